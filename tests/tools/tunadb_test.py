#!/usr/bin/env python3
"""End-to-end tests of the tunadb program: tunadb_test.py TUNADB TEST_NAME.

Each test runs the binary with fixed input and compares exit code, stdout and stderr with the
expected values; it prints what differed and exits 1 on a mismatch.
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

TUNADB = sys.argv[1]
failures = []


def run(args, stdin=""):
    env = dict(os.environ)
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
    done = subprocess.run([TUNADB, "--threads", "2"] + args, input=stdin, capture_output=True,
                          text=True, timeout=100, env=env)
    return done.returncode, done.stdout, done.stderr


def check(condition, what, code, out, err):
    if not condition:
        failures.append(f"{what}\n--- exit code: {code}\n--- stdout:\n{out}--- stderr:\n{err}")


def one_error_line(err):
    lines = err.splitlines()
    return len(lines) == 1 and lines[0].startswith("tunadb: ")


def test_cli_sum():
    code, out, err = run(["-c", "CREATE TABLE t(a INT); INSERT INTO t VALUES (1),(2); SELECT sum(a) FROM t"])
    check(code == 0 and err == "", "exit 0 without stderr", code, out, err)
    lines = out.splitlines()
    check(lines[:2] == ["CREATE TABLE", "INSERT 0 2"], "command tags", code, out, err)
    check(len(lines) == 6 and lines[4].strip() == "3" and lines[5] == "(1 row)", "sum is 3 in a table",
          code, out, err)
    check(set(lines[3]) <= {"-", "+"}, "header rule", code, out, err)


def test_csv_exact():
    code, out, err = run(["--csv", "-c",
                          "CREATE TABLE t(a INT, b VARCHAR(5), c DECIMAL(6,2));"
                          "INSERT INTO t VALUES (2, NULL, 1.5), (1, 'x,y', -2);"
                          "SELECT a, b, c FROM t ORDER BY a;"
                          "SELECT count(*) AS n FROM t"])
    check(code == 0 and err == "", "exit 0", code, out, err)
    check(out == 'a,b,c\n1,"x,y",-2.00\n2,,1.50\nn\n2\n', "exact CSV", code, out, err)


def test_script_error():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "script.sql")
        with open(path, "w") as f:
            f.write("CREATE TABLE t (a INTEGER);\nINSERT INTO t VALUES (7);\nSELECT a, foo FROM t;\nSELECT 99;\n")
        code, out, err = run([path])
    check(code != 0, "non-zero exit", code, out, err)
    check(one_error_line(err), "one error line", code, out, err)
    check(re.match(r"^tunadb: .*script\.sql: line 3, column 11: .*foo", err) is not None,
          "error names the file, line 3, column 11 and foo", code, out, err)
    check("INSERT 0 1" in out and "99" not in out, "ran lines 1-2, stopped at 3", code, out, err)


def test_bad_sql():
    code, out, err = run(["-c", "SELECT 1;\nSELEC 2"])
    check(code == 1, "exit code 1", code, out, err)
    check(one_error_line(err) and err.startswith("tunadb: line 2, column 1: "), "syntax error at line 2",
          code, out, err)


def test_missing_file():
    code, out, err = run(["/nonexistent/dir/missing.sql"])
    check(code == 1, "exit code 1", code, out, err)
    check(err == "tunadb: /nonexistent/dir/missing.sql: cannot open: No such file or directory\n",
          "missing file message", code, out, err)


def test_stdin_shell():
    script = ("CREATE TABLE t (a INTEGER, s VARCHAR(10));\n"
              "INSERT INTO t\n  VALUES (5, 'five'), (12, NULL);\n"
              ".tables\n"
              "SELECT a, s\nFROM t\nORDER BY a;\n"
              "-- a comment only\n"
              "SELECT count(*) FROM t\n")  # the last statement has no ';': it runs at end of input
    code, out, err = run([], stdin=script)
    check(code == 0 and err == "", "exit 0, no stderr", code, out, err)
    check("tunadb>" not in out and "...>" not in out, "no prompts without a terminal", code, out, err)
    lines = out.splitlines()
    check(lines[:3] == ["CREATE TABLE", "INSERT 0 2", "t"], "tags and .tables", code, out, err)
    table = lines[3:8]
    check(len(table) == 5 and table[2] == "  5 | five" and table[3] == " 12 | NULL" and table[4] == "(2 rows)",
          "aligned table, numbers right, NULL shown", code, out, err)
    check(lines[-2].strip() == "2" and lines[-1] == "(1 row)", "final statement without ';'", code, out, err)


def test_stdin_shell_error():
    script = "CREATE TABLE t (a INTEGER);\nSELECT nope FROM t;\nINSERT INTO t VALUES (1);\nSELECT sum(a) FROM t;\n"
    code, out, err = run([], stdin=script)
    check(code == 1, "exit 1 after an error in piped input", code, out, err)
    check(one_error_line(err) and err.startswith("tunadb: line 2, column 8: ") and "nope" in err,
          "error line 2", code, out, err)
    check("INSERT 0 1" in out and out.splitlines()[-2].strip() == "1", "the shell went on", code, out, err)


def test_dot_commands():
    script = ("CREATE TABLE items (id BIGINT NOT NULL, price DECIMAL(15,2), name VARCHAR(20));\n"
              ".schema items\n.timer on\nSELECT count(*) FROM items;\n.timer off\n.bogus\n.schema nothere\n.help\n")
    code, out, err = run([], stdin=script)
    check("CREATE TABLE items (\n    id BIGINT NOT NULL,\n    price DECIMAL(15,2),\n    name VARCHAR(20)\n);\n" in out,
          ".schema text", code, out, err)
    check(re.search(r"\(1 row\)\nRun Time: \d+\.\d{3} s\n", out) is not None, ".timer on", code, out, err)
    check(".tables" in out and ".tpch" in out, ".help lists commands", code, out, err)
    errors = err.splitlines()
    check(len(errors) == 2 and "unknown command .bogus" in errors[0] and "nothere" in errors[1]
          and errors[0].startswith("tunadb: line 6: "), "dot command errors", code, out, err)
    check(code == 1, "exit 1 after errors", code, out, err)


def test_syntax_position():
    code, out, err = run(["-c", "CREATE TABLE t (a INTEGER);\n  SELECT a FROM t; SELECT b\n FROM t"])
    check(code == 1, "exit 1", code, out, err)
    check(one_error_line(err) and err.startswith("tunadb: line 2, column 27: "),
          "position in the whole -c text", code, out, err)


def test_escape_string():
    code, out, err = run(["--csv", "-c", "SELECT E'it\\'s;here' AS a; SELECT e'x\\\\' AS b, 'y' AS c"])
    check(code == 0 and err == "", "exit 0", code, out, err)
    check(out == "a\nit's;here\nb,c\nx\\,y\n", "E'...' strings hold ; and escaped quotes", code, out, err)


def test_one_line_errors():
    for text in ["SELECT 'abc\ndef", "SELECT 1; /* open\ncomment", "SELECT \x01\x02\n\x7f;"]:
        code, out, err = run(["-c", text])
        check(code == 1 and one_error_line(err), f"one error line for {text!r}", code, out, err)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "garbage.sql")
        with open(path, "wb") as f:
            f.write(bytes(range(256)) + b"\n\n;\x00'\n")
        code, out, err = run([path])
    check(code == 1 and one_error_line(err) and err.startswith(f"tunadb: {path}: "),
          "one error line for binary garbage", code, out, err)


def test_comment_across_lines():
    code, out, err = run([], stdin="SELECT 1 AS a;\n/* a comment; with a semicolon\n still ; inside */ SELECT 2 AS b;\n/* open\n")
    check(code == 1 and one_error_line(err) and "unterminated /* comment" in err, "unterminated comment reported",
          code, out, err)
    check(" a\n---\n 1\n(1 row)\n b\n---\n 2\n(1 row)\n" == out, "a comment spans lines in piped input", code, out, err)


def test_directory_file():
    with tempfile.TemporaryDirectory() as tmp:
        code, out, err = run([tmp])
    check(code == 1 and one_error_line(err) and err.startswith(f"tunadb: {tmp}: ") and "directory" in err,
          "a directory as FILE fails", code, out, err)


def test_copy_invalid_utf8():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.tbl")
        for bad, column in [(b"\xff", 3), (b"ok\xc3", 3), (b"\xe2\x82", 3), (b"\xc0\xaf", 3), (b"\xed\xa0\x80", 3)]:
            with open(path, "wb") as f:
                f.write("1|fine|é€😀\n2|".encode() + bad + b"|x\n")
            code, out, err = run(["-c", "CREATE TABLE t (a INTEGER, b VARCHAR, c VARCHAR); "
                                        f"COPY t FROM '{path}'; SELECT count(*) FROM t"])
            check(code == 1 and one_error_line(err) and f"{path}:2:{column}: " in err and "UTF-8" in err,
                  f"invalid UTF-8 {bad!r} rejected at line 2, column {column}", code, out, err)
        with open(path, "wb") as f:
            f.write("1|fine|é€😀\n".encode())
        code, out, err = run(["--csv", "-c", f"CREATE TABLE t (a INTEGER, b VARCHAR, c VARCHAR); COPY t FROM '{path}'; "
                                             "SELECT c FROM t"])
        check(code == 0 and out == "c\né€😀\n", "valid UTF-8 loads", code, out, err)


def test_csv_quoting_null():
    sql = "SELECT 1 AS \"a,b\", 'q' AS \"say \"\"hi\"\"\", NULL AS n, '' AS e, 'NULL' AS s"
    code, out, err = run(["--csv", "-c", sql])
    check(code == 0 and out == '"a,b","say ""hi""",n,e,s\n1,q,,"",NULL\n', "RFC 4180 header, NULL vs ''",
          code, out, err)
    code, out, err = run(["--csv", "--null", "NULL", "-c", sql])
    check(code == 0 and out == '"a,b","say ""hi""",n,e,s\n1,q,NULL,"","NULL"\n', "--null in CSV", code, out, err)
    code, out, err = run(["--null", "(null)", "-c", "SELECT NULL AS n, '' AS e"])
    check(code == 0 and out.splitlines()[2] == " (null) | ", "--null in tables", code, out, err)


def long_setup(rows=80000):
    # 1.6e8 join pairs; with --morsel-rows 256 every probe task is short, so cancel takes effect fast.
    values = ", ".join(f"({i}, {i % 40})" for i in range(rows))
    return (f"CREATE TABLE t (a INTEGER NOT NULL, k INTEGER NOT NULL);\nINSERT INTO t VALUES {values};\n",
            "SELECT count(*), sum(x.a + y.a) FROM t x JOIN t y ON x.k = y.k;\n")


def interrupt_after_insert(args, stdin):
    """Starts tunadb, waits until the INSERT finished (its tag is flushed), lets the long join
    start, sends SIGINT, and returns exit code, stdout, stderr."""
    proc = subprocess.Popen([TUNADB, "--threads", "2", "--morsel-rows", "256"] + args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    if stdin:
        proc.stdin.write(stdin)
    proc.stdin.close()
    out = ""
    while "INSERT 0" not in out:
        line = proc.stdout.readline()
        if not line:
            break
        out += line
    time.sleep(0.7)
    start = time.monotonic()
    proc.send_signal(signal.SIGINT)
    rest = proc.stdout.read()  # the outputs are small: reading them one after the other cannot block
    err = proc.stderr.read()
    proc.wait(timeout=60)
    if time.monotonic() - start > 10:
        failures.append(f"Ctrl-C took {time.monotonic() - start:.1f} s to take effect")
    return proc.returncode, out + rest, err


def test_interrupt_file():
    setup, query = long_setup()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "long.sql")  # too long for a -c argument
        with open(path, "w") as f:
            f.write(setup + query + "SELECT 42;\n")
        code, out, err = interrupt_after_insert([path], "")
    check(code == 130, "exit 130 after Ctrl-C", code, out, err)
    check(err == "tunadb: interrupted\n" and "42" not in out, "one line 'interrupted', nothing after", code, out, err)


def test_interrupt_shell():
    setup, query = long_setup()
    code, out, err = interrupt_after_insert([], setup + query + "SELECT 42 AS answer;\n")
    check(err == "tunadb: interrupted\n", "the query ended with 'interrupted'", code, out, err)
    check(out.endswith(" answer\n--------\n     42\n(1 row)\n"), "the shell went on", code, out, err)
    check(code == 1, "exit 1 (a statement failed)", code, out, err)


def test_tpch_small():
    python = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                          "build", "venv", "bin", "python")
    if not os.access(python, os.X_OK):
        print("skipped: build/venv missing (make deps)")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "sf0.01")
        for attempt in ("generate", "cached"):
            code, out, err = run(["--tpch", "0.01", "--data-dir", data, "--csv", "-c",
                                  "SELECT count(*) AS n FROM lineitem; SELECT count(*) AS n FROM orders;"
                                  "SELECT n_name FROM nation WHERE n_nationkey = 7"])
            check(code == 0, f"{attempt}: exit 0", code, out, err)
            check(out == "n\n60175\nn\n15000\nn_name\nGERMANY\n", f"{attempt}: row counts", code, out, err)


def test_interactive():
    """The shell on a terminal (a pty): prompts, continuation lines, Ctrl-C at the prompt drops the
    typed line, errors keep the shell alive, .quit exits 0."""
    import pty
    import select
    with tempfile.TemporaryDirectory() as home:
        pid, fd = pty.fork()
        if pid == 0:
            os.environ["HOME"] = home  # keeps the history file out of the real home
            os.execv(TUNADB, [TUNADB, "--threads", "2"])
        out = b""

        def pump(seconds):
            nonlocal out
            end = time.time() + seconds
            while time.time() < end:
                ready, _, _ = select.select([fd], [], [], 0.05)
                if ready:
                    try:
                        out += os.read(fd, 4096)
                    except OSError:
                        return

        pump(1.5)
        for chunk in [b"CREATE TABLE t (a INT);\r", b"INSERT INTO t VALUES (1), (NULL);\r", b"SELECT a,\r",
                      b"count(*) AS n FROM t GROUP BY a ORDER BY a;\r", b"SELECT 'dropped'", b"\x03",
                      b".tables\r", b"SELEC 1;\r", b"SELECT 7 AS seven;\r", b".quit\r"]:
            os.write(fd, chunk)
            pump(0.7)
        _, status = os.waitpid(pid, 0)
        pump(0.2)
    text = out.decode(errors="replace").replace("\r", "").replace("\x1b[?2004h", "").replace("\x1b[?2004l", "")
    code = os.waitstatus_to_exitcode(status)
    check(code == 0, "exit 0 after .quit", code, text, "")
    check("tunadb> " in text and "   ...> " in text, "prompts", code, text, "")
    check(" a    | n\n------+---\n    1 | 1\n NULL | 1\n(2 rows)\n" in text, "multi-line query result", code, text, "")
    check("dropped" not in text.split("SELECT 'dropped'", 1)[-1], "Ctrl-C dropped the typed line", code, text, "")
    check("tunadb: line 1, column 1: syntax error" in text and " seven\n-------\n     7\n" in text,
          "error, then the shell goes on", code, text, "")


def test_explain_analyze():
    code, out, err = run(["-c", "CREATE TABLE t(a INT, b INT); INSERT INTO t VALUES (1, 1), (2, 1), (3, 2);"
                                "EXPLAIN ANALYZE SELECT b, count(*) FROM t WHERE a > 1 GROUP BY b"])
    check(code == 0 and err == "", "exit 0", code, out, err)
    check(re.search(r"^ +Aggregate .*\(rows=2 tasks=\d+ (per worker=[\d/]+ )?time=\d+\.\d{3} ms "
                    r"memory=\d+\.\d (KiB|MiB) pipeline \d+: ", out, re.M)
          is not None, "aggregate line with 2 rows and its tables' memory", code, out, err)
    check(re.search(r"^ +Scan t .*\(rows=2 tasks=\d+ ", out, re.M) is not None, "scan line with 2 rows", code, out,
          err)
    check(out.startswith("CREATE TABLE\nINSERT 0 3\nPlan:\n  "), "plan after the command tags", code, out, err)
    check(re.search(r"^Total: 2 rows in \d+\.\d{3} ms$", out, re.M) is not None, "total line", code, out, err)


def trace_slices(path):
    with open(path) as f:
        text = f.read()
    if path.endswith(".csv"):
        return text
    import json
    return {event.get("name") for event in json.loads(text)["traceEvents"]}


def test_trace_option():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "q.json")
        code, out, err = run(["--trace", path, "-c",
                              "CREATE TABLE t(a INT); INSERT INTO t VALUES (1), (2); SELECT sum(a) FROM t"])
        check(code == 0 and err == "", "exit 0", code, out, err)
        names = trace_slices(path)
        check("scan t" in names and "aggregate" in names, f"operator slices in {sorted(names)}", code, out, err)
        code, out, err = run(["--trace", tmp, "-c", "SELECT 1"])
        check(code == 1 and one_error_line(err) and "--trace: .trace: cannot write" in err and out == "",
              "a directory is a clear error before anything runs", code, out, err)


def test_trace_command():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "q.csv")
        script = ("CREATE TABLE t(a INT);\nINSERT INTO t VALUES (1), (2);\n"
                  f".trace {tmp}/missing/x.json\nSELECT 1 AS one;\n.trace off\n.trace\n"
                  f".trace {path}\nSELECT sum(a) FROM t;\n.trace off\nSELECT 2 AS two;\n")
        code, out, err = run([], stdin=script)
        errors = err.splitlines()
        check(len(errors) == 3 and errors[0].startswith("tunadb: line 3: .trace: cannot write ")
              and "No such file or directory" in errors[0] and "no trace is being recorded" in errors[1]
              and "expected a file name or off" in errors[2], "three clear errors", code, out, err)
        check(" one\n" in out and " two\n" in out and " sum\n" in out, "the shell went on", code, out, err)
        check(code == 1, "exit 1 after errors", code, out, err)
        text = trace_slices(path)
        check(text.startswith("# mxtasking trace:") and '"scan t"' in text and '"aggregate"' in text,
              "CSV trace with operator slices", code, out, err)


globals()["test_" + sys.argv[2]]()
if failures:
    print("\n\n".join(failures))
    sys.exit(1)
print("ok")
