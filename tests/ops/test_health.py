"""Health is a state with a reason; per-update latency; freshness gauges."""

import time
import urllib.error
import urllib.request

import pytest
from prometheus_client import generate_latest

from fluxmat.engine import Reasoner
from fluxmat.ops.dashboard import LiveSource, serve
from fluxmat.ops.inspect import StateView
from fluxmat.ops.metrics import JobMetrics
from fluxmat.stream.batch import BatchOutcome
from fluxmat.stream.verify import Verification
from tests.support.shared import metric


def _outcome(batch, dead=0, updates=2, ts=None):
    o = BatchOutcome(batch, updates=updates, dead=dead)
    o.timestamps_ms = list(ts or [])
    o.oldest_timestamp_ms = min(o.timestamps_ms) if o.timestamps_ms else None
    return o


class _Processor:
    def __init__(self):
        self.reasoner = Reasoner.from_text("p(X) :- q(X).", "fd-counting")
        self.reasoner.load([("q", 1)])


class _Store:
    def size(self):
        return 0

    def memory_bytes(self):
        return None

    maxmemory_bytes = namespace_bytes = cluster_problem = memory_bytes

    def memory(self):
        return {}, 0  # no Redis node (as MemoryStateStore)

    def last_batch(self):
        return 0


def test_health_moves_from_healthy_to_degraded_to_failing_and_back():
    m = JobMetrics("p.dl", "fd-counting", "default", "updates")
    proc, store = _Processor(), _Store()
    m.on_batch(_outcome(0), proc, store)
    m.sample()
    assert m.health() == ("healthy", "idle: nothing to do") and metric(m, "fluxmat_health_state") == 0
    m.on_batch(_outcome(1, dead=2), proc, store)
    m.sample()
    state, reason = m.health()
    assert (state, reason) == ("degraded", "2 dead letters in the last 60 s") and metric(m, "fluxmat_health_state") == 1
    m.on_error(RuntimeError("Redis went away"))
    m.sample()
    assert m.health() == ("failing", "a batch failed: RuntimeError: Redis went away")
    assert metric(m, "fluxmat_health_state") == 2 and metric(m, "fluxmat_batch_failures_total") == 1
    assert m.status()["health"]["state"] == "failing"
    m.on_batch(_outcome(2), proc, store)
    assert m.health()[0] == "degraded"  # the dead letters are still recent
    m.on_verified(Verification(3, False, 10, missing=1, sample=["-p(1)"]))
    assert m.health() == ("failing", "the self-check of batch 3 found a different materialisation")
    m.on_verified(Verification(4, True, 10))
    assert m.health()[0] == "degraded"


def test_latency_is_observed_once_per_update_and_the_consistency_point_has_an_age():
    m = JobMetrics("p.dl", "fd-counting", "default", "updates")
    now_ms = int(time.time() * 1000)
    m.on_batch(_outcome(0, updates=3, ts=[now_ms - 3000, now_ms - 2000, now_ms - 1000]), _Processor(), _Store())
    assert metric(m, "fluxmat_update_latency_seconds_count") == 3
    assert 5.5 <= metric(m, "fluxmat_update_latency_seconds_sum") <= 7.0
    m.state.now["last_commit"] -= 30
    m.sample()
    assert 29 <= metric(m, "fluxmat_consistency_point_age_seconds") <= 40
    assert metric(m, "fluxmat_idle") == 1
    m.set_lag({"0": 5})
    m.sample()
    assert metric(m, "fluxmat_idle") == 0


def test_healthz_answers_503_with_the_reason_when_failing():
    m = JobMetrics("p.dl", "fd-counting", "default", "updates")
    server = serve(LiveSource(m, StateView(_Processor().reasoner)), "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.server_address[1]}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            assert resp.status == 200 and resp.read() == b"healthy: idle: nothing to do\n"
        m.on_error(RuntimeError("boom"))
        with pytest.raises(urllib.error.HTTPError) as exc:
            urllib.request.urlopen(url, timeout=10)
        assert exc.value.code == 503 and exc.value.read() == b"failing: a batch failed: RuntimeError: boom\n"
    finally:
        server.shutdown()
        server.server_close()


def test_a_growing_lag_degrades_and_a_stable_one_does_not():
    m = JobMetrics("p.dl", "fd-counting", "default", "updates")
    now_ms = int(time.time() * 1000)  # the oldest waiting update's timestamp was read (else: unknown)
    for lag in (3,) * 12:
        m.set_lag({"0": lag}, now_ms)
        m.sample()
    assert m.health() == ("healthy", "applying updates")
    for lag in range(4, 16):
        m.set_lag({"0": lag}, now_ms)
        m.sample()
    state, reason = m.health()
    assert state == "degraded" and reason.startswith("the consumer lag grew from 3 to 15 messages")


def test_spark_phases_are_kept_beside_ours_with_a_bounded_label():
    m = JobMetrics("p.dl", "fd-counting", "default", "updates")
    m.on_spark_batch({"triggerExecution": 0.8, "addBatch": 0.5, "somethingNew": 1.0})
    text = generate_latest(m.registry).decode()
    assert 'fluxmat_spark_phase_seconds_sum{phase="addBatch"} 0.5' in text
    assert 'fluxmat_spark_phase_seconds_count{phase="triggerExecution"} 1.0' in text
    assert "somethingNew" not in text


def test_a_batch_reports_where_its_time_went():
    """Issue 16: BatchOutcome.phases (decode, engine, export, commit, publish) -> fluxmat_batch_phase_seconds."""
    import json

    from fluxmat.connectors.state import MemoryStateStore
    from fluxmat.stream.batch import BatchProcessor
    from tests.support.shared import NullPublisher

    p = BatchProcessor(Reasoner.from_text("p(X) :- q(X).", "fd-counting"), MemoryStateStore(), NullPublisher())
    p.start([])
    msg = json.dumps({"add": [["q", 1], ["q", 2]]})
    outcome = p.process(0, [(0, 0, None, msg, None, True, len(msg))])
    assert list(outcome.phases) == ["decode", "engine", "poll", "deltas", "export", "commit", "publish"]
    assert all(v >= 0 for v in outcome.phases.values()) and sum(outcome.phases.values()) <= outcome.seconds
    m = JobMetrics("p.dl", "fd-counting", "default", "updates")
    m.on_batch(outcome, p, MemoryStateStore())
    text = generate_latest(m.registry).decode()
    assert 'fluxmat_batch_phase_seconds_count{phase="engine"} 1.0' in text
