"""tests/support/browser.py against a tiny local site: live numbers, a form, JS errors, hangs.

The site is a ThreadingHTTPServer on 127.0.0.1: `/` polls `/api/count` every 200 ms
and shows the number; its form asks `/api/query`; `/broken` throws and logs errors;
`/covered` hides a button under an overlay; `/hang` blocks its renderer for seconds.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.support.browser import (
    CHROMIUM_MISSING,
    Browser,
    BrowserError,
    BrowserNotFound,
    JSError,
    WaitTimeout,
    chromium_argv,
    processes_using,
)

needs_chromium = pytest.mark.skipif(not Browser.available(), reason=CHROMIUM_MISSING)

HEAD = '<!doctype html><html><head><meta charset="utf-8"><link rel="icon" href="data:,">'

LIVE = (
    HEAD
    + """<title>live</title><style>
  body { font: 16px sans-serif; margin: 24px; background: #f4f6fb; }
  #facts { font-size: 48px; color: #1d4ed8; }
  #query-result { margin-top: 12px; padding: 8px; background: #fff; min-height: 1.5em; }
</style></head><body>
<h1>Harness test page</h1>
<p>facts: <span id="facts">–</span></p>
<form id="query">
  <input id="query-pattern" size="30" value="old text">
  <button id="query-run" type="button">Run</button>
</form>
<div id="query-result"></div>
<script>
  window.inputs = 0; window.changes = 0;
  const box = document.getElementById('query-pattern');
  box.addEventListener('input', () => window.inputs++);
  box.addEventListener('change', () => window.changes++);
  async function tick() {
    const r = await fetch('/api/count');
    document.getElementById('facts').textContent = (await r.json()).count;
  }
  setInterval(tick, 200);
  async function run() {
    const r = await fetch('/api/query?pattern=' + encodeURIComponent(box.value));
    const d = await r.json();
    document.getElementById('query-result').textContent = d.rows.length + ' rows for ' + d.pattern;
  }
  document.getElementById('query-run').addEventListener('click', run);
  document.getElementById('query').addEventListener('submit', e => { e.preventDefault(); run(); });
</script></body></html>"""
)

BROKEN = (
    HEAD
    + """</head><body><p>broken</p><script>
  console.error('bad thing', 42);
  fetch('/missing-resource');
  setTimeout(() => { window.ready = true; throw new Error('boom from page'); }, 50);
</script></body></html>"""
)

COVERED = (
    HEAD
    + """</head><body>
<button id="under" style="position:absolute; top:50px; left:50px">under</button>
<div id="overlay" style="position:fixed; inset:0; background:rgba(0,0,0,.3)"></div>
<button id="hidden" style="display:none">hidden</button>
</body></html>"""
)

HANG = (
    HEAD
    + """</head><body><script>
  setTimeout(() => { const t = Date.now(); while (Date.now() - t < 8000) {} }, 100);
</script></body></html>"""
)

PAGES = {"/": LIVE, "/broken": BROKEN, "/covered": COVERED, "/hang": HANG}


class _Handler(BaseHTTPRequestHandler):
    count = 0
    lock = threading.Lock()

    def log_message(self, *args):  # keep pytest output clean
        pass

    def _send(self, status: int, ctype: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/api/count":
            with _Handler.lock:
                _Handler.count += 1
                n = _Handler.count
            self._send(200, "application/json", json.dumps({"count": n}).encode())
        elif url.path == "/api/query":
            pattern = urllib.parse.parse_qs(url.query).get("pattern", [""])[0]
            rows = [[pattern, i] for i in range(3)]
            self._send(200, "application/json", json.dumps({"pattern": pattern, "rows": rows}).encode())
        elif url.path == "/slow":
            time.sleep(1.0)
            self._send(200, "text/html", (HEAD + "<p id=slow>slow page</p>").encode())
        elif url.path in PAGES:
            self._send(200, "text/html; charset=utf-8", PAGES[url.path].encode())
        else:
            self._send(404, "text/plain", b"not found")


@pytest.fixture(scope="module")
def site():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser():
    if not Browser.available():
        pytest.skip(CHROMIUM_MISSING)
    with Browser() as b:
        yield b


@pytest.fixture
def page(browser):
    p = browser.open()
    yield p
    p.close()


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:8]
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@needs_chromium
def test_wait_for_live_numbers_and_evaluate(page, site):
    page.goto(f"{site}/?token=abc")
    first = page.wait_for(
        "document.querySelector('#facts') && Number(document.querySelector('#facts').textContent) > 0",
        timeout=30,
    )
    assert first is True
    n1 = int(page.evaluate("document.querySelector('#facts').textContent"))
    # the number keeps moving: wait_for returns the (truthy) value it waited for
    n2 = page.wait_for(f"Number(document.querySelector('#facts').textContent) > {n1} && "
                       "Number(document.querySelector('#facts').textContent)")  # fmt: skip
    assert n2 > n1
    assert page.url == f"{site}/?token=abc"
    assert page.text("h1") == "Harness test page"
    assert page.evaluate("new Promise(r => setTimeout(() => r({a: [1, 'x']}), 50))") == {"a": [1, "x"]}
    assert page.evaluate("undefined") is None
    assert page.console_errors == []


@needs_chromium
def test_fill_click_and_press(page, site):
    page.goto(site)
    page.fill("#query-pattern", "path(a, ?X)")
    assert page.evaluate("document.getElementById('query-pattern').value") == "path(a, ?X)"
    assert page.evaluate("window.inputs") >= 2 and page.evaluate("window.changes") == 1
    page.click("#query-run")
    text = page.wait_for("document.getElementById('query-result').textContent")
    assert text == "3 rows for path(a, ?X)"
    # the click was a trusted mouse event: the focus moved to the button
    assert page.evaluate("document.activeElement.id") == "query-run"
    page.fill("#query-pattern", "edge(?X, b)")  # replaces, does not append
    page.press("#query-pattern", "Enter")  # submits the form
    text = page.wait_for("document.getElementById('query-result').textContent.includes('edge') "
                         "&& document.getElementById('query-result').textContent")  # fmt: skip
    assert text == "3 rows for edge(?X, b)"
    assert page.console_errors == []


@needs_chromium
def test_screenshot_writes_a_png(page, site, artifacts_dir):
    page.goto(site)
    page.wait_for("Number(document.querySelector('#facts').textContent) > 0")
    path = page.screenshot(artifacts_dir / "browser_harness.png")
    data = path.read_bytes()
    width, height = _png_size(data)
    assert (width, height) == (1280, 800)  # the page fits: full page == viewport
    assert len(data) > 10_000  # text and colours, not a blank frame
    viewport = page.png(full_page=False)
    assert _png_size(viewport) == (1280, 800)
    page.evaluate("document.body.style.height = '2000px'")
    assert _png_size(page.png())[1] >= 2000


@needs_chromium
def test_console_errors_and_exceptions_are_captured(page, site):
    page.goto(f"{site}/broken")
    page.wait_for("window.ready === true")
    errors = page.console_errors
    deadline = time.monotonic() + 10
    while len(errors) < 3 and time.monotonic() < deadline:  # the 404 arrives asynchronously
        time.sleep(0.05)
        errors = page.console_errors
    joined = "\n".join(errors)
    assert "console.error: bad thing 42" in joined
    assert "Error: boom from page" in joined and "uncaught:" in joined
    assert "404" in joined and "/missing-resource" in joined
    assert ("error", "bad thing 42") in page.console_messages


@needs_chromium
def test_wait_for_times_out_with_a_useful_error(page, site):
    page.goto(f"{site}/broken")
    page.wait_for("window.ready === true")
    start = time.monotonic()
    with pytest.raises(WaitTimeout) as info:
        page.wait_for("document.querySelector('#nope').textContent === 'x'", timeout=1)
    assert time.monotonic() - start < 5
    message = str(info.value)
    assert isinstance(info.value, TimeoutError)
    assert "timed out after 1 s" in message and "#nope" in message
    assert "last JS error: TypeError" in message  # what went wrong on the last poll
    assert f"page: {site}/broken" in message
    assert "boom from page" in message  # the page's console errors so far
    with pytest.raises(WaitTimeout, match=r"last value: False\n"):
        page.wait_for("document.querySelector('p').textContent === 'x'", timeout=0.3)
    with pytest.raises(WaitTimeout, match=r"last value: ''\n"):
        page.wait_for("document.querySelector('p').textContent.slice(10)", timeout=0.3)


@needs_chromium
def test_evaluate_raises_with_the_js_error(page, site):
    page.goto(site)
    with pytest.raises(JSError, match="TypeError: Cannot read properties of null"):
        page.evaluate("document.querySelector('#nope').textContent")
    with pytest.raises(WaitTimeout, match="#nope"):
        page.fill("#nope", "x", timeout=0.5)


@needs_chromium
def test_click_refuses_hidden_and_covered_elements(page, site):
    page.goto(f"{site}/covered")
    with pytest.raises(BrowserError, match=r"covered by <div#overlay>"):
        page.click("#under")
    with pytest.raises(BrowserError, match="has no size"):
        page.click("#hidden")


@needs_chromium
def test_open_waits_for_load_and_reports_navigation_errors(browser, site):
    start = time.monotonic()
    page = browser.open(f"{site}/slow")
    assert time.monotonic() - start >= 0.9
    assert page.evaluate("document.readyState") == "complete"
    assert page.text("#slow") == "slow page"
    page.close()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]  # nothing listens here once closed
    with pytest.raises(BrowserError, match="ERR_CONNECTION_REFUSED"):
        browser.open(f"http://127.0.0.1:{dead}/")


@needs_chromium
def test_a_hung_page_times_out_on_time(site):
    with Browser() as b:
        page = b.open(f"{site}/hang")
        time.sleep(0.5)  # the page's script now blocks its renderer for 8 s
        start = time.monotonic()
        with pytest.raises(WaitTimeout) as info:
            page.wait_for("window.never === true", timeout=2)
        assert time.monotonic() - start < 7
        assert "window.never" in str(info.value)


def _live_group_members(pgid: int) -> list[int]:
    """PIDs of processes in the group that are not zombies (init reaps those lazily)."""
    alive = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()  # state, ppid, pgrp, ...
            if int(fields[2]) == pgid and fields[0] != "Z":
                alive.append(int(entry))
    return alive


@needs_chromium
def test_close_kills_the_process_group_and_removes_the_profile(site):
    b = Browser()
    pid, workdir = b.pid, b._proc.workdir
    b.open(site).wait_for("Number(document.querySelector('#facts').textContent) > 0")
    assert os.path.isdir(workdir) and len(_live_group_members(pid)) > 1
    assert set(processes_using(workdir)) >= set(_live_group_members(pid))  # + crash handlers
    b.close()
    b.close()  # idempotent
    assert _live_group_members(pid) == []
    assert processes_using(workdir) == []
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reaped
    assert not os.path.exists(workdir)
    with pytest.raises(BrowserError, match="closed"):
        b.send("Browser.getVersion")


@needs_chromium
def test_non_loopback_traffic_goes_to_the_blackhole_proxy(site):
    """A page can reach loopback servers only: anything else is sent to the proxy."""
    requests: list[str] = []
    with socket.create_server(("127.0.0.1", 0)) as trap:
        trap.settimeout(0.5)
        with Browser(blackhole_proxy=f"127.0.0.1:{trap.getsockname()[1]}") as b:
            page = b.open(site)  # loopback is never proxied
            page.wait_for("Number(document.querySelector('#facts').textContent) > 0")
            page.evaluate("fetch('http://fluxmat.invalid/probe').catch(() => null), true")
            deadline = time.monotonic() + 3  # also collect the browser's own requests
            while time.monotonic() < deadline:
                try:
                    conn, _ = trap.accept()
                except TimeoutError:
                    continue
                with conn:
                    conn.settimeout(5)
                    requests.append(conn.recv(4096).decode("latin-1").split("\r\n")[0])
    assert "GET http://fluxmat.invalid/probe HTTP/1.1" in requests
    # chromium itself asks nothing of the outside (background networking is off)
    assert [r for r in requests if "fluxmat.invalid" not in r] == [], "\n".join(requests)


def test_the_browser_calls_no_google_service_by_itself():
    """The endpoints Chromium reaches on its own (seen through the blackhole proxy with Debian's
    chromium: `CONNECT www.google.com:443` for the search engine's preconnect and new tab page,
    `android.clients.google.com:443` for Google Cloud Messaging's check-in) point to a closed
    loopback port, which is never proxied; the preconnect features are off."""
    argv = chromium_argv("chromium", "/tmp/profile")
    flags = dict(a[2:].split("=", 1) for a in argv[1:] if "=" in a)
    for switch in ("google-base-url", "gcm-checkin-url", "gcm-registration-url", "gcm-mcs-endpoint",
                   "gaia-url", "google-apis-url", "lso-url", "sync-url", "variations-server-url"):
        assert flags[switch].startswith("http://127.0.0.1:"), switch
    disabled = flags["disable-features"].split(",")
    assert {"PreconnectToSearch", "SearchEnginePreconnector", "NetworkTimeServiceQuerying"} <= set(disabled)
    assert "--disable-background-networking" in argv and "--no-first-run" in argv


def test_a_callers_disable_features_is_merged_not_a_second_flag():
    """Chromium honours only the last `--disable-features`: a caller's list must not switch ours
    back on."""
    argv = chromium_argv("chromium", "/tmp/profile", ["--disable-features=Foo,Translate", "--x=1"])
    lists = [a for a in argv if a.startswith("--disable-features=")]
    assert len(lists) == 1
    features = lists[0].split("=", 1)[1].split(",")
    assert {"Foo", "PreconnectToSearch", "Translate"} <= set(features)
    assert features.count("Translate") == 1
    assert argv[-1] == "--x=1"


def test_a_missing_chromium_raises_not_found(monkeypatch):
    monkeypatch.setenv("FLUXMAT_CHROMIUM", "/nonexistent/chromium")
    assert not Browser.available()
    with pytest.raises(BrowserNotFound, match="apt-get install chromium") as info:
        Browser()
    assert isinstance(info.value, FileNotFoundError)
