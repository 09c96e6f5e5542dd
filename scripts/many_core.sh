#!/bin/bash
# Every many-core measurement of the project in one run, for a machine that has release binaries
# but no build tree (a lent 16-core machine, a cluster node): the runtime against oneTBB, the B-link
# tree against the thread trees and oneTBB, the original MxTasking tree on the same requests, a
# disturbed core with stealing on and off, TPC-H against DuckDB and the radix join, each at the
# worker counts given. Steps run in priority order, each under its own time limit, and each writes
# its CSV under OUT as soon as it ends, so a run cut short keeps what it measured.
#
#   scripts/many_core.sh BIN_DIR OUT_DIR [WORKERS] [SIZE]
#     BIN_DIR   mx_bench_runtime, mx_bench_ycsb, mx_bench_join, mx_bench_tpch and, optionally,
#               blinktree_benchmark (the original, built outside this repository)
#     WORKERS   comma separated, largest first (default: 16,4 then a 1-worker pass)
#     SIZE      full (10 M keys, TPC-H SF1) or quick (200 k keys, SF 0.05) for a trial run
#   PACK=FILE   when set, OUT_DIR is packed into FILE (tar.gz) after every step
#
# DuckDB (for TPC-H) must be importable by python3. Writes OUT_DIR/env.txt (CPU, memory, load)
# and one CSV per step; OUT_DIR/steps.txt lists each step's exit status and seconds.
set -uo pipefail
if [ $# -lt 2 ]; then
    sed -n '2,16p' "$0" >&2
    exit 2
fi
bin=$1
out=$2
workers=${3:-16,4}
size=${4:-full}
repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
max_workers=${workers%%,*}
if [ "$size" = quick ]; then
    keys=200000 sf=0.05 fib=25 tasks=200000 hops=50000 build=250000 probe=4000000
else
    keys=10000000 sf=1 fib=30 tasks=1000000 hops=200000 build=4000000 probe=64000000
fi
# The busy process of the disturbed runs shares a core with a worker in the middle of the range.
hog_core=$((max_workers / 2))

pack() { [ -n "${PACK:-}" ] && tar czf "$PACK.tmp" -C "$(dirname "$out")" "$(basename "$out")" && mv "$PACK.tmp" "$PACK"; }
step() {
    local name=$1 limit=$2
    shift 2
    local start=$SECONDS
    echo "== $name ($(cut -d' ' -f1-3 /proc/loadavg))" | tee -a "$out/log.txt"
    timeout --kill-after=5 "$limit" "$@" >>"$out/log.txt" 2>&1
    local rc=$?
    echo "$name,$rc,$((SECONDS - start))" >>"$out/steps.txt"
    echo "   rc $rc, $((SECONDS - start)) s" | tee -a "$out/log.txt"
    pack
}

{
    date -u
    nproc
    lscpu
    free -g
    cat /proc/loadavg
} >"$out/env.txt" 2>&1
echo "step,rc,seconds" >"$out/steps.txt"
pack

# Runtime: fork/join, local spawns, messages, against oneTBB's task_group.
step runtime_fib 90 "$bin/mx_bench_runtime" -b fib --fib-n "$fib" -w "$workers,1" -r 5 \
    --variants mx_default,mx_lifo,tbb_task_group -q -o "$out/runtime_fib.csv"
step runtime_spawn_local 90 "$bin/mx_bench_runtime" -b spawn_local --tasks "$tasks" -w "$workers,1" -r 5 \
    --variants mx_default,mx,tbb_task_group -q -o "$out/runtime_spawn_local.csv"
step runtime_all_to_all 60 "$bin/mx_bench_runtime" -b all_to_all --hops "$hops" -w "$workers" -r 5 \
    --variants mx_default,mx,tbb_task_group -q -o "$out/runtime_all_to_all.csv"

# B-link tree: the task tree against the thread OLC tree and oneTBB's concurrent map.
step ycsb 200 "$bin/mx_bench_ycsb" -n "$keys" -m "$keys" -w "$workers" -r 3 \
    --variants mxtasking,thread_olc,tbb -q -o "$out/ycsb.csv"

# The original MxTasking tree on the same requests (interleaved; ours / original per phase).
if [ -x "$bin/blinktree_benchmark" ]; then
    step export_workload 60 "$bin/mx_bench_ycsb" -n "$keys" -m "$keys" --export-workload /tmp/mx_wl
    step original 240 bash -c "'$repo/scripts/ab_original.sh' '$bin/blinktree_benchmark' /tmp/mx_wl 2 '$workers' \
        '$bin/mx_bench_ycsb' > '$out/original.txt'"
fi

# TPC-H: all 22 queries, DuckDB and TunaDB interleaved per thread count.
if python3 -c "import duckdb" 2>/dev/null; then
    data=/tmp/mx_tpch_sf$sf
    all22=$(seq -s, 1 22)
    step tpch_gen 120 python3 "$repo/scripts/tpch.py" gen --sf "$sf" --out "$data"
    for threads in ${workers//,/ }; do
        step "tpch_duckdb_${threads}t" 120 python3 "$repo/scripts/tpch.py" time --data "$data" \
            --threads "$threads" --queries "$all22" --reps 3 --csv "$out/tpch_duckdb_${threads}t.csv"
        step "tpch_tunadb_${threads}t" 150 "$bin/mx_bench_tpch" --data "$data" --threads "$threads" \
            --queries "$all22" --queries-dir "$repo/tests/db/queries" --reps 3 --warmup 1 --timeout 60 --cancel-grace 5 --quiet \
            --csv "$out/tpch_tunadb_${threads}t.csv" --json "$out/tpch_tunadb_${threads}t.json"
    done
fi

# A busy process on one core for the whole measurement: stealing on against off, and oneTBB.
for bench in spawn_local fib; do
    args=(-b "$bench" -w "$max_workers" -r 5 --disturb-core "$hog_core" -q)
    [ "$bench" = fib ] && args+=(--fib-n "$fib" --variants mx_default,tbb_task_group)
    [ "$bench" = spawn_local ] && args+=(--tasks "$tasks" --variants mx,tbb_task_group)
    step "disturbed_${bench}_on" 60 "$bin/mx_bench_runtime" "${args[@]}" -o "$out/disturbed_${bench}_on.csv"
    step "disturbed_${bench}_off" 60 "$bin/mx_bench_runtime" "${args[@]}" --no-steal \
        -o "$out/disturbed_${bench}_off.csv"
done
step disturbed_ycsb_on 90 "$bin/mx_bench_ycsb" -n "$keys" -m "$keys" -w "$max_workers" -r 3 \
    --variants mxtasking,thread_olc --disturb-core "$hog_core" -q -o "$out/disturbed_ycsb_on.csv"
step disturbed_ycsb_off 90 "$bin/mx_bench_ycsb" -n "$keys" -m "$keys" -w "$max_workers" -r 3 \
    --variants mxtasking --no-steal --disturb-core "$hog_core" -q -o "$out/disturbed_ycsb_off.csv"

# One worker last: the slowest runs, and the base of the speed-ups.
step ycsb_1w 120 "$bin/mx_bench_ycsb" -n "$keys" -m "$keys" -w 1 -r 1 \
    --variants mxtasking,thread_olc,tbb -q -o "$out/ycsb_1w.csv"
if [ -x "$bin/blinktree_benchmark" ]; then
    step original_1w 120 bash -c "'$repo/scripts/ab_original.sh' '$bin/blinktree_benchmark' /tmp/mx_wl 1 1 \
        '$bin/mx_bench_ycsb' > '$out/original_1w.txt'"
fi
step join 120 "$bin/mx_bench_join" --build "$build" --probe "$probe" --min-bits 11 --max-bits 11 \
    --workers ${workers//,/ } 1 --repetitions 3 --csv "$out/join.csv"
echo "done" | tee -a "$out/log.txt"
pack
