#!/bin/bash
# Device call 3: the worker prefetching the rest of each task object (new) against the binary
# before (base), interleaved, at 16, 4 and 2 workers and two feeder batch sizes; the runtime's
# tiny-task benchmarks against the same pair.
set -u
D=$(cd "$(dirname "$0")" && pwd); B=$D/bin; export LD_LIBRARY_PATH=$D/lib
O=${OUT:-/tmp/out}; W=$O/w; mkdir -p $W
K=${KEYS:-10000000}; BIG=${BIG:-16}; R=${ROUNDS:-4}; FIB=${FIB:-30}; TASKS=${TASKS:-1000000}
log() { echo "== $* ($(date +%T) load $(cut -d' ' -f1 /proc/loadavg))" | tee -a $W/log.txt; }
pack() { tar czf $O/res.tgz.tmp -C $O w && mv $O/res.tgz.tmp $O/res.tgz; }
{ date; nproc; lscpu | grep -E "Model|L3|L2|NUMA node\(s\)"; cat /proc/loadavg; } > $W/env.txt 2>&1
log warmup; timeout 60 $B/mx_bench_ycsb -n $K -m $K -w $BIG -r 1 --variants mxtasking -q -o /tmp/w.csv >/dev/null 2>&1
run() { local bin=$1 w=$2 name=$3; shift 3; timeout 60 $B/$bin -n $K -m $K -w $w -r 1 --variants mxtasking -q -o /tmp/s.csv "$@" >/dev/null 2>>$W/log.txt; grep throughput /tmp/s.csv | cut -d, -f1-5 | sed "s/^/$name,$rep,/" | tee -a $W/ab.csv; }
for rep in $(seq $R); do log r16_$rep
  run mx_bench_ycsb_base $BIG base_b500; run mx_bench_ycsb $BIG new_b500; run mx_bench_ycsb_base $BIG base_b100 --batch 100; run mx_bench_ycsb $BIG new_b100 --batch 100; pack; done
for rep in 1 2; do log r4_$rep
  run mx_bench_ycsb_base 4 base_b500; run mx_bench_ycsb 4 new_b500; run mx_bench_ycsb_base 4 base_b100 --batch 100; run mx_bench_ycsb 4 new_b100 --batch 100; pack; done
for rep in 1; do log r2_$rep; run mx_bench_ycsb_base 2 base_b500; run mx_bench_ycsb 2 new_b500; pack; done
log runtime
for rep in 1 2; do for v in base new; do bin=mx_bench_runtime; [ $v = base ] && bin=mx_bench_runtime_base
  timeout 30 $B/$bin -b fib --fib-n $FIB -w $BIG -r 3 --variants mx_default -q -o /tmp/f.csv >/dev/null 2>&1; grep tasks_per_second /tmp/f.csv | cut -d, -f1-5 | sed "s/^/$v,$rep,/" | tee -a $W/runtime.csv
  timeout 30 $B/$bin -b spawn_local --tasks $TASKS -w $BIG -r 3 --variants mx_default -q -o /tmp/f.csv >/dev/null 2>&1; grep tasks_per_second /tmp/f.csv | cut -d, -f1-5 | sed "s/^/$v,$rep,/" | tee -a $W/runtime.csv
done; done
log done; pack
