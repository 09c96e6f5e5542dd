#!/bin/bash
# Device: warmed, interleaved comparison with the original tree; task tree vs thread OLC; runtime vs oneTBB.
set -u
D=$PWD/device-bundle; B=$D/bin; export LD_LIBRARY_PATH=$D/lib
O=${OUT:-/tmp/out}; W=$O/w; mkdir -p $W
K=${KEYS:-10000000}; BIG=${BIG:-16}; FIB=${FIB:-30}; TASKS=${TASKS:-1000000}
log() { echo "== $* ($(date +%T) load $(cut -d' ' -f1 /proc/loadavg))" | tee -a $W/log.txt; }
pack() { tar czf $O/res.tgz -C $O w; }
{ date; nproc; lscpu | grep -E "Model|L3|NUMA node\(s\)"; cat /proc/loadavg; } > $W/env.txt
log export; timeout 60 $B/mx_bench_ycsb -n $K -m $K --export-workload /tmp/wl >/dev/null 2>&1
log warmup; timeout 60 $B/mx_bench_ycsb -n $K -m $K -w $BIG -r 1 --variants mxtasking,thread_olc -q -o /tmp/x.csv >/dev/null 2>&1
timeout 60 $B/blinktree_benchmark $BIG -f /tmp/wl/fill /tmp/wl/mixed_c --sync4me -pd 2 -i 1 >/dev/null 2>&1
log ab16; timeout 150 $D/../scripts/ab_original.sh $B/blinktree_benchmark /tmp/wl 2 $BIG $B/mx_bench_ycsb > $W/ab16.txt 2>&1; tail -4 $W/ab16.txt | tee -a $W/log.txt; pack
ab() { local w=$1 r=$2; for rep in $(seq $r); do for v in mx_bench_ycsb mx_bench_ycsb_compact; do
  timeout 100 $B/$v -n $K -m $K -w $w -r 1 --variants mxtasking -q -o /tmp/c.csv >/dev/null 2>&1
  grep throughput /tmp/c.csv | cut -d, -f1-5 | sed "s/^/$v,$rep,/" | tee -a $W/compact.csv; done; done; pack; }
log compact16; ab $BIG 2
log ycsb16; timeout 100 $B/mx_bench_ycsb -n $K -m $K -w $BIG -r 3 --variants mxtasking,thread_olc -q -o $W/ycsb16.csv >/dev/null 2>&1; grep throughput $W/ycsb16.csv | cut -d, -f1-5 | tee -a $W/log.txt; pack
log runtime16; timeout 60 $B/mx_bench_runtime -b fib --fib-n $FIB -w $BIG,1 -r 5 --variants mx_default,tbb_task_group -q -o $W/fib.csv >/dev/null 2>&1
timeout 60 $B/mx_bench_runtime -b spawn_local --tasks $TASKS -w $BIG,1 -r 5 --variants mx_default,mx,tbb_task_group -q -o $W/spawn.csv >/dev/null 2>&1; grep tasks_per_second $W/fib.csv $W/spawn.csv | cut -d, -f1-5 | tee -a $W/log.txt; pack
H=$((BIG/2))
for s in on off; do a=""; [ $s = off ] && a=--no-steal
  log disturbed_$s; timeout 40 $B/mx_bench_runtime -b fib --fib-n $FIB -w $BIG -r 5 --disturb-core $H --variants mx_default,tbb_task_group -q -o $W/dfib_$s.csv $a >/dev/null 2>&1
  timeout 40 $B/mx_bench_runtime -b spawn_local --tasks $TASKS -w $BIG -r 5 --disturb-core $H --variants mx,mx_default,tbb_task_group -q -o $W/dspawn_$s.csv $a >/dev/null 2>&1
  grep tasks_per_second $W/dfib_$s.csv $W/dspawn_$s.csv | cut -d, -f1-5 | tee -a $W/log.txt; pack
done
log compact1; ab 1 1
log ab1; timeout 150 $D/../scripts/ab_original.sh $B/blinktree_benchmark /tmp/wl 2 1 $B/mx_bench_ycsb > $W/ab1.txt 2>&1; tail -4 $W/ab1.txt | tee -a $W/log.txt; pack
log done; pack
