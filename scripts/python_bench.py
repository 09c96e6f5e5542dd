#!/usr/bin/python3
"""Fetching a large result into Python: TunaDB's package (python/) against DuckDB's, for
scripts/demo.py's target python_fetch_arrow_vs_duckdb (docs/python.md).

Both engines hold the same table of ROWS rows (k BIGINT, q INTEGER, v DOUBLE, p DECIMAL(12,2)),
DuckDB made from range(), TunaDB loaded from DuckDB's CSV export; then each runs
`SELECT k, q, v, p FROM t` with the same thread count and fetches the whole result as an Arrow
table (fetch_arrow_table) and as NumPy arrays (fetchnumpy). Each is timed REPS times after one
warm-up, interleaved; the medians go to stdout and, with --csv, to a file in demo.py's format.

With --tpch-data DIR (from `scripts/tpch.py gen`) and --tpch-driver PATH (mx_bench_tpch) it
measures instead what the Python API costs a query: the TPC-H queries run through
`cursor.execute(q).fetchall()` against the same queries in the C++ driver, same data, same thread
count. The Python process loads the tables once; each round runs the driver (its own process and
load) and then the queries in Python, so the two alternate. Per query the median over rounds of
each round's median; the target python_tpch_vs_cpp is the geometric mean of C++ time / Python time.

Runs on build/venv/bin/python with tunadb installed (make python-test, or pip install ./python).

Usage: build/venv/bin/python scripts/python_bench.py [--rows 10000000] [--threads 2] [--reps 5]
       [--csv FILE]
       build/venv/bin/python scripts/python_bench.py --tpch-data DIR --tpch-driver PATH
       [--tpch-queries 1,...,22] [--threads 2] [--reps 3] [--rounds 2] [--csv FILE]
"""

import argparse
import csv
import json
import math
import os
import statistics
import subprocess
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


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TPCH_QUERY_DIR = os.path.join(REPO, "tests", "db", "queries")


def _cpp_round(driver, data, threads, queries, reps, json_path):
    """One process of the C++ driver: {query: median seconds} of the queries it ran correctly."""
    command = [driver, "--data", data, "--threads", str(threads), "--queries", ",".join(queries),
               "--reps", str(reps), "--warmup", "1", "--quiet", "--json", json_path]
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(command)}: exit {done.returncode}: {done.stdout[-500:]}")
    with open(json_path) as handle:
        status = json.load(handle)
    return {entry["query"]: float(entry["median_s"]) for entry in status["queries"]
            if entry["status"] in ("ok", "unchecked")}


def tpch_python_vs_cpp(data, driver, threads=2, queries=None, reps=3, rounds=2, log=print):
    """Median seconds per query through the Python API and through the C++ driver:
    {"python": {query: s}, "cpp": {query: s}}, medians over rounds of per-round medians."""
    import tunadb

    queries = queries or [str(q) for q in range(1, 23)]
    texts = {}
    for query in queries:
        with open(os.path.join(TPCH_QUERY_DIR, f"q{query}.sql"), encoding="utf-8") as handle:
            texts[query] = handle.read()
    con = tunadb.connect(threads=threads, progress=False)
    started = time.monotonic()
    con.load_tpch(directory=data)
    log(f"    loaded {data} through Python in {time.monotonic() - started:.1f} s")
    cursor = con.cursor()
    runs = {"python": {q: [] for q in queries}, "cpp": {q: [] for q in queries}}
    with tempfile.TemporaryDirectory(prefix="tunadb-bench-") as directory:
        for round_index in range(rounds):
            cpp = _cpp_round(driver, data, threads, queries, reps,
                             os.path.join(directory, f"cpp{round_index}.json"))
            for query, seconds in cpp.items():
                runs["cpp"][query].append(seconds)
            for query in queries:
                times = []
                for rep in range(reps + 1):  # the first run warms up, as the driver's --warmup 1
                    begin = time.perf_counter()
                    cursor.execute(texts[query]).fetchall()
                    if rep > 0:
                        times.append(time.perf_counter() - begin)
                runs["python"][query].append(statistics.median(times))
            log(f"    round {round_index + 1} of {rounds} done")
    con.close()
    return {system: {q: statistics.median(t) for q, t in per_query.items() if len(t) == rounds}
            for system, per_query in runs.items()}


def tpch_main(args):
    queries = args.tpch_queries.split(",") if args.tpch_queries else None
    medians = tpch_python_vs_cpp(args.tpch_data, args.tpch_driver, args.threads, queries, args.reps,
                                 args.rounds)
    python, cpp = medians["python"], medians["cpp"]
    common = [q for q in python if q in cpp]
    missing = sorted(set(python) ^ set(cpp) | (set(queries or []) - set(common)), key=int)
    if missing:
        print(f"python_bench.py: queries not measured in both: {','.join(missing)}", file=sys.stderr)
    if not common:
        return 1
    lines = []

    def add(benchmark, variant, metric, value, unit):
        lines.append({"benchmark": benchmark, "variant": variant, "workers": str(args.threads),
                      "metric": metric, "value": f"{value:.6g}", "unit": unit,
                      "repetitions": str(args.reps * args.rounds)})

    print(f"{'query':>6} {'cpp_s':>9} {'python_s':>9} {'cpp/python':>10}")
    for query in common:
        ratio = cpp[query] / python[query]
        print(f"{query:>6} {cpp[query]:9.4f} {python[query]:9.4f} {ratio:10.3f}")
        add(f"python_tpch_q{query}", "cpp", "median_time", cpp[query], "s")
        add(f"python_tpch_q{query}", "python", "median_time", python[query], "s")
    geomean = math.exp(statistics.fmean(math.log(cpp[q] / python[q]) for q in common))
    print(f"python_tpch_vs_cpp {geomean:.4f} (C++ driver time / Python time, geometric mean over "
          f"{len(common)} queries)")
    add("python_tpch", "cpp_over_python", "ratio", geomean, "ratio")
    if args.csv:
        with open(args.csv, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(lines[0]))
            writer.writeheader()
            writer.writerows(lines)
    return 0 if not missing else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=None, help="timed runs (default 5; 3 with --tpch-data)")
    parser.add_argument("--csv", help="write the medians here (demo.py's columns)")
    parser.add_argument("--tpch-data", help="TPC-H directory: time the queries through Python against C++")
    parser.add_argument("--tpch-driver", help="mx_bench_tpch (with --tpch-data)")
    parser.add_argument("--tpch-queries", help="comma-separated query numbers (default all 22)")
    parser.add_argument("--rounds", type=int, default=2, help="alternations of C++ and Python (--tpch-data)")
    args = parser.parse_args()
    if args.tpch_data:
        if not args.tpch_driver:
            parser.error("--tpch-data needs --tpch-driver")
        args.reps = args.reps or 3
        try:
            return tpch_main(args)
        except ImportError as error:
            print(f"python_bench.py: {error} (run with build/venv/bin/python after make python-test)",
                  file=sys.stderr)
            return 1
    args.reps = args.reps or 5
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
