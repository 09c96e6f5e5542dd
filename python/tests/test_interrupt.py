"""KeyboardInterrupt cancels a running query within a second, the connection stays usable."""

import _thread
import signal
import threading
import time

import pytest

import tunadb


@pytest.fixture
def default_sigint():
    """Python's own SIGINT handler for the test: a process started in the background by a
    non-interactive shell inherits SIGINT ignored, and then interrupt_main() does nothing."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_keyboard_interrupt_cancels_a_long_self_join(default_sigint):
    con = tunadb.connect(threads=2)
    try:
        con.execute("CREATE TABLE t (k INTEGER NOT NULL)")
        con.executemany("INSERT INTO t VALUES (?)", [(i % 4,) for i in range(200000)])
        interrupted_at = []

        def interrupt():
            interrupted_at.append(time.monotonic())
            _thread.interrupt_main()

        # 10^10 join pairs: hours without the cancel. The safety net ends a cancel that does not
        # work as a failure rather than a hang.
        safety = threading.Timer(30.0, con.cancel)
        timer = threading.Timer(0.5, interrupt)
        safety.start()
        timer.start()
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            con.execute("SELECT count(*) FROM t a, t b WHERE a.k = b.k")
        ended = time.monotonic()
        safety.cancel()
        assert interrupted_at, "the query ended before the interrupt"
        assert ended - interrupted_at[0] < 1.0, ended - interrupted_at[0]
        assert ended - started < 5.0
        assert con.execute("SELECT count(*) FROM t WHERE k = 1").fetchone() == (50000,)
    finally:
        con.close()


def test_gil_is_released_while_a_query_runs(con):
    con.execute("CREATE TABLE t (k INTEGER NOT NULL)")
    con.executemany("INSERT INTO t VALUES (?)", [(i % 2,) for i in range(20000)])
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.01)

    ticker = threading.Thread(target=tick)
    ticker.start()
    started = time.monotonic()
    con.execute("SELECT count(*) FROM t a, t b WHERE a.k = b.k").fetchone()
    elapsed = time.monotonic() - started
    stop.set()
    ticker.join()
    during = [t for t in ticks if started < t < started + elapsed]
    if elapsed > 0.2:
        assert len(during) >= elapsed / 0.01 / 4


def test_cancel_from_another_thread(con):
    con.execute("CREATE TABLE t (k INTEGER NOT NULL)")
    con.executemany("INSERT INTO t VALUES (?)", [(i % 4,) for i in range(200000)])
    timer = threading.Timer(0.3, con.cancel)
    timer.start()
    result = {}

    def run():
        try:
            con.execute("SELECT count(*) FROM t a, t b WHERE a.k = b.k")
        except tunadb.Error as error:
            result["error"] = error

    worker = threading.Thread(target=run)
    worker.start()
    worker.join(10)
    assert not worker.is_alive()
    assert isinstance(result.get("error"), tunadb.OperationalError)
    assert con.execute("SELECT 1").fetchone() == (1,)


def test_progress_bar_for_long_statements(monkeypatch):
    import tunadb.connection as connection

    bars = []

    class FakeBar:
        def __init__(self):
            self.n = 0
            self.refreshes = 0
            self.closed = False

        def refresh(self):
            assert 0 <= self.n <= 100
            self.refreshes += 1

        def close(self):
            self.closed = True

    def make_bar():
        bars.append(FakeBar())
        return bars[-1]

    monkeypatch.setattr(connection, "_progress_bar", make_bar)
    con = tunadb.connect(threads=2)
    try:
        con.execute("CREATE TABLE t (k INTEGER NOT NULL)")
        con.executemany("INSERT INTO t VALUES (?)", [(i % 4,) for i in range(200000)])
        bars.clear()  # the load may have shown one
        con.execute("SELECT count(*) FROM t")
        assert bars == []  # short statements show none
        timer = threading.Timer(1.6, con.cancel)
        timer.start()
        with pytest.raises(tunadb.OperationalError):
            con.execute("SELECT count(*) FROM t a, t b WHERE a.k = b.k")
        assert len(bars) == 1 and bars[0].refreshes > 0 and bars[0].closed
    finally:
        con.close()
    quiet = tunadb.connect(threads=1, progress=False)
    quiet.close()
