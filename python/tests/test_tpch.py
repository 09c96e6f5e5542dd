"""The 22 TPC-H queries through the Python API give DuckDB's answers at SF 0.01 (doubles within
1e-9 relative, decimals with the same value and scale, everything else equal), as
tools/tpch_check compares them for the C++ tests."""

import decimal
import math
import os
import subprocess
import sys

import pytest

import tunadb
from conftest import REPO

duckdb = pytest.importorskip("duckdb")

QUERIES = os.path.join(REPO, "tests", "db", "queries")
SF = "0.01"


@pytest.fixture(scope="module")
def data_dir():
    directory = os.environ.get("TUNADB_TPCH_DIR") or os.path.join(REPO, "build", "tpch", f"sf{SF}")
    if not os.path.exists(os.path.join(directory, ".complete")):
        subprocess.run([sys.executable, os.path.join(REPO, "scripts", "tpch.py"), "gen", "--sf", SF,
                        "--out", directory], check=True)
    return directory


@pytest.fixture(scope="module")
def engines(data_dir):
    sys.path.insert(0, os.path.join(REPO, "scripts"))
    try:
        import tpch
    finally:
        sys.path.pop(0)
    theirs = duckdb.connect()
    theirs.execute("SET threads = 2")
    tpch.load(theirs, data_dir)
    ours = tunadb.connect(threads=2)
    assert ours.load_tpch(directory=data_dir) > 0
    yield ours, theirs
    ours.close()
    theirs.close()


def _cell_matches(ours, theirs):
    if ours is None or theirs is None:
        return ours is None and theirs is None
    if isinstance(theirs, float):
        return isinstance(ours, float) and math.isclose(ours, theirs, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(theirs, decimal.Decimal):
        return (isinstance(ours, decimal.Decimal) and ours == theirs
                and ours.as_tuple().exponent == theirs.as_tuple().exponent)
    if isinstance(theirs, int) and isinstance(ours, decimal.Decimal):
        # SUM over integers is DuckDB's HUGEINT and TunaDB's DECIMAL(38,0): the same text.
        return ours.as_tuple().exponent == 0 and ours == theirs
    return type(ours) is type(theirs) and ours == theirs


def _key(row):
    return tuple("" if isinstance(v, float) else repr(v) for v in row)


def _rows_match(ours, theirs):
    if len(ours) != len(theirs):
        return f"{len(ours)} rows, DuckDB {len(theirs)}"
    for pairing in (zip(ours, theirs), zip(sorted(ours, key=_key), sorted(theirs, key=_key))):
        mismatch = next(((a, b) for a, b in pairing
                         if len(a) != len(b) or not all(map(_cell_matches, a, b))), None)
        if mismatch is None:
            return ""
    return f"first difference: {mismatch[0]} vs DuckDB {mismatch[1]}"


@pytest.mark.parametrize("number", range(1, 23))
def test_tpch_query_equals_duckdb(engines, number):
    ours, theirs = engines
    with open(os.path.join(QUERIES, f"q{number}.sql")) as f:
        sql = f.read()
    cur = ours.execute(sql)
    got = cur.fetchall()
    expected = theirs.execute(sql).fetchall()
    # Names of unaliased expressions differ (PostgreSQL's "sum", DuckDB's "sum(l_quantity)").
    assert len(cur.description) == len(theirs.execute(sql).description)
    assert _rows_match(got, expected) == ""
    if number in (1, 3, 10):
        table = ours.execute(sql).fetch_arrow_table()
        assert [tuple(r.values()) for r in table.to_pylist()] == got


def test_load_tpch_generates_into_the_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with tunadb.connect(threads=2) as con:
        rows = con.load_tpch(0.01)
        assert os.path.exists(tmp_path / "tunadb" / "tpch" / "sf0.01" / ".complete")
        assert sorted(con.tables()) == sorted(["region", "nation", "supplier", "customer", "part", "partsupp",
                                               "orders", "lineitem"])
        counts = [con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in con.tables()]
        assert sum(counts) == rows and con.execute("SELECT count(*) FROM nation").fetchone() == (25,)
        with pytest.raises(tunadb.ProgrammingError):  # the tables exist already
            con.load_tpch(0.01)


def test_load_tpch_generates_without_the_source_tree(monkeypatch, tmp_path):
    # The installed package carries its generator; only DuckDB's modules are needed.
    import tunadb.connection as connection

    assert os.path.exists(os.path.join(os.path.dirname(connection.__file__), "_tpch_gen.py"))
    monkeypatch.setattr(connection, "_source_dir", lambda: str(tmp_path / "no-source-tree"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with tunadb.connect(threads=1) as con:
        assert con.load_tpch(0.01) > 0
        assert con.execute("SELECT count(*) FROM region").fetchone() == (5,)


def test_load_tpch_without_duckdb_says_what_to_install(monkeypatch, tmp_path):
    import tunadb.connection as connection

    monkeypatch.setattr(connection, "_source_dir", lambda: str(tmp_path / "no-source-tree"))
    monkeypatch.setattr(connection, "_has_tpch_generator_modules", lambda: False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with tunadb.connect(threads=1) as con:
        with pytest.raises(tunadb.OperationalError, match="pip install duckdb"):
            con.load_tpch(0.01)
        assert con.tables() == []


def test_load_tpch_errors(tmp_path):
    with tunadb.connect(threads=1) as con:
        with pytest.raises(tunadb.OperationalError):
            con.load_tpch(directory=tmp_path / "nothing")
        with pytest.raises(tunadb.InterfaceError):
            con.load_tpch(-1)
        with pytest.raises(tunadb.InterfaceError):
            con.load_tpch()
