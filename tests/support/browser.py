"""A small headless-browser harness for tests: Debian's chromium driven over CDP.

Contract::

    with Browser() as b:                       # BrowserNotFound if no chromium
        page = b.open("http://127.0.0.1:PORT/?token=abc")     # waits for `load`
        page.wait_for("Number(document.querySelector('#facts')?.textContent) > 0",
                      timeout=30)              # WaitTimeout (also a TimeoutError)
        value = page.evaluate("document.querySelector('#facts').textContent")
        page.fill("#query-pattern", "path(a, ?X)")
        page.click("#query-run")               # a real (trusted) mouse click
        page.screenshot(artifacts_dir / "dashboard.png")      # writes a PNG, returns the path
        page.console_errors                    # console.error, uncaught exceptions,
                                               # failed loads (404s), CSP errors, ...

How: the Chrome DevTools Protocol over `--remote-debugging-pipe` (file descriptors 3
and 4 of the child), so the browser opens no debugging port at all, and only the
standard library is needed. The browser runs headless (`--headless=new`, plus
`--no-sandbox`, which root needs) in its own session and process group (crash handlers,
which leave it, are found by the unique profile path on their command line), with a
fresh temporary profile, and all non-loopback HTTP(S)/WebSocket traffic is sent to a dead
proxy on 127.0.0.1 (Chromium never proxies loopback addresses), so a page can reach
only servers on this machine. Background networking is off, and the Google endpoints Chromium
still calls by itself (search engine, new tab page, sign-in, Cloud Messaging, component
updater, field trials) are pointed at a closed loopback port (see `chromium_argv`). `close()` (and leaving the `with` block, and garbage
collection and interpreter exit as a fallback) kills the browser's process group and
its crash handlers by PID (SIGKILL), reaps it, and removes the temporary profile.

Waiting: `open` waits for the page's `load` event; `fill`, `click`, `press` and
`text` wait for their selector to match (default 10 s); `wait_for` polls a JavaScript
expression until it is truthy. Every wait has a timeout whose error message names what
was awaited and includes the last value seen, the last JavaScript error raised by the
expression, the page URL and the page's console errors so far.

API (everything blocks until done or timed out):
  * `Browser(executable=None, *, timeout=30, width=1280, height=800, blackhole_proxy=...,
    extra_args=())`; `Browser.available()`; `.open(url, *, timeout=30) -> Page`;
    `.send(method, params, *, session=None, timeout=30)` (raw CDP); `.pid`; `.close()`.
  * `Page.goto(url, *, timeout=30)`, `.url`, `.evaluate(js, *, timeout=30)`,
    `.wait_for(js, timeout=30, interval=0.1)` (returns the truthy value),
    `.wait_for_selector(sel, *, timeout=10)`, `.text(sel)`, `.fill(sel, text)`,
    `.click(sel)`, `.press(sel, "Enter")`, `.screenshot(path, *, full_page=True)`,
    `.png(*, full_page=True) -> bytes`, `.console_errors`, `.console_messages`,
    `.send(method, params)` / `.call(method, **params)` (raw CDP), `.close()`.
  * Errors: `BrowserError` (a RuntimeError); `BrowserNotFound` (also a
    FileNotFoundError); `JSError` (the expression threw); `WaitTimeout` (also a
    TimeoutError).

Executable: `$FLUXMAT_CHROMIUM`, else `/usr/lib/chromium/chromium` (the binary behind
Debian's `chromium` wrapper script), else `chromium`, `chromium-browser`,
`google-chrome` or `google-chrome-stable` on PATH. Tests skip when `find_chromium()`
returns None (see `CHROMIUM_MISSING`).

Tip for pages under test: Chromium requests `/favicon.ico`; a server that answers
404 there puts a "Failed to load resource" entry into `console_errors`. Serve one,
or put `<link rel="icon" href="data:,">` into the page.
"""

from __future__ import annotations

import base64
import fcntl
import itertools
import json
import os
import shutil
import signal
import tempfile
import threading
import time
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = [
    "CHROMIUM_MISSING",
    "Browser",
    "BrowserError",
    "BrowserNotFound",
    "JSError",
    "Page",
    "WaitTimeout",
    "chromium_argv",
    "find_chromium",
]

CHROMIUM_MISSING = "chromium is not installed (apt-get install chromium, or set FLUXMAT_CHROMIUM)"

_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
_DEBIAN_BINARY = "/usr/lib/chromium/chromium"

# Where Google services would be reached: a closed loopback port. Chromium never proxies
# loopback, so these requests fail at once on this machine and never reach the network.
_NOWHERE = "http://127.0.0.1:9"

# Features that make the browser call out by itself. Chromium honours only the LAST
# `--disable-features` flag, so this is one list, merged with any the caller passes.
_DISABLED_FEATURES = (
    "Translate", "MediaRouter", "DialMediaRouteProvider", "OptimizationHints",
    "OptimizationHintsFetching", "OptimizationGuideModelDownloading",
    "OptimizationTargetPrediction", "NetworkTimeServiceQuerying", "AutofillServerCommunication",
    "CertificateTransparencyComponentUpdater", "InterestFeedContentSuggestions",
    # the default search engine (www.google.com, start.duckduckgo.com, ...) is preconnected
    "PreconnectToSearch", "SearchEnginePreconnector", "SearchEnginePreconnect2",
    "SearchPrefetchServicePrefetching", "LensOverlay", "GlobalMediaControls",
    "PushMessaging",
)  # fmt: skip

# Flags: headless, no sandbox (root), nothing phoning home, deterministic rendering.
_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-sync",
    "--disable-breakpad",
    "--disable-client-side-phishing-detection",
    "--disable-domain-reliability",
    "--disable-field-trial-config",
    "--disable-search-engine-choice-screen",
    "--dns-prefetch-disable",
    "--no-pings",
    # what still calls home despite the above (seen through the blackhole proxy): sign-in
    # (accounts.google.com), the component updater (update.googleapis.com), the search engine
    # and the new tab page (www.google.com), Google Cloud Messaging's device check-in
    # (android.clients.google.com, mtalk.google.com), Google APIs, sync and field trials
    f"--gaia-url={_NOWHERE}",
    f"--component-updater=url-source={_NOWHERE}",
    f"--google-base-url={_NOWHERE}",
    f"--gcm-checkin-url={_NOWHERE}/checkin",
    f"--gcm-registration-url={_NOWHERE}/register",
    f"--gcm-mcs-endpoint={_NOWHERE}",
    f"--google-apis-url={_NOWHERE}",
    f"--lso-url={_NOWHERE}",
    f"--sync-url={_NOWHERE}",
    f"--variations-server-url={_NOWHERE}",
    "--metrics-recording-only",
    "--password-store=basic",
    "--use-mock-keychain",
    "--mute-audio",
    "--hide-scrollbars",
    "--force-color-profile=srgb",
    "--remote-debugging-pipe",
)


def chromium_argv(exe: str, profile: str, extra_args: Iterable[str] = ()) -> list[str]:
    """The command line of a harness browser: `_FLAGS`, the profile, then `extra_args`.

    Every `--disable-features=` of `extra_args` is merged into the harness's own list (Chromium
    keeps only the last such flag, so a caller's list would otherwise switch ours back on).
    """
    disabled = list(_DISABLED_FEATURES)
    rest = []
    for arg in extra_args:
        if arg.startswith("--disable-features="):
            disabled += [f for f in arg.split("=", 1)[1].split(",") if f and f not in disabled]
        else:
            rest.append(arg)
    return [exe, *_FLAGS, f"--disable-features={','.join(disabled)}",
            f"--user-data-dir={profile}", *rest]  # fmt: skip


_KEYS = {  # key name -> (code, windowsVirtualKeyCode, text)
    "Enter": ("Enter", 13, "\r"),
    "Tab": ("Tab", 9, ""),
    "Escape": ("Escape", 27, ""),
    "Backspace": ("Backspace", 8, ""),
}


class BrowserError(RuntimeError):
    """Anything that went wrong driving the browser."""


class BrowserNotFound(BrowserError, FileNotFoundError):
    """No chromium executable was found."""


class JSError(BrowserError):
    """A JavaScript expression threw."""


class WaitTimeout(BrowserError, TimeoutError):
    """A wait ran out of time; the message says what was awaited and what was seen."""


def find_chromium() -> str | None:
    """The chromium executable to use, or None if there is none."""
    env = os.environ.get("FLUXMAT_CHROMIUM")
    if env:
        return env if os.access(env, os.X_OK) else shutil.which(env)
    if os.access(_DEBIAN_BINARY, os.X_OK):
        return _DEBIAN_BINARY
    for name in _CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


def _high_fd(fd: int) -> int:
    """Move `fd` to a number >= 10 (close-on-exec) so dup2 onto 3/4 cannot clobber it."""
    new = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return new


def _short(value: Any, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "...(truncated)"


def _remote_text(obj: dict) -> str:
    """A console argument (a CDP RemoteObject) as text."""
    if "value" in obj:
        v = obj["value"]
        return v if isinstance(v, str) else json.dumps(v)
    if "unserializableValue" in obj:
        return obj["unserializableValue"]
    return obj.get("description") or obj.get("type", "?")


def _exception_text(details: dict) -> str:
    exc = details.get("exception") or {}
    text = exc.get("description") or details.get("text") or "exception"
    where = details.get("url")
    if where:
        text += f" ({where}:{details.get('lineNumber', 0) + 1})"
    return text


def processes_using(path: str) -> list[int]:
    """PIDs of live (non-zombie) processes whose command line mentions `path`."""
    needle = path.encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if needle in cmdline and state != b"Z":
            pids.append(int(entry))
    return pids


class _Process:
    """The chromium process and its CDP pipe; cleanup can run from a weakref finalizer."""

    def __init__(self, argv: list[str], env: dict[str, str], log_path: Path, workdir: str):
        self.workdir = workdir
        self.log_path = log_path
        to_r, to_w = (_high_fd(fd) for fd in os.pipe())
        from_r, from_w = (_high_fd(fd) for fd in os.pipe())
        log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            self.pid = os.posix_spawn(
                argv[0],
                argv,
                env,
                file_actions=[
                    (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
                    (os.POSIX_SPAWN_DUP2, log_fd, 1),
                    (os.POSIX_SPAWN_DUP2, log_fd, 2),
                    (os.POSIX_SPAWN_DUP2, to_r, 3),
                    (os.POSIX_SPAWN_DUP2, from_w, 4),
                ],
                setsid=True,  # own session and process group (pgid == pid)
            )
        except BaseException:
            for fd in (to_r, to_w, from_r, from_w):
                os.close(fd)
            raise
        finally:
            os.close(log_fd)
        os.close(to_r)
        os.close(from_w)
        self.write_fd = to_w
        self.read_fd = from_r
        self.returncode: int | None = None
        self._lock = threading.Lock()

    def poll(self) -> int | None:
        with self._lock:
            if self.returncode is None:
                try:
                    pid, status = os.waitpid(self.pid, os.WNOHANG)
                except ChildProcessError:
                    self.returncode = -1
                else:
                    if pid:
                        self.returncode = os.waitstatus_to_exitcode(status)
            return self.returncode

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def cleanup(self) -> None:
        """SIGKILL the process group, reap it, remove the profile (the profile is thrown
        away, so a graceful shutdown buys nothing, and it hangs behind a busy renderer).
        """
        try:
            os.killpg(self.pid, signal.SIGKILL)  # the group we created: renderers, GPU, zygotes
        except (ProcessLookupError, PermissionError):
            pass
        deadline = time.monotonic() + 10
        while self.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        # crashpad handlers leave the group (setsid) but name our unique profile path
        for pid in processes_using(self.workdir):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        # the read end belongs to the reader thread, which closes it at EOF (closing it
        # here could hand its number to another file while the thread still reads it)
        fd, self.write_fd = self.write_fd, None
        if fd is not None:
            os.close(fd)
        for _ in range(5):  # a dying helper may still be writing into the profile
            shutil.rmtree(self.workdir, ignore_errors=True)
            if not os.path.exists(self.workdir):
                break
            time.sleep(0.1)


class Browser:
    """A headless chromium; use as a context manager (or call `close()`).

    Args:
        executable: chromium binary; default `find_chromium()`.
        width, height: viewport size in CSS pixels for pages it opens.
        timeout: seconds to wait for the browser to start and answer on its pipe.
        blackhole_proxy: where non-loopback traffic is sent (a dead port by default).
        extra_args: further command-line flags.
    """

    def __init__(
        self,
        executable: str | None = None,
        *,
        timeout: float = 30.0,
        width: int = 1280,
        height: int = 800,
        blackhole_proxy: str = "127.0.0.1:9",
        extra_args: Iterable[str] = (),
    ):
        exe = executable or find_chromium()
        if exe is None:
            raise BrowserNotFound(CHROMIUM_MISSING)
        self.executable = exe
        self.width, self.height = width, height
        self._ids = itertools.count(1)
        self._pending: dict[int, dict | None] = {}
        self._cond = threading.Condition()
        self._handlers: dict[str | None, Any] = {}
        self._write_lock = threading.Lock()
        self._closed = False
        self._pages: list[Page] = []

        workdir = tempfile.mkdtemp(prefix="fluxmat-chromium-")
        profile = os.path.join(workdir, "profile")
        env = dict(os.environ)
        env.update(
            HOME=workdir,  # keeps ~/.pki, ~/.cache etc. out of the real home
            XDG_CONFIG_HOME=os.path.join(workdir, "config"),
            XDG_CACHE_HOME=os.path.join(workdir, "cache"),
        )
        argv = chromium_argv(
            exe, profile,
            [f"--window-size={width},{height}", f"--proxy-server={blackhole_proxy}", *extra_args],
        )  # fmt: skip
        argv.append("about:blank")
        try:
            self._proc = _Process(argv, env, Path(workdir) / "chromium.log", workdir)
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        self._finalizer = weakref.finalize(self, self._proc.cleanup)
        self._reader = threading.Thread(target=self._read_loop, name="cdp-reader", daemon=True)
        self._reader.start()
        try:
            self.version = self.send("Browser.getVersion", timeout=timeout)
        except BaseException:
            self.close()
            raise

    @staticmethod
    def available() -> bool:
        """Whether a chromium executable is installed (tests skip otherwise)."""
        return find_chromium() is not None

    @property
    def pid(self) -> int:
        return self._proc.pid

    # --- protocol ---------------------------------------------------------------
    def _read_loop(self) -> None:
        try:
            self._read_messages(self._proc.read_fd)
        finally:
            os.close(self._proc.read_fd)
            with self._cond:
                self._closed = True
                self._cond.notify_all()

    def _read_messages(self, fd: int) -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                break
            buf += chunk
            *messages, buf = buf.split(b"\0")
            for raw in messages:
                try:
                    msg = json.loads(raw)
                except ValueError:
                    continue
                if "id" in msg:
                    with self._cond:
                        if msg["id"] in self._pending:
                            self._pending[msg["id"]] = msg
                            self._cond.notify_all()
                else:
                    handler = self._handlers.get(msg.get("sessionId"))
                    if handler is not None:
                        try:
                            handler(msg["method"], msg.get("params", {}))
                        except Exception:  # a bad event must not kill the reader
                            pass

    def send(
        self,
        method: str,
        params: dict | None = None,
        *,
        session: str | None = None,
        timeout: float = 30.0,
    ) -> dict:
        """Send one CDP command and return its result; BrowserError on error or timeout."""
        if self._closed:
            raise BrowserError(f"browser is closed (sending {method}){self._log_note()}")
        msg_id = next(self._ids)
        msg: dict[str, Any] = {"id": msg_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        data = json.dumps(msg).encode() + b"\0"
        with self._cond:
            self._pending[msg_id] = None
        try:
            with self._write_lock:
                view = memoryview(data)
                while view:
                    view = view[os.write(self._proc.write_fd, view) :]
        except (OSError, TypeError) as e:
            with self._cond:
                self._pending.pop(msg_id, None)
            raise BrowserError(
                f"browser pipe closed (sending {method}): {e}{self._log_note()}"
            ) from e
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending.get(msg_id) is None:
                left = deadline - time.monotonic()
                if self._closed:
                    self._pending.pop(msg_id, None)
                    raise BrowserError(
                        f"browser exited while waiting for {method}{self._log_note()}"
                    )
                if left <= 0:
                    self._pending.pop(msg_id, None)
                    raise WaitTimeout(
                        f"no answer to {method} within {timeout:g} s{self._log_note()}"
                    )
                self._cond.wait(min(left, 0.5))
            reply = self._pending.pop(msg_id)
        assert reply is not None
        if "error" in reply:
            err = reply["error"]
            raise BrowserError(
                f"{method} failed: {err.get('message')} {err.get('data', '')}".rstrip()
            )
        return reply.get("result", {})

    def _log_note(self) -> str:
        code = self._proc.poll()
        tail = self._proc.log_tail()
        note = "" if code is None else f"\nchromium exited with code {code}"
        return note + (f"\nchromium log tail:\n{tail}" if tail else "")

    # --- pages ------------------------------------------------------------------
    def open(self, url: str = "about:blank", *, timeout: float = 30.0) -> Page:
        """Open `url` in a new tab and wait for its `load` event; return the Page."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        page = Page(self, target, session)
        self._handlers[session] = page._on_event
        self._pages.append(page)
        page._setup()
        if url != "about:blank":
            page.goto(url, timeout=timeout)
        return page

    def close(self) -> None:
        """Kill the browser's process group by PID, reap it, remove the profile; idempotent."""
        if self._finalizer.alive:
            self._finalizer()  # runs _Process.cleanup once
        self._reader.join(timeout=5)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Page:
    """One tab. Get it from `Browser.open`; its methods block until done or timed out."""

    def __init__(self, browser: Browser, target_id: str, session_id: str):
        self.browser = browser
        self.target_id = target_id
        self.session_id = session_id
        self._errors: list[str] = []
        self._messages: list[tuple[str, str]] = []
        self._lifecycle: set[tuple[str, str]] = set()
        self._events = threading.Condition()

    # --- events -----------------------------------------------------------------
    def _on_event(self, method: str, params: dict) -> None:
        if method == "Runtime.consoleAPICalled":
            level = params.get("type", "log")
            text = " ".join(_remote_text(a) for a in params.get("args", []))
            self._messages.append((level, text))
            if level in ("error", "assert"):
                self._errors.append(f"console.{level}: {text}")
        elif method == "Runtime.exceptionThrown":
            text = _exception_text(params.get("exceptionDetails", {}))
            self._messages.append(("exception", text))
            self._errors.append(f"uncaught: {text}")
        elif method == "Log.entryAdded":
            entry = params.get("entry", {})
            level, text = entry.get("level", "info"), entry.get("text", "")
            if entry.get("url"):
                text += f" ({entry['url']})"
            self._messages.append((level, text))
            if level == "error":
                self._errors.append(f"{entry.get('source', 'browser')}: {text}")
        elif method == "Page.lifecycleEvent":
            with self._events:
                self._lifecycle.add((params.get("loaderId", ""), params.get("name", "")))
                self._events.notify_all()

    @property
    def console_errors(self) -> list[str]:
        """Error-level console messages, uncaught exceptions and failed loads, in order."""
        return list(self._errors)

    @property
    def console_messages(self) -> list[tuple[str, str]]:
        """Every console/log message as (level, text), in order."""
        return list(self._messages)

    # --- plumbing ---------------------------------------------------------------
    def send(self, method: str, params: dict | None = None, *, timeout: float = 30.0) -> dict:
        """Send a raw CDP command to this tab."""
        return self.browser.send(method, params, session=self.session_id, timeout=timeout)

    def call(self, method: str, **params: Any) -> dict:
        """`send` with keyword parameters: `page.call("Page.reload", ignoreCache=True)`."""
        return self.send(method, params)

    def _setup(self) -> None:
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")
        self.send("Page.setLifecycleEventsEnabled", {"enabled": True})
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {
                "width": self.browser.width,
                "height": self.browser.height,
                "deviceScaleFactor": 1,
                "mobile": False,
            },
        )

    def _context(self) -> str:
        errors = self.console_errors
        shown = "\n  ".join(errors[-10:]) if errors else "(none)"
        try:
            url = self.evaluate("location.href", timeout=0.5)
        except BrowserError:
            url = "?"
        return f"\npage: {url}\nconsole errors ({len(errors)}):\n  {shown}"

    # --- navigation -------------------------------------------------------------
    def goto(self, url: str, *, timeout: float = 30.0) -> None:
        """Navigate and wait for the `load` event; BrowserError if the load failed."""
        result = self.send("Page.navigate", {"url": url}, timeout=timeout)
        if result.get("errorText"):
            raise BrowserError(
                f"navigating to {url} failed: {result['errorText']}{self._context()}"
            )
        loader = result.get("loaderId")
        if not loader:  # same-document navigation (fragment change)
            return
        deadline = time.monotonic() + timeout
        with self._events:
            while (loader, "load") not in self._lifecycle:
                left = deadline - time.monotonic()
                if left <= 0 or self.browser._closed:
                    break
                self._events.wait(min(left, 0.5))
            else:
                return
        raise WaitTimeout(f"{url} did not fire `load` within {timeout:g} s{self._context()}")

    @property
    def url(self) -> str:
        return self.evaluate("location.href")

    # --- script -----------------------------------------------------------------
    def evaluate(self, expression: str, *, timeout: float = 30.0) -> Any:
        """Evaluate a JS expression (promises awaited) and return its JSON value.

        DOM nodes and other non-JSON values come back as {} or None; raises JSError if
        the expression throws.
        """
        result = self.send(
            "Runtime.evaluate",
            {
                "expression": expression,
                "returnByValue": True,
                "awaitPromise": True,
                "userGesture": True,
                "timeout": int(timeout * 1000),
            },
            timeout=timeout + 1,
        )
        if "exceptionDetails" in result:
            raise JSError(f"{_exception_text(result['exceptionDetails'])}\nin: {expression}")
        obj = result.get("result", {})
        if "value" in obj:
            return obj["value"]
        if "unserializableValue" in obj:  # NaN, Infinity, -0, bigints
            return obj["unserializableValue"]
        return None

    def wait_for(self, expression: str, timeout: float = 30.0, interval: float = 0.1) -> Any:
        """Poll a JS expression until it is truthy and return that value.

        A throwing expression counts as not yet true (the element may not exist yet).
        On timeout raises WaitTimeout with the last value, the last JS error, the URL
        and the console errors.
        """
        deadline = time.monotonic() + timeout
        last_value: Any = None
        last_error: str | None = None
        polls = 0
        while True:
            left = deadline - time.monotonic()
            try:
                polls += 1
                last_value = self.evaluate(expression, timeout=max(left, 0.5))
                last_error = None
                if last_value:
                    return last_value
            except JSError as e:
                last_error = str(e).split("\nin: ")[0]
            except WaitTimeout as e:  # the page is busy or hung
                last_error = str(e).split("\n")[0]
            except BrowserError as e:
                if self.browser._closed:
                    raise
                last_error = str(e)  # e.g. context destroyed by a navigation
            if time.monotonic() + interval > deadline:
                break
            time.sleep(interval)
        raise WaitTimeout(
            f"timed out after {timeout:g} s ({polls} polls) waiting for: {expression}\n"
            f"last value: {_short(last_value)}"
            + (f"\nlast JS error: {last_error}" if last_error else "")
            + self._context()
        )

    def wait_for_selector(self, selector: str, *, timeout: float = 10.0) -> None:
        """Wait until `document.querySelector(selector)` matches an element."""
        self.wait_for(f"document.querySelector({json.dumps(selector)}) !== null", timeout=timeout)

    def text(self, selector: str, *, timeout: float = 10.0) -> str:
        """The textContent of the first element matching `selector` (waited for)."""
        self.wait_for_selector(selector, timeout=timeout)
        return self.evaluate(f"document.querySelector({json.dumps(selector)}).textContent")

    # --- input ------------------------------------------------------------------
    def _element_call(self, selector: str, body: str, timeout: float) -> Any:
        """Wait for `selector`, then run `body` with `el` bound to it."""
        self.wait_for_selector(selector, timeout=timeout)
        return self.evaluate(
            f"(el => {{ {body} }})(document.querySelector({json.dumps(selector)}))"
        )

    def fill(self, selector: str, value: str, *, timeout: float = 10.0) -> None:
        """Focus an input/textarea, clear it and type `value` (input + change events)."""
        state = self._element_call(
            selector,
            "el.scrollIntoView({block: 'center'}); el.focus();"
            "if (document.activeElement !== el) return 'not focusable (disabled or hidden?)';"
            "if (!('value' in el)) return 'not an input, textarea or select';"
            "if (el.select) el.select(); el.value = '';"
            "el.dispatchEvent(new Event('input', {bubbles: true})); return 'ok';",
            timeout,
        )
        if state != "ok":
            raise BrowserError(f"fill({selector!r}): element is {state}{self._context()}")
        if value:
            self.send("Input.insertText", {"text": value})
        self._element_call(
            selector, "el.dispatchEvent(new Event('change', {bubbles: true}));", timeout
        )

    def click(self, selector: str, *, timeout: float = 10.0) -> None:
        """Click the centre of the element with real mouse events (waits for it to appear).

        Raises BrowserError if the element has no size or another element covers it.
        """
        info = self._element_call(
            selector,
            "el.scrollIntoView({block: 'center', inline: 'center'});"
            "const r = el.getBoundingClientRect();"
            "if (r.width === 0 || r.height === 0) return {error: 'has no size (hidden?)'};"
            "const x = r.left + r.width / 2, y = r.top + r.height / 2;"
            "const hit = document.elementFromPoint(x, y);"
            "if (hit && hit !== el && !el.contains(hit))"
            "  return {error: 'is covered by <' + hit.tagName.toLowerCase()"
            "    + (hit.id ? '#' + hit.id : '') + '>'};"
            "return {x, y};",
            timeout,
        )
        if not isinstance(info, dict) or "error" in info:
            err = info.get("error") if isinstance(info, dict) else info
            raise BrowserError(f"click({selector!r}): element {err}{self._context()}")
        x, y = info["x"], info["y"]
        self.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})
        for kind in ("mousePressed", "mouseReleased"):
            self.send(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": x, "y": y, "button": "left", "buttons": 1, "clickCount": 1},
            )

    def press(self, selector: str, key: str, *, timeout: float = 10.0) -> None:
        """Focus the element and press a key: Enter, Tab, Escape or Backspace."""
        if key not in _KEYS:
            raise ValueError(f"unsupported key {key!r}; one of {sorted(_KEYS)}")
        self._element_call(selector, "el.focus();", timeout)
        code, vk, text = _KEYS[key]
        common = {"key": key, "code": code, "windowsVirtualKeyCode": vk, "nativeVirtualKeyCode": vk}
        self.send("Input.dispatchKeyEvent", {"type": "keyDown", "text": text, **common})
        self.send("Input.dispatchKeyEvent", {"type": "keyUp", **common})

    # --- output -----------------------------------------------------------------
    def png(self, *, full_page: bool = True) -> bytes:
        """A PNG of the whole page (at least the viewport), or of the viewport only."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            metrics = self.send("Page.getLayoutMetrics")
            content, view = metrics["cssContentSize"], metrics["cssLayoutViewport"]
            params["clip"] = {
                "x": 0,
                "y": 0,
                "width": max(1, content["width"], view["clientWidth"]),
                "height": max(1, content["height"], view["clientHeight"]),
                "scale": 1,
            }
            params["captureBeyondViewport"] = True
        return base64.b64decode(self.send("Page.captureScreenshot", params)["data"])

    def screenshot(self, path: str | os.PathLike, *, full_page: bool = True) -> Path:
        """Write a PNG of the page to `path` (parents created) and return the path."""
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(self.png(full_page=full_page))
        return out

    def close(self) -> None:
        """Close this tab (the browser stays open)."""
        try:
            self.browser.send("Target.closeTarget", {"targetId": self.target_id}, timeout=5)
        except BrowserError:
            pass
        self.browser._handlers.pop(self.session_id, None)
