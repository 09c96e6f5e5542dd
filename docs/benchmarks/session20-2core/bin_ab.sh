#!/bin/bash
# two binaries alternating, order flipped every round: bin_ab.sh A B ROUNDS N [opts]
a=$1; b=$2; rounds=$3; n=$4; shift 4
for r in $(seq $rounds); do
  if [ $((r % 2)) -eq 1 ]; then order="$a $b"; else order="$b $a"; fi
  for bin in $order; do
    $bin -n $n -m $((n*10 > 10000000 ? 10000000 : n*10)) -w 1 -r 1 --variants mxtasking -q -o /tmp/binab.csv "$@" >/dev/null 2>&1
    echo "$r $(basename $bin) $(grep throughput /tmp/binab.csv | cut -d, -f1,5 | tr '\n' ' ')"
  done
done
