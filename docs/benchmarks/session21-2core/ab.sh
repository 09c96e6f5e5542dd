#!/bin/bash
# two binaries alternating, order flipped every round: ab.sh A B ROUNDS N M W [opts]
out=$(mktemp); trap 'rm -f "$out"' EXIT
a=$1; b=$2; rounds=$3; n=$4; m=$5; w=$6; shift 6
for r in $(seq $rounds); do
  if [ $((r % 2)) -eq 1 ]; then order="$a $b"; else order="$b $a"; fi
  for bin in $order; do
    $bin -n $n -m $m -w $w -r 1 --variants mxtasking -q -o "$out" "$@" >/dev/null 2>&1
    echo "$r $(basename $bin) $(grep throughput "$out" | cut -d, -f1,5 | tr '\n' ' ')"
  done
done
