"""fetchnumpy() and fetch_arrow_table() agree with fetchall()."""

import datetime
import decimal

import numpy as np
import pytest

import tunadb

from conftest import ALL_TYPES_SCHEMA
from test_dbapi import ROWS

pa = pytest.importorskip("pyarrow")


@pytest.fixture(scope="module")
def filled():
    con = tunadb.connect(threads=2)
    con.execute(ALL_TYPES_SCHEMA)
    con.executemany("INSERT INTO v VALUES (?, ?, ?, ?, ?, ?, ?, ?)", ROWS)
    # Many rows over several batches and workers, with NULLs in some of them.
    con.execute("CREATE TABLE big (k BIGINT NOT NULL, g INTEGER, s VARCHAR, p DECIMAL(12,2), t DATE, x DOUBLE)")
    con.executemany("INSERT INTO big VALUES (?, ?, ?, ?, ?, ?)", [
        (i, None if i % 7 == 0 else i % 13, None if i % 11 == 0 else f"s{i % 97}",
         decimal.Decimal(i) / 100, datetime.date(1990, 1, 1) + datetime.timedelta(days=i % 5000),
         i * 0.5) for i in range(60000)])
    yield con
    con.close()


# Ordered, so that two runs give the same row order.
QUERIES = [
    "SELECT * FROM v ORDER BY i NULLS FIRST",
    "SELECT * FROM big WHERE k % 3 = 1 ORDER BY k",
    "SELECT g, count(*) AS c, sum(p) AS total, min(s) AS lo, max(t) AS hi, avg(x) AS mean FROM big GROUP BY g "
    "ORDER BY g",
    "SELECT k, s FROM big ORDER BY s DESC, k LIMIT 1000",
]


def _py(value):
    if isinstance(value, np.generic):
        return value.item()
    return value


@pytest.mark.parametrize("sql", QUERIES)
def test_numpy_equals_fetchall(filled, sql):
    rows = filled.execute(sql).fetchall()
    cur = filled.execute(sql)
    names = [c[0] for c in cur.description]
    types = [c[1] for c in cur.description]
    arrays = cur.fetchnumpy()
    assert list(arrays) == names
    for index, name in enumerate(names):
        array = arrays[name]
        assert len(array) == len(rows)
        expected = [row[index] for row in rows]
        has_null = any(v is None for v in expected)
        assert isinstance(array, np.ma.MaskedArray) == has_null, name
        mask = np.ma.getmaskarray(array)
        data = np.ma.getdata(array)
        for i, want in enumerate(expected):
            assert bool(mask[i]) == (want is None)
            if want is None:
                continue
            got = _py(data[i])
            if types[index] == "DECIMAL":
                assert got == float(want)
            elif types[index] == "DATE":
                assert data[i] == np.datetime64(want, "D")
            else:
                assert got == want and type(got) is type(want), (name, got, want)
        dtypes = {"BOOLEAN": np.bool_, "INTEGER": np.int32, "BIGINT": np.int64, "DOUBLE": np.float64,
                  "DECIMAL": np.float64, "VARCHAR": np.object_}
        if types[index] in dtypes:
            assert data.dtype == dtypes[types[index]]
        else:
            assert data.dtype == np.dtype("datetime64[D]")


@pytest.mark.parametrize("sql", QUERIES)
def test_arrow_equals_fetchall(filled, sql):
    rows = filled.execute(sql).fetchall()
    cur = filled.execute(sql)
    table = cur.fetch_arrow_table()
    assert table.column_names == [c[0] for c in cur.description]
    assert table.num_rows == len(rows)
    assert [tuple(r.values()) for r in table.to_pylist()] == rows
    kinds = {"BOOLEAN": pa.bool_(), "INTEGER": pa.int32(), "BIGINT": pa.int64(), "DOUBLE": pa.float64(),
             "DATE": pa.date32(), "VARCHAR": pa.large_string()}
    for field, column in zip(table.schema, cur.description):
        if column[1] == "DECIMAL":
            assert field.type == pa.decimal128(column[4], column[5])
        else:
            assert field.type == kinds[column[1]]
    table.validate(full=True)


def test_arrow_after_partial_fetch_and_arrow_alias(filled):
    cur = filled.execute("SELECT k, s FROM big ORDER BY k")
    head = cur.fetchmany(10)
    assert [r[0] for r in head] == list(range(10))
    rest = cur.arrow()
    assert rest.num_rows == 60000 - 10
    assert rest.column("k")[0].as_py() == 10
    assert cur.fetchall() == []
    cur.execute("SELECT k FROM big ORDER BY k")
    cur.fetchone()
    arrays = cur.fetchnumpy()
    assert arrays["k"][0] == 1 and len(arrays["k"]) == 59999


def test_arrow_outlives_cursor_and_connection():
    con = tunadb.connect(threads=1)
    table = con.execute("SELECT 'abc' AS s, 1.25 AS d").fetch_arrow_table()
    arrays = con.execute("SELECT CAST(7 AS BIGINT) AS k").fetchnumpy()
    con.close()
    assert table.to_pylist() == [{"s": "abc", "d": decimal.Decimal("1.25")}]
    assert arrays["k"].tolist() == [7]


def test_pandas_through_arrow(filled):
    pd = pytest.importorskip("pandas")
    frame = filled.execute("SELECT k, g FROM big ORDER BY k LIMIT 5").df()
    assert isinstance(frame, pd.DataFrame) and list(frame["k"]) == [0, 1, 2, 3, 4]
