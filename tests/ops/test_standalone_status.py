"""The dashboard apart from the job reads the job's one status value (its /api/status), not scraped metrics.

A job's side without Spark: a per-batch processor over a real redis-server
feeds the job's metrics (as in `fluxmat run`), whose page is served with a
token. `fluxmat dashboard`'s source (`StoredSource`) is pointed at the job's
`/api/status`: its `/api/status` and `/healthz` tell what the job's do (totals,
lag, dead letters, batches, health and its reason), the job's health gauge
agrees, and a real headless chromium on the page apart shows the job's health.
When the job stops answering, the page apart says so (degraded, with the
reason) and still answers from the committed state.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid

import pytest

from fluxmat.connectors.state import RedisStateStore
from fluxmat.engine import Reasoner
from fluxmat.ops.dashboard import LiveSource, StoredSource, serve
from fluxmat.ops.inspect import StateView
from fluxmat.ops.metrics import JobMetrics
from fluxmat.ops.status import HEALTH_STATES
from fluxmat.stream.batch import BatchProcessor
from tests.support.browser import Browser
from tests.support.cli import fluxmat, user_error
from tests.support.shared import NullPublisher

TOKEN = "job-t0ken"
PROGRAM = "path(X, Y) :- edge(X, Y).\npath(X, Z) :- path(X, Y), edge(Y, Z).\n"
UPDATES = [{"add": [["edge", "b", "c"]], "id": "u1"}, {"add": [["edge", "c", "d"]], "id": "u2"},
           {"add": [["edge", "x"]], "id": "bad"}, {"del": [["edge", "a", "b"]], "id": "u3"}]  # fmt: skip


def _rows(items) -> list[tuple]:
    values = [json.dumps(item) for item in items]
    return [(0, i, None, v, int(time.time() * 1000), True, len(v)) for i, v in enumerate(values)]


def _get(url: str, token: str | None = None) -> tuple[int, object]:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            code, body = resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        code, body = exc.code, exc.read()
    return code, json.loads(body) if url.split("?")[0].endswith("/api/status") else body.decode()


class Pair:
    """A job's metrics served as the job serves them, and the dashboard apart reading the job's status."""

    def __init__(self, redis_url: str, program_path):
        ns = f"standalone-{uuid.uuid4().hex[:8]}"
        reasoner = Reasoner.from_file(program_path, "fd-counting")
        store = RedisStateStore(redis_url, ns)
        processor = BatchProcessor(reasoner, store, NullPublisher())
        processor.start([("edge", "a", "b")])
        self.metrics = m = JobMetrics(str(program_path), "fd-counting", ns, "updates")
        m.on_start(processor, store)
        m.on_batch(processor.process(0, _rows(UPDATES)), processor, store)
        m.set_lag({0: 3, 1: 0})
        m.sample()
        self.job_server = serve(LiveSource(m, StateView(reasoner)), "127.0.0.1", 0, TOKEN)
        self.job = f"http://127.0.0.1:{self.job_server.server_address[1]}"
        self.source = StoredSource(
            str(program_path), redis_url, ns, f"{self.job}/api/status", status_token=TOKEN
        )
        self.apart_server = serve(self.source, "127.0.0.1", 0)
        self.apart = f"http://127.0.0.1:{self.apart_server.server_address[1]}"
        self.facts = reasoner.facts()

    def health(self) -> dict[str, str]:
        """The health as the job's page, the page apart, both health checks and the job's gauge tell it."""
        self.metrics.sample()
        gauge = HEALTH_STATES[int(self.metrics.registry.get_sample_value("fluxmat_health_state"))]
        job, apart = _get(f"{self.job}/api/status", TOKEN)[1], _get(f"{self.apart}/api/status")[1]
        return {"job page": f"{job['health']['state']}: {job['health']['reason']}",
                "page apart": f"{apart['health']['state']}: {apart['health']['reason']}",
                "job check": _get(f"{self.job}/healthz")[1].strip(),
                "check apart": _get(f"{self.apart}/healthz")[1].strip(),
                "gauge": gauge}  # fmt: skip

    def close(self) -> None:
        for server in (self.job_server, self.apart_server):
            server.shutdown()
            server.server_close()


@pytest.fixture
def pair(redis_server, tmp_path):
    program = tmp_path / "p.dl"
    program.write_text(PROGRAM, encoding="utf-8")
    p = Pair(redis_server.url, program)
    yield p
    p.close()


def test_the_page_apart_tells_what_the_job_reports(pair):
    job = _get(f"{pair.job}/api/status", TOKEN)[1]
    apart = _get(f"{pair.apart}/api/status")[1]
    assert apart["mode"] == "stored"
    assert job["totals"]["updates"] == 3 and job["totals"]["dead_letters"] == 1
    for part in ("totals", "batches", "dead_letters"):
        assert apart[part] == job[part], part
    assert {**apart["job"], "uptime": 0} == {**job["job"], "uptime": 0}
    assert apart["now"]["lag"] == job["now"]["lag"] == {"0": 3, "1": 0}
    assert apart["now"]["pending"] == job["now"]["pending"]
    assert (
        apart["now"]["facts"] == job["now"]["facts"] == len(pair.facts)
    )  # the committed state: the same
    assert apart["now"]["through"] == job["now"]["through"] == "u3"
    assert apart["health"] == job["health"] and job["health"]["state"] == "degraded"
    assert apart["deltas"] and apart["deltas"][-1]["batch"] == 0
    pair.metrics.set_lag_unknown()  # the job cannot read the oldest update's age: unknown, never 0
    apart = _get(f"{pair.apart}/api/status")[1]
    assert apart["now"]["time_lag"] is None and apart["now"]["time_lag_unknown"] is True


def test_the_health_is_told_one_way_through_degraded_failing_and_a_job_gone(pair):
    told = pair.health()
    state = told.pop("gauge")
    assert state == "degraded" and set(told.values()) == {
        "degraded: 1 dead letter in the last 60 s"
    }, told
    pair.metrics.on_error(RuntimeError("the broker is gone"))
    told = pair.health()
    assert told.pop("gauge") == "failing"
    assert set(told.values()) == {"failing: a batch failed: RuntimeError: the broker is gone"}, told
    pair.job_server.shutdown()  # the job is gone: the page apart says so, and still answers
    pair.job_server.server_close()
    code, status = _get(f"{pair.apart}/api/status")
    assert code == 200 and status["health"]["state"] == "degraded"
    assert (
        "does not answer" in status["health"]["reason"] and pair.job in status["health"]["reason"]
    )
    assert status["now"]["facts"] == len(pair.facts)
    assert set(status["totals"].values()) == {None}  # counted by the job only: unknown, never 0
    assert any("does not answer" in e["message"] for e in status["errors"])
    assert _get(f"{pair.apart}/healthz")[1].startswith("degraded: the job's status at ")


@pytest.mark.skipif(
    not Browser.available(), reason="chromium is not installed (apt-get install chromium)"
)
def test_the_page_apart_shows_the_jobs_health_in_a_real_browser(pair):
    with Browser() as browser:
        page = browser.open(f"{pair.apart}/")
        page.wait_for("document.getElementById('status').textContent === 'live'")
        health = page.wait_for("document.getElementById('health').textContent")
        assert health == "degraded: 1 dead letter in the last 60 s"
        assert page.evaluate("document.getElementById('health').className") == "degraded"
        assert page.evaluate("document.getElementById('updates').textContent") == "3"
        assert page.evaluate("document.getElementById('dead-letters').textContent") == "1"
        assert page.evaluate("document.getElementById('lag').textContent") == "3"
        assert page.console_errors == []


@pytest.mark.skipif(
    not Browser.available(), reason="chromium is not installed (apt-get install chromium)"
)
def test_the_page_apart_without_the_job_shows_its_counters_unknown(pair, redis_server):
    """Without the job's status, what only the job counts reads "unknown", never 0; the state still shows."""
    source = StoredSource(pair.source.program, redis_server.url, pair.source.namespace)
    server = serve(source, "127.0.0.1", 0)
    try:
        with Browser() as browser:
            page = browser.open(f"http://127.0.0.1:{server.server_address[1]}/")
            page.wait_for("document.getElementById('updates').textContent === 'unknown'")
            shown = {i: page.evaluate(f"document.getElementById('{i}').textContent")
                     for i in ("updates", "dead-letters", "failures", "throughput", "facts")}  # fmt: skip
            assert shown == {"updates": "unknown", "dead-letters": "unknown", "failures": "unknown",
                             "throughput": "unknown", "facts": str(len(pair.facts))}  # fmt: skip
            assert page.evaluate("document.getElementById('updates').parentElement.classList.contains('unknown')")
            assert page.console_errors == []
    finally:
        server.shutdown()
        server.server_close()


def test_the_metrics_url_flag_is_gone_with_a_clear_error(tmp_path):
    program = tmp_path / "p.dl"
    program.write_text(PROGRAM, encoding="utf-8")
    user_error(fluxmat("dashboard", program, "--redis", "redis://127.0.0.1:1/0",
                       "--metrics-url", "http://127.0.0.1:9108/metrics"),
               "--metrics-url is gone", "give --status-url http://JOB:DASHBOARD-PORT/api/status")  # fmt: skip
