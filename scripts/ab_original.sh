#!/bin/bash
# Interleaved runs of this project's task-based B-link tree and the original MxTasking's
# blinktree_benchmark (jmuehlig/mxtasking, built outside this repository) on the same workload
# files. Each repetition runs, per worker count: the original's fill + C, the original's fill + A,
# and ours (load, C, A in one process), each a fresh process. Prints one CSV line per run:
#   system,workers,phase,mops
# and then the medians and the ratio ours / original per phase and worker count.
#
#   scripts/ab_original.sh ORIGINAL_BINARY WORKLOAD_DIR REPS WORKERS [MX_BENCH_YCSB] [OPTIONS...]
#   mx_bench_ycsb -n 10000000 -m 10000000 --export-workload /tmp/wl   # writes fill, mixed_c, mixed_a
#   scripts/ab_original.sh ~/mxtasking/build/bin/blinktree_benchmark /tmp/wl 5 1,2
#
# The original runs with --sync4me -pd 2 (its annotated synchronization and prefetch distance 2);
# ours with its defaults. Both read the keys from the same files, so both trees see the same
# requests in the same order; ours regenerates them from the same seed (-n/-m must match the
# export).
set -euo pipefail
if [ $# -lt 4 ]; then
    sed -n '2,12p' "$0" >&2
    exit 2
fi
original=$1
workload=$2
reps=$3
IFS=, read -r -a worker_counts <<<"$4"
ours=${5:-build/release/benchmarks/ycsb/mx_bench_ycsb}
shift $(($# < 5 ? $# : 5))
keys=$(wc -l <"$workload/fill")
ops=$(wc -l <"$workload/mixed_c")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The original prints "cores iteration phase TIME ms THROUGHPUT op/s" per phase (0 fill, 1 mixed).
original_phase() { awk -v phase="$1" '$3 == phase && $7 == "op/s" {print $6 / 1e6}' | tail -1; }
for rep in $(seq "$reps"); do
    for workers in "${worker_counts[@]}"; do
        out=$("$original" "$workers" -f "$workload/fill" "$workload/mixed_c" --sync4me -pd 2 -i 1 2>&1)
        echo "original,$workers,load,$(original_phase 0 <<<"$out")" | tee -a "$work/runs"
        echo "original,$workers,c,$(original_phase 1 <<<"$out")" | tee -a "$work/runs"
        out=$("$original" "$workers" -f "$workload/fill" "$workload/mixed_a" --sync4me -pd 2 -i 1 2>&1)
        echo "original,$workers,a,$(original_phase 1 <<<"$out")" | tee -a "$work/runs"
        "$ours" -n "$keys" -m "$ops" -w "$workers" -r 1 --variants mxtasking -q -o "$work/ours.csv" "$@"
        for phase in load c a; do
            echo "ours,$workers,$phase,$(grep "^ycsb_$phase,mxtasking,$workers,throughput," "$work/ours.csv" |
                cut -d, -f5)" | tee -a "$work/runs"
        done
    done
done
source "$(dirname "$0")/stats.sh"
echo "workers,phase,original_median,ours_median,ours_over_original"
for workers in "${worker_counts[@]}"; do
    for phase in load c a; do
        o=$(grep "^original,$workers,$phase," "$work/runs" | cut -d, -f4 | median)
        m=$(grep "^ours,$workers,$phase," "$work/runs" | cut -d, -f4 | median)
        echo "$workers,$phase,$o,$m,$(awk -v a="$m" -v b="$o" 'BEGIN {printf "%.2f", a / b}')"
    done
done
