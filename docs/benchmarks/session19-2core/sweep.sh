#!/bin/bash
# interleaved sweep of tree prefetch settings at 2 workers on this guest
cd /work/main
B=${B:-./build/release/benchmarks/ycsb/mx_bench_ycsb}
declare -a CFG=("" "--read-prefetch-eighths 8 --prefetch-distance 3" "--read-prefetch-eighths 8" "--prefetch-distance 6" "--non-temporal-reads" "--dynamic-prefetch" "--read-prefetch-eighths 2 --prefetch-distance 6")
for r in 1 2 3; do
 for i in "${!CFG[@]}"; do
   o0=$(awk '{print $2+$3+$4}' /proc/stat | head -1)
   $B -n 10000000 -m 10000000 -w 2 -r 1 --variants mxtasking,thread_olc -q -o /tmp/sw.csv ${CFG[$i]} >/dev/null 2>&1
   c=$(grep "^ycsb_c,mxtasking,2,throughput" /tmp/sw.csv | cut -d, -f5)
   a=$(grep "^ycsb_a,mxtasking,2,throughput" /tmp/sw.csv | cut -d, -f5)
   tc=$(grep "^ycsb_c,thread_olc,2,throughput" /tmp/sw.csv | cut -d, -f5)
   ta=$(grep "^ycsb_a,thread_olc,2,throughput" /tmp/sw.csv | cut -d, -f5)
   oth=$(grep "other_cpu_seconds" /tmp/sw.csv | cut -d, -f5)
   echo "$r|${CFG[$i]}|C $c|A $a|tC $tc|tA $ta|other $oth"
 done
done
