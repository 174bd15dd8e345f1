"""The page stays readable on real data -- a real headless chromium at 1,280 px with long IRIs.

No Spark: a per-batch processor feeds the job's metrics (as in `fluxmat run`)
with updates whose IRIs are long and mostly outside the program's prefixes,
and the history has an idle pause. The page must keep every tile, chart and
card inside the viewport's width, show IRIs with the prefixes (elided, the full
IRI in a title), link each delta fact to the update that changed it, and draw
charts over one time window with a time axis, unit-labelled y ticks, legends
and a gap where nothing was sampled.
"""

import json
import time

import pytest

from fluxmat.connectors.state import MemoryStateStore
from fluxmat.engine import EngineOptions, Reasoner
from fluxmat.ops.dashboard import LiveSource, serve
from fluxmat.ops.inspect import StateView
from fluxmat.ops.metrics import JobMetrics, history_point
from fluxmat.stream.batch import BatchProcessor
from tests.support.browser import Browser
from tests.support.shared import NullPublisher

pytestmark = pytest.mark.skipif(not Browser.available(), reason="chromium is not installed (apt-get install chromium)")

NS = "http://example.org/a/rather/long/namespace/for/testing/the/layout#"
PROGRAM = f"""@prefix ex: <{NS}> .
ex:knows[?X, ?Y] :- ex:met[?X, ?Y] .
ex:knows[?Y, ?X] :- ex:knows[?X, ?Y] .
"""
LONG = "http://people.unprefixed.example.com/registry/of/people/with/very/long/identifiers/person-{:020d}"
UPDATE_ID = "urn:producer.example.com:updates:" + "0123456789abcdef" * 6  # ids are the producer's: any length


def _row(offset: int, update: dict) -> tuple:
    value = json.dumps(update)
    return (0, offset, None, value, int(time.time() * 1000) - 2000, True, len(value))


@pytest.fixture
def page_server():
    reasoner = Reasoner.from_text(PROGRAM, "fd-counting", options=EngineOptions(core="objects"))  # overlapping causes
    processor = BatchProcessor(reasoner, MemoryStateStore(), NullPublisher())
    processor.start([])
    m = JobMetrics("layout.dl", "fd-counting", "a-namespace-with-a-rather-long-name-for-the-header", "updates")
    m.on_start(processor, processor.store)
    now = time.time()
    for b in range(3):  # three batches of long IRIs, the last with two overlapping updates
        ups = [{"id": UPDATE_ID if (b, j) == (2, 1) else f"u{b}-{j}",
                "add": [[f"<{NS}met>", f"<{LONG.format(10 * b + j)}>", f"<{NS}bob>"]]}
               for j in range(1 + (b == 2))]  # fmt: skip
        bad = {"add": [[f"<{NS}met>", "x" * 300]]}  # a dead letter (wrong arity) with a long reason, first
        rows = [_row(0, bad)] + [_row(1 + j, u) for j, u in enumerate(ups)]
        m.on_batch(processor.process(b, rows), processor, processor.store)
    point = history_point(m.state.totals, m.state.now)
    m.state.history.clear()  # 2 minutes sampled, a 90 s pause (the job was down), then 30 s more
    m.state.history.extend({**point, "t": now - 240 + i} for i in range(120))
    m.state.history.extend({**point, "t": now - 30 + i} for i in range(31))
    server = serve(LiveSource(m, StateView(reasoner)), "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


BOUNDS = """(() => {
  const W = document.documentElement.clientWidth;
  const out = [...document.querySelectorAll('.tile, .card, canvas, table, pre, header')].filter((e) => {
    const r = e.getBoundingClientRect(); return r.left < 0 || r.right > W + 0.5; }).map((e) => e.id || e.className);
  return {W, scroll: document.documentElement.scrollWidth, outside: out,
          tiles: document.querySelectorAll('.tile').length, charts: document.querySelectorAll('canvas').length};
})()"""


def test_the_page_fits_1280_px_with_long_iris_and_its_charts_can_be_read(page_server, artifacts_dir):
    with Browser(width=1280, height=900) as browser:
        page = browser.open(page_server + "/")
        page.wait_for("document.querySelectorAll('#deltas tr').length === 3")
        page.wait_for("document.getElementById('chart-facts').dataset.segments")
        # a long IRI was asked about too: the why card holds it
        page.fill("#why-fact", f"ex:met(<{LONG.format(0)}>, ex:bob)")
        page.click("#why-run")
        page.wait_for("!!document.querySelector('#why-result .iri')")
        shot = page.screenshot(artifacts_dir / "dashboard-1280.png")
        print(f"dashboard screenshot at 1280 px: {shot}")
        box = page.evaluate(BOUNDS)
        assert box["W"] >= 1200 and box["tiles"] == 14 and box["charts"] == 6
        assert box["outside"] == [] and box["scroll"] <= box["W"], box

        # IRIs: the program's prefix where it applies, else elided; the full IRI in the title and the link
        shown = page.evaluate("[...document.querySelectorAll('#deltas .iri')].map((e) => [e.textContent, e.title])")
        elided = [(text, title) for text, title in shown if title == LONG.format(20)]
        assert elided and all("…" in text and len(text) < 60 for text, _ in elided)
        deltas = page.evaluate("document.getElementById('deltas').textContent")
        assert "ex:bob" in deltas and NS not in deltas  # the printer's prefixes, and the page's
        rules = page.evaluate("[...document.querySelectorAll('#rules .iri')].map((e) => [e.textContent, e.title])")
        assert ["ex:knows", NS + "knows"] in rules  # rule text comes with full IRIs: the page applies the prefix
        facts = page.evaluate("[...document.querySelectorAll('#deltas a.why-link')].map((a) => a.dataset.fact)")
        assert f"ex:met(<{LONG.format(20)}>, ex:bob)" in facts  # what "why" takes: the whole fact

        # each fact names the update whose work changed it
        causes = page.evaluate("[...document.querySelectorAll('#deltas .by')].map((e) => [e.textContent, e.title])")
        assert ("← u0-0", "u0-0: the batch's only update") in [tuple(c) for c in causes]
        overlapped = [c for c in causes if c[0] == "← u2-0" or c[1].startswith(UPDATE_ID)]
        assert len(overlapped) == 6 and all("2 updates overlap" in title for _, title in overlapped)
        assert all(len(text) < 40 for text, _ in overlapped)  # a long update id is elided, whole in the title

        # charts: one window, a time axis, y ticks with units, legends, a gap for the pause
        charts = page.evaluate("[...document.querySelectorAll('canvas')].map((c) => ({id: c.id, ...c.dataset, "
                               "legend: c.previousElementSibling.textContent}))")  # fmt: skip
        assert len({(c["x0"], c["x1"]) for c in charts}) == 1
        by_id = {c["id"]: c for c in charts}
        for c in charts:
            assert json.loads(c["xTicks"]) and all(":" in t for t in json.loads(c["xTicks"])), c
            assert len(json.loads(c["yTicks"])) >= 2 and c["legend"], c
        assert all(t.endswith((" s", " ms")) for t in json.loads(by_id["chart-latency"]["yTicks"]))
        assert all(t.endswith(" msgs") for t in json.loads(by_id["chart-lag"]["yTicks"]))
        assert all(t.endswith("/s") for t in json.loads(by_id["chart-throughput"]["yTicks"]))
        assert json.loads(by_id["chart-facts"]["segments"]) == [2]  # 120 s, the pause, 30 s: two lines
        assert "batch duration" in by_id["chart-latency"]["legend"]
        assert page.console_errors == []
