"""Time lag in seconds -- the age of the oldest update not yet reflected, from Kafka timestamps.

The source reads, for each partition with unread records, the timestamp of the
first record at or after the consumed offset (a real tansu broker); the job's
metrics turn the oldest of them into `fluxmat_time_lag_seconds`, 0 when
nothing waits, so idleness never looks like being behind.
"""

import math
import time

import pytest
from kafka import KafkaProducer

from fluxmat.connectors.broker import EmbeddedBroker, ensure_topics
from fluxmat.connectors.kafka_source import KafkaStreamReader
from fluxmat.ops.metrics import JobMetrics
from fluxmat.stream.observe import sample_lag
from tests.support.shared import metric


def test_the_time_lag_is_the_age_of_the_oldest_waiting_update_and_zero_when_nothing_waits():
    m = JobMetrics("p.dl", "fd-counting", "default", "updates")
    now_ms = int(time.time() * 1000)
    m.set_lag({"0": 3, "1": 0}, now_ms - 42_000)
    assert 41.5 <= metric(m, "fluxmat_time_lag_seconds") <= 44
    m.state.oldest_ms -= 10_000  # the job stalls: the same update waits and grows older with every sample
    m.sample()
    assert 51.5 <= metric(m, "fluxmat_time_lag_seconds") <= 54
    assert 51.5 <= m.status()["now"]["time_lag"] <= 54 and m.status()["history"][-1]["time_lag"] >= 51.5
    m.set_lag({"0": 0, "1": 0}, now_ms - 42_000)  # drained: a stale timestamp does not count
    m.sample()
    assert metric(m, "fluxmat_time_lag_seconds") == 0 and metric(m, "fluxmat_idle") == 1
    m.set_lag({"0": 2}, None)  # waiting, but its timestamp could not be read: unknown, never 0
    assert math.isnan(metric(m, "fluxmat_time_lag_seconds"))
    assert m.status()["now"]["time_lag"] is None and m.status()["now"]["time_lag_unknown"] is True
    assert "time lag unknown" in m.health()[1]
    m.set_lag({"0": 2}, now_ms - 5_000)  # the lookup answers again
    assert 4.5 <= metric(m, "fluxmat_time_lag_seconds") <= 7 and not m.status()["now"]["time_lag_unknown"]


def test_the_source_reads_the_timestamp_of_the_first_unread_record_of_each_partition(broker):
    bs, topic = broker.bootstrap, "timelag"
    ensure_topics(bs, {topic: 2})
    base = int(time.time() * 1000) - 600_000
    producer = KafkaProducer(bootstrap_servers=bs, acks="all")
    try:  # partition 0: offsets 0..3 produced 10 min, 9, 8, 7 min ago; partition 1: offset 0 at 5 min ago
        for i in range(4):
            producer.send(topic, partition=0, value=b"{}", timestamp_ms=base + i * 60_000)
        producer.send(topic, partition=1, value=b"{}", timestamp_ms=base + 300_000)
        producer.flush()
    finally:
        producer.close()
    reader = KafkaStreamReader({"bootstrap": bs, "topic": topic})
    try:
        high, heads = reader.backlog({"0": 2, "1": 0})
        assert high == {"0": 4, "1": 1}
        assert heads == {"0": base + 120_000, "1": base + 300_000}  # offset 2 of partition 0, offset 0 of 1
        high, heads = reader.backlog({"0": 4, "1": 1})  # everything consumed: nothing waits
        assert high == {"0": 4, "1": 1} and heads == {}
        assert reader.high_watermarks({"0": 1}) == {"0": 4, "1": 1}
    finally:
        reader.stop()
    m = JobMetrics("p.dl", "fd-counting", "default", topic)
    high, heads = KafkaStreamReader({"bootstrap": bs, "topic": topic}).backlog({"0": 3, "1": 1})
    m.set_lag({p: h - {"0": 3, "1": 1}[p] for p, h in high.items()}, min(heads.values(), default=None))
    assert metric(m, "fluxmat_time_lag_seconds") == pytest.approx(time.time() - (base + 180_000) / 1000, abs=3)


def test_a_lag_lookup_that_does_not_answer_reads_unknown_never_zero(tmp_path):
    """A real broker answers, then stops: the job's lag sampler reports the time lag as unknown.

    0 would read "nothing waits" on the dashboard and in alerts while updates wait unseen.
    """
    broker = EmbeddedBroker(log_path=tmp_path / "tansu.log").start()
    topic = "lagunknown"
    try:
        ensure_topics(broker.bootstrap, {topic: 1})
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
        producer.send(topic, partition=0, value=b"{}", timestamp_ms=int(time.time() * 1000) - 60_000)
        producer.flush()
        producer.close()
        reader = KafkaStreamReader({"bootstrap": broker.bootstrap, "topic": topic})
        m = JobMetrics("p.dl", "fd-counting", "default", topic)
        assert sample_lag(reader, {"0": 0}, m) is None
        assert 59 <= metric(m, "fluxmat_time_lag_seconds") <= 70
        broker.stop()
        why = sample_lag(reader, {"0": 0}, m)
        reader.stop()
    finally:
        broker.stop()
    assert why
    assert math.isnan(metric(m, "fluxmat_time_lag_seconds"))
    m.sample()  # the sampler's once-a-second refresh keeps it unknown
    assert math.isnan(metric(m, "fluxmat_time_lag_seconds"))
    now = m.status()["now"]
    assert now["time_lag"] is None and now["time_lag_unknown"] is True
    assert m.status()["history"][-1]["time_lag"] is None
    state, reason = m.health()
    assert "time lag unknown" in reason, (state, reason)

