"""Work in flight for too long shows as degraded, naming its phase, whatever the phase stalls on.

The job's in-flight tracker (stream.inflight) records each micro-batch's start
and phase; the health check (ops.metrics) turns a batch older than
`--stall-seconds` into `degraded: committing to Redis for 23 s (...)`, and
`fluxmat_batch_in_flight_seconds` / `fluxmat_batch_in_flight_phase{phase}` show
it to Prometheus. Unit tests with a hand-moved clock; a real redis-server paused
under a per-batch processor; the live job under `CLIENT PAUSE` is in
tests/ops/test_ops_redis_faults.py.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
import redis
from prometheus_client import generate_latest

from fluxmat.connectors.state import MemoryStateStore, RedisStateStore
from fluxmat.engine import Reasoner
from fluxmat.engine.limits import Limits
from fluxmat.ops.metrics import JobMetrics
from fluxmat.stream.batch import BatchProcessor
from fluxmat.stream.inflight import PHASES, InFlight
from tests.support.servers import RedisServer
from tests.support.shared import NullPublisher, metric

PROGRAM = "path(X, Y) :- edge(X, Y).\npath(X, Z) :- path(X, Y), edge(Y, Z).\n"


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def watched() -> tuple[Clock, InFlight, JobMetrics]:
    """A job's metrics watching an in-flight tracker on a hand-moved clock (threshold 5 s)."""
    clock = Clock()
    tracker = InFlight(clock)
    m = JobMetrics("p.dl", "fd-counting", "default", "updates")
    m.watch(tracker, 5.0)
    return clock, tracker, m


def phase_series(m: JobMetrics) -> dict[str, float]:
    out = {}
    for line in generate_latest(m.registry).decode().splitlines():
        if line.startswith("fluxmat_batch_in_flight_phase{"):
            out[line.split('phase="')[1].split('"')[0]] = float(line.split()[-1])
    return out


def row(offset: int, update: dict) -> tuple:
    value = json.dumps(update)
    return (0, offset, None, value, int(time.time() * 1000), True, len(value))


def test_the_tracker_knows_the_batch_its_phase_and_their_ages():
    clock = Clock()
    t = InFlight(clock)
    assert t.now() is None
    t.enter("commit")  # nothing in flight: ignored
    assert t.now() is None
    t.start(7, "collect")
    clock.t += 2
    t.enter("commit")
    clock.t += 21.4
    work = t.now()
    assert (work.batch, work.phase, work.seconds, work.phase_seconds) == (7, "commit", pytest.approx(23.4),
                                                                           pytest.approx(21.4))  # fmt: skip
    assert work.text == "committing to Redis for 21 s (batch 7, in flight for 23 s)"
    t.done()
    assert t.now() is None
    t.start(None, "start")
    assert t.now().text.startswith("restoring the state from Redis at start for 0 s (starting")


def test_a_batch_in_flight_past_the_threshold_degrades_the_health_then_recovers():
    clock, t, m = watched()
    m.sample()
    assert m.health() == ("healthy", "idle: nothing to do") and metric(m, "fluxmat_batch_in_flight_seconds") == 0
    t.start(3, "engine")
    clock.t += 4
    assert m.health()[0] == "healthy"  # a batch of 4 s is not a stall
    t.enter("commit")
    clock.t += 19
    m.sample()
    assert m.health() == ("degraded", "committing to Redis for 19 s (batch 3, in flight for 23 s)")
    assert metric(m, "fluxmat_health_state") == 1 and metric(m, "fluxmat_batch_in_flight_seconds") == 23
    assert phase_series(m) == {p: float(p == "commit") for p in PHASES}  # every phase has a series
    shown = m.status()
    assert shown["health"]["state"] == "degraded" and shown["now"]["in_flight"]["stalled"] is True
    assert shown["now"]["in_flight"]["phase"] == "commit"
    t.enter("publish")
    clock.t += 1
    assert m.health() == ("degraded", "publishing deltas for 1 s (batch 3, in flight for 24 s)")
    t.done()
    m.sample()
    assert m.health()[0] == "healthy" and metric(m, "fluxmat_batch_in_flight_seconds") == 0
    assert set(phase_series(m).values()) == {0.0} and m.status()["now"]["in_flight"] is None


def test_a_stall_during_a_weakened_cluster_names_both():
    """A failover stalls the batch: the reason names the stall and the cluster's problem (its likely cause)."""
    clock, t, m = watched()
    m.set_redis_problem("Redis Cluster node 127.0.0.1:7001 failing")
    assert m.health() == ("degraded", "Redis Cluster node 127.0.0.1:7001 failing")
    t.start(2, "keys")
    clock.t += 6
    state, reason = m.health()
    assert state == "degraded" and reason.endswith("(batch 2, in flight for 6 s); Redis Cluster node 127.0.0.1:7001 failing")
    m.set_redis_problem(None)
    assert m.health()[1].endswith("in flight for 6 s)")


def test_failing_outranks_a_stall():
    clock, t, m = watched()
    t.start(1, "commit")
    clock.t += 60
    m.on_error(RuntimeError("Redis went away"))
    assert m.health()[0] == "failing"


def test_the_processor_reports_each_phase_as_it_enters_it():
    seen: list[str] = []
    processor = BatchProcessor(Reasoner.from_text(PROGRAM, "fd-counting"), MemoryStateStore(), NullPublisher(),
                               on_phase=seen.append)  # fmt: skip
    processor.start([("edge", "a", "b")])
    processor.process(0, [row(0, {"add": [["edge", "b", "c"]]})])
    assert seen == ["check", "decode", "engine", "export", "commit", "publish"]
    seen.clear()
    processor.process(0, [row(0, {"add": [["edge", "b", "c"]]})])  # a replay
    assert seen == ["check", "publish"]
    assert set(seen) <= set(PHASES)


def test_a_quarantine_reports_its_restore_from_the_store():
    seen: list[str] = []
    reasoner = Reasoner.from_text(PROGRAM, "fd-counting")
    processor = BatchProcessor(reasoner, MemoryStateStore(), NullPublisher(), on_phase=seen.append,
                               limits=Limits.of(50, None))  # fmt: skip
    processor.start([])
    chain = [["edge", f"n{i}", f"n{i + 1}"] for i in range(40)]  # its closure is far over 50 units
    outcome = processor.process(0, [row(0, {"add": chain}), row(1, {"add": [["edge", "x", "y"]]})])
    assert outcome.quarantined == 1
    assert "restore" in seen and seen[-2:] == ["commit", "publish"]


@pytest.fixture
def paused_redis(tmp_path):
    server = RedisServer(tmp_path / "redis").start()
    try:
        yield server
    finally:
        server.stop()


def test_a_redis_stall_in_the_commit_shows_as_degraded_naming_the_commit(paused_redis):
    """A real redis-server whose writes are paused (`CLIENT PAUSE ... WRITE`), default client timeouts."""
    tracker = InFlight()
    m = JobMetrics("p.dl", "fd-counting", "stall", "updates")
    m.watch(tracker, 1.0)
    store = RedisStateStore(paused_redis.url, "stall")
    processor = BatchProcessor(Reasoner.from_text(PROGRAM, "fd-counting"), store, NullPublisher(),
                               on_phase=tracker.enter)  # fmt: skip
    processor.start([("edge", "a", "b")])
    admin = redis.Redis.from_url(paused_redis.url)
    admin.execute_command("CLIENT", "PAUSE", "4000", "WRITE")  # reads answer, the commit waits 4 s
    result = {}

    def batch():
        tracker.start(0, "collect")
        try:
            result["outcome"] = processor.process(0, [row(0, {"add": [["edge", "b", "c"]]})])
        finally:
            tracker.done()

    thread = threading.Thread(target=batch)
    thread.start()
    seen = []
    while thread.is_alive():
        seen.append(m.health())
        time.sleep(0.1)
    thread.join()
    admin.close()
    stalled = [reason for state, reason in seen if state == "degraded"]
    assert stalled and stalled[-1].startswith("committing to Redis for "), seen[-3:]
    assert "(batch 0, in flight for " in stalled[-1]
    assert result["outcome"].added == 3  # committed once the pause ended: edge(b, c), path(b, c), path(a, c)
    assert m.health()[0] == "healthy"
    assert RedisStateStore(paused_redis.url, "stall").last_batch() == 0
    store.close()


def test_the_stall_seconds_flag_has_a_default_an_environment_fallback_and_a_check(tmp_path, monkeypatch):
    from fluxmat.engine import FluxmatError
    from fluxmat.ops.cli import build_parser
    from fluxmat.ops.stream_cli import job_config

    base = ["run", "p.dl", "--bootstrap-servers", "x:1", "--updates-topic", "u", "--deltas-topic", "d",
            "--redis", "memory://", "--checkpoint", str(tmp_path)]  # fmt: skip
    assert job_config(build_parser().parse_args(base)).stall_seconds == 5.0
    assert job_config(build_parser().parse_args([*base, "--stall-seconds", "12.5"])).stall_seconds == 12.5
    monkeypatch.setenv("FLUXMAT_STALL_SECONDS", "8")
    assert job_config(build_parser().parse_args(base)).stall_seconds == 8.0
    for value in ("0", "-3", "nan"):
        with pytest.raises(FluxmatError, match="--stall-seconds must be more than 0 seconds"):
            job_config(build_parser().parse_args([*base, "--stall-seconds", value]))
    with pytest.raises(FluxmatError, match="--stall-seconds expects a number of seconds, got 'soon'"):
        job_config(build_parser().parse_args([*base, "--stall-seconds", "soon"]))


@pytest.mark.integration  # a real headless chromium
def test_the_page_shows_the_batch_in_flight_and_its_phase():
    """A real headless chromium: the tile shows the batch's age (⚠ past the threshold), its caption the phase."""
    from fluxmat.ops.dashboard import LiveSource, serve
    from fluxmat.ops.inspect import StateView
    from tests.support.browser import Browser

    if not Browser.available():
        pytest.skip("chromium is not installed (apt-get install chromium)")
    clock, tracker, m = watched()
    tracker.start(9, "engine")
    clock.t += 3
    tracker.enter("publish")
    clock.t += 20
    server = serve(LiveSource(m, StateView(Reasoner.from_text(PROGRAM, "fd-counting"))), "127.0.0.1", 0)
    try:
        with Browser() as browser:
            page = browser.open(f"http://127.0.0.1:{server.server_address[1]}/")
            page.wait_for("document.getElementById('in-flight').textContent.includes('⚠')")
            assert page.text("#in-flight") == "23 s ⚠"
            assert page.text("#in-flight-k") == "batch in flight: publishing deltas for 20 s (batch 9, in flight for 23 s)"
            assert page.text("#health").startswith("degraded: publishing deltas for 20 s")
            tracker.done()
            page.wait_for("document.getElementById('in-flight').textContent === 'idle'")
            assert page.text("#in-flight-k") == "batch in flight"
    finally:
        server.shutdown()
        server.server_close()
