#!/bin/bash
# original vs ours on a small tree, 1 worker, alternating
cd /work/main
Y=build/release/benchmarks/ycsb/mx_bench_ycsb
n=${N:-100000}; W=${W:-1}
for r in $(seq ${ROUNDS:-4}); do
  o=$(LD_LIBRARY_PATH=/work/orig/build/lib /work/orig/build/bin/blinktree_benchmark $W -f /tmp/wl_$n/fill /tmp/wl_$n/mixed_c --sync4me -pd 2 -i 1 2>&1 | awk '$3==1 && $7=="op/s" {print $6/1e6}')
  $Y -n $n -m $((n*10)) -w $W -r 1 --variants mxtasking -q -o /tmp/sm.csv $EXTRA >/dev/null 2>&1
  echo "$r n=$n orig C $o ours $(grep throughput /tmp/sm.csv | cut -d, -f1,5 | tr '\n' ' ')"
done
