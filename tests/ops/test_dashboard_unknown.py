"""A value the page does not know reads "unknown" on a hatched tile, why in its title: never "–", 0 or a stale number.

A real headless chromium against the job's page (`serve(LiveSource)`), no Spark:
a per-batch processor feeds the job's metrics as in `fluxmat run`. Unknown are:
the time lag when updates wait but the oldest one's timestamp cannot be read;
the consumer lag (and the time lag) when the lag lookup fails; and every tile
once the job stops answering (the page kept showing the last numbers as if
they were current).
"""

import json
import time

import pytest

from fluxmat.connectors.state import MemoryStateStore
from fluxmat.engine import Reasoner
from fluxmat.ops.dashboard import LiveSource, serve
from fluxmat.ops.inspect import StateView
from fluxmat.ops.metrics import JobMetrics
from fluxmat.stream.batch import BatchProcessor
from tests.support.browser import Browser
from tests.support.shared import NullPublisher

pytestmark = pytest.mark.skipif(not Browser.available(), reason="chromium is not installed (apt-get install chromium)")

TILES = "[...document.querySelectorAll('.tile')].map((t) => [t.querySelector('.v').id, t.querySelector('.v').textContent, t.classList.contains('unknown'), t.querySelector('.v').title])"


@pytest.fixture
def job():
    reasoner = Reasoner.from_text("path(X, Y) :- edge(X, Y).\npath(X, Z) :- path(X, Y), edge(Y, Z).\n", "fd-counting")
    processor = BatchProcessor(reasoner, MemoryStateStore(), NullPublisher())
    processor.start([])
    m = JobMetrics("path.dl", "fd-counting", "ns", "updates")
    m.on_start(processor, processor.store)
    value = json.dumps({"id": "u1", "add": [["edge", "a", "b"], ["edge", "b", "c"]]})
    m.on_batch(processor.process(0, [(0, 0, None, value, int(time.time() * 1000), True, len(value))]),
               processor, processor.store)  # fmt: skip
    server = serve(LiveSource(m, StateView(reasoner)), "127.0.0.1", 0)
    try:
        yield m, server, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def tiles(page) -> dict[str, tuple[str, bool, str]]:
    return {i: (text, hatched, why) for i, text, hatched, why in page.evaluate(TILES)}


def test_unknown_values_read_unknown_on_a_hatched_tile(job):
    m, server, url = job
    with Browser(width=1280, height=900) as browser:
        page = browser.open(url + "/")
        page.wait_for("document.getElementById('facts').textContent === '5'")
        assert not any(hatched for _, hatched, _ in tiles(page).values())

        m.set_lag({"0": 5}, None)  # updates wait; the oldest one's timestamp is not known
        page.wait_for("document.getElementById('time-lag').textContent === 'unknown'")
        shown = tiles(page)
        assert shown["time-lag"][1] and "timestamp" in shown["time-lag"][2]
        assert shown["lag"] == ("5", False, "")  # the lag itself is known

        m.set_lag_unknown()  # the lookup failed: the last lag is not the lag now
        page.wait_for("document.getElementById('lag').textContent === 'unknown'")
        assert tiles(page)["lag"][1] and "lag lookup" in tiles(page)["lag"][2]

        m.set_lag({"0": 0}, None)  # it answers again: nothing waits
        page.wait_for("document.getElementById('time-lag').textContent === 'idle'")
        assert [i for i, (_, hatched, _) in tiles(page).items() if hatched] == []
        assert tiles(page)["lag"] == ("0", False, "")
        assert page.console_errors == []

        server.shutdown()  # the job stops answering: no tile keeps its last number
        server.server_close()
        page.wait_for("document.getElementById('status').className === 'down'")
        page.wait_for("document.getElementById('facts').textContent === 'unknown'")
        shown = tiles(page)
        assert len(shown) == 14 and all(text == "unknown" and hatched for text, hatched, _ in shown.values()), shown
        assert all(why.startswith("no answer from the job") for _, _, why in shown.values())
