#!/usr/bin/env python3
"""Fills in the expected results of SQL logic test files (tests/sql/logic/*.test) from DuckDB.

Runs every record of each file in a fresh in-memory DuckDB database, in order, and rewrites each
`query` record's column letters and result block with DuckDB's answer. A query preceded by a
comment line containing "hand-written" keeps its result (for answers where TunaDB deliberately
differs from DuckDB, e.g. how years before 1 print); the comment says why. Statements that
DuckDB rejects, and `statement error` records that DuckDB accepts, are listed on stderr.

    build/venv/bin/python scripts/sqllogic_duckdb.py tests/sql/logic/functions_string.test
    build/venv/bin/python scripts/sqllogic_duckdb.py --check tests/sql/logic/*.test

With --check nothing is written; the exit code is 1 when a file would change.
"""

import argparse
import datetime
import decimal
import sys

import duckdb


def letter(type_name):
    name = str(type_name).upper()
    if name in ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
                "UINTEGER", "UBIGINT", "UHUGEINT"):
        return "I"
    if name in ("DOUBLE", "FLOAT"):
        return "R"
    if name.startswith("DECIMAL"):
        return "D"
    if name == "BOOLEAN":
        return "B"
    return "T"


def cell(value):
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, float):
        if value != value:
            return "nan"
        if value in (float("inf"), float("-inf")):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    text = str(value)
    return "(empty)" if text == "" else text


def records(lines):
    """Yields (start, end, header, sql_lines, result_start) for each record; end is exclusive."""
    i = 0
    while i < len(lines):
        header = lines[i].strip()
        if not header or header.startswith("#"):
            i += 1
            continue
        start = i
        i += 1
        sql = []
        while i < len(lines) and lines[i].strip() and lines[i].strip() != "----":
            sql.append(lines[i])
            i += 1
        result_start = None
        if i < len(lines) and lines[i].strip() == "----":
            i += 1
            result_start = i
            while i < len(lines) and lines[i].strip():
                i += 1
        yield start, i, header, sql, result_start


def process(path, check):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    con = duckdb.connect()
    out = []
    copied = 0
    problems = 0
    for start, end, header, sql, result_start in records(lines):
        out.extend(lines[copied:start])
        copied = end
        text = "\n".join(sql)
        previous = lines[start - 1] if start > 0 else ""
        if header.startswith("statement"):
            out.extend(lines[start:end])
            try:
                con.execute(text)
                if header.startswith("statement error"):
                    print(f"{path}:{start + 1}: DuckDB accepts this statement", file=sys.stderr)
            except duckdb.Error as error:
                if header == "statement ok":
                    problems += 1
                    print(f"{path}:{start + 1}: DuckDB fails: {error}", file=sys.stderr)
            continue
        words = header.split()
        if "hand-written" in previous:
            out.extend(lines[start:end])
            continue
        try:
            cursor = con.execute(text)
            rows = cursor.fetchall()
            types = "".join(letter(d[1]) for d in cursor.description)
        except duckdb.Error as error:
            problems += 1
            print(f"{path}:{start + 1}: DuckDB fails: {error}", file=sys.stderr)
            out.extend(lines[start:end])
            continue
        out.append(" ".join(["query", types] + words[2:]))
        out.extend(sql)
        out.append("----")
        out.extend("\t".join(cell(v) for v in row) for row in rows)
    out.extend(lines[copied:])
    changed = out != lines
    if changed and not check:
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(out))
    if changed and check:
        print(f"{path}: results differ from DuckDB's", file=sys.stderr)
    return changed, problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only report files DuckDB disagrees with")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    changed_any = False
    for path in args.files:
        changed, _ = process(path, args.check)
        changed_any = changed_any or changed
    return 1 if args.check and changed_any else 0


if __name__ == "__main__":
    sys.exit(main())
