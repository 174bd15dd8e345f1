"""A whole-stream micro-batch is read on the driver, from the ranges Spark planned (stream.collect).

Real local Spark, real broker: the job's `foreachBatch` gets a DataFrame over
the batch's planned `fluxmat-kafka` partitions; `DriverCollect` reads exactly
those records without running a Spark job, and falls back to `df.toArrow()`
(saying so once) for a DataFrame that is not such a read.
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
from itertools import count

import pytest
from kafka import KafkaProducer

from fluxmat.connectors.broker import ensure_topics
from fluxmat.connectors.kafka_source import register
from fluxmat.connectors.message import SCHEMA, Message
from fluxmat.stream.collect import DriverCollect, planned
from fluxmat.stream.job import WORKER_LATE, WORKER_RESTARTS, spark_session

_topics = count()


@pytest.fixture(scope="module")
def spark():
    session = spark_session("local[2]", app="test_collect")
    register(session)
    yield session
    session.stop()


def _produce(bootstrap: str, topic: str, records: list[tuple[int, str | None]]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        for partition, value in records:
            value = None if value is None else value.encode()
            producer.send(topic, partition=partition, key=b"k", value=value)
        producer.flush()
    finally:
        producer.close()


class Batches:
    """foreachBatch: each batch collected by `DriverCollect`, with the Spark jobs that ran meanwhile."""

    def __init__(self, spark, collect: DriverCollect):
        self.tracker = spark.sparkContext.statusTracker()
        self.collect = collect
        self.rows: list[Message] = []
        self.jobs: list[int] = []  # Spark jobs started while a batch was collected
        self.lock = threading.Lock()

    def __call__(self, df, batch_id: int) -> None:
        before = set(self.tracker.getJobIdsForGroup())
        table = self.collect(df)
        ran = set(self.tracker.getJobIdsForGroup()) - before
        rows = [Message._make(r) for r in zip(*(c.to_pylist() for c in table.columns), strict=True)]
        with self.lock:
            self.rows += rows
            self.jobs += sorted(ran)


def _wait_for(query: list, start, batches: Batches, rows: int) -> None:
    """Until `rows` rows were collected; a query whose source worker was late (a busy machine) starts again."""
    restarts = 0
    while len(batches.rows) < rows:
        exc = query[0].exception()
        if exc is not None and WORKER_LATE in str(exc) and restarts < WORKER_RESTARTS:
            restarts += 1
            query[0].stop()
            query[0] = start()
        assert exc is None or WORKER_LATE in str(exc), exc
        time.sleep(0.2)


def test_a_batch_is_read_on_the_driver_exactly_as_planned_without_a_spark_job(spark, broker):
    topic = f"collect{next(_topics)}"
    ensure_topics(broker.bootstrap, {topic: 3})
    records = [(i % 3, json.dumps({"add": [["edge", i, i + 1]], "id": f"u{i}"})) for i in range(30)]
    records.append((2, None))  # a tombstone travels as value None
    _produce(broker.bootstrap, topic, records)
    said: list[str] = []
    options = {"bootstrap": broker.bootstrap, "topic": topic}
    batches = Batches(spark, DriverCollect(options, said.append))
    checkpoint = tempfile.mkdtemp()

    def start():
        return (spark.readStream.format("fluxmat-kafka").options(**options).load()
                .writeStream.foreachBatch(batches).option("checkpointLocation", checkpoint)
                .trigger(processingTime="200 milliseconds").start())  # fmt: skip

    query = [start()]
    runs = [query]  # a query's Spark jobs run in the job group of its run id
    try:
        _wait_for(query, start, batches, len(records))
        # a second batch, read from where the first ended
        _produce(broker.bootstrap, topic, [(1, "late")])
        _wait_for(query, start, batches, len(records) + 1)
    finally:
        runs.append(str(query[0].runId))
        query[0].stop()
    got = {(m.partition, m.offset): m.value for m in batches.rows}
    assert len(got) == len(batches.rows) == len(records) + 1, "a record was read twice"
    offsets = {0: 0, 1: 0, 2: 0}
    want = {}
    for partition, value in [*records, (1, "late")]:
        want[(partition, offsets[partition])] = value
        offsets[partition] += 1
    assert got == want
    tracker = spark.sparkContext.statusTracker()
    jobs = [j for run in runs[1:] for j in tracker.getJobIdsForGroup(run)]
    assert jobs == [], f"Spark jobs ran to collect the batches: {jobs}"
    assert said == []


def test_a_dataframe_that_is_not_a_read_of_the_source_is_collected_by_spark(spark, broker):
    said: list[str] = []
    collect = DriverCollect({"bootstrap": broker.bootstrap, "topic": "unused"}, said.append)
    df = spark.createDataFrame([(0, 7, None, "v", 1, True, 1)], SCHEMA)
    assert planned(df) is None
    assert collect(df).column("offset").to_pylist() == [7]
    assert collect(df).num_rows == 1
    assert len(said) == 1 and "collected by Spark jobs" in said[0]
