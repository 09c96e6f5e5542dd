"""Connection and Cursor (PEP 249) over the engine of tunadb._tunadb."""

import atexit
import csv
import datetime
import os
import re
import subprocess
import sys
import threading
import time
import weakref

from . import _params
from ._errors import (DataError, InterfaceError, NotSupportedError, OperationalError,
                      ProgrammingError, translate)
from ._tunadb import Engine, EngineError

TPCH_TABLES = ("region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem")

# Rows converted to Python objects at a time by fetchone()/fetchmany().
_CHUNK_ROWS = 2048


# Open connections, closed at exit so that their runtimes stop their workers in order.
_open_connections = weakref.WeakSet()


@atexit.register
def _close_all():
    for connection in list(_open_connections):
        try:
            connection.close()
        except Exception:
            pass


class DBAPITypeObject:
    """A PEP 249 type object: equal to every type_code of its group."""

    def __init__(self, *names):
        self.names = frozenset(names)

    def __eq__(self, other):
        return other in self.names

    def __ne__(self, other):
        return other not in self.names

    def __hash__(self):
        return hash(self.names)

    def __repr__(self):
        return f"DBAPITypeObject{tuple(sorted(self.names))}"


STRING = DBAPITypeObject("VARCHAR")
BINARY = DBAPITypeObject()
NUMBER = DBAPITypeObject("INTEGER", "BIGINT", "DECIMAL", "DOUBLE")
DATETIME = DBAPITypeObject("DATE")
ROWID = DBAPITypeObject()
BOOLEAN = DBAPITypeObject("BOOLEAN")


def _rowcount_of(tag):
    # PostgreSQL's tags: "INSERT 0 3", "COPY 60175", "SELECT 4".
    words = tag.split()
    if words and words[0] in ("INSERT", "COPY", "SELECT") and words[-1].isdigit():
        return int(words[-1])
    return -1


def _is_copy(sql):
    return re.match(r"\s*copy\b", sql, re.IGNORECASE) is not None


class Connection:
    """One in-memory TunaDB database on its own mxtasking runtime."""

    def __init__(self, threads=None, morsel_rows=None, progress=True):
        if threads is not None and not (isinstance(threads, int) and 1 <= threads <= 65535):
            raise InterfaceError(f"threads must be a positive integer or None, not {threads!r}")
        if morsel_rows is not None and not (isinstance(morsel_rows, int) and morsel_rows >= 1):
            raise InterfaceError(f"morsel_rows must be a positive integer or None, not {morsel_rows!r}")
        try:
            self._engine = Engine(threads, morsel_rows)
        except Exception as error:  # ConfigError of the runtime
            raise OperationalError(f"cannot start the runtime: {error}") from error
        self._cursors = []
        # In-flight calls; close() waits for them (guarded by _lock).
        self._lock = threading.Condition()
        self._running = 0
        # A progress bar for statements running longer than a second (tqdm, terminal only).
        self._progress = progress
        _open_connections.add(self)

    # -- PEP 249 ---------------------------------------------------------------------------------

    def close(self):
        """Closes the connection and its cursors; the database and its tables are gone."""
        if self._engine is None:
            return
        for cursor in list(self._cursors):
            cursor.close()
        with self._lock:
            engine = self._engine
            self._engine = None
            engine.cancel("connection closed")
            while self._running > 0:
                self._lock.wait()
        engine.close()

    def commit(self):
        """No-op: every statement takes effect at once (TunaDB has no transactions)."""
        self._check_open()

    def rollback(self):
        self._check_open()
        raise NotSupportedError("TunaDB has no transactions: every statement takes effect at once")

    def cursor(self):
        self._check_open()
        cursor = Cursor(self)
        self._cursors.append(cursor)
        return cursor

    # -- conveniences --------------------------------------------------------------------------

    def execute(self, sql, parameters=None):
        """A new cursor that has run `sql` (fetch from it)."""
        return self.cursor().execute(sql, parameters)

    def executemany(self, sql, seq_of_parameters):
        return self.cursor().executemany(sql, seq_of_parameters)

    def explain(self, sql, parameters=None, analyze=False):
        """The plan of the SELECT `sql` as text (EXPLAIN). With analyze=True the query runs and the
        plan shows per operator the rows it produced, its tasks and their time, and the time of
        each pipeline (EXPLAIN ANALYZE); the result rows are dropped."""
        if not isinstance(sql, str):
            raise ProgrammingError(f"SQL must be a str, not {type(sql).__name__}")
        bound = _params.bind(sql, parameters) if parameters is not None else None
        prefixed = _Prefixed("EXPLAIN ANALYZE " if analyze else "EXPLAIN ", sql, bound)
        result = self._run(prefixed.text, prefixed)
        if result.kind != "explain":
            raise ProgrammingError("explain() takes one SELECT statement")
        return result.text

    @property
    def closed(self):
        return self._engine is None

    @property
    def threads(self):
        """Worker threads of the connection's runtime."""
        return self._check_open().workers

    def tables(self):
        """Names of the tables."""
        return list(self._check_open().tables())

    def cancel(self):
        """Cancels the queries running on this connection right now (from another thread)."""
        engine = self._engine
        if engine is not None:
            engine.cancel("cancelled")

    def read_csv(self, path, table, *, header=True, delimiter=",", null="", quote='"', columns=None,
                 sample_rows=1000):
        """Loads the CSV file `path` into `table` and returns the number of rows loaded.

        An existing table receives the rows (COPY). Otherwise the table is created first, with
        `columns` (a dict or list of (name, SQL type) pairs) or, without them, with names from the
        header and types guessed from the first `sample_rows` rows (BIGINT or INTEGER, DOUBLE,
        DATE, BOOLEAN, else VARCHAR). A failed load leaves a table it created dropped again.
        """
        self._check_open()
        path = os.fspath(path)
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", table):
            raise ProgrammingError(f"invalid table name {table!r}")
        if not os.path.isfile(path):
            raise OperationalError(f"{path}: cannot open: No such file")
        created = False
        if table.lower() not in (name.lower() for name in self.tables()):
            if columns is None:
                columns = _guess_columns(path, header, delimiter, quote, null, sample_rows)
            elif isinstance(columns, dict):
                columns = list(columns.items())
            spec = ", ".join(f'"{name}" {sql_type}' for name, sql_type in columns)
            self._run(f"CREATE TABLE {table} ({spec})")
            created = True
        options = [f"DELIMITER {_params.literal(delimiter)}", f"HEADER {'true' if header else 'false'}",
                   f"NULL {_params.literal(null)}", f"QUOTE {_params.literal(quote)}", "FORMAT csv"]
        try:
            result = self._run(f"COPY {table} FROM {_params.literal(path)} ({', '.join(options)})")
        except BaseException:
            if created:
                self._run(f"DROP TABLE IF EXISTS {table}")
            raise
        return _rowcount_of(result.tag)

    def load_tpch(self, sf=None, directory=None):
        """Creates and loads the eight TPC-H tables; returns the rows loaded.

        `directory` holds the files of scripts/tpch.py gen (schema.sql and <table>.tbl); with
        `sf` alone they are generated (once) into $XDG_CACHE_HOME/tunadb/tpch/sf<SF> with
        DuckDB's dbgen (the duckdb and duckdb-extension-tpch packages), as the tunadb shell does.
        """
        self._check_open()
        if directory is None:
            if sf is None:
                raise InterfaceError("load_tpch needs a scale factor or a directory")
            directory = _tpch_directory(sf)
            if not os.path.exists(os.path.join(directory, ".complete")):
                _generate_tpch(sf, directory)
        directory = os.fspath(directory)
        schema_path = os.path.join(directory, "schema.sql")
        try:
            with open(schema_path, encoding="utf-8") as f:
                schema = f.read()
        except OSError as error:
            raise OperationalError(f"{schema_path}: cannot read: {error.strerror}") from error
        self._run(schema)
        rows = 0
        for table in TPCH_TABLES:
            path = os.path.join(directory, f"{table}.tbl")
            rows += _rowcount_of(self._run(f"COPY {table} FROM {_params.literal(path)}", copy=True).tag)
        return rows

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # -- internals -----------------------------------------------------------------------------

    def _check_open(self):
        engine = self._engine
        if engine is None:
            raise ProgrammingError("connection is closed")
        return engine

    def _run(self, sql, bound=None, copy=None):
        """Runs `sql` on the engine and returns its last statement's Result. The GIL is released
        while it runs; in the main thread a KeyboardInterrupt cancels it (the engine's cancel, as
        the shell's Ctrl-C) and is re-raised once the engine has stopped."""
        with self._lock:
            engine = self._check_open()
            self._running += 1
        try:
            try:
                if threading.current_thread() is not threading.main_thread():
                    return engine.execute(sql)
                return _run_interruptible(engine, sql, self._progress)
            except EngineError as error:
                raise _translated(error, bound, _is_copy(sql) if copy is None else copy) from None
        finally:
            with self._lock:
                self._running -= 1
                self._lock.notify_all()


class _Prefixed:
    """`sql` (bound to its parameters, if any) behind a prefix, with error positions mapped back
    into `sql` as the caller wrote it (the interface of _params.Bound)."""

    def __init__(self, prefix, sql, bound=None):
        self.original = sql
        self.text = prefix + (bound.text if bound is not None else sql)
        self._prefix = len(prefix)
        self._bound = bound

    def original_position(self, position):
        position -= self._prefix
        if position <= 0:
            return 0
        return self._bound.original_position(position) if self._bound is not None else position


def _translated(error, bound, copy):
    exception = translate(error, copy)
    if bound is not None and exception.position > 0:
        position = bound.original_position(exception.position)
        line, column = _params.line_column(bound.original, position)
        exception = type(exception)(exception.message, position, line, column)
    return exception


def _run_interruptible(engine, sql, progress=True):
    box = {}
    done = threading.Event()

    def work():
        try:
            box["result"] = engine.execute(sql)
        except BaseException as error:  # handed to the caller's thread
            box["error"] = error
        finally:
            done.set()

    # An Event, not Thread.join(): a KeyboardInterrupt inside join() can leave the thread marked
    # as ended while it still runs (CPython's _wait_for_tstate_lock).
    thread = threading.Thread(target=work, name="tunadb-query", daemon=True)
    thread.start()
    started = time.monotonic()
    bar = None
    try:
        # Short waits: _thread.interrupt_main() and a signal that arrives while the lock wait is
        # not interruptible are only handled once the main thread runs Python code again.
        while not done.wait(0.05):
            if progress and bar is None and time.monotonic() - started > 1.0:
                bar = _progress_bar()
            if bar is not None:
                bar_done, bar_total = engine.progress()
                if bar_total > 0:
                    bar.n = round(100 * min(bar_done, bar_total) / bar_total)
                bar.refresh()
    except KeyboardInterrupt:
        # The query may not have registered yet (still parsing): cancel until it has ended.
        while not done.is_set():
            try:
                engine.cancel("interrupted")
                done.wait(0.005)
            except KeyboardInterrupt:
                pass
        raise
    finally:
        if bar is not None:
            bar.close()
    if "error" in box:
        raise box["error"]
    return box["result"]


def _progress_bar():
    """A tqdm bar on stderr when tqdm is installed and stderr is a terminal, else None. Its
    percentage is the share of the rows of the query's scans read so far (Database::progress)."""
    if not sys.stderr.isatty():
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=100, unit="%", leave=False, desc="query (Ctrl-C cancels)",
                bar_format="{desc} {bar} {n}% {elapsed}")


class Cursor:
    """A cursor: runs statements and fetches their results (rows, NumPy arrays or Arrow)."""

    def __init__(self, connection):
        self._connection = connection
        self.arraysize = 1
        self._result = None
        self._explain = None
        self._position = 0
        self._rowcount = -1
        self._description = None
        self._closed = False

    @property
    def connection(self):
        return self._connection

    @property
    def description(self):
        return self._description

    @property
    def rowcount(self):
        return self._rowcount

    @property
    def rownumber(self):
        return self._position if self._description is not None else None

    def close(self):
        self._closed = True
        self._result = None
        self._explain = None
        try:
            self._connection._cursors.remove(self)
        except ValueError:
            pass

    def setinputsizes(self, sizes):
        self._check()

    def setoutputsize(self, size, column=None):
        self._check()

    def execute(self, sql, parameters=None):
        """Runs `sql` (one statement, or several separated by ';', whose last one gives the
        result) with `parameters` bound to its `?` or `$1` placeholders. Returns the cursor."""
        self._check()
        if not isinstance(sql, str):
            raise ProgrammingError(f"SQL must be a str, not {type(sql).__name__}")
        bound = None
        if parameters is not None:
            bound = _params.bind(sql, parameters)
            text = bound.text
        else:
            text = sql
        self._reset()
        result = self._connection._run(text, bound)
        self._set_result(result)
        return self

    def executemany(self, sql, seq_of_parameters):
        """Runs `sql` once per parameter sequence. `INSERT ... VALUES (?, ...)` runs as INSERTs of
        many rows at a time (each INSERT publishes a new table version)."""
        self._check()
        rows = list(seq_of_parameters)
        self._reset()
        if not rows:
            self._rowcount = 0
            return self
        placeholders = _params.scan_placeholders(sql)
        match = re.fullmatch(r"(\s*insert\s+into\s.*?\bvalues\s*)(\(.*\))\s*;?\s*", sql,
                             re.IGNORECASE | re.DOTALL)
        if match and placeholders and all(match.start(2) <= start for start, _, _ in placeholders):
            prefix, group = match.group(1), match.group(2)
            offset = match.start(2)
            group_placeholders = [(s - offset, e - offset, i) for s, e, i in placeholders]
            total = 0
            batch = []
            size = 0
            for parameters in rows:
                text = _params.bind(group, parameters, group_placeholders).text
                batch.append(text)
                size += len(text) + 2
                if size > 1 << 20:
                    total += _rowcount_of(self._connection._run(prefix + ", ".join(batch)).tag)
                    batch, size = [], 0
            if batch:
                total += _rowcount_of(self._connection._run(prefix + ", ".join(batch)).tag)
            self._rowcount = total
            return self
        total = 0
        for parameters in rows:
            bound = _params.bind(sql, parameters, placeholders)
            result = self._connection._run(bound.text, bound)
            count = _rowcount_of(result.tag)
            total = -1 if count < 0 or total < 0 else total + count
        self._rowcount = total
        return self

    def fetchone(self):
        rows = self._fetch(1)
        return rows[0] if rows else None

    def fetchmany(self, size=None):
        return self._fetch(self.arraysize if size is None else size)

    def fetchall(self):
        return self._fetch(None)

    def __iter__(self):
        return self

    def __next__(self):
        row = self.fetchone()
        if row is None:
            raise StopIteration
        return row

    def fetchnumpy(self):
        """The remaining rows as a dict of NumPy arrays by column name: BOOLEAN bool, INTEGER
        int32, BIGINT int64, DOUBLE and DECIMAL float64 (the nearest double), DATE
        datetime64[D], VARCHAR object (str). Columns with NULLs are numpy.ma masked arrays."""
        import numpy as np

        result, start, stop = self._take_rest()
        out = {}
        if result is None:  # EXPLAIN
            out["explain"] = np.array(self._explain[start:stop], dtype=object)
            return out
        for index, (name, type_name, *_rest) in enumerate(result.columns):
            values, nulls = result.numpy_parts(index, start, stop)
            if type_name == "BOOLEAN":
                values = values.view(np.bool_)
            elif type_name == "DATE":
                values = values.astype("datetime64[D]")
            elif type_name == "VARCHAR":
                array = np.empty(len(values), dtype=object)
                array[:] = values
                values = array
            if nulls is not None:
                mask = nulls.view(np.bool_)
                if mask.any():
                    values = np.ma.MaskedArray(values, mask=mask.copy())
            out[name] = values
        return out

    def fetch_arrow_table(self):
        """The remaining rows as a pyarrow.Table (the columns are handed over through the Arrow C
        data interface; BIGINT, DOUBLE, DECIMAL(p>18) and VARCHAR without a copy). VARCHAR is
        large_string, DATE date32, DECIMAL decimal128(p, s)."""
        pa = _pyarrow()
        return pa.Table.from_batches([self.fetch_record_batch()])

    arrow = fetch_arrow_table

    def fetch_record_batch(self):
        """The remaining rows as one pyarrow.RecordBatch."""
        pa = _pyarrow()
        result, start, stop = self._take_rest()
        if result is None:
            return pa.record_batch({"explain": pa.array(self._explain[start:stop], pa.string())})
        schema_capsule, array_capsule = result.arrow_capsules(start, stop)
        return pa.RecordBatch._import_from_c_capsule(schema_capsule, array_capsule)

    def df(self):
        """The remaining rows as a pandas DataFrame (through Arrow)."""
        return self.fetch_arrow_table().to_pandas()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- internals -----------------------------------------------------------------------------

    def _check(self):
        if self._closed:
            raise ProgrammingError("cursor is closed")
        self._connection._check_open()

    def _reset(self):
        self._result = None
        self._explain = None
        self._position = 0
        self._rowcount = -1
        self._description = None

    def _set_result(self, result):
        if result.kind == "query":
            self._result = result
            self._description = [
                (name, type_name, None, (length or None) if type_name == "VARCHAR" else None,
                 precision if type_name == "DECIMAL" else None, scale if type_name == "DECIMAL" else None,
                 nullable)
                for name, type_name, precision, scale, length, nullable in result.columns
            ]
            self._rowcount = result.rows
        elif result.kind == "explain":
            self._explain = [(result.text,)]
            self._description = [("explain", "VARCHAR", None, None, None, None, False)]
            self._rowcount = 1
        else:
            self._rowcount = _rowcount_of(result.tag)

    def _size(self):
        if self._result is not None:
            return self._result.rows
        return len(self._explain) if self._explain is not None else 0

    def _take_rest(self):
        self._check()
        if self._description is None:
            raise ProgrammingError("no result set: the last statement was not a query")
        start = self._position
        stop = self._size()
        self._position = stop
        return self._result, start, stop

    def _fetch(self, count):
        self._check()
        if self._description is None:
            raise ProgrammingError("no result set: the last statement was not a query")
        if count is not None and count < 0:
            raise ProgrammingError("fetchmany size must not be negative")
        start = self._position
        stop = self._size() if count is None else min(self._size(), start + count)
        self._position = stop
        if self._result is None:
            return self._explain[start:stop]
        result = self._result
        rows = []
        for begin in range(start, stop, _CHUNK_ROWS if count is not None else max(stop - start, 1)):
            end = min(stop, begin + (_CHUNK_ROWS if count is not None else stop - start))
            columns = [result.to_list(index, begin, end) for index in range(len(self._description))]
            rows.extend(zip(*columns))
        return rows


def _pyarrow():
    try:
        import pyarrow
    except ImportError as error:
        raise ImportError("Arrow results need pyarrow: pip install pyarrow") from error
    return pyarrow


def _guess_columns(path, header, delimiter, quote, null, sample_rows):
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.reader(f, delimiter=delimiter, quotechar=quote)
            first = next(reader, None)
            if first is None:
                raise DataError(f"{path}: the file is empty; give columns= to create the table")
            names = first if header else [f"column{i}" for i in range(len(first))]
            sample = [] if header else [first]
            for row in reader:
                if len(sample) >= sample_rows:
                    break
                sample.append(row)
    except UnicodeDecodeError as error:
        raise DataError(f"{path}: not UTF-8 text: {error}") from error
    except csv.Error as error:
        raise DataError(f"{path}: {error}") from error
    columns = []
    for index, name in enumerate(names):
        values = [row[index] for row in sample if index < len(row) and row[index] != null]
        columns.append((name.strip() or f"column{index}", _guess_type(values)))
    return columns


def _guess_type(values):
    def all_match(check):
        return all(check(v) for v in values)

    def is_int(v):
        return re.fullmatch(r"[+-]?\d+", v) is not None and -2**63 <= int(v) < 2**63

    def is_float(v):
        try:
            float(v)
            return re.fullmatch(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*", v) is not None
        except ValueError:
            return False

    def is_date(v):
        try:
            datetime.date.fromisoformat(v)
            return re.fullmatch(r"\d{4}-\d{2}-\d{2}", v) is not None
        except ValueError:
            return False

    if not values:
        return "VARCHAR"
    if all_match(is_int):
        return "INTEGER" if all(-2**31 <= int(v) < 2**31 for v in values) else "BIGINT"
    if all_match(is_float):
        return "DOUBLE"
    if all_match(is_date):
        return "DATE"
    if all_match(lambda v: v.lower() in ("true", "false")):
        return "BOOLEAN"
    return "VARCHAR"


def _source_dir():
    from . import _build_info
    return _build_info.SOURCE_DIR


def _tpch_directory(sf):
    text = f"{float(sf):g}" if not isinstance(sf, str) else sf
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 1000:
        raise InterfaceError(f"invalid scale factor {sf!r} (expected a number > 0, e.g. 0.01)")
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "tunadb", "tpch", f"sf{text}")


def _has_tpch_generator_modules():
    import importlib.util
    return all(importlib.util.find_spec(name) is not None for name in ("duckdb", "duckdb_extension_tpch"))


def _generate_tpch(sf, directory):
    # The generator ships inside the package (_tpch_gen.py, the repository's scripts/tpch.py); a
    # package used from the source tree without installing falls back to the script itself.
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_tpch_gen.py")
    if not os.path.exists(script):
        script = os.path.join(_source_dir(), "scripts", "tpch.py")
    if not os.path.exists(script):
        raise OperationalError(f"cannot generate TPC-H data: {script} is missing; pass directory=")
    # It needs DuckDB's dbgen: this interpreter's duckdb if it has one, else the source tree's venv.
    python = sys.executable
    if not _has_tpch_generator_modules():
        venv_python = os.path.join(_source_dir(), "build", "venv", "bin", "python")
        if not os.path.exists(venv_python):
            raise OperationalError(
                "load_tpch(sf) generates the data with DuckDB's dbgen: install it with "
                "`pip install duckdb==1.5.5 duckdb-extension-tpch==1.5.5` (or `pip install "
                "'tunadb[tpch]'`), or pass directory= with files of `scripts/tpch.py gen`")
        python = venv_python
    os.makedirs(os.path.dirname(directory), exist_ok=True)
    text = f"{float(sf):g}" if not isinstance(sf, str) else sf
    # TPCH_PY_REEXEC: the generator does not look for the source tree's venv on its own.
    environment = dict(os.environ, TPCH_PY_REEXEC="1")
    done = subprocess.run([python, script, "gen", "--sf", text, "--out", directory],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environment)
    if done.returncode != 0:
        raise OperationalError(f"generating TPC-H SF {text} into {directory} failed:\n{done.stdout}")
