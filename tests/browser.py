"""A real headless browser for tests: Debian's chromium driven by the DevTools protocol.

Contract:
  * `Browser()` starts `chromium --headless=new` with a private profile and
    `--remote-debugging-port=0` bound to 127.0.0.1 (the port is read from the
    profile's `DevToolsActivePort`); `close()` / the context manager kills it by
    PID and removes the profile. `Browser.available()` says whether chromium is
    installed (tests skip with that reason otherwise).
  * `Browser.open(url)` returns a `Page`: `evaluate(js)` returns the value of a
    JS expression (awaiting promises); `wait_for(js, timeout)` polls until it is
    truthy and raises `TimeoutError` with the last value and the page's console
    errors; `fill(selector, text)`, `click(selector)`; `screenshot(path)` writes
    a PNG; `console_errors` collects console errors and uncaught exceptions.
One websocket (websocket-client) per page; no Playwright, no browser download.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome")


def _executable() -> str | None:
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


class Page:
    def __init__(self, ws_url: str):
        import websocket

        self.ws = websocket.create_connection(ws_url, timeout=60, suppress_origin=True)
        self.ids = itertools.count(1)
        self.console_errors: list[str] = []
        self.call("Page.enable")
        self.call("Runtime.enable")
        self.call("Log.enable")

    def _event(self, msg: dict) -> None:
        method, params = msg.get("method"), msg.get("params", {})
        if method == "Runtime.exceptionThrown":
            d = params.get("exceptionDetails", {})
            self.console_errors.append(d.get("exception", {}).get("description") or d.get("text", ""))
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.console_errors.append(" ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            self.console_errors.append(params["entry"].get("text", ""))

    def call(self, method: str, **params) -> dict:
        ident = next(self.ids)
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == ident:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self._event(msg)

    def goto(self, url: str, timeout: float = 30) -> None:
        self.call("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete'", timeout)

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails'].get('text')}")
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float = 30, interval: float = 0.2):
        deadline = time.monotonic() + timeout
        last = None
        while True:
            try:
                last = self.evaluate(expression)
            except RuntimeError as exc:
                last = f"error: {exc}"
            if last and not (isinstance(last, str) and last.startswith("error: ")):
                return last
            if time.monotonic() > deadline:
                raise TimeoutError(f"{expression!r} not true after {timeout:g} s (last value {last!r}); "
                                   f"console errors: {self.console_errors}")  # fmt: skip
            time.sleep(interval)

    def fill(self, selector: str, text: str) -> None:
        self.evaluate(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); "
                      f"e.value = {json.dumps(text)}; e.dispatchEvent(new Event('input')); return true; }})()")  # fmt: skip

    def click(self, selector: str) -> None:
        self.evaluate(f"document.querySelector({json.dumps(selector)}).click(), true")

    def screenshot(self, path: str | Path, width: int = 1280, height: int = 1400) -> Path:
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)  # fmt: skip
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        self.ws.close()


class Browser:
    def __init__(self, timeout: float = 30):
        exe = _executable()
        if exe is None:
            raise FileNotFoundError("chromium is not installed (apt-get install chromium)")
        self.profile = Path(tempfile.mkdtemp(prefix="fluxmat-chromium-"))
        args = [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--disable-dev-shm-usage", "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0", f"--user-data-dir={self.profile}", "about:blank"]  # fmt: skip
        self.log = open(self.profile.with_suffix(".log"), "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while not (port_file.is_file() and port_file.read_text().strip()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"chromium did not start: {self.profile.with_suffix('.log').read_text()[-2000:]}")
            time.sleep(0.1)
        self.port = int(port_file.read_text().splitlines()[0])
        self.pages: list[Page] = []

    @staticmethod
    def available() -> bool:
        return _executable() is not None

    def open(self, url: str) -> Page:
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/json/new?about:blank", method="PUT")
        with urllib.request.urlopen(req, timeout=30) as resp:
            target = json.loads(resp.read())
        page = Page(target["webSocketDebuggerUrl"])
        self.pages.append(page)
        page.goto(url)
        return page

    def close(self) -> None:
        for page in getattr(self, "pages", []):
            try:
                page.close()
            except Exception:  # noqa: BLE001 - closing anyway
                pass
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=30)
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)
        self.profile.with_suffix(".log").unlink(missing_ok=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
