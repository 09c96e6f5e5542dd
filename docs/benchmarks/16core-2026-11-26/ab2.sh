#!/bin/bash
# Runtime A/B at 16 workers: base, array magazines (alloc), alloc + hand-back queue (both).
out=/tmp/ab2; mkdir -p $out; b=device-bundle/bin; W=${W:-16}; H=${H:-8}
for round in 1 2; do
  for v in base alloc both; do
    for d in "" "--disturb-core $H"; do
      tag="$v,$round,${d:+disturbed}"
      timeout 30 $b/rt_$v -b spawn_local --tasks ${TASKS:-1000000} -w $W -r 5 --variants mx,mx_default,tbb_task_group -q -o $out/t.csv $d
      grep tasks_per_second $out/t.csv | sed "s/^/$tag,/" >> $out/ab2.csv
      timeout 30 $b/rt_$v -b fib --fib-n ${FIB:-30} -w $W -r 5 --variants mx_default,tbb_task_group -q -o $out/t.csv $d
      grep tasks_per_second $out/t.csv | sed "s/^/$tag,/" >> $out/ab2.csv
    done
    timeout 40 $b/ycsb_$v -n ${KEYS:-4000000} -m ${KEYS:-4000000} -w $W -r 1 --variants mxtasking -q -o $out/t.csv
    grep -E "ycsb_(c|a|load),mxtasking,$W,throughput" $out/t.csv | sed "s/^/$v,$round,,/" >> $out/ab2.csv
    [ -n "$PACK" ] && cp $out/ab2.csv $PACK
  done
done
echo done
