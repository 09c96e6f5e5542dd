"""TunaDB, the task-based SQL engine of mxtasking, from Python: DB-API 2.0 (PEP 249) with NumPy
and Arrow results.

    import tunadb
    with tunadb.connect(threads=2) as con:
        con.execute("CREATE TABLE t (a INTEGER, b VARCHAR)")
        con.executemany("INSERT INTO t VALUES (?, ?)", [(1, "x"), (2, None)])
        print(con.execute("SELECT a, b FROM t WHERE a > ?", [0]).fetchall())
"""

import datetime as _datetime
import time as _time

from ._errors import (DatabaseError, DataError, Error, IntegrityError, InterfaceError, InternalError,
                      NotSupportedError, OperationalError, ProgrammingError, Warning)
from .connection import BINARY, BOOLEAN, DATETIME, NUMBER, ROWID, STRING, Connection, Cursor

apilevel = "2.0"
threadsafety = 1  # threads may share the module; a connection belongs to one thread at a time
paramstyle = "qmark"  # also numeric placeholders: $1, $2, ...

__version__ = "0.1.0"

__all__ = [
    "connect", "Connection", "Cursor", "apilevel", "threadsafety", "paramstyle",
    "Error", "Warning", "InterfaceError", "DatabaseError", "DataError", "OperationalError",
    "IntegrityError", "InternalError", "ProgrammingError", "NotSupportedError",
    "STRING", "BINARY", "NUMBER", "DATETIME", "ROWID", "BOOLEAN",
    "Date", "Time", "Timestamp", "DateFromTicks", "TimeFromTicks", "TimestampFromTicks", "Binary",
]


def connect(threads=None, morsel_rows=None, progress=True):
    """A new in-memory database on a runtime of `threads` workers (default: one per core).
    `morsel_rows`: rows per scan task (engine tuning). `progress`: show a progress bar on a
    terminal for statements that run longer than a second, if tqdm is installed."""
    return Connection(threads=threads, morsel_rows=morsel_rows, progress=progress)


Date = _datetime.date
Time = _datetime.time
Timestamp = _datetime.datetime
Binary = bytes


def DateFromTicks(ticks):
    return Date(*_time.localtime(ticks)[:3])


def TimeFromTicks(ticks):
    return Time(*_time.localtime(ticks)[3:6])


def TimestampFromTicks(ticks):
    return Timestamp(*_time.localtime(ticks)[:6])
