#!/bin/bash
# Device: where the task tree's time goes at 16 workers (profiles of ours and the original) and a
# sweep of the tree's switches at 16 workers, two interleaved rounds.
set -u
D=$PWD/device-bundle; B=$D/bin; export LD_LIBRARY_PATH=$D/lib
O=${OUT:-/tmp/out}; W=$O/w; mkdir -p $W
K=${KEYS:-10000000}; BIG=${BIG:-16}
log() { echo "== $* ($(date +%T) load $(cut -d' ' -f1 /proc/loadavg))" | tee -a $W/log.txt; }
pack() { tar czf $O/res.tgz.tmp -C $O w && mv $O/res.tgz.tmp $O/res.tgz; }
{ date; nproc; lscpu | grep -E "Model|L3|L2|NUMA node\(s\)|MHz"; cat /proc/loadavg; } > $W/env.txt 2>&1
tar xJf $D/perf.tar.xz -C /tmp; P="env LD_LIBRARY_PATH=/tmp/perf:$D/lib /tmp/perf/perf"
log export; timeout 60 $B/mx_bench_ycsb -n $K -m $K --export-workload /tmp/wl >/dev/null 2>&1
log perf_ours16; timeout 60 $P record -e cpu-clock -F 999 -o /tmp/ours16.data -- $B/mx_bench_ycsb -n $K -m $K -w $BIG -r 1 --variants mxtasking -q -o /tmp/o.csv >/dev/null 2>>$W/log.txt; grep throughput /tmp/o.csv | cut -d, -f1-5 | tee -a $W/log.txt
log perf_orig16; timeout 60 $P record -e cpu-clock -F 999 -o /tmp/orig16.data -- $B/blinktree_benchmark $BIG -f /tmp/wl/fill /tmp/wl/mixed_c --sync4me -pd 2 -i 1 2>&1 | tail -2 | tee -a $W/log.txt
for f in ours16 orig16; do timeout 60 $P report -i /tmp/$f.data --no-children --stdio --sort dso,sym 2>/dev/null | grep -E '^ +[0-9]' | head -60 > $W/$f.report.txt; done
for s in 'mx::tasking::detail::Worker::execute' 'mx::tasking::detail::Worker::run_buffer_static<false>' 'mx::index::blinktree::BLinkTree<1024ul>::OperationTask::execute'; do echo "#### $s"; timeout 60 $P annotate -i /tmp/ours16.data --stdio -s "$s" 2>/dev/null | grep -E '^\s+[0-9]+\.[0-9]+ :' | sort -rn | head -40; done > $W/ours16.annotate.txt
pack
log profile16; timeout 60 $B/mx_bench_ycsb -n $K -m $K -w $BIG -r 1 --variants mxtasking -q -o /tmp/p.csv --profile > $W/profile16.txt 2>&1; pack
ours() { local name=$1; shift; timeout 60 $B/mx_bench_ycsb -n $K -m $K -w $BIG -r 1 --variants mxtasking -q -o /tmp/s.csv "$@" >/dev/null 2>>$W/log.txt; grep throughput /tmp/s.csv | cut -d, -f1-5 | sed "s/^/$name,$rep,/" | tee -a $W/sweep.csv; }
for rep in 1 2; do log sweep$rep
  ours default; ours nosteal --no-steal; ours d2 --prefetch-distance 2; ours nta --non-temporal-reads
  ours static --split static; ours bypass0 --bypass-level 0; ours d8 --prefetch-distance 8; ours e8 --read-prefetch-eighths 8
  pack; done
log done; pack
