#!/usr/bin/python3
"""Fetching a large result into Python: TunaDB's package (python/) against DuckDB's, for
scripts/demo.py's target python_fetch_arrow_vs_duckdb (docs/python.md).

Both engines hold the same table of ROWS rows (k BIGINT, q INTEGER, v DOUBLE, p DECIMAL(12,2)),
DuckDB made from range(), TunaDB loaded from DuckDB's CSV export; then each runs
`SELECT k, q, v, p FROM t` with the same thread count and fetches the whole result as an Arrow
table (fetch_arrow_table) and as NumPy arrays (fetchnumpy). Each is timed REPS times after one
warm-up, interleaved; the medians go to stdout and, with --csv, to a file in demo.py's format.

Runs on build/venv/bin/python with tunadb installed (make python-test, or pip install ./python).

Usage: build/venv/bin/python scripts/python_bench.py [--rows 10000000] [--threads 2] [--reps 5]
       [--csv FILE]
"""

import argparse
import csv
import os
import statistics
import sys
import tempfile
import time

QUERY = "SELECT k, q, v, p FROM t"


def _duckdb_arrow(result):
    # DuckDB 1.5 renamed fetch_arrow_table() to to_arrow_table() (the old name warns).
    return result.to_arrow_table() if hasattr(result, "to_arrow_table") else result.fetch_arrow_table()


def fetch_arrow_vs_duckdb(rows=10_000_000, threads=2, reps=5, log=print):
    """Median seconds of query + fetch for both engines: {(engine, kind): seconds}, kind 'arrow' or
    'numpy'. Raises ImportError when tunadb, duckdb or pyarrow is missing."""
    import duckdb
    import pyarrow  # noqa: F401 - both fetch_arrow_table()s need it

    import tunadb

    theirs = duckdb.connect()
    theirs.execute(f"SET threads = {int(threads)}")
    theirs.execute("CREATE TABLE t AS SELECT range AS k, CAST(range % 1000 AS INTEGER) AS q, "
                   "range * 0.5 AS v, CAST((range % 100000) / 100 AS DECIMAL(12,2)) AS p "
                   f"FROM range({int(rows)})")
    ours = tunadb.connect(threads=threads)
    with tempfile.TemporaryDirectory(prefix="tunadb-bench-") as directory:
        path = os.path.join(directory, "t.csv")
        started = time.monotonic()
        theirs.execute(f"COPY t TO '{path}' (HEADER false)")
        ours.execute("CREATE TABLE t (k BIGINT NOT NULL, q INTEGER NOT NULL, v DOUBLE NOT NULL, "
                     "p DECIMAL(12,2) NOT NULL)")
        ours.execute("COPY t FROM ? (FORMAT csv)", [path])
        log(f"    {rows} rows in both engines ({time.monotonic() - started:.1f} s to copy)")

    runs = {}

    def timed(key, run):
        started = time.perf_counter()
        result = run()
        runs.setdefault(key, []).append(time.perf_counter() - started)
        return result

    fetchers = {
        ("tunadb", "arrow"): lambda: ours.execute(QUERY).fetch_arrow_table(),
        ("duckdb", "arrow"): lambda: _duckdb_arrow(theirs.execute(QUERY)),
        ("tunadb", "numpy"): lambda: ours.execute(QUERY).fetchnumpy(),
        ("duckdb", "numpy"): lambda: theirs.execute(QUERY).fetchnumpy(),
    }
    for key, fetch in fetchers.items():  # warm-up, and the results agree
        result = fetch()
        count = result.num_rows if key[1] == "arrow" else len(result["k"])
        if count != rows:
            raise RuntimeError(f"{key[0]} {key[1]} fetched {count} rows, expected {rows}")
        del result
    for _ in range(reps):
        for key, fetch in fetchers.items():
            result = timed(key, fetch)
            del result
    ours.close()
    theirs.close()
    return {key: statistics.median(times) for key, times in runs.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--csv", help="write the medians here (demo.py's columns)")
    args = parser.parse_args()
    try:
        medians = fetch_arrow_vs_duckdb(args.rows, args.threads, args.reps)
    except ImportError as error:
        print(f"python_bench.py: {error} (run with build/venv/bin/python after make python-test)",
              file=sys.stderr)
        return 1
    lines = []
    for (engine, kind), seconds in sorted(medians.items()):
        print(f"{engine:7} {kind:6} {seconds * 1000:9.1f} ms")
        lines.append({"benchmark": f"python_fetch_{kind}", "variant": engine, "workers": str(args.threads),
                      "metric": "seconds", "value": f"{seconds:.6f}", "unit": "s",
                      "repetitions": str(args.reps)})
    for kind in ("arrow", "numpy"):
        ratio = medians[("duckdb", kind)] / medians[("tunadb", kind)]
        print(f"python_fetch_{kind}_vs_duckdb {ratio:.3f} (DuckDB time / TunaDB time)")
        lines.append({"benchmark": f"python_fetch_{kind}", "variant": "duckdb_over_tunadb",
                      "workers": str(args.threads), "metric": "ratio", "value": f"{ratio:.4f}",
                      "unit": "ratio", "repetitions": str(args.reps)})
    if args.csv:
        with open(args.csv, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(lines[0]))
            writer.writeheader()
            writer.writerows(lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
