#!/bin/bash
# one binary, two option sets alternating: flags.sh BIN ROUNDS N W "OPTS_A" "OPTS_B"
out=$(mktemp); trap 'rm -f "$out"' EXIT
bin=$1; rounds=$2; n=$3; w=$4; A=$5; B=$6
for r in $(seq $rounds); do
  if [ $((r % 2)) -eq 1 ]; then set -- "$A" "$B"; else set -- "$B" "$A"; fi
  for opts in "$1" "$2"; do
    $bin -n $n -m $n -w $w -r 1 --variants mxtasking -q -o "$out" $opts >/dev/null 2>&1
    echo "$r [$opts] $(grep throughput "$out" | cut -d, -f1,5 | tr '\n' ' ')"
  done
done
