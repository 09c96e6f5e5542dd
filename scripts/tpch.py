#!/usr/bin/python3
"""TPC-H data, reference answers and DuckDB timings for TunaDB (see docs/tpch.md).

Runs on the virtual environment that `make deps` creates (build/venv, DuckDB 1.5.5 with the
tpch extension from PyPI, so nothing is downloaded at run time); started with another Python it
re-executes itself with build/venv/bin/python.

  gen     --sf SF --out DIR        DIR/<table>.tbl in dbgen's format, DIR/schema.sql, DIR/.complete
  answers --data DIR --out DIR2    DIR2/<name>.csv and DIR2/<name>.types per query
          [--queries 1,3,6,14] [--params FILE ...] [--all]
  time    --data DIR --threads T --queries 1,3,6,14 --reps 5 [--csv FILE]

Usage: build/venv/bin/python scripts/tpch.py gen --sf 0.01 --out build/tpch/sf0.01
"""

import argparse
import csv
import datetime
import decimal
import glob
import os
import shutil
import signal
import statistics
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(REPO, "build", "venv")
VENV_PYTHON = os.path.join(VENV, "bin", "python")
QUERIES_DIR = os.path.join(REPO, "tests", "db", "queries")
DUCKDB_VERSION = "1.5.5"

try:
    import duckdb
except ImportError:
    # Re-executing keeps `scripts/tpch.py ...` usable from any shell; the environment variable
    # stops a loop when the venv itself lacks duckdb.
    if (os.path.exists(VENV_PYTHON) and not os.environ.get("TPCH_PY_REEXEC")
            and os.path.realpath(sys.prefix) != os.path.realpath(VENV)):
        os.environ["TPCH_PY_REEXEC"] = "1"
        os.execv(VENV_PYTHON, [VENV_PYTHON, os.path.abspath(__file__)] + sys.argv[1:])
    sys.exit(f"tpch.py: the Python module duckdb is missing for {sys.executable}; run `make deps` "
             f"(it creates build/venv with duckdb=={DUCKDB_VERSION}) and use "
             f"build/venv/bin/python scripts/tpch.py")

# dbgen's load order: every table after the ones its keys refer to.
TABLES = ["region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem"]

# String columns of the TPC-H specification (clause 1.4.1). DuckDB's dbgen creates them as plain
# VARCHAR; schema.sql keeps the specification's CHAR(n)/VARCHAR(n), which DuckDB and PostgreSQL
# both accept. Every other column takes DuckDB's catalog type.
SPEC_STRING_TYPES = {
    "p_name": "VARCHAR(55)", "p_mfgr": "CHAR(25)", "p_brand": "CHAR(10)",
    "p_type": "VARCHAR(25)", "p_container": "CHAR(10)", "p_comment": "VARCHAR(23)",
    "s_name": "CHAR(25)", "s_address": "VARCHAR(40)", "s_phone": "CHAR(15)",
    "s_comment": "VARCHAR(101)", "ps_comment": "VARCHAR(199)",
    "c_name": "VARCHAR(25)", "c_address": "VARCHAR(40)", "c_phone": "CHAR(15)",
    "c_mktsegment": "CHAR(10)", "c_comment": "VARCHAR(117)",
    "o_orderstatus": "CHAR(1)", "o_orderpriority": "CHAR(15)", "o_clerk": "CHAR(15)",
    "o_comment": "VARCHAR(79)",
    "l_returnflag": "CHAR(1)", "l_linestatus": "CHAR(1)", "l_shipinstruct": "CHAR(25)",
    "l_shipmode": "CHAR(10)", "l_comment": "VARCHAR(44)",
    "n_name": "CHAR(25)", "n_comment": "VARCHAR(152)",
    "r_name": "CHAR(25)", "r_comment": "VARCHAR(152)",
}
NON_STRING_TYPES = {"INTEGER", "BIGINT", "DECIMAL(15,2)", "DATE"}
MARKER = ".complete"
CHUNK_BYTES = 64 << 20


def fail(message):
    sys.exit(f"tpch.py: {message}")


def sql_string(text):
    return "'" + text.replace("'", "''") + "'"


def tpch_extension_path():
    try:
        import duckdb_extension_tpch
    except ImportError:
        fail("the Python module duckdb_extension_tpch is missing; run `make deps`")
    base = os.path.join(os.path.dirname(duckdb_extension_tpch.__file__), "extensions")
    wanted = os.path.join(base, "v" + duckdb.__version__, "tpch.duckdb_extension")
    if os.path.exists(wanted):
        return wanted
    found = sorted(glob.glob(os.path.join(base, "*", "tpch.duckdb_extension")))
    fail(f"no tpch extension for DuckDB {duckdb.__version__} under {base} (found: "
         f"{', '.join(found) or 'none'}); run `make deps` to install duckdb=={DUCKDB_VERSION} and "
         f"duckdb-extension-tpch=={DUCKDB_VERSION}")


def connect(threads=None):
    con = duckdb.connect(":memory:")
    if threads is not None:
        con.execute(f"SET threads = {int(threads)}")
    return con


def sf_text(sf):
    return format(sf, "g")


def read_marker(directory):
    """The key=value lines of DIR/.complete, or None when the directory holds no complete set."""
    try:
        with open(os.path.join(directory, MARKER)) as f:
            return dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
    except OSError:
        return None


def is_complete(directory, sf):
    marker = read_marker(directory)
    if marker is None or marker.get("sf") != sf_text(sf):
        return False
    names = [f"{t}.tbl" for t in TABLES] + ["schema.sql"]
    return all(os.path.isfile(os.path.join(directory, n)) for n in names)


# ----------------------------------------------------------------------------------------- gen

def schema_sql(con):
    statements = []
    for table in TABLES:
        columns = con.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_name = ? ORDER BY ordinal_position", [table]).fetchall()
        if not columns:
            fail(f"dbgen created no table {table}")
        lines = []
        for name, data_type in columns:
            if data_type == "VARCHAR" and name in SPEC_STRING_TYPES:
                data_type = SPEC_STRING_TYPES[name]
            elif data_type not in NON_STRING_TYPES or name in SPEC_STRING_TYPES:
                fail(f"unexpected type {data_type} of {table}.{name} in DuckDB's dbgen")
            lines.append(f"    {name} {data_type}")
        statements.append(f"CREATE TABLE {table} (\n" + ",\n".join(lines) + "\n);\n")
    return "\n".join(statements)


def check_tbl_file(path, expected_rows, columns):
    """COPY writes unquoted fields here, so checks what would break dbgen's format: each line has
    exactly one '|' per column (the last one trailing) and no value held a '|' or a newline."""
    lines = with_trailing = bars = 0
    previous = b""
    with open(path, "rb") as f:
        while True:
            chunk = f.read(CHUNK_BYTES)
            if not chunk:
                break
            lines += chunk.count(b"\n")
            bars += chunk.count(b"|")
            with_trailing += chunk.count(b"|\n") + (previous == b"|" and chunk[:1] == b"\n")
            previous = chunk[-1:]
    if previous not in (b"", b"\n"):
        fail(f"{path}: last line has no newline")
    if lines != expected_rows:
        fail(f"{path}: {lines} lines written, table has {expected_rows} rows")
    if with_trailing != lines:
        fail(f"{path}: {lines - with_trailing} lines lack the trailing '|'")
    if bars != lines * columns:
        fail(f"{path}: {bars} '|' in {lines} lines of {columns} columns: a value holds a '|'")


_terminated = False


def on_sigterm(signum, frame):
    global _terminated
    _terminated = True
    raise KeyboardInterrupt


def remove_stale_temporaries(parent, name):
    """Removes what killed runs left behind (.NAME.tmp-PID, .NAME.old-PID of dead processes)."""
    for path in glob.glob(os.path.join(parent, f".{glob.escape(name)}.*-*")):
        kind, _, pid = os.path.basename(path)[len(name) + 2:].partition("-")
        if kind not in ("tmp", "old") or not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except PermissionError:
            pass  # alive, another user's


def cmd_gen(args):
    out = os.path.abspath(args.out)
    if args.sf <= 0:
        fail("--sf must be positive")
    if is_complete(out, args.sf):
        print(f"tpch gen: {out} already holds SF {sf_text(args.sf)}")
        return
    parent = os.path.dirname(out)
    os.makedirs(parent, exist_ok=True)
    remove_stale_temporaries(parent, os.path.basename(out))
    # SIGTERM (e.g. from a timeout) unwinds like Ctrl-C so that the temporary directory goes.
    signal.signal(signal.SIGTERM, on_sigterm)
    tmp = os.path.join(parent, f".{os.path.basename(out)}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    os.mkdir(tmp)
    try:
        con = connect(args.threads)
        con.execute(f"LOAD {sql_string(tpch_extension_path())}")
        start = time.perf_counter()
        con.execute(f"CALL dbgen(sf = {args.sf!r})")
        dbgen_s = time.perf_counter() - start

        start = time.perf_counter()
        with open(os.path.join(tmp, "schema.sql"), "w") as f:
            f.write(schema_sql(con))
        counts = {}
        for table in TABLES:
            path = os.path.join(tmp, f"{table}.tbl")
            # The extra NULL column, written as an empty field, produces dbgen's trailing '|'.
            # QUOTE '' keeps COPY from quoting values such as "Supplier#000000001".
            con.execute(f"COPY (SELECT *, NULL FROM {table}) TO {sql_string(path)} "
                        "(FORMAT csv, DELIMITER '|', HEADER false, NULLSTR '', QUOTE '')")
            counts[table] = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            columns = con.execute("SELECT count(*) FROM information_schema.columns "
                                  "WHERE table_name = ?", [table]).fetchone()[0]
            check_tbl_file(path, counts[table], columns)
        write_s = time.perf_counter() - start
        con.close()

        with open(os.path.join(tmp, MARKER), "w") as f:
            f.write(f"duckdb={duckdb.__version__}\n")
            f.writelines(f"rows.{t}={counts[t]}\n" for t in TABLES)
            f.write(f"sf={sf_text(args.sf)}\n")  # last: a marker cut short has no sf line
            f.flush()
            os.fsync(f.fileno())

        if is_complete(out, args.sf):  # a concurrent run finished first
            print(f"tpch gen: {out} already holds SF {sf_text(args.sf)}")
            return
        old = None
        if os.path.lexists(out):
            old = os.path.join(parent, f".{os.path.basename(out)}.old-{os.getpid()}")
            os.rename(out, old)
        os.rename(tmp, out)
        if old:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"tpch gen: SF {sf_text(args.sf)} -> {out}: dbgen {dbgen_s:.2f} s, write {write_s:.2f} s, "
          + ", ".join(f"{t} {counts[t]}" for t in TABLES))


# ------------------------------------------------------------------------------------- loading

def load(con, data_dir):
    """Creates the tables of DATA/schema.sql and fills them from DATA/<table>.tbl."""
    data_dir = os.path.abspath(data_dir)
    schema = os.path.join(data_dir, "schema.sql")
    if not os.path.isfile(schema):
        fail(f"{schema} is missing: generate the data with `tpch.py gen --sf SF --out {data_dir}`")
    with open(schema) as f:
        con.execute(f.read())
    marker = read_marker(data_dir) or {}
    tables = [t for (t,) in con.execute(
        "SELECT table_name FROM information_schema.tables ORDER BY table_name").fetchall()]
    for table in tables:
        path = os.path.join(data_dir, f"{table}.tbl")
        if not os.path.isfile(path):
            fail(f"{path} is missing")
        # DuckDB's CSV reader drops the empty field after dbgen's trailing '|'; dbgen's text
        # has no quotes, so none are interpreted.
        con.execute(f"COPY {table} FROM {sql_string(path)} "
                    "(FORMAT csv, DELIMITER '|', HEADER false, QUOTE '', ESCAPE '')")
        expected = marker.get(f"rows.{table}")
        if expected is not None:
            loaded = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            if loaded != int(expected):
                fail(f"{path}: loaded {loaded} rows, {MARKER} says {expected}")


# ------------------------------------------------------------------------------------- queries

def resolve_query(name):
    """'6' -> tests/db/queries/q6.sql, '6_2' -> tests/db/queries/params/q6_2.sql."""
    name = name.strip()
    if name.startswith("q"):
        name = name[1:]
    for directory in (QUERIES_DIR, os.path.join(QUERIES_DIR, "params")):
        path = os.path.join(directory, f"q{name}.sql")
        if os.path.isfile(path):
            return name, path
    fail(f"no query q{name}.sql under {QUERIES_DIR}")


def query_sort_key(name):
    return [int(part) if part.isdigit() else part for part in name.split("_")]


def select_queries(args):
    """(name, path) pairs; the name becomes the answer's file stem without the leading 'q'."""
    chosen = {}
    if args.all:
        for path in glob.glob(os.path.join(QUERIES_DIR, "**", "q*.sql"), recursive=True):
            chosen[os.path.basename(path)[1:-4]] = path
    if args.queries:
        for item in args.queries.split(","):
            name, path = resolve_query(item)
            chosen[name] = path
    for path in args.params or []:
        if not os.path.isfile(path):
            fail(f"query file {path} does not exist")
        stem = os.path.splitext(os.path.basename(path))[0]
        chosen[stem[1:] if stem.startswith("q") else stem] = os.path.abspath(path)
    if not chosen:
        for n in range(1, 23):
            chosen[str(n)] = resolve_query(str(n))[1]
    return sorted(chosen.items(), key=lambda item: query_sort_key(item[0]))


def read_query(path):
    with open(path) as f:
        return f.read()


def format_value(value):
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)  # shortest text that reads back as the same double (<= 17 digits)
    if isinstance(value, decimal.Decimal):
        return format(value, "f")  # keeps the scale (17.00), never an exponent
    if isinstance(value, datetime.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, datetime.date):
        return value.isoformat()
    return str(value)


def csv_field(text):
    if any(c in text for c in ',"\n\r'):
        return '"' + text.replace('"', '""') + '"'
    return text


def csv_line(fields):
    # Unlike the csv module, writes a lone NULL as an empty line rather than as "".
    return ",".join(csv_field(f) for f in fields) + "\n"


def write_atomic(path, text):
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", newline="") as f:
        f.write(text)
    os.replace(tmp, path)


def cmd_answers(args):
    queries = select_queries(args)
    os.makedirs(args.out, exist_ok=True)
    con = connect(args.threads)
    start = time.perf_counter()
    load(con, args.data)
    print(f"tpch answers: loaded {args.data} in {time.perf_counter() - start:.2f} s")
    for name, path in queries:
        start = time.perf_counter()
        try:
            relation = con.sql(read_query(path))
            columns, types = relation.columns, [str(t) for t in relation.types]
            rows = relation.fetchall()
        except duckdb.Error as e:
            fail(f"{path}: {e}")
        text = csv_line(columns) + "".join(csv_line([format_value(v) for v in row]) for row in rows)
        write_atomic(os.path.join(args.out, f"q{name}.csv"), text)
        write_atomic(os.path.join(args.out, f"q{name}.types"),
                     "".join(f"{c}\t{t}\n" for c, t in zip(columns, types)))
        print(f"  q{name}: {len(rows)} rows, {time.perf_counter() - start:.3f} s")


# ---------------------------------------------------------------------------------------- time

TIME_HEADER = ["system", "threads", "query", "median_s", "min_s", "max_s", "reps"]


def cmd_time(args):
    if args.reps < 1:
        fail("--reps must be at least 1")
    queries = select_queries(args)
    con = connect(args.threads)
    start = time.perf_counter()
    load(con, args.data)
    load_s = time.perf_counter() - start
    print(f"duckdb {duckdb.__version__}, threads={args.threads}: load {load_s:.3f} s")
    print(f"{'query':>8} {'median_s':>10} {'min_s':>10} {'max_s':>10} {'reps':>5}")
    rows = []
    for name, path in queries:
        text = read_query(path)
        try:
            con.execute(text).fetchall()  # warm-up
        except duckdb.Error as e:
            fail(f"{path}: {e}")
        seconds = []
        for _ in range(args.reps):
            start = time.perf_counter()
            con.execute(text).fetchall()
            seconds.append(time.perf_counter() - start)
        row = ["duckdb", args.threads, name, f"{statistics.median(seconds):.6f}",
               f"{min(seconds):.6f}", f"{max(seconds):.6f}", args.reps]
        rows.append(row)
        print(f"{name:>8} {row[3]:>10} {row[4]:>10} {row[5]:>10} {args.reps:>5}")
    if args.csv:
        append = args.append and os.path.isfile(args.csv) and os.path.getsize(args.csv) > 0
        if os.path.dirname(args.csv):
            os.makedirs(os.path.dirname(args.csv), exist_ok=True)
        with open(args.csv, "a" if append else "w", newline="") as f:
            writer = csv.writer(f, lineterminator="\n")
            if not append:
                writer.writerow(TIME_HEADER)
            writer.writerows(rows)
        print(f"wrote {args.csv}")


# ---------------------------------------------------------------------------------------- main

def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    gen = sub.add_parser("gen", help="generate TPC-H .tbl files with DuckDB's dbgen")
    gen.add_argument("--sf", type=float, required=True, help="scale factor, e.g. 0.01, 0.1, 1")
    gen.add_argument("--out", required=True, help="output directory (replaced as a whole)")
    gen.add_argument("--threads", type=int, help="DuckDB threads (default: all cores)")
    gen.set_defaults(func=cmd_gen)

    def add_query_options(p, queries_help):
        p.add_argument("--queries", help=queries_help)
        p.add_argument("--params", action="append", metavar="FILE",
                       help="an extra query file, e.g. tests/db/queries/params/q6_2.sql "
                            "(repeatable); its answer is named after the file")
        p.add_argument("--all", action="store_true",
                       help="every q*.sql under tests/db/queries, parameter sets included")

    answers = sub.add_parser("answers", help="write DuckDB's answers as CSV")
    answers.add_argument("--data", required=True, help="directory written by gen")
    answers.add_argument("--out", required=True, help="directory for q<N>.csv and q<N>.types")
    answers.add_argument("--threads", type=int, help="DuckDB threads (default: all cores)")
    add_query_options(answers, "comma-separated query names: 1,3,6_2 (default: 1..22)")
    answers.set_defaults(func=cmd_answers)

    timing = sub.add_parser("time", help="time DuckDB on the queries")
    timing.add_argument("--data", required=True, help="directory written by gen")
    timing.add_argument("--threads", type=int, required=True, help="DuckDB threads")
    timing.add_argument("--reps", type=int, default=5, help="timed runs after one warm-up")
    timing.add_argument("--csv", help="write the medians to this CSV file")
    timing.add_argument("--append", action="store_true",
                        help="append to --csv instead of replacing it (header only when new)")
    add_query_options(timing, "comma-separated query names: 1,3,6,14 (default: 1..22)")
    timing.set_defaults(func=cmd_time)

    args = parser.parse_args()
    try:
        args.func(args)
    except KeyboardInterrupt:
        sys.exit(143 if _terminated else 130)
    except (duckdb.Error, RuntimeError):
        if _terminated:  # DuckDB turns the interrupt into its own error
            sys.exit(143)
        raise


if __name__ == "__main__":
    main()
