"""Kafka connectors against a real tansu broker and a real local Spark.

One broker and one SparkSession per module keep the runtime small.
"""

import json
import logging
import os
import pickle
import sys
import threading
import time

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

from kafka import KafkaProducer  # noqa: E402
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows  # noqa: E402

from fluxmat.connectors import kafka_source  # noqa: E402
from fluxmat.connectors.broker import (  # noqa: E402
    EmbeddedBroker,
    _free_port,
    check_broker,
    ensure_topics,
    tansu_path,
)
from fluxmat.connectors.kafka_sink import LOG_RAW_CHARS, KafkaPublisher  # noqa: E402
from fluxmat.connectors.kafka_source import (  # noqa: E402
    KafkaInputPartition,
    KafkaSourceError,
    KafkaStreamReader,
    fair_limit,
    register,
)
from tests.support.messages import read_deltas  # noqa: E402

_topic_counter = iter(range(10_000))


def fresh_topic(bs, partitions=1, prefix="t"):
    name = f"{prefix}{next(_topic_counter)}"
    ensure_topics(bs, {name: partitions})
    return name


def produce(bs, topic, records):
    """records: (partition, key, value) with str/None key and value."""
    producer = KafkaProducer(bootstrap_servers=bs, acks="all")
    try:
        for part, key, value in records:
            producer.send(topic, partition=part,
                          key=None if key is None else key.encode(),
                          value=None if value is None else value.encode())
        producer.flush()
    finally:
        producer.close()


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("test_kafka_connectors")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


# -- broker -----------------------------------------------------------------


def test_tansu_binary_is_shipped():
    assert tansu_path().is_file()


def test_embedded_broker_start_stop(tmp_path):
    b = EmbeddedBroker(log_path=tmp_path / "log")
    b.start()
    pid, bs = b.pid, b.bootstrap
    assert bs.startswith("127.0.0.1:")
    check_broker(bs)
    b.stop()
    b.stop()  # idempotent
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(ConnectionError, match="cannot reach Kafka broker"):
        check_broker(bs, timeout=1.0)


def test_check_broker_dead_port():
    port = _free_port()
    with pytest.raises(ConnectionError, match=f"cannot reach Kafka broker at 127.0.0.1:{port}"):
        check_broker(f"127.0.0.1:{port}", timeout=1.0)


def test_ensure_topics_idempotent(broker):
    ensure_topics(broker.bootstrap, {"idem-a": 3, "idem-b": 1})
    ensure_topics(broker.bootstrap, {"idem-a": 3, "idem-b": 1, "idem-c": 2})
    reader = KafkaStreamReader({"bootstrap": broker.bootstrap, "topic": "idem-a"})
    assert reader.initialOffset() == {"0": 0, "1": 0, "2": 0}
    reader.stop()


# -- sink -------------------------------------------------------------------


def test_publisher_splits_and_keeps_empty_batches(broker):
    bs = broker.bootstrap
    deltas = fresh_topic(bs, prefix="deltas")
    added = [["edge", "a", i] for i in range(5)]
    removed = [["edge", "b", i] for i in range(2)]
    with KafkaPublisher(bs, deltas, max_facts_per_message=3) as pub:
        assert pub.publish_delta(0, {"0": 7}, added, removed) == 3
        assert pub.publish_delta(1, {"0": 7}, [], []) == 1
        assert pub.publish_delta(2, None, [["p", 1]], []) == 1
    msgs = read_deltas(bs, deltas)
    assert [(m["batch"], m["part"], m["parts"]) for m in msgs] == [
        (0, 0, 3), (0, 1, 3), (0, 2, 3), (1, 0, 1), (2, 0, 1)]
    assert all(len(m["added"]) + len(m["removed"]) <= 3 for m in msgs)
    batch0 = [m for m in msgs if m["batch"] == 0]
    assert [f for m in batch0 for f in m["added"]] == added
    assert [f for m in batch0 for f in m["removed"]] == removed
    assert msgs[0]["through"] == {"0": 7}
    assert msgs[3]["added"] == msgs[3]["removed"] == []


def test_keyed_deltas_deferred_go_by_key_in_order(broker):
    """Keyed deltas carry the key and are keyed by it; deferred sends are awaited at the block's end."""
    bs = broker.bootstrap
    deltas = fresh_topic(bs, partitions=3, prefix="kdeltas")
    with KafkaPublisher(bs, deltas) as pub:
        with pub.deferred():
            for batch in range(4):
                for key in ("t1", "t2", "t3"):
                    pub.publish_delta(batch, f"{key}-{batch}", [["edge", key, batch]], [], key=key)
            assert len(pub._deferred) == 12  # sent, not yet awaited
        assert pub._deferred is None
        pub.publish_delta(9, None, [], [])  # without a key: as before
    msgs = read_deltas(bs, deltas)
    keyed = [m for m in msgs if "key" in m]
    assert len(keyed) == 12 and len(msgs) == 13
    for key in ("t1", "t2", "t3"):  # one key's deltas in order (one partition per key)
        assert [m["through"] for m in keyed if m["key"] == key] == [f"{key}-{b}" for b in range(4)]
    assert list(keyed[0]) == ["v", "key", "batch", "through", "part", "parts", "added", "removed"]


def test_read_deltas_rebuilds_materialisation(broker):
    bs = broker.bootstrap
    deltas = fresh_topic(bs, prefix="deltas")
    with KafkaPublisher(bs, deltas, max_facts_per_message=2) as pub:
        pub.publish_delta(0, 1, [["e", 1, 2], ["e", 2, 3], ["t", 1, 3]], [])
        pub.publish_delta(1, 2, [], [["e", 2, 3], ["t", 1, 3]])
        pub.publish_delta(2, 3, [["e", "ü", "ß"]], [])
    state = set()
    for m in read_deltas(bs, deltas):
        state -= {tuple(f) for f in m["removed"]}
        state |= {tuple(f) for f in m["added"]}
    assert state == {("e", 1, 2), ("e", "ü", "ß")}
    assert read_deltas(bs, fresh_topic(bs)) == []


def test_dead_letters(broker):
    bs = broker.bootstrap
    dl = fresh_topic(bs, prefix="dead")
    with KafkaPublisher(bs, fresh_topic(bs), dead_letter_topic=dl, source_topic="updates") as pub:
        pub.publish_dead_letter("invalid JSON: Expecting value", 2, 41, "{oops")
        pub.publish_dead_letter("null value", 0, 3, None)
    assert read_deltas(bs, dl) == [
        {"v": 1, "reason": "invalid JSON: Expecting value",
         "source": {"topic": "updates", "partition": 2, "offset": 41}, "raw": "{oops"},
        {"v": 1, "reason": "null value", "source": {"topic": "updates", "partition": 0, "offset": 3},
         "raw": None},
    ]


def test_publisher_errors(broker):
    with pytest.raises(ConnectionError, match="cannot reach Kafka broker"):
        KafkaPublisher(f"127.0.0.1:{_free_port()}", "x", connect_timeout=1.0)
    with KafkaPublisher(broker.bootstrap, fresh_topic(broker.bootstrap)) as pub:
        with pytest.raises(TypeError, match="cannot be pickled"):
            pickle.dumps(pub)


def test_dead_letters_without_a_topic_are_logged_not_raised(broker, caplog):
    """Issue 14: without --dead-letter-topic a dead letter is one log line, never an error.

    (It used to raise ValueError after the batch was committed, so every restart
    failed on the same batch.)
    """
    raw = '{"add": [["edge", "a"' + "x" * 1000 + "\n"
    with KafkaPublisher(broker.bootstrap, fresh_topic(broker.bootstrap)) as pub, \
            caplog.at_level(logging.WARNING, logger="fluxmat.dead-letters"):  # fmt: skip
        pub.publish_dead_letter("invalid JSON:\nExpecting ','", 3, 17, raw)
        pub.publish_dead_letter("expected an update object", 0, 4, None)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and all("\n" not in line for line in lines), lines
    assert lines[0].startswith("dead letter: partition 3 offset 17: invalid JSON: Expecting ','")
    assert lines[0].endswith(f"message: {json.dumps(raw[:LOG_RAW_CHARS])} (truncated)")
    assert lines[1] == ("dead letter: partition 0 offset 4: expected an update object; "
                        "message: null")


def test_large_facts_are_split_to_fit_a_kafka_message(broker):
    """A delta part over max_message_bytes is halved, so big facts never exceed the broker's limit."""
    bs = broker.bootstrap
    deltas = fresh_topic(bs, prefix="deltas")
    big = [["doc", i, "x" * 300_000] for i in range(5)]
    with KafkaPublisher(bs, deltas, max_message_bytes=700_000) as pub:
        assert pub.publish_delta(0, None, big[:3], big[3:]) == 3  # halves: [0, 1], [2], [3, 4]
        assert pub.publish_delta(1, None, [["doc", 9, "y" * 1_200_000]], []) == 1  # one fact: as is
    msgs = read_deltas(bs, deltas)
    assert [(m["batch"], m["part"], m["parts"]) for m in msgs] == [
        (0, 0, 3), (0, 1, 3), (0, 2, 3), (1, 0, 1)]
    assert all(len(json.dumps(m)) <= 700_000 for m in msgs[:3])
    assert [f for m in msgs[:3] for f in m["added"]] == big[:3]
    assert [f for m in msgs[:3] for f in m["removed"]] == big[3:]


@pytest.mark.parametrize("compression", ["lz4", "gzip", "none"])
def test_deltas_are_compressed_on_the_wire(broker, compression):
    """Issue 16: the broker (tansu) takes and serves compressed batches; consumers get the same JSON."""
    bs = broker.bootstrap
    deltas = fresh_topic(bs)
    facts = [["http://swat.cse.lehigh.edu/onto/univ-bench.owl#takesCourse",
              f"<http://www.Department0.University0.edu/GraduateStudent{i}>", f"Course {i} é"]
             for i in range(3000)]  # fmt: skip
    kw = {} if compression == "lz4" else {"compression": compression}  # lz4: the default
    with KafkaPublisher(bs, deltas, **kw) as pub:
        assert pub.publish_delta(0, "u9", facts, []) == 1
        rate = pub._producer.metrics()["producer-metrics"]["compression-rate-avg"]  # sent / encoded bytes
    assert rate < 0.25 if compression != "none" else rate == 1.0
    assert read_deltas(bs, deltas) == [{"v": 2, "batch": 0, "through": "u9", "part": 0, "parts": 1,
                                        "added": facts, "removed": []}]  # fmt: skip


# -- source, without Spark ----------------------------------------------------


def test_fair_limit():
    start = {"0": 0, "1": 10, "2": 5}
    high = {"0": 100, "1": 12, "2": 105}
    # partition 1 has only 2; the rest of the budget is shared by 0 and 2
    assert fair_limit(start, high, 10) == {"0": 4, "1": 12, "2": 9}
    assert fair_limit(start, high, 1000) == high
    assert sum(fair_limit(start, high, 2)[p] - start[p] for p in start) == 2
    # a budget below the partition count rotates instead of starving a partition
    seen = set()
    pos = dict(start)
    for _ in range(3):
        end = fair_limit(pos, high, 1)
        seen |= {p for p in end if end[p] > pos[p]}
        pos = end
    assert seen == {"0", "1", "2"}


def test_reader_offsets_and_limits(broker):
    bs = broker.bootstrap
    topic = fresh_topic(bs, 3)
    produce(bs, topic, [(i % 3, None, f"v{i}") for i in range(10)])  # 4, 3, 3
    reader = KafkaStreamReader({"bootstrap": bs, "topic": topic, "maxOffsetsPerTrigger": "5"})
    try:
        start = reader.initialOffset()
        assert start == {"0": 0, "1": 0, "2": 0}
        assert reader.getDefaultReadLimit() == ReadMaxRows(5)
        assert reader.latestOffset(start, ReadAllAvailable()) == {"0": 4, "1": 3, "2": 3}
        end = reader.latestOffset(start, ReadMaxRows(5))
        assert sum(end.values()) == 5 and all(end[p] <= h for p, h in {"0": 4, "1": 3, "2": 3}.items())
        # a partition missing from the start offsets (added later) is read from 0
        assert reader.latestOffset({"0": 4}, ReadAllAvailable()) == {"0": 4, "1": 3, "2": 3}
        parts = reader.partitions({"0": 4, "1": 1, "2": 0}, {"0": 4, "1": 3, "2": 3})
        assert [(p.partition, p.start, p.end) for p in parts] == [(1, 1, 3), (2, 0, 3)]
        rows = rows_of(pickle.loads(pickle.dumps(reader)).read(parts[0]))
        assert [(r[0], r[1], r[3]) for r in rows] == [(1, 1, "v4"), (1, 2, "v7")]
        # lost data: checkpoint beyond the broker's end
        with pytest.raises(KafkaSourceError, match="lost data"):
            reader.latestOffset({"0": 50, "1": 0, "2": 0}, ReadAllAvailable())
    finally:
        reader.stop()
    latest = KafkaStreamReader({"bootstrap": bs, "topic": topic, "startingOffsets": "latest"})
    assert latest.initialOffset() == {"0": 4, "1": 3, "2": 3}
    latest.stop()


def test_reader_times_out_instead_of_looping(broker):
    bs = broker.bootstrap
    topic = fresh_topic(bs)
    produce(bs, topic, [(0, "k", "x")])
    reader = KafkaStreamReader({"bootstrap": bs, "topic": topic, "stallTimeoutSeconds": "1"})
    t0 = time.monotonic()
    with pytest.raises(KafkaSourceError, match="no progress .* offset 1 .* high watermark 1"):
        list(reader.read(KafkaInputPartition(topic, 0, 0, 5)))
    assert time.monotonic() - t0 < 10


def rows_of(batches) -> list[tuple]:
    """The rows of the Arrow record batches a reader yields."""
    return [row for b in batches for row in zip(*(c.to_pylist() for c in b.columns), strict=True)]


def test_kafka_python_checks_crcs_in_c():
    """Issue 16: with the crc32c package (a dependency), kafka-python's CRC32C is not its pure-Python one."""
    from kafka.record import _crc32c, util

    assert util.calc_crc32c.__defaults__[0] is not _crc32c.crc


def test_reader_keeps_its_consumer_across_micro_batches(broker):
    bs = broker.bootstrap
    topic = fresh_topic(bs)
    produce(bs, topic, [(0, None, f"v{i}") for i in range(10)])
    reader = KafkaStreamReader({"bootstrap": bs, "topic": topic})
    key = (bs, topic, 0)

    def read(lo, hi):
        return [(r[1], r[3]) for r in rows_of(reader.read(KafkaInputPartition(topic, 0, lo, hi)))]

    try:
        assert read(0, 4) == [(i, f"v{i}") for i in range(4)]
        first = kafka_source._READERS[key]
        assert first.at == 4  # never read past the range
        assert read(4, 10) == [(i, f"v{i}") for i in range(4, 10)]  # goes on where it stood
        assert kafka_source._READERS[key] is first
        assert read(2, 6) == [(i, f"v{i}") for i in range(2, 6)]  # a replay seeks back
        assert kafka_source._READERS[key] is first
        rows = reader.read(KafkaInputPartition(topic, 0, 6, 10))
        next(rows)
        rows.close()  # an abandoned read closes its consumer: the next one starts afresh
        assert key not in kafka_source._READERS
        assert read(7, 9) == [(7, "v7"), (8, "v8")]
        assert kafka_source._READERS[key] is not first
    finally:
        kafka_source.close_readers()
    assert not kafka_source._READERS


def test_reader_fetches_ask_the_broker_to_wait_for_nothing(broker):
    """A read's records are there (below the high watermark planning saw): its fetches must not be held.

    The client sends the next fetch as it hands over a range's last records;
    at the end of the log the broker holds it for `fetch_max_wait_ms`, and the
    next micro-batch's first poll on the kept consumer waits for it (100 ms
    before: a micro-batch's read of 5 records took 22 ms at the median, max
    102 ms, when it came 30 ms after the previous one; 6 ms, max 73 ms, with 5 ms).
    """
    bs = broker.bootstrap
    topic = fresh_topic(bs)
    reader = KafkaStreamReader({"bootstrap": bs, "topic": topic})
    key = (bs, topic, 0)
    try:
        for lo in range(0, 20, 5):  # micro-batches at the log's end, as in a steady stream
            produce(bs, topic, [(0, None, f"v{i}") for i in range(lo, lo + 5)])
            rows = rows_of(reader.read(KafkaInputPartition(topic, 0, lo, lo + 5)))
            assert [r[1] for r in rows] == list(range(lo, lo + 5))
            if lo == 0:
                first = kafka_source._READERS[key]
            assert kafka_source._READERS[key] is first  # never swapped for a patient one
        assert first.client_wait <= 10
    finally:
        kafka_source.close_readers()


def test_planning_fetches_little_whatever_the_backlog(broker):
    """tansu answers ListOffsets wrongly: end offsets come from fetch responses, kept tiny."""
    bs = broker.bootstrap
    topic = fresh_topic(bs)
    produce(bs, topic, [(0, None, "x" * 1000) for _ in range(2000)])  # a 2 MB backlog
    reader = KafkaStreamReader({"bootstrap": bs, "topic": topic})
    try:
        for start in (0, 0, 1000, 2000):
            assert reader.latestOffset({"0": start}, ReadAllAvailable()) == {"0": 2000}
        # each probe fetches one record batch at most (kafka-python's default: 1 MiB per partition)
        config = reader._metadata().config
        assert config["max_partition_fetch_bytes"] <= 1024 and config["fetch_max_bytes"] <= 4096
    finally:
        reader.stop()


def test_oldest_waiting_record_is_found_in_a_long_log(broker):
    """The time lag's lookup finds the oldest waiting record however many record batches precede it.

    A steady stream writes one record batch per update. tansu's read of a
    record slows as a partition's batches grow in number and it answers nothing
    to a fetch whose wait is shorter than that read: with a 5 ms wait, beyond
    ~6,000 batches (a 30-minute soak at 80 updates/s) every lookup came back
    without the record and the job's time lag read unknown for good.
    """
    bs = broker.bootstrap
    topic = fresh_topic(bs)
    producer = KafkaProducer(bootstrap_servers=bs, batch_size=1, linger_ms=0)  # a batch per record
    try:
        sent = [producer.send(topic, partition=0, value=f"u{i}".encode()) for i in range(9_000)]
        producer.flush()
    finally:
        producer.close()
    stamps = {m.offset: m.timestamp for m in (f.get(timeout=30) for f in sent[-60:])}
    reader = KafkaStreamReader({"bootstrap": bs, "topic": topic})
    try:
        for start in (8_950, 8_990):
            high, heads = reader.backlog({"0": start})
            assert high == {"0": 9_000}
            assert heads == {"0": stamps[start]}
    finally:
        reader.stop()


def test_reader_needs_options_and_topic(broker):
    with pytest.raises(ValueError, match="'topic'"):
        KafkaStreamReader({"bootstrap": broker.bootstrap})


# -- source under Spark ---------------------------------------------------------


class Collector:
    """foreachBatch target: records (batch_id, rows) on the driver."""

    def __init__(self):
        self.batches = []
        self.lock = threading.Lock()

    def __call__(self, df, batch_id):
        rows = [tuple(r) for r in df.collect()]
        with self.lock:
            self.batches.append((batch_id, rows))

    @property
    def rows(self):
        with self.lock:
            return [r for _, rows in self.batches for r in rows]


def run_until(spark, bs, topic, ckpt, expected, options=None, timeout=90):
    reader = spark.readStream.format("fluxmat-kafka").option("bootstrap", bs).option("topic", topic)
    for k, v in (options or {}).items():
        reader = reader.option(k, v)
    sink = Collector()
    query = (reader.load().writeStream.foreachBatch(sink)
             .option("checkpointLocation", str(ckpt))
             .trigger(processingTime="200 milliseconds").start())
    try:
        deadline = time.monotonic() + timeout
        while len(sink.rows) < expected:
            assert query.exception() is None, query.exception()
            assert time.monotonic() < deadline, f"saw {len(sink.rows)} of {expected} rows"
            time.sleep(0.1)
        time.sleep(0.6)  # a few more triggers: nothing extra may arrive
    finally:
        query.stop()
    return sink


def check_exactly_once(rows, produced):
    keys = [(r[0], r[1]) for r in rows]
    assert len(keys) == len(set(keys)), "a (partition, offset) was delivered twice"
    assert {(r[0], r[1]): (r[2], r[3]) for r in rows} == produced


def test_spark_reads_every_record_once_in_partition_order(spark, broker, tmp_path):
    bs = broker.bootstrap
    topic = fresh_topic(bs, 3)
    n = 60
    records = [(i % 3, f"fact{i % 7}", json.dumps({"add": [["edge", i, i + 1]]}))
               for i in range(n)]
    records.append((1, "gone", None))  # tombstone: value None
    produce(bs, topic, records)
    before = int(time.time() * 1000)
    sink = run_until(spark, bs, topic, tmp_path / "ckpt", n + 1)
    rows = sink.rows
    produced, next_offset = {}, {0: 0, 1: 0, 2: 0}
    for part, key, value in records:
        produced[(part, next_offset[part])] = (key, value)
        next_offset[part] += 1
    check_exactly_once(rows, produced)
    assert all(abs(r[4] - before) < 120_000 for r in rows)  # Kafka timestamps in ms
    for batch_id, batch in sink.batches:  # Kafka order within each partition
        for p in range(3):
            offs = [r[1] for r in batch if r[0] == p]
            assert offs == sorted(offs), (batch_id, p, offs)


def test_spark_max_offsets_per_trigger_and_restart(spark, broker, tmp_path):
    bs = broker.bootstrap
    topic = fresh_topic(bs, 3)
    ckpt = tmp_path / "ckpt"
    first = [(i % 3, None, f"a{i}") for i in range(23)]
    produce(bs, topic, first)
    sink = run_until(spark, bs, topic, ckpt, 23, {"maxOffsetsPerTrigger": 5})
    sizes = [len(rows) for _, rows in sink.batches if rows]
    assert sum(sizes) == 23 and max(sizes) <= 5 and len(sizes) >= 5, sizes
    assert len({(r[0], r[1]) for r in sink.rows}) == 23

    # restart on the same checkpoint: only the records produced since are delivered
    second = [(i % 3, None, f"b{i}") for i in range(7)]
    produce(bs, topic, second)
    again = run_until(spark, bs, topic, ckpt, 7, {"maxOffsetsPerTrigger": 5})
    assert sorted(r[3] for r in again.rows) == sorted(v for _, _, v in second)
    assert {(r[0], r[1]) for r in again.rows}.isdisjoint({(r[0], r[1]) for r in sink.rows})


def test_spark_available_now(spark, broker, tmp_path):
    bs = broker.bootstrap
    topic = fresh_topic(bs, 2)
    produce(bs, topic, [(i % 2, None, str(i)) for i in range(12)])
    sink = Collector()
    query = (spark.readStream.format("fluxmat-kafka").option("bootstrap", bs)
             .option("topic", topic).option("maxOffsetsPerTrigger", 4).load()
             .writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "c"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(90)
    assert query.exception() is None
    assert sorted(int(r[3]) for r in sink.rows) == list(range(12))
    assert all(len(rows) <= 4 for _, rows in sink.batches)
