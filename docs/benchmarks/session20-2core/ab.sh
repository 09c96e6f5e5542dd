#!/bin/bash
# rounds of ours only, configs alternating (order flipped every round)
cd /work/main
Y=build/release/benchmarks/ycsb/mx_bench_ycsb
W=${W:-1}
mapfile -t cfgs < ${CFGS}
for r in $(seq ${ROUNDS:-6}); do
  idx=($(seq 0 $((${#cfgs[@]}-1))))
  if [ $((r % 2)) -eq 0 ]; then idx=($(printf '%s\n' "${idx[@]}" | tac)); fi
  for i in "${idx[@]}"; do
    opts=${cfgs[$i]}
    $Y -n ${N:-10000000} -m ${N:-10000000} -w $W -r 1 --variants mxtasking -q -o /tmp/ab$i.csv $opts >/dev/null 2>&1
    echo "$r cfg$i [$opts] $(grep throughput /tmp/ab$i.csv | cut -d, -f1,5 | tr '\n' ' ')"
  done
done
