#!/bin/bash
# A/B of the tree's prefetch settings and the runtime's stealing, current binary vs 19f01c8.
out=/tmp/ab; mkdir -p $out; b=device-bundle/bin
run() { # name workers args...
  local name=$1 w=$2; shift 2
  local bin=$b/mx_bench_ycsb
  [ "$name" = old ] && bin=$b/mx_bench_ycsb_19f01c8
  timeout 60 $bin -n ${KEYS:-10000000} -m ${KEYS:-10000000} -w $w -r 1 --variants mxtasking -q -o $out/tmp.csv "$@" >/dev/null 2>&1
  echo "rc=$? $name $w" >> $out/log.txt
  grep -E "^ycsb_(load|c|a),mxtasking,$w,throughput," $out/tmp.csv | sed "s/^/$name,$rep,/" >> $out/ab.csv
  [ -n "$PACK" ] && tar czf $PACK -C /tmp ab
}
configs() {
  run default $1
  run e8d3 $1 --read-prefetch-eighths 8 --prefetch-distance 3
  run e8d3_nosteal $1 --read-prefetch-eighths 8 --prefetch-distance 3 --no-steal
  run old $1
  run e8d2 $1 --read-prefetch-eighths 8 --prefetch-distance 2
  run e4d4_nosteal $1 --no-steal
}
for rep in 1 2; do configs ${BIG:-16}; done
rep=1; configs 1
echo done >> $out/log.txt; [ -n "$PACK" ] && tar czf $PACK -C /tmp ab
