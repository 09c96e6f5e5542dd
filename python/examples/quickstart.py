"""The example of README.md and docs/python.md (python/tests/test_examples.py runs it)."""

from datetime import date
from decimal import Decimal

import tunadb

with tunadb.connect(threads=2) as con:  # an in-memory database on its own runtime
    con.execute("CREATE TABLE t (id INTEGER NOT NULL, name VARCHAR, price DECIMAL(10,2), day DATE)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)",
                    [(1, "tea", Decimal("2.50"), date(2024, 1, 2)), (2, None, Decimal("1.25"), None)])
    cur = con.execute("SELECT id, name, price FROM t WHERE price > $1 ORDER BY id", [Decimal("1")])
    print(cur.description[2])  # ('price', 'DECIMAL', None, None, 10, 2, True)
    print(cur.fetchall())  # [(1, 'tea', Decimal('2.50')), (2, None, Decimal('1.25'))]
    arrays = con.execute("SELECT id, price FROM t ORDER BY id").fetchnumpy()
    print(arrays["id"])  # [1 2] (int32)
    table = con.execute("SELECT * FROM t ORDER BY id").fetch_arrow_table()  # needs pyarrow
    print(table.column("day"))  # date32: 2024-01-02, null
