#!/bin/bash
# Device: TPC-H SF 1, all 22 queries, 16 threads, DuckDB then TunaDB (merged code of session 16).
set -u
D=$PWD/device-bundle; B=$D/bin; export LD_LIBRARY_PATH=$D/lib
O=${OUT:-/tmp/out}; W=$O/w; mkdir -p $W; BIG=${BIG:-16}; SF=${SF:-1}
log() { echo "== $* ($(date +%T) load $(cut -d' ' -f1 /proc/loadavg))" | tee -a $W/log.txt; }
python3 -m pip install -q --no-index --target /tmp/py $D/wheels/*.whl > $W/pip.txt 2>&1 || { for w in $D/wheels/*.whl; do python3 -m zipfile -e $w /tmp/py; done; }
export PYTHONPATH=/tmp/py; data=/tmp/tpch_sf$SF; all22=$(seq -s, 1 22)
log tpch_gen; timeout 90 python3 $D/../scripts/tpch.py gen --sf $SF --out $data >> $W/log.txt 2>&1
for r in 1 2; do
log duckdb$r; timeout 90 python3 $D/../scripts/tpch.py time --data $data --threads $BIG --queries $all22 --reps 3 --csv $W/tpch_duckdb_${BIG}t_$r.csv >> $W/log.txt 2>&1
log tunadb$r; timeout 120 $B/mx_bench_tpch --data $data --threads $BIG --queries $all22 --queries-dir $D/../tests/db/queries --reps 3 --warmup 1 --timeout 60 --cancel-grace 5 --quiet --csv $W/tpch_tunadb_${BIG}t_$r.csv >> $W/log.txt 2>&1
done
log done
