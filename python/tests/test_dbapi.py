"""PEP 249 conformance: module globals, exception classes, connection and cursor methods,
parameters of every type, NULLs, exact value types."""

import datetime
import decimal
import threading

import pytest

import tunadb
from conftest import ALL_TYPES_SCHEMA

D = decimal.Decimal


def test_module_globals():
    assert tunadb.apilevel == "2.0"
    assert tunadb.threadsafety in (0, 1, 2, 3)
    assert tunadb.paramstyle == "qmark"


def test_exception_hierarchy():
    assert issubclass(tunadb.Warning, Exception)
    assert issubclass(tunadb.Error, Exception)
    assert not issubclass(tunadb.Warning, tunadb.Error)
    assert issubclass(tunadb.InterfaceError, tunadb.Error)
    assert issubclass(tunadb.DatabaseError, tunadb.Error)
    for cls in (tunadb.DataError, tunadb.OperationalError, tunadb.IntegrityError, tunadb.InternalError,
                tunadb.ProgrammingError, tunadb.NotSupportedError):
        assert issubclass(cls, tunadb.DatabaseError), cls
    assert not issubclass(tunadb.InterfaceError, tunadb.DatabaseError)


def test_type_objects(cur):
    cur.execute("SELECT 1 AS a, CAST(1 AS BIGINT) AS b, 1.5 AS c, 1e0 AS d, 'x' AS e, "
                "DATE '2020-01-02' AS f, TRUE AS g")
    codes = [column[1] for column in cur.description]
    assert codes == ["INTEGER", "BIGINT", "DECIMAL", "DOUBLE", "VARCHAR", "DATE", "BOOLEAN"]
    assert codes[0] == tunadb.NUMBER and codes[2] == tunadb.NUMBER and codes[3] == tunadb.NUMBER
    assert codes[4] == tunadb.STRING and codes[4] != tunadb.NUMBER
    assert codes[5] == tunadb.DATETIME
    assert codes[0] != tunadb.BINARY and codes[0] != tunadb.ROWID
    assert [column[0] for column in cur.description] == list("abcdefg")
    assert all(len(column) == 7 for column in cur.description)
    assert cur.description[2][4:6] == (2, 1)


def test_constructors():
    assert tunadb.Date(2020, 1, 2) == datetime.date(2020, 1, 2)
    assert isinstance(tunadb.DateFromTicks(0), datetime.date)
    assert isinstance(tunadb.TimestampFromTicks(0), datetime.datetime)
    assert isinstance(tunadb.TimeFromTicks(0), datetime.time)
    assert tunadb.Binary(b"x") == b"x"


def test_fetch_methods(cur):
    cur.execute("CREATE TABLE t (a INTEGER NOT NULL, b VARCHAR)")
    assert cur.description is None
    cur.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, NULL), (4, 'd'), (5, 'e')")
    assert cur.rowcount == 5
    cur.execute("SELECT a, b FROM t ORDER BY a")
    assert cur.rowcount == 5
    assert cur.description[0][0] == "a" and cur.description[0][6] is False
    assert cur.fetchone() == (1, "a")
    assert cur.arraysize == 1
    assert cur.fetchmany() == [(2, "b")]
    cur.arraysize = 2
    assert cur.fetchmany() == [(3, None), (4, "d")]
    assert cur.fetchall() == [(5, "e")]
    assert cur.fetchone() is None
    assert cur.fetchmany(3) == []
    assert cur.fetchall() == []
    assert [row for row in cur.execute("SELECT a FROM t WHERE a > 3 ORDER BY a")] == [(4,), (5,)]


def test_fetch_without_result_set(cur):
    cur.execute("CREATE TABLE t (a INTEGER)")
    with pytest.raises(tunadb.ProgrammingError):
        cur.fetchone()
    with pytest.raises(tunadb.ProgrammingError):
        cur.fetchall()


def test_connection_execute_and_context_managers():
    with tunadb.connect(threads=1) as con:
        assert con.threads == 1
        assert con.execute("SELECT 40 + 2").fetchall() == [(42,)]
        with con.cursor() as cur:
            assert cur.execute("SELECT 'x'").fetchone() == ("x",)
        with pytest.raises(tunadb.ProgrammingError):
            cur.execute("SELECT 1")
    assert con.closed
    with pytest.raises(tunadb.ProgrammingError):
        con.execute("SELECT 1")


def test_closed_connection_raises_programming_error():
    con = tunadb.connect(threads=1)
    cur = con.cursor()
    cur.execute("SELECT 1")
    con.close()
    con.close()  # a second close is harmless
    for call in (con.cursor, con.commit, con.rollback, lambda: con.execute("SELECT 1"),
                 lambda: cur.execute("SELECT 1"), cur.fetchall, con.tables,
                 lambda: con.read_csv("x.csv", table="x")):
        with pytest.raises(tunadb.ProgrammingError):
            call()


def test_commit_and_rollback(con):
    con.commit()
    with pytest.raises(tunadb.NotSupportedError):
        con.rollback()


def test_closed_cursor(cur):
    cur.close()
    with pytest.raises(tunadb.ProgrammingError):
        cur.execute("SELECT 1")
    with pytest.raises(tunadb.ProgrammingError):
        cur.fetchone()


def test_multiple_statements_give_the_last_result(cur):
    cur.execute("CREATE TABLE t (a INTEGER); INSERT INTO t VALUES (7); SELECT a * 2 FROM t")
    assert cur.fetchall() == [(14,)]


def test_explain(cur):
    cur.execute("EXPLAIN SELECT 1")
    (text,) = cur.fetchone()
    assert "Plan" in text


def test_explain_and_explain_analyze_from_the_connection(con):
    con.execute("CREATE TABLE t (a INTEGER, b VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?)", [(i, f"s{i % 3}") for i in range(100)])
    plan = con.explain("SELECT b, count(*) FROM t WHERE a >= ? GROUP BY b", [40])
    assert "Plan" in plan and "Scan t" in plan and "tasks=" not in plan and "Total:" not in plan
    analyzed = con.explain("SELECT b, count(*) FROM t WHERE a >= ? GROUP BY b", [40], analyze=True)
    # Analyzed: the scan's filter passed 60 rows, the aggregate produced 3.
    assert "rows=60 " in analyzed and "rows=3 " in analyzed and "Total: 3 rows" in analyzed, analyzed
    assert con.execute("SELECT count(*) FROM t").fetchone() == (100,)  # still usable


def test_explain_errors_point_into_the_callers_sql(con):
    with pytest.raises(tunadb.ProgrammingError) as caught:
        con.explain("SELECT nope FROM (SELECT 1 AS a) s", analyze=True)
    assert caught.value.position == 8 and caught.value.line == 1 and caught.value.column == 8
    with pytest.raises(tunadb.ProgrammingError):
        con.explain("CREATE TABLE x (a INTEGER)")


# --------------------------------------------------------------------------------- values

ROWS = [
    (True, 1, 10, D("1.50"), D("12345678901234567890.1234"), 0.1, datetime.date(1992, 1, 1), "plain"),
    (False, -2147483648, -9223372036854775808, D("-9999999999999.99"), D("-0.0001"), -0.0,
     datetime.date(1, 1, 1), "it's \"quoted\" ? $1 -- not a comment"),
    (None, None, None, None, None, None, None, None),
    (True, 2147483647, 9223372036854775807, D("0.00"), D("0.0000"), 1e308, datetime.date(9999, 12, 31),
     "ünïcødé ✓ 😀"),
    (False, 0, 0, D("0.01"), D("99999999999999999999999999.9999"), 2.5e-300, datetime.date(2000, 2, 29), ""),
]


def _check_types(row, expected):
    for value, want in zip(row, expected):
        assert type(value) is type(want), (value, want)
        if isinstance(want, D):
            assert value.as_tuple().exponent == want.as_tuple().exponent, (value, want)
        assert value == want or (value != value and want != want)


def test_round_trip_of_every_type_through_parameters(cur):
    cur.execute(ALL_TYPES_SCHEMA)
    cur.executemany("INSERT INTO v VALUES (?, ?, ?, ?, ?, ?, ?, ?)", ROWS)
    assert cur.rowcount == len(ROWS)
    cur.execute("SELECT * FROM v")
    got = cur.fetchall()
    assert len(got) == len(ROWS)
    for row, expected in zip(sorted(got, key=repr), sorted(ROWS, key=repr)):
        _check_types(row, expected)
    assert str(got[[r[7] for r in got].index("")][4]) == "99999999999999999999999999.9999"


def test_round_trip_through_single_inserts_and_dollar_parameters(cur):
    cur.execute(ALL_TYPES_SCHEMA)
    for row in ROWS:
        cur.execute("INSERT INTO v VALUES ($1, $2, $3, $4, $5, $6, $7, $8)", row)
        assert cur.rowcount == 1
    for row in ROWS:
        if row[1] is None:
            cur.execute("SELECT * FROM v WHERE i IS NULL")
        else:
            cur.execute("SELECT * FROM v WHERE i = ? AND s = ? AND t = ? AND d = ?", (row[1], row[7], row[6], row[3]))
        (got,) = cur.fetchall()
        _check_types(got, row)


def test_exact_types_of_results(cur):
    cur.execute("SELECT 1, 3000000000, 1.25, CAST(2 AS DOUBLE), 'a', DATE '1995-03-15', 1 = 1, NULL")
    row = cur.fetchone()
    assert [type(v) for v in row] == [int, int, D, float, str, datetime.date, bool, type(None)]
    assert row[2] == D("1.25") and str(row[2]) == "1.25"


def test_parameters_as_expressions(cur):
    assert cur.execute("SELECT ? + 1", [41]).fetchone() == (42,)
    assert cur.execute("SELECT ?", [-5]).fetchone() == (-5,)
    assert cur.execute("SELECT ? * 2", [1.5]).fetchone() == (3.0,)
    assert type(cur.execute("SELECT ?", [1.5]).fetchone()[0]) is float
    assert cur.execute("SELECT ?", [-1.5]).fetchone() == (-1.5,)
    assert cur.execute("SELECT ?", [D("-12.345")]).fetchone() == (D("-12.345"),)
    (whole,) = cur.execute("SELECT ?", [D("12")]).fetchone()
    assert whole == 12 and isinstance(whole, D)
    assert cur.execute("SELECT ?", [2**62]).fetchone() == (2**62,)
    assert cur.execute("SELECT $2, $1, $2", ["a", "b"]).fetchone() == ("b", "a", "b")
    assert cur.execute("SELECT ?", [True]).fetchone() == (True,)
    assert cur.execute("SELECT ? + interval '1' day", [datetime.date(2020, 2, 28)]).fetchone() == (
        datetime.date(2020, 2, 29),)
    assert cur.execute("SELECT '?', \"?\" FROM (SELECT 1 AS \"?\") x WHERE ? -- ?\n /* ? */", [True]).fetchone() == (
        "?", 1)


def test_numpy_scalars_as_parameters(cur):
    np = pytest.importorskip("numpy")
    row = cur.execute("SELECT ?, ?, ?, ?, ?, ?", [np.int32(-3), np.int64(2**40), np.float64(0.5), np.bool_(True),
                                                 np.str_("s"), np.datetime64("2020-02-03")]).fetchone()
    assert row == (-3, 2**40, 0.5, True, "s", datetime.date(2020, 2, 3))
    assert [type(v) for v in row] == [int, int, float, bool, str, datetime.date]


def test_strings_are_bound_safely(cur):
    cur.execute("CREATE TABLE t (s VARCHAR)")
    evil = "x'); DROP TABLE t; --"
    cur.execute("INSERT INTO t VALUES (?)", [evil])
    assert cur.execute("SELECT s FROM t").fetchall() == [(evil,)]
    assert cur.execute("SELECT count(*) FROM t WHERE s = ?", [evil]).fetchone() == (1,)
    backslash = "a\\'b\\"
    assert cur.execute("SELECT ?", [backslash]).fetchone() == (backslash,)


def test_parameter_errors(cur):
    with pytest.raises(tunadb.ProgrammingError, match="2 .*placeholders but 1"):
        cur.execute("SELECT ?, ?", [1])
    with pytest.raises(tunadb.ProgrammingError):
        cur.execute("SELECT $2", [1])
    with pytest.raises(tunadb.ProgrammingError, match="mix"):
        cur.execute("SELECT ?, $1", [1, 2])
    with pytest.raises(tunadb.ProgrammingError):
        cur.execute("SELECT ?", {"a": 1})
    with pytest.raises(tunadb.ProgrammingError):
        cur.execute("SELECT ?", "a")
    with pytest.raises(tunadb.NotSupportedError):
        cur.execute("SELECT ?", [b"bytes"])
    with pytest.raises(tunadb.NotSupportedError):
        cur.execute("SELECT ?", [datetime.datetime(2020, 1, 1)])
    with pytest.raises(tunadb.NotSupportedError):
        cur.execute("SELECT ?", [float("nan")])
    with pytest.raises(tunadb.DataError):
        cur.execute("SELECT ?", ["nul\x00"])
    with pytest.raises(tunadb.NotSupportedError):
        cur.execute("SELECT ?", [object()])


def test_executemany_without_insert_and_rowcount(cur):
    cur.execute("CREATE TABLE t (a INTEGER)")
    cur.executemany("INSERT INTO t SELECT ? + 1", [(1,), (2,), (3,)])
    assert cur.rowcount == 3
    assert sorted(cur.execute("SELECT a FROM t").fetchall()) == [(2,), (3,), (4,)]
    cur.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(100000)])
    assert cur.rowcount == 100000
    assert cur.execute("SELECT count(*), sum(a) FROM t").fetchone() == (100003, sum(range(100000)) + 9)


# --------------------------------------------------------------------------------- errors

def test_sql_error_carries_message_and_position(cur):
    cur.execute("CREATE TABLE t (a INTEGER)")
    with pytest.raises(tunadb.ProgrammingError) as caught:
        cur.execute("SELECT a,\n       foo FROM t")
    error = caught.value
    assert error.message == 'column "foo" does not exist'
    assert (error.line, error.column, error.position) == (2, 8, 18)
    assert str(error) == 'line 2, column 8: column "foo" does not exist'


def test_error_position_with_parameters_points_into_the_callers_text(cur):
    cur.execute("CREATE TABLE t (a INTEGER)")
    with pytest.raises(tunadb.ProgrammingError) as caught:
        cur.execute("SELECT ?, ?, foo FROM t", ["a long string parameter", 12345678])
    assert (caught.value.line, caught.value.column) == (1, 14)


def test_syntax_error(cur):
    with pytest.raises(tunadb.ProgrammingError) as caught:
        cur.execute("SELEC 1")
    assert caught.value.position == 1 and "syntax error" in caught.value.message
    with pytest.raises(tunadb.ProgrammingError):
        cur.execute("SELECT * FROM missing_table")


def test_runtime_error_is_data_error(cur):
    with pytest.raises(tunadb.DataError) as caught:
        cur.execute("SELECT CAST('abc' AS INTEGER) + x FROM (SELECT 1 AS x) t")
    assert caught.value.message
    cur.execute("CREATE TABLE t (a BIGINT)")
    cur.execute("INSERT INTO t VALUES (9223372036854775807)")
    with pytest.raises(tunadb.DataError):
        cur.execute("SELECT a + 1 FROM t")
    assert cur.execute("SELECT a FROM t").fetchall() == [(9223372036854775807,)]


def test_unsupported_sql_is_not_supported_error(cur):
    cur.execute("CREATE TABLE t (a INTEGER)")
    with pytest.raises(tunadb.NotSupportedError):
        cur.execute("UPDATE t SET a = 1")
    with pytest.raises(tunadb.NotSupportedError):
        cur.execute("BEGIN")


def test_malformed_files(con, tmp_path):
    con.execute("CREATE TABLE t (a INTEGER, b DATE)")
    with pytest.raises(tunadb.OperationalError) as caught:
        con.execute("COPY t FROM ?", [str(tmp_path / "missing.csv")])
    assert "missing.csv" in str(caught.value)
    bad = tmp_path / "bad.csv"
    bad.write_text("1,2020-01-01\nx,2020-01-02\n")
    with pytest.raises(tunadb.DataError) as caught:
        con.execute(f"COPY t FROM '{bad}' (FORMAT csv)")
    assert "bad.csv" in str(caught.value)
    assert con.execute("SELECT count(*) FROM t").fetchone() == (0,)
    with pytest.raises(tunadb.OperationalError):
        con.read_csv(tmp_path / "missing.csv", table="m")
    with pytest.raises(tunadb.DataError):
        con.read_csv(bad, table="t", header=False)
    assert "m" not in con.tables()


def test_read_csv(con, tmp_path):
    path = tmp_path / "people.csv"
    path.write_text("id,name,born,score,ok\n1,Ann,1990-05-01,1.5,true\n2,\"Bob, Jr.\",,2.25,false\n"
                    "3,,2001-12-31,,true\n")
    assert con.read_csv(path, table="people") == 3
    cur = con.execute("SELECT * FROM people ORDER BY id")
    assert [c[1] for c in cur.description] == ["INTEGER", "VARCHAR", "DATE", "DOUBLE", "BOOLEAN"]
    assert cur.fetchall() == [
        (1, "Ann", datetime.date(1990, 5, 1), 1.5, True),
        (2, "Bob, Jr.", None, 2.25, False),
        (3, None, datetime.date(2001, 12, 31), None, True),
    ]
    assert con.read_csv(path, table="people") == 3  # appends to the existing table
    assert con.execute("SELECT count(*) FROM people").fetchone() == (6,)
    typed = tmp_path / "typed.csv"
    typed.write_text("1|10.50\n2|3.25\n")
    assert con.read_csv(typed, table="money", header=False, delimiter="|",
                        columns={"id": "INTEGER", "amount": "DECIMAL(10,2)"}) == 2
    assert con.execute("SELECT sum(amount) FROM money").fetchone() == (D("13.75"),)


def test_two_connections_in_one_process():
    a = tunadb.connect(threads=1)
    b = tunadb.connect(threads=2)
    try:
        a.execute("CREATE TABLE t (x INTEGER)")
        a.execute("INSERT INTO t VALUES (1)")
        b.execute("CREATE TABLE t (x VARCHAR)")
        b.execute("INSERT INTO t VALUES ('b')")
        assert a.execute("SELECT x FROM t").fetchall() == [(1,)]
        assert b.execute("SELECT x FROM t").fetchall() == [("b",)]
        results = {}

        def work(name, con):
            con.execute("CREATE TABLE big (k INTEGER)")
            con.executemany("INSERT INTO big VALUES (?)", [(i % 100,) for i in range(20000)])
            results[name] = con.execute("SELECT count(*) FROM big x, big y WHERE x.k = y.k").fetchone()

        threads = [threading.Thread(target=work, args=(n, c)) for n, c in (("a", a), ("b", b))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == {"a": (4000000,), "b": (4000000,)}
    finally:
        a.close()
        b.close()


def test_bad_connect_arguments():
    with pytest.raises(tunadb.InterfaceError):
        tunadb.connect(threads=0)
    with pytest.raises(tunadb.InterfaceError):
        tunadb.connect(threads="2")
