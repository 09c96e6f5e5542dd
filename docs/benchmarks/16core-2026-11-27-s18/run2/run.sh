#!/bin/bash
# Device call 2: requests in flight per worker (the YCSB feeder's batch) at 16, 4 and 2 workers,
# interleaved; ours with batch 100 against the original and the thread OLC tree; TPC-H SF1 16/4
# threads, DuckDB and TunaDB.
set -u
D=$(cd "$(dirname "$0")" && pwd); B=$D/bin; export LD_LIBRARY_PATH=$D/lib; REPO=$(cd "$D/.." && pwd)
O=${OUT:-/tmp/out}; W=$O/w; mkdir -p $W
K=${KEYS:-10000000}; BIG=${BIG:-16}; SF=${SF:-1}; R=${ROUNDS:-4}
log() { echo "== $* ($(date +%T) load $(cut -d' ' -f1 /proc/loadavg))" | tee -a $W/log.txt; }
pack() { tar czf $O/res.tgz.tmp -C $O w && mv $O/res.tgz.tmp $O/res.tgz; }
{ date; nproc; lscpu | grep -E "Model|L3|L2|NUMA node\(s\)"; cat /proc/loadavg; } > $W/env.txt 2>&1
(python3 -m pip install -q --no-index --target /tmp/py $D/wheels/*.whl > $W/pip.txt 2>&1) &
PIP=$!
log export; timeout 60 $B/mx_bench_ycsb -n $K -m $K --export-workload /tmp/wl >/dev/null 2>&1
log warmup; timeout 60 $B/blinktree_benchmark $BIG -f /tmp/wl/fill /tmp/wl/mixed_c --sync4me -pd 2 -i 1 >/dev/null 2>&1
ours() { local w=$1 name=$2; shift 2; timeout 60 $B/mx_bench_ycsb -n $K -m $K -w $w -r 1 --variants mxtasking -q -o /tmp/s.csv "$@" >/dev/null 2>>$W/log.txt; grep throughput /tmp/s.csv | cut -d, -f1-5 | sed "s/^/$name,$rep,/" | tee -a $W/batch.csv; }
for rep in $(seq $R); do log batch16_$rep; ours $BIG b500 --batch 500; ours $BIG b100 --batch 100; ours $BIG b200 --batch 200; ours $BIG b50 --batch 50; pack; done
log ab16_b100; timeout 100 $D/scripts/ab_original.sh $B/blinktree_benchmark /tmp/wl 2 $BIG $B/mx_bench_ycsb --batch 100 > $W/ab16_b100.txt 2>&1; tail -4 $W/ab16_b100.txt | tee -a $W/log.txt; pack
log ycsb16_b100; timeout 60 $B/mx_bench_ycsb -n $K -m $K -w $BIG -r 3 --batch 100 --variants mxtasking,thread_olc -q -o $W/ycsb16_b100.csv >/dev/null 2>&1; grep throughput $W/ycsb16_b100.csv | cut -d, -f1-5 | tee -a $W/log.txt; pack
for rep in 1 2; do log batch4_$rep; ours 4 b500 --batch 500; ours 4 b100 --batch 100; pack; done
for rep in 1; do log batch2_$rep; ours 2 b500 --batch 500; ours 2 b100 --batch 100; pack; done
wait $PIP; export PYTHONPATH=/tmp/py
if python3 -c "import duckdb" 2>>$W/log.txt; then
  data=/tmp/tpch_sf$SF; all22=$(seq -s, 1 22)
  log tpch_gen; timeout 90 python3 $REPO/scripts/tpch.py gen --sf $SF --out $data >> $W/log.txt 2>&1
  for t in $BIG 4; do
    log tpch_duckdb_$t; (cd $REPO && timeout 90 python3 scripts/tpch.py time --data $data --threads $t --queries $all22 --reps 3 --csv $W/tpch_duckdb_${t}t.csv >> $W/log.txt 2>&1)
    log tpch_tunadb_$t; (cd $REPO && timeout 90 $B/mx_bench_tpch --data $data --threads $t --queries $all22 --reps 3 --warmup 1 --timeout 60 --quiet --csv $W/tpch_tunadb_${t}t.csv >> $W/log.txt 2>&1)
    pack
  done
fi
log done; pack
