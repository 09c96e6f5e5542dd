#!/bin/bash
# Interleaved A/B runs of mx_bench_ycsb binaries (or option sets): each repetition runs every
# command once, in order, as a fresh process; prints per command the target ratio of every run
# (sorted), its median and the median mxtasking throughput of the workload C phase.
#
#   scripts/ab_ycsb.sh REPS TARGET "COMMON ARGS" "BINARY_A [OPTIONS]" "BINARY_B [OPTIONS]" ...
#   scripts/ab_ycsb.sh 5 blinktree_c_task_vs_thread \
#       "-n 10000000 -m 10000000 -w 2 -r 1 --variants mxtasking,thread_olc" /tmp/old_ycsb /tmp/new_ycsb
set -euo pipefail
if [ $# -lt 4 ]; then
    sed -n '2,8p' "$0" >&2
    exit 2
fi
reps=$1
target=$2
common=$3
shift 3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
commands=("$@")
for rep in $(seq "$reps"); do
    for i in "${!commands[@]}"; do
        # shellcheck disable=SC2086 # the command and the common arguments are word lists
        ${commands[$i]} $common -q -o "$work/run.csv" >/dev/null
        grep "^blinktree_targets,$target," "$work/run.csv" | cut -d, -f5 >>"$work/ratio_$i"
        grep "^ycsb_c,mxtasking,.*,throughput" "$work/run.csv" | cut -d, -f5 >>"$work/mops_$i"
    done
    echo "repetition $rep of $reps done" >&2
done
source "$(dirname "$0")/stats.sh"
for i in "${!commands[@]}"; do
    echo "${commands[$i]}: $target $(sort -g "$work/ratio_$i" | tr '\n' ' ')median $(median "$work/ratio_$i"); C mxtasking M ops/s median $(median "$work/mops_$i")"
done
