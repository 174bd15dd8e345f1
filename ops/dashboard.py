"""The live dashboard: one web page and a small JSON API, served from the standard library.

Routes (GET):
  /             the page (ops/dashboard.html): charts and tables fed by /api/status
  /api/status   totals, current values, per-second history, recent batches,
                deltas and errors (the shape of `ops.status.JobStatus.as_dict`), and
                the program's `prefixes` (the page shows IRIs with them)
  /api/query    ?pattern=pred(a, ?X)&limit=N  -> facts matching the pattern
  /api/why      ?fact=pred(a, b)              -> a proof of the fact (engine.why)
                (a `--partition-by` job: both, and /api/sparql, take `&key=K`: that key's state)
  /api/sparql   ?query=SELECT ...&format=json|csv|ntriples|turtle&limit=N -> SPARQL 1.1
                results (SPARQL protocol GET; the format also by Accept), over the
                materialisation's triples, read-only, at most `limit` (default 1,000,
                at most 10,000) results and 5 s (connectors.sparql)
  /healthz      "healthy: ..." / "degraded: ..." (200) or "failing: reason" (503); no token

Binding: 127.0.0.1 unless told otherwise; any other address needs an auth token.
With a token every API route requires `Authorization: Bearer TOKEN` (the scheme
in any case) or `?token=TOKEN` (the page, which holds no data itself, passes on
the token it was opened with); a wrong or missing token gets 401. Bad questions
(syntax errors, unknown predicates) get 400 with the error message; a job busy
with a long batch, or a state store that does not answer, gets 503 with the
reason, within about 2 s.

Bounds: a query stops matching after `limit` facts (default `DEFAULT_LIMIT`,
at most `MAX_LIMIT`); a proof is searched over at most `EXPLAIN_FACTS` facts and
shown at most `PROOF_DEPTH` levels deep and `PROOF_NODES` nodes large (`… N
more` for the rest); JSON is written without recursion. Requests are served by
`WORKERS` threads (further ones wait, up to `QUEUED`, then get 503), each
connection with a `REQUEST_TIMEOUT` socket timeout. The `Host` header must name
a loopback host (`localhost`, `*.localhost`), an IP address, or the host the
dashboard was bound to (`--host` / `--dashboard-host`): a page on another site
cannot reach the dashboard by rebinding its DNS name to 127.0.0.1.

Two sources: `LiveSource` inside `fluxmat run` (the job's metrics, its engine
under its lock) and `StoredSource` for `fluxmat dashboard` (the Redis state,
reloaded when the job commits a new batch, plus the job's /metrics when given).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import threading
import time
import urllib.request
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from fluxmat.connectors.redact import redact
from fluxmat.connectors.state import INITIAL, KEEP_OUTPUTS
from fluxmat.engine import FluxmatError
from fluxmat.ops.inspect import Busy, StateView, from_store, json_text
from fluxmat.ops.series import delta_entry, fact_text, history_point
from fluxmat.ops.status import JobStatus, program_in_force

PAGE = Path(__file__).with_name("dashboard.html")
DEFAULT_LIMIT = 1000
MAX_LIMIT = 10_000
EXPLAIN_FACTS = 50_000
PROOF_DEPTH = 50
PROOF_NODES = 1000
WORKERS = 8
QUEUED = 32
REQUEST_TIMEOUT = 5.0  # seconds a client may take to send its request or read the answer
LOCK_WAIT = 1.5  # seconds a question waits for the job's batch lock (then 503)
STORE_TIMEOUT = 1.5  # seconds for one Redis command of the standalone dashboard
SPARQL_TIMEOUT = 5.0
ACCEPT = {"csv": "text/csv", "ntriples": "application/n-triples", "turtle": "text/turtle",
          "json": "application/sparql-results+json"}  # fmt: skip


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_allowed(header: str | None, bound: str) -> bool:
    """Whether a request's `Host` header names this dashboard (see the module docstring).

    A request without a `Host` header comes from no browser, so no rebound page.
    """
    if header is None:
        return True
    name = header.strip().lower()
    if name.startswith("["):  # [::1]:8088
        name = name[1 : name.find("]")] if "]" in name else name
    elif name.count(":") == 1:
        name = name.rsplit(":", 1)[0]
    name = name.rstrip(".")
    if name == "localhost" or name.endswith(".localhost") or name == bound.strip().lower().rstrip("."):
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def check_binding(host: str, token: str | None) -> None:
    """Refuse to serve beyond loopback without an auth token."""
    if not is_loopback(host) and not token:
        raise FluxmatError(
            f"the dashboard on {host} would be reachable from other machines: "
            "give --auth-token (or FLUXMAT_AUTH_TOKEN), or bind to 127.0.0.1"
        )


def _one_state(key: str | None) -> None:
    if key is not None:
        raise FluxmatError("this dashboard shows one materialisation: leave out ?key= "
                           "(fluxmat dashboard --key K reads one key of a --partition-by job)")  # fmt: skip



class LiveSource:
    """The running job: its metrics and its engine (questions wait for the job's lock)."""

    def __init__(self, metrics, view: StateView):
        self.metrics = metrics
        self._view = view

    def status(self) -> dict:
        return self.metrics.status()

    def health(self) -> tuple[str, str]:
        return self.metrics.health()

    def prefixes(self) -> dict[str, str]:
        """The program's prefixes (the page shows IRIs with them)."""
        view = self._view
        return dict(view.reasoner.prefixes) if view is not None and view.reasoner is not None else {}

    def view(self, key: str | None = None) -> StateView:
        _one_state(key)
        return self._view


class KeyedLiveSource(LiveSource):
    """A running `--partition-by` job: its metrics; questions read one key's state from Redis (`?key=`).

    The last `VIEWS` keys asked about are kept, each reloaded when its key has
    committed a newer batch.
    """

    VIEWS = 4

    def __init__(self, metrics, cfg):
        super().__init__(metrics, None)
        from fluxmat.connectors.state import redis_client

        self.cfg = cfg
        self.client = redis_client(cfg.redis, cfg.redis_cluster, STORE_TIMEOUT)
        self.views: dict[str, tuple[int | None, StateView]] = {}
        self._lock = threading.Lock()

    def prefixes(self) -> dict[str, str]:
        """The program's prefixes, once a key's state was loaded (every key has the same program)."""
        views = list(self.views.values())
        return dict(views[-1][1].reasoner.prefixes) if views else {}

    def view(self, key: str | None = None) -> StateView:
        import redis

        from fluxmat.connectors.state import RedisStateStore

        if not key:
            raise FluxmatError("this job keeps one materialisation per key (--partition-by): "
                               "name the key (the page's key field, or ?key=K)")  # fmt: skip
        cfg = self.cfg
        store = RedisStateStore(cfg.redis, cfg.namespace, retry_seconds=0, key=key, cluster=cfg.redis_cluster,
                                client=self.client)  # fmt: skip
        if not self._lock.acquire(timeout=LOCK_WAIT):
            raise Busy("the dashboard is still loading a key's state; try again")
        try:
            batch = store.last_batch()
            cached = self.views.get(key)
            if cached is None or cached[0] != batch:
                view = from_store(cfg.program or None, cfg.redis, cfg.namespace, cfg.ontology, store, key=key,
                                  owl_rules=cfg.owl_rules)
                self.views.pop(key, None)
                self.views[key] = cached = (batch, view)
                while len(self.views) > self.VIEWS:
                    self.views.pop(next(iter(self.views)))
            return cached[1]
        except redis.RedisError as exc:
            raise Unavailable(f"the state store does not answer: {redact(str(exc))}") from None
        finally:
            self._lock.release()


class Unavailable(FluxmatError):
    """The state store did not answer (the dashboard answers 503 with the reason)."""


class StoredSource:
    """The job's Redis state, for a dashboard running apart from the job.

    What the job reports about itself (totals, lag, pending work, its health,
    recent batches and dead letters) is its one status value, read from the
    job's own `/api/status` (`status_url`, with `status_token` when the job's
    dashboard wants one): the page apart shows what the job's page shows. The
    state as committed (sizes, the last batch, the program in force, the
    deltas) is read from Redis. Redis commands time out after `STORE_TIMEOUT`
    seconds and are not retried: with Redis down every answer is a quick 503
    naming the problem.
    """

    def __init__(self, program: str, url: str, namespace: str = "default",
                 status_url: str | None = None, ontologies: tuple[str, ...] = (),
                 key: str | None = None, cluster: bool = False, owl_rules: str = "axioms",
                 status_token: str | None = None):  # fmt: skip
        from fluxmat.connectors.state import RedisStateStore, redis_client

        self.owl_rules = owl_rules
        self.program, self.url, self.namespace = program, url, namespace
        self.job = JobStatusReader(status_url, status_token)
        self.ontologies = tuple(ontologies)
        self.key = key
        client = redis_client(url, cluster, STORE_TIMEOUT)
        self.store = RedisStateStore(url, namespace, retry_seconds=0, key=key, cluster=cluster, client=client)
        self._view: StateView | None = None
        self._view_batch: int | None = None
        self._lock = threading.Lock()
        self.alone = JobStatus(program, None, namespace, None)  # what is shown when no job status is read
        self.alone.now.update(time_lag=None)

    @contextmanager
    def _store(self):
        import redis

        try:
            yield self.store
        except redis.RedisError as exc:
            raise Unavailable(f"the state store {redact(self.url)} does not answer: {redact(str(exc))}") from None

    def _fact_text(self):
        """Program text for published facts, once the state has been loaded (else as published)."""
        view = self._view
        return fact_text(view.reasoner) if view is not None else None

    def health(self) -> tuple[str, str]:
        """Failing when the state store does not answer; else the job's own health (`JobStatusReader.health`)."""
        try:
            with self._store() as store:
                store.last_batch()
        except Unavailable as exc:
            return "failing", str(exc)
        return self.job.health(self.job.read())

    def prefixes(self) -> dict[str, str]:
        """The program's prefixes, once the state has been loaded (the page shows IRIs with them)."""
        view = self._view
        return dict(view.reasoner.prefixes) if view is not None else {}

    def view(self, key: str | None = None) -> StateView:
        """The state as of the last committed batch (reloaded when the job moved on)."""
        _one_state(key)
        if not self._lock.acquire(timeout=LOCK_WAIT):
            raise Busy("the dashboard is still loading the job's state; try again")
        try:
            with self._store() as store:
                batch = store.last_batch()
                if self._view is None or batch != self._view_batch:
                    self._view = from_store(self.program, self.url, self.namespace, self.ontologies, store,
                                            owl_rules=self.owl_rules)
                    self._view_batch = batch
            return self._view
        finally:
            self._lock.release()

    def status(self) -> dict:
        """The job's status (`/api/status` of the job, or `alone`), with the state as committed in Redis."""
        with self._store():
            meta = self.store.meta()
            job = self.job.read()
            status = job if job is not None else self._alone(meta)
            state, reason = self.job.health(job)
            return {
                **status, "mode": "stored", "now": {**status["now"], **self._committed(meta)},
                "deltas": self._deltas(meta.get("batch")), "errors": [*status["errors"], *self.job.errors],
                "health": {"state": state, "reason": reason},
            }  # fmt: skip

    def _alone(self, meta: dict) -> dict:
        """The status shown without the job's: nothing counted, the history of the committed sizes."""
        self.alone.info["algorithm"] = meta.get("algorithm")
        self.alone.now.update(self._committed(meta))
        point = history_point(self.alone.totals, self.alone.now)
        self.alone.history.append({**point, **dict.fromkeys(("updates", "fact_ops", "deltas"))})
        status = self.alone.as_dict()
        status["now"].pop("in_flight", None)  # unknown without the job
        # counted by the job only: unknown (null), never 0, which would read "nothing happened"
        status["totals"] = dict.fromkeys(status["totals"])
        return status

    def _committed(self, meta: dict) -> dict:
        """What the state in Redis tells as of the last committed batch (sizes, program in force)."""
        store = self.store
        return {
            "facts": int(meta.get("facts", 0)), "explicit": int(meta.get("explicit", 0)),
            "log": int(meta.get("log", 0)), "state_entries": store.size(),
            "state_bytes": store.namespace_bytes(), "redis_bytes": store.memory_bytes(),
            "last_batch": meta.get("batch"), "through": meta.get("through"),
            "program": program_in_force(meta.get("program_version"), meta.get("program_history")),
        }  # fmt: skip

    def _deltas(self, batch: int | None) -> list[dict]:
        """The stored outputs of the last batches that changed something, oldest first."""
        deltas = []
        if batch is not None:
            for b in range(batch, max(batch - KEEP_OUTPUTS, INITIAL - 1), -1):
                out = self.store.output(b)
                if out and (out["added"] or out["removed"]):
                    deltas.append(delta_entry(b, out, None, self._fact_text()))
        return deltas[::-1]


class JobStatusReader:
    """The running job's one status value, read from its dashboard's `/api/status` (ops.status.JobStatus).

    `read()` answers the job's status, or None when no URL was given or the job
    does not answer (why, in `errors` and `problem`), within `timeout` seconds.
    """

    def __init__(self, url: str | None, token: str | None = None, timeout: float = 1.0):
        self.url, self.token, self.timeout = url, token, timeout
        self.errors: deque[dict] = deque(maxlen=20)
        self.problem: str | None = None

    def read(self) -> dict | None:
        if not self.url:
            return None
        request = urllib.request.Request(self.url)
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as resp:
                status = json.loads(resp.read())
        except (OSError, ValueError) as exc:
            self.problem = redact(f"the job's status at {self.url} does not answer: {exc}")
            self.errors.append({"t": time.time(), "message": self.problem})
            return None
        self.problem = None
        return status

    def health(self, status: dict | None) -> tuple[str, str]:
        """The job's health as it reports it; degraded when its status cannot be read."""
        if status is not None:
            return status["health"]["state"], status["health"]["reason"]
        if self.url:
            return "degraded", self.problem or f"the job's status at {self.url} was not read"
        return "healthy", "the stored state answers (the job's own health: --status-url)"


def _handler(source, token: str | None, bound: str, request_timeout: float):
    class Handler(BaseHTTPRequestHandler):
        server_version = "fluxmat-dashboard"
        timeout = request_timeout  # the socket timeout of each connection (StreamRequestHandler)

        def log_message(self, fmt, *args):  # quiet: the job logs what matters
            pass

        def _send(self, code: int, body: bytes, kind: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            if code == 503:
                self.send_header("Retry-After", "2")
            self.end_headers()
            self.wfile.write(body)

        def _json(self, code: int, obj) -> None:
            self._send(code, json_text(obj).encode("utf-8"), "application/json")

        def _authorised(self, query: dict) -> bool:
            if not token:
                return True
            given = query.get("token", [""])[0]
            scheme, _, credentials = self.headers.get("Authorization", "").strip().partition(" ")
            if scheme.lower() == "bearer":
                given = credentials.strip()
            return hmac.compare_digest(given.encode(), token.encode())

        def _sparql(self, query: dict) -> None:
            from fluxmat.connectors.sparql import DEFAULT_LIMIT as SPARQL_LIMIT
            from fluxmat.connectors.sparql import Limits

            accept = self.headers.get("Accept", "")
            fmt = query.get("format", [None])[0] or next(
                (f for f, kind in ACCEPT.items() if kind in accept), None)  # fmt: skip
            limits = Limits(results=int(query.get("limit", [SPARQL_LIMIT])[0]), timeout=SPARQL_TIMEOUT)
            answer, _ = _view(source, query).sparql(query.get("query", [""])[0], fmt, limits)
            self.send_response(200)
            self.send_header("Content-Type", answer.content_type)
            self.send_header("Content-Length", str(len(answer.body)))
            self.send_header("X-Fluxmat-Truncated", "true" if answer.truncated else "false")
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(answer.body)

        def do_GET(self):  # noqa: N802 - the http.server API
            if not host_allowed(self.headers.get("Host"), bound):
                return self._json(403, {"error": "this Host is not allowed (DNS rebinding protection): "
                                        "use localhost, an IP address, or the --host name"})  # fmt: skip
            url = urlparse(self.path)
            query = parse_qs(url.query)
            if url.path == "/healthz":  # 503 when failing, with the reason (never needs the token)
                state, reason = source.health()
                return self._send(503 if state == "failing" else 200, f"{state}: {reason}\n".encode(), "text/plain")
            if url.path == "/favicon.ico":
                return self._send(204, b"", "image/x-icon")
            if url.path in ("/", "/index.html"):  # static: holds no data, fetches it with the token
                return self._send(200, PAGE.read_bytes(), "text/html; charset=utf-8")
            if not self._authorised(query):
                return self._json(401, {"error": "missing or wrong token (open the page as /?token=...)"})
            route = ROUTES.get(url.path)
            if route is None and url.path != SPARQL:
                return self._json(404, {"error": f"no such page: {url.path}"})
            try:
                if route is None:
                    return self._sparql(query)
                return self._json(200, route(source, query))
            except (Busy, Unavailable) as exc:
                return self._json(503, {"error": str(exc)})
            except (FluxmatError, ValueError) as exc:
                return self._json(400, {"error": str(exc)})
            except (MemoryError, RecursionError) as exc:
                return self._json(503, {"error": f"the question needs too much: {type(exc).__name__}"})

    return Handler


def _view(source, query: dict) -> StateView:
    """The state a question is about: the job's, or with `--partition-by` the `?key=` one's."""
    key = query.get("key", [None])[0] or None
    return source.view() if key is None else source.view(key)


def _query(source, query: dict) -> dict:
    limit = int(query.get("limit", [DEFAULT_LIMIT])[0])
    if limit < 0:
        raise ValueError(f"limit must be at least 0, got {limit}")
    return _view(source, query).query(query.get("pattern", [""])[0], min(limit, MAX_LIMIT), exact=False)


def _why(source, query: dict) -> dict:
    return _view(source, query).why(query.get("fact", [""])[0], PROOF_DEPTH, PROOF_NODES, EXPLAIN_FACTS)


ROUTES = {"/api/status": lambda source, _args: {**source.status(), "prefixes": source.prefixes()},
          "/api/query": _query, "/api/why": _why}  # fmt: skip
SPARQL = "/api/sparql"  # answered in the asked format, not JSON (Handler._sparql)


class _Server(HTTPServer):
    """An HTTP server with a bounded pool of worker threads.

    At most `WORKERS` requests are served at once and `QUEUED` more wait; a
    connection beyond that gets an immediate 503 and is closed.
    """

    request_queue_size = 64  # the listen backlog (socketserver's default of 5 drops bursts)

    def __init__(self, address, handler):
        super().__init__(address, handler)
        self.pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="fluxmat-dashboard")
        self.slots = threading.BoundedSemaphore(WORKERS + QUEUED)

    def process_request(self, request, client_address) -> None:
        if not self.slots.acquire(blocking=False):
            try:
                request.settimeout(REQUEST_TIMEOUT)
                request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                                b"Retry-After: 2\r\nConnection: close\r\n\r\n")  # fmt: skip
            except OSError:
                pass
            self.shutdown_request(request)
            return
        self.pool.submit(self._serve_one, request, client_address)

    def _serve_one(self, request, client_address) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:  # a client that went away or timed out: nothing to report
            pass
        finally:
            self.shutdown_request(request)
            self.slots.release()

    def server_close(self) -> None:
        super().server_close()
        self.pool.shutdown(wait=False, cancel_futures=True)


def serve(source, host: str = "127.0.0.1", port: int = 0, token: str | None = None,
          request_timeout: float = REQUEST_TIMEOUT):  # fmt: skip
    """Start the dashboard in a daemon thread; returns the server (`.server_address`)."""
    check_binding(host, token)
    server = _Server((host, port), _handler(source, token, host, request_timeout))
    threading.Thread(target=server.serve_forever, name="fluxmat-dashboard", daemon=True).start()
    return server
