"""The dashboard shows the program version in force and its changes -- a real headless chromium.

No Spark: a per-batch processor on the arrays core over a real redis-server
feeds the job's metrics (as in `fluxmat run`), whose page is served as the job
serves it; a program message in a batch changes the program. The job's page
and `/api/status` show version 1, then version 2 with the change's lines; the
dashboard apart from the job reads the same from the committed state in Redis.
"""

from __future__ import annotations

import json
import time
import urllib.request
import uuid

import pytest

from fluxmat.connectors.state import RedisStateStore
from fluxmat.engine import EngineOptions, Reasoner
from fluxmat.ops.dashboard import LiveSource, StoredSource, serve
from fluxmat.ops.inspect import StateView
from fluxmat.ops.metrics import JobMetrics
from fluxmat.stream.batch import BatchProcessor
from tests.support.browser import Browser
from tests.support.shared import NullPublisher

PROGRAM = "path(X, Y) :- edge(X, Y).\n"
CLOSURE = "path(X, Z) :- path(X, Y), edge(Y, Z)."
BATCH = [{"add": [["edge", "b", "c"]], "id": "u1"}, {"program": {"add": CLOSURE}, "id": "v2"},
         {"add": [["edge", "c", "d"]], "id": "u2"}]  # fmt: skip
VERSION = "document.getElementById('program-version').textContent"
HISTORY = "document.getElementById('program-history').textContent"


def _rows(items) -> list[tuple]:
    values = [json.dumps(item) for item in items]
    return [(0, i, None, v, int(time.time() * 1000), True, len(v)) for i, v in enumerate(values)]


def _program(base: str) -> dict:
    with urllib.request.urlopen(f"{base}/api/status", timeout=10) as resp:
        return json.loads(resp.read())["now"]["program"]


@pytest.fixture
def job(redis_server, tmp_path):
    """The job's side (processor, metrics, its page) and the page apart, over one namespace in Redis."""
    program = tmp_path / "p.dl"
    program.write_text(PROGRAM, encoding="utf-8")
    ns = f"program-page-{uuid.uuid4().hex[:8]}"
    reasoner = Reasoner.from_file(program, options=EngineOptions("fd-counting", core="arrays"))
    store = RedisStateStore(redis_server.url, ns)
    processor = BatchProcessor(reasoner, store, NullPublisher())
    processor.start([("edge", "a", "b")])
    metrics = JobMetrics(str(program), "fd-counting", ns, "updates")
    metrics.on_start(processor, store)
    servers = [serve(LiveSource(metrics, StateView(reasoner)), "127.0.0.1", 0),
               serve(StoredSource(str(program), redis_server.url, ns), "127.0.0.1", 0)]  # fmt: skip
    bases = [f"http://127.0.0.1:{s.server_address[1]}" for s in servers]

    def batch(b: int, items) -> None:
        metrics.on_batch(processor.process(b, _rows(items)), processor, store)

    yield batch, bases
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.mark.skipif(
    not Browser.available(), reason="chromium is not installed (apt-get install chromium)"
)
def test_after_a_program_message_the_page_shows_the_new_version_and_its_change(job):
    batch, (live, apart) = job
    batch(0, [{"add": [["edge", "b", "c"]], "id": "u0"}])
    assert _program(live) == _program(apart) == {"version": 1, "history": []}
    with Browser() as browser:
        page = browser.open(f"{live}/")
        assert page.wait_for(f"{VERSION} === 'program v1' && {VERSION}") == "program v1"
        assert (
            page.evaluate("getComputedStyle(document.getElementById('no-program-changes')).display")
            == "block"
        )
        batch(1, BATCH)  # the program message, at its place in the batch
        assert page.wait_for(f"{VERSION} === 'program v2' && {VERSION}") == "program v2"
        history = page.wait_for(f"{HISTORY}.includes('v2') && {HISTORY}")
        assert CLOSURE.rstrip(".") in history, history
        assert page.console_errors == []
        apart_page = browser.open(
            f"{apart}/"
        )  # the dashboard apart: the program committed with the state
        assert apart_page.wait_for(f"{VERSION} === 'program v2' && {VERSION}") == "program v2"
    shown = _program(live)
    assert shown["version"] == 2 and [c["version"] for c in shown["history"]] == [2]
    assert _program(apart) == shown
