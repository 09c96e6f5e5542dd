#!/bin/bash
# Device: tree vs original and thread OLC at 16 and 1 workers, profiles at 16, runtime, TPC-H 16t.
set -u
D=$PWD/device-bundle; B=$D/bin; export LD_LIBRARY_PATH=$D/lib
O=${OUT:-/tmp/out}; W=$O/w; mkdir -p $W
K=${KEYS:-10000000}; BIG=${BIG:-16}; FIB=${FIB:-30}; TASKS=${TASKS:-1000000}; SF=${SF:-1}
log() { echo "== $* ($(date +%T) load $(cut -d' ' -f1 /proc/loadavg))" | tee -a $W/log.txt; }
pack() { tar czf $O/res.tgz.tmp -C $O w && mv $O/res.tgz.tmp $O/res.tgz; }
{ date; nproc; lscpu | grep -E "Model|L3|L2|NUMA node\(s\)"; cat /proc/loadavg; python3 --version; } > $W/env.txt 2>&1
mkdir -p /tmp/perf && tar xJf $D/perf.tar.xz -C /tmp && P="env LD_LIBRARY_PATH=/tmp/perf /tmp/perf/perf"
(python3 -m pip install -q --no-index --target /tmp/py $D/wheels/*.whl > $W/pip.txt 2>&1 || { echo "pip failed, unzipping" >> $W/pip.txt; for w in $D/wheels/*.whl; do python3 -m zipfile -e $w /tmp/py; done; }) &
PIP=$!
log export; timeout 60 $B/mx_bench_ycsb -n $K -m $K --export-workload /tmp/wl >/dev/null 2>&1
log warmup; timeout 60 $B/blinktree_benchmark $BIG -f /tmp/wl/fill /tmp/wl/mixed_c --sync4me -pd 2 -i 1 >/dev/null 2>&1
log ab16; timeout 150 $D/../scripts/ab_original.sh $B/blinktree_benchmark /tmp/wl 2 $BIG $B/mx_bench_ycsb > $W/ab16.txt 2>&1; tail -4 $W/ab16.txt | tee -a $W/log.txt; pack
log ycsb16; timeout 100 $B/mx_bench_ycsb -n $K -m $K -w $BIG -r 3 --variants mxtasking,thread_olc -q -o $W/ycsb16.csv >/dev/null 2>&1; grep throughput $W/ycsb16.csv | cut -d, -f1-5 | tee -a $W/log.txt; pack
log perf_ours16; timeout 60 $P record -e cpu-clock -F 999 -o /tmp/ours16.data -- $B/mx_bench_ycsb -n $K -m $K -w $BIG -r 1 --variants mxtasking -q -o /tmp/o.csv >/dev/null 2>>$W/log.txt; grep throughput /tmp/o.csv | cut -d, -f1-5 | tee -a $W/log.txt
log perf_orig16; timeout 60 $P record -e cpu-clock -F 999 -o /tmp/orig16.data -- $B/blinktree_benchmark $BIG -f /tmp/wl/fill /tmp/wl/mixed_c --sync4me -pd 2 -i 1 2>&1 | tail -2 | tee -a $W/log.txt
for f in ours16 orig16; do timeout 60 $P report -i /tmp/$f.data --no-children --stdio --sort dso,sym 2>/dev/null | grep -E '^ +[0-9]' | head -50 > $W/$f.report.txt; done
for s in 'mx::tasking::detail::Worker::execute' 'mx::tasking::detail::Worker::run_buffer_static<false>' 'mx::index::blinktree::BLinkTree<1024ul>::OperationTask::execute'; do timeout 60 $P annotate -i /tmp/ours16.data --stdio -s "$s" 2>/dev/null | grep -vE '^\s+0\.00' | head -250; done > $W/ours16.annotate.txt
pack
log runtime16; timeout 60 $B/mx_bench_runtime -b fib --fib-n $FIB -w $BIG,1 -r 5 --variants mx_default,tbb_task_group -q -o $W/fib.csv >/dev/null 2>&1
timeout 60 $B/mx_bench_runtime -b spawn_local --tasks $TASKS -w $BIG,1 -r 5 --variants mx_default,mx,tbb_task_group -q -o $W/spawn.csv >/dev/null 2>&1; grep tasks_per_second $W/fib.csv $W/spawn.csv | cut -d, -f1-5 | tee -a $W/log.txt; pack
H=$((BIG/2))
for s in on off; do a=""; [ $s = off ] && a=--no-steal
  log disturbed_$s; timeout 40 $B/mx_bench_runtime -b fib --fib-n $FIB -w $BIG -r 5 --disturb-core $H --variants mx_default,tbb_task_group -q -o $W/dfib_$s.csv $a >/dev/null 2>&1
  timeout 40 $B/mx_bench_runtime -b spawn_local --tasks $TASKS -w $BIG -r 5 --disturb-core $H --variants mx,mx_default,tbb_task_group -q -o $W/dspawn_$s.csv $a >/dev/null 2>&1
  grep tasks_per_second $W/dfib_$s.csv $W/dspawn_$s.csv | cut -d, -f1-5 | tee -a $W/log.txt; pack
done
wait $PIP; export PYTHONPATH=/tmp/py
if python3 -c "import duckdb" 2>>$W/log.txt; then
  data=/tmp/tpch_sf$SF; all22=$(seq -s, 1 22)
  log tpch_gen; timeout 90 python3 $D/../scripts/tpch.py gen --sf $SF --out $data >> $W/log.txt 2>&1
  log tpch_duckdb16; timeout 90 python3 $D/../scripts/tpch.py time --data $data --threads $BIG --queries $all22 --reps 3 --csv $W/tpch_duckdb_${BIG}t.csv >> $W/log.txt 2>&1
  log tpch_tunadb16; timeout 120 $B/mx_bench_tpch --data $data --threads $BIG --queries $all22 --queries-dir $D/../tests/db/queries --reps 3 --warmup 1 --timeout 60 --cancel-grace 5 --quiet --csv $W/tpch_tunadb_${BIG}t.csv >> $W/log.txt 2>&1
  pack
fi
log ab1; timeout 150 $D/../scripts/ab_original.sh $B/blinktree_benchmark /tmp/wl 1 1 $B/mx_bench_ycsb > $W/ab1.txt 2>&1; tail -4 $W/ab1.txt | tee -a $W/log.txt
log done; pack
