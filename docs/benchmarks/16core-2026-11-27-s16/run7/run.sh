#!/bin/bash
# Device: one thief woken at a time (new) against every spawn waking the next sleeper (old), 16
# workers, quiet and with core 8 busy, stealing on and off; 2 interleaved rounds.
set -u
D=$PWD/device-bundle; B=$D/bin; export LD_LIBRARY_PATH=$D/lib
O=${OUT:-/tmp/out}; W=$O/w; mkdir -p $W
BIG=${BIG:-16}; FIB=${FIB:-30}; TASKS=${TASKS:-1000000}; H=$((BIG/2))
{ date; nproc; cat /proc/loadavg; } > $W/env.txt
for rep in 1 2; do for v in old new; do
  bin=$B/mx_bench_runtime; [ $v = old ] && bin=$B/mx_bench_runtime_old
  for s in on off; do a=""; [ $s = off ] && a=--no-steal
    timeout 40 $bin -b spawn_local --tasks $TASKS -w $BIG -r 3 --disturb-core $H --variants mx_default,mx -q -o /tmp/a.csv $a >/dev/null 2>&1
    grep tasks_per_second /tmp/a.csv | cut -d, -f1-5 | sed "s/^/$v,$rep,disturbed_$s,/" >> $W/steal.csv
    timeout 40 $bin -b fib --fib-n $FIB -w $BIG -r 3 --disturb-core $H --variants mx_default -q -o /tmp/a.csv $a >/dev/null 2>&1
    grep tasks_per_second /tmp/a.csv | cut -d, -f1-5 | sed "s/^/$v,$rep,disturbed_$s,/" >> $W/steal.csv
  done
  timeout 40 $bin -b spawn_local --tasks $TASKS -w $BIG,1 -r 3 --variants mx_default,mx -q -o /tmp/a.csv >/dev/null 2>&1
  grep tasks_per_second /tmp/a.csv | cut -d, -f1-5 | sed "s/^/$v,$rep,quiet,/" >> $W/steal.csv
  timeout 40 $bin -b fib --fib-n $FIB -w $BIG,1 -r 3 --variants mx_default -q -o /tmp/a.csv >/dev/null 2>&1
  grep tasks_per_second /tmp/a.csv | cut -d, -f1-5 | sed "s/^/$v,$rep,quiet,/" >> $W/steal.csv
done; done
cat $W/steal.csv
