#!/bin/sh
# ctest fixture of the TPC-H tests: makes DuckDB's TPC-H data and answers in DATA and DATA-answers
# (scripts/tpch.py; both steps are skipped when their output is complete and up to date).
# Usage: tpch_data.sh PYTHON REPO DATA SF
set -eu
python=$1
repo=$2
data=$3
sf=$4
answers="$data-answers"
if [ ! -x "$python" ]; then
    echo "tpch: $python is missing: run \`make deps\` in $repo (it creates build/venv with DuckDB)" >&2
    exit 1
fi
"$python" "$repo/scripts/tpch.py" gen --sf "$sf" --out "$data"
# Answers depend on the data and the query texts; redo them when either is newer.
if [ -f "$answers/.complete" ] && [ -z "$(find "$data/.complete" "$repo/tests/db/queries" "$repo/scripts/tpch.py" \
        -newer "$answers/.complete" 2>/dev/null | head -n 1)" ]; then
    echo "tpch: answers in $answers are up to date"
    exit 0
fi
rm -f "$answers/.complete"
"$python" "$repo/scripts/tpch.py" answers --data "$data" --out "$answers" --all
touch "$answers/.complete"
