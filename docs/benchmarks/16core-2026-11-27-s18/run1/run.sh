#!/bin/bash
# Device call 1: the tree against the original and the thread OLC tree at 16 workers, a sweep of
# the feeder's batch (requests in flight per worker) and other switches, a 16-worker profile,
# TPC-H SF1 at 16 and 4 threads against DuckDB, the runtime against oneTBB.
set -u
D=$(cd "$(dirname "$0")" && pwd); B=$D/bin; export LD_LIBRARY_PATH=$D/lib
O=${OUT:-/tmp/out}; W=$O/w; mkdir -p $W
K=${KEYS:-10000000}; BIG=${BIG:-16}; FIB=${FIB:-30}; TASKS=${TASKS:-1000000}; SF=${SF:-1}; R=${ROUNDS:-3}
log() { echo "== $* ($(date +%T) load $(cut -d' ' -f1 /proc/loadavg))" | tee -a $W/log.txt; }
{ date; nproc; lscpu; cat /proc/loadavg; free -g; } > $W/env.txt 2>&1
(python3 -m pip install -q --no-index --target /tmp/py $D/wheels/*.whl > $W/pip.txt 2>&1 || { for w in $D/wheels/*.whl; do python3 -m zipfile -e $w /tmp/py; done; }) &
PIP=$!
log export; timeout 60 $B/mx_bench_ycsb -n $K -m $K --export-workload /tmp/wl >/dev/null 2>&1
log warmup; timeout 60 $B/blinktree_benchmark $BIG -f /tmp/wl/fill /tmp/wl/mixed_c --sync4me -pd 2 -i 1 >/dev/null 2>&1
log ab16; timeout 150 $D/scripts/ab_original.sh $B/blinktree_benchmark /tmp/wl $R $BIG $B/mx_bench_ycsb > $W/ab16.txt 2>&1; tail -4 $W/ab16.txt | tee -a $W/log.txt
log ycsb16; timeout 60 $B/mx_bench_ycsb -n $K -m $K -w $BIG -r 3 --variants mxtasking,thread_olc -q -o $W/ycsb16.csv >/dev/null 2>&1; grep throughput $W/ycsb16.csv | cut -d, -f1-5 | tee -a $W/log.txt
ours() { local name=$1; shift; timeout 40 $B/mx_bench_ycsb -n $K -m $K -w $BIG -r 1 --variants mxtasking -q -o /tmp/s.csv "$@" >/dev/null 2>>$W/log.txt; grep throughput /tmp/s.csv | cut -d, -f1-5 | sed "s/^/$name,$rep,/" | tee -a $W/sweep.csv; }
for rep in $(seq $R); do log sweep$rep; ours default; ours b100 --batch 100; ours b50 --batch 50; ours b2000 --batch 2000; ours nta --non-temporal-reads; ours nosteal --no-steal; ours tb16 --task-buffer 16; done
log profile16; timeout 40 $B/mx_bench_ycsb -n $K -m $K -w $BIG -r 1 --variants mxtasking -q -o /tmp/p.csv --profile > $W/profile16.txt 2>&1
log profile16_b100; timeout 40 $B/mx_bench_ycsb -n $K -m $K -w $BIG -r 1 --variants mxtasking -q -o /tmp/p.csv --profile --batch 100 > $W/profile16_b100.txt 2>&1
wait $PIP; export PYTHONPATH=/tmp/py
if python3 -c "import duckdb" 2>>$W/log.txt; then
  data=/tmp/tpch_sf$SF; all22=$(seq -s, 1 22)
  log tpch_gen; timeout 90 python3 $D/scripts/tpch.py gen --sf $SF --out $data >> $W/log.txt 2>&1
  for t in $BIG 4; do
    log tpch_duckdb_$t; timeout 90 python3 $D/scripts/tpch.py time --data $data --threads $t --queries $all22 --reps 3 --csv $W/tpch_duckdb_${t}t.csv >> $W/log.txt 2>&1
    log tpch_tunadb_$t; timeout 90 $B/mx_bench_tpch --data $data --threads $t --queries $all22 --reps 3 --warmup 1 --timeout 60 --quiet --csv $W/tpch_tunadb_${t}t.csv >> $W/log.txt 2>&1
  done
fi
log runtime16; timeout 40 $B/mx_bench_runtime -b fib --fib-n $FIB -w $BIG,1 -r 5 --variants mx_default,tbb_task_group -q -o $W/fib.csv >/dev/null 2>&1
timeout 40 $B/mx_bench_runtime -b spawn_local --tasks $TASKS -w $BIG,1 -r 5 --variants mx_default,mx,tbb_task_group -q -o $W/spawn.csv >/dev/null 2>&1; grep tasks_per_second $W/fib.csv $W/spawn.csv | cut -d, -f1-5 | tee -a $W/log.txt
tar xJf $D/perf.tar.xz -C /tmp; P="env LD_LIBRARY_PATH=/tmp/perf:$D/lib /tmp/perf/perf"
log perf16; timeout 40 $P record -e cpu-clock -F 1999 -o /tmp/ours16.data -- $B/mx_bench_ycsb -n $K -m $K -w $BIG -r 1 --variants mxtasking -q -o /tmp/o.csv >/dev/null 2>>$W/log.txt
timeout 40 $P report -i /tmp/ours16.data --no-children --stdio --sort sym 2>/dev/null | grep -E '^ +[0-9]' | head -40 > $W/ours16.report.txt
for s in 'mx::tasking::detail::Worker::run_buffer_static<false>' 'mx::index::blinktree::BLinkTree<1024ul>::OperationTask::execute'; do echo "#### $s"; timeout 30 $P annotate -i /tmp/ours16.data --stdio -s "$s" 2>/dev/null | grep -E '^\s+[0-9]+\.[0-9]+ :' | sort -rn | head -30; done > $W/ours16.annotate.txt
log done
tar czf $O/res.tgz -C $O w
