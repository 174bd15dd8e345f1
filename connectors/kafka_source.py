"""Kafka source for Spark Structured Streaming, as a PySpark Python Data Source.

Spark's JVM Kafka connector needs jars from Maven Central, so the job reads
Kafka with this `DataSourceStreamReader` (docs/streaming.md, "Source"): it plans
with kafka-python and reads the records with confluent-kafka (librdkafka:
connectors.kafka_records, ~5x less CPU a record)::

    register(spark)
    df = (spark.readStream.format("fluxmat-kafka")
          .option("bootstrap", "127.0.0.1:9092").option("topic", "updates")
          .option("maxOffsetsPerTrigger", 1000).load())

Options:
    bootstrap: Kafka bootstrap servers (required).
    topic: Topic to read (required).
    startingOffsets: "earliest" (default), "latest", or a JSON object
        `{"<partition>": offset}` (partitions not named start at 0). Used only
        when the query has no checkpoint yet.
    maxOffsetsPerTrigger: At most this many records per micro-batch, across all
        partitions (a rate limit; default: everything available).
    stallTimeoutSeconds: How long `read` may go without progress before it
        fails (default 30).
    kafkaConfig: Path of a Kafka security settings file (client.kafka_config),
        read where each consumer is made, on the driver and on executors (so
        the secrets never appear in the options, the plan or a pickle; the
        file, and the environment variables it names, must be there).
    maxValueBytes: Values longer than this many bytes are cut to it before
        decoding (`size` still tells their length), so an oversized message
        travels no further than the executor (default: no limit).

Rows: `partition int, offset long, key string, value string, timestamp long,
utf8 boolean, size long` (timestamp is the Kafka record timestamp in ms; size
the value's length in bytes, null for a tombstone). `read` yields them as Arrow
record batches (one per `consume`, in the schema Spark expects), which Spark takes
as they are: PySpark's conversion of yielded tuples costs ~20 us per row. Keys and values are decoded
as UTF-8 with invalid bytes replaced by U+FFFD, and `utf8` is False when the
value was not valid UTF-8, so the consumer can reject it (the stream sends it to
the dead-letter topic) rather than the source failing. A record with a null
value (tombstone) yields `value = None`.

Offsets: `{"<partition>": next offset to read}`, one entry per partition. They
live only in Spark's checkpoint; nothing is committed to Kafka (`commit` is a
no-op) and no consumer group is used.

Contract:
    * Each micro-batch reads exactly the records in [start, end) of every
      partition, so a batch Spark replays after a crash yields the same rows
      (at-least-once end to end; the operator deduplicates by batch id).
    * Order: Kafka order within a partition; none across partitions. Producers
      that need order across facts key by fact (all updates of one fact go to
      one partition) or use a single partition.
    * Partitions added to the topic while the query runs are picked up from
      offset 0 at the first micro-batch planned `_PARTITIONS_EVERY` (2) seconds
      after the previous discovery.
    * Data loss (e.g. an in-memory broker restarted under an old checkpoint):
      planning raises `KafkaSourceError` when a partition ends before its
      checkpointed offset, and `read` raises it after `stallTimeoutSeconds`
      without progress, rather than looping forever or silently skipping
      records. A query restarted on the same checkpoint after Spark crashed
      mid-batch re-reads that batch's exact range.
    * Clients: the driver-side reader keeps one lookup consumer (never
      pickled) with tiny fetch sizes: the end offsets it plans with are the
      high watermarks of fetch responses of at most a few KiB, so planning
      costs the same whatever the backlog. On executors, each Python worker
      keeps its partition readers (connectors.kafka_records) across
      micro-batches (`_READERS`, one per bootstrap, topic and partition),
      with its connection; each `read` assigns the partition at its start
      offset, and the reader is unassigned (fetches nothing) between reads. A reader is closed
      when its read fails or is abandoned, so the next read starts afresh.
      The job's driver reads whole-stream micro-batches the same way
      (`read_table` over the partitions Spark planned, stream.collect).
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from fluxmat.connectors.kafka_records import PATIENT_WAIT_MS, KafkaReadError, PartitionReader
from fluxmat.connectors.message import SCHEMA, Message

try:
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # pragma: no cover - depends on the installed pyspark
    raise ImportError("the fluxmat-kafka source needs pyspark >= 4.2 "
                      "(streaming ReadLimit / admission-control API)") from None

_DISCOVER_TIMEOUT = 10.0
# The driver's lookup consumer: a fetch answers with a few KiB at most (and at
# once when there is nothing new), so a high watermark costs the same with any backlog.
_LOOKUP = {"max_partition_fetch_bytes": 1024, "fetch_max_bytes": 4096, "fetch_max_wait_ms": 5}
# The lag's lookup of the oldest waiting record (`backlog`): a record is there,
# so the fetch returns as soon as the broker has read it. tansu's read of a
# record takes longer as a partition's record batches grow in number (with
# single-record batches, beyond ~6,000 at a load of 20 it took over 5 ms) and
# it answers nothing to a shorter wait: the time lag then read unknown for good.
_HEADS = {**_LOOKUP, "fetch_max_wait_ms": PATIENT_WAIT_MS}  # as a read's after an empty answer
_LOOKUP_POLL_MS = 10
_PARTITIONS_EVERY = 2.0  # seconds between partition discoveries (a metadata request: ~100 ms on tansu)
_KEEP_READERS = 64  # consumers a Python worker keeps between micro-batches (least recently used go)


class KafkaSourceError(RuntimeError):
    """The source cannot continue (missing topic, unreachable broker, lost data)."""


@dataclass(frozen=True)
class KafkaInputPartition(InputPartition):
    """Records [start, end) of one Kafka partition; one Spark task reads it."""

    topic: str
    partition: int
    start: int
    end: int


def _arrow_schema():
    """SCHEMA as the Arrow schema PySpark checks a yielded record batch against."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import (
        BooleanType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    types = (IntegerType(), LongType(), StringType(), StringType(), LongType(), BooleanType(), LongType())
    struct = StructType([StructField(n, t) for n, t in zip(Message._fields, types, strict=True)])
    return to_arrow_schema(struct, timezone="UTC")  # as pyspark.sql.worker.plan_data_source_read does


def _batch(columns: list[list], schema):
    """Columns (lists in SCHEMA's order) as one Arrow record batch."""
    import pyarrow as pa

    return pa.RecordBatch.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, schema, strict=True)],
                                      schema=schema)  # fmt: skip


def _consumer(bootstrap: str, kafka_config: str | None, **config):
    from kafka import KafkaConsumer

    from fluxmat.client.kafka_config import load

    return KafkaConsumer(**{
        **load(kafka_config).args,
        "bootstrap_servers": bootstrap,
        "enable_auto_commit": False,
        "group_id": None,
        "auto_offset_reset": "none",
        "fetch_max_wait_ms": 100,
        **config,
    })  # fmt: skip


# Executor side: consumers kept by a Python worker between micro-batches, by
# (bootstrap, topic, partition). A read takes its partition's consumer out while
# it runs (so no two reads share one) and puts it back when it has read its range.
_READERS: OrderedDict[tuple[str, str, int], object] = OrderedDict()
_READERS_LOCK = threading.Lock()


def _take_reader(key: tuple[str, str, int]):
    with _READERS_LOCK:
        return _READERS.pop(key, None)


def _keep_reader(key: tuple[str, str, int], consumer) -> None:
    with _READERS_LOCK:
        old = _READERS.pop(key, None)
        _READERS[key] = consumer
        evicted = [_READERS.popitem(last=False)[1] for _ in range(len(_READERS) - _KEEP_READERS)]
    for c in ([old] if old is not None else []) + evicted:
        c.close()


def close_readers() -> None:
    """Close the consumers this process keeps between micro-batches."""
    with _READERS_LOCK:
        kept = list(_READERS.values())
        _READERS.clear()
    for c in kept:
        c.close()


def fair_limit(start: dict[str, int], high: dict[str, int], budget: int) -> dict[str, int]:
    """End offsets that read at most `budget` records in total, shared fairly.

    Water-filling: every partition gets an equal share of the budget, capped by
    what it has available; what a small partition does not use goes to the
    others. The remainder of the integer division goes one record each to
    partitions in a rotation that depends on the start offsets, so a budget
    smaller than the number of partitions does not starve the same partition
    every batch. Never goes beyond `high`.
    """
    avail = {p: max(high[p] - start.get(p, 0), 0) for p in high}
    grant = dict.fromkeys(high, 0)
    left = max(int(budget), 0)
    open_ = sorted((p for p in avail if avail[p] > 0), key=lambda p: (avail[p], int(p)))
    while left > 0 and open_:
        share = left // len(open_)
        if share == 0:
            rot = sum(start.get(p, 0) for p in open_) % len(open_)
            ids = sorted(open_, key=int)
            for p in (ids[rot:] + ids[:rot])[:left]:
                grant[p] += 1
            break
        still = []
        for p in open_:
            take = min(share, avail[p] - grant[p])
            grant[p] += take
            left -= take
            if grant[p] < avail[p]:
                still.append(p)
        open_ = still
    return {p: start.get(p, 0) + grant[p] for p in high}


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans micro-batches from Kafka high watermarks; reads them on executors."""

    def __init__(self, options: dict[str, str]) -> None:
        try:
            self.bootstrap = options["bootstrap"]
            self.topic = options["topic"]
        except KeyError as exc:
            raise ValueError(f"fluxmat-kafka source needs option {exc.args[0]!r}") from None
        self.kafka_config = options.get("kafkaConfig") or None
        self.starting = options.get("startingOffsets", "earliest")
        max_rows = options.get("maxOffsetsPerTrigger")
        self.max_rows = int(max_rows) if max_rows not in (None, "") else None
        if self.max_rows is not None and self.max_rows < 1:
            raise ValueError(f"maxOffsetsPerTrigger must be >= 1, got {max_rows}")
        self.stall_timeout = float(options.get("stallTimeoutSeconds", 30))
        max_value = options.get("maxValueBytes")
        self.max_value = int(max_value) if max_value not in (None, "") else None
        self._meta = None  # driver-side lookup consumer, created lazily
        self._heads = None  # the same for `backlog` (`_HEADS`)
        self._parts: tuple[list[int], float] | None = None  # partitions found, and when
        self._target: dict[str, int] | None = None  # Trigger.AvailableNow cap

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_meta"] = state["_heads"] = None  # a client never travels to executors
        return state

    # -- driver side -------------------------------------------------------

    def _metadata(self):
        if self._meta is None:
            self._meta = self._lookup_consumer(_LOOKUP)
        return self._meta

    def _heads_consumer(self):
        if self._heads is None:
            self._heads = self._lookup_consumer(_HEADS)
        return self._heads

    def _lookup_consumer(self, settings: dict):
        try:
            return _consumer(self.bootstrap, self.kafka_config, **settings)
        except Exception as exc:
            raise KafkaSourceError(f"cannot reach Kafka broker at {self.bootstrap}: {exc}") from None

    def _partitions(self) -> list[int]:
        """The topic's partitions, discovered again every `_PARTITIONS_EVERY` seconds."""
        consumer = self._metadata()
        now = time.monotonic()
        if self._parts is not None and now - self._parts[1] < _PARTITIONS_EVERY:
            return self._parts[0]
        deadline = now + _DISCOVER_TIMEOUT
        while True:
            consumer.topics()  # forces a metadata refresh, so new partitions show up
            parts = consumer.partitions_for_topic(self.topic)
            if parts:
                self._parts = (sorted(parts), now)
                return self._parts[0]
            if time.monotonic() > deadline:
                raise KafkaSourceError(
                    f"topic {self.topic!r} not found on {self.bootstrap} "
                    f"after {_DISCOVER_TIMEOUT:.0f} s")
            time.sleep(0.2)

    def high_watermarks(self, start: dict[str, int]) -> dict[str, int]:
        """Current end offset of every partition, from fetch responses.

        tansu answers ListOffsets wrongly, so instead each partition is fetched
        from its planned start by the lookup consumer (fetches of at most
        `_LOOKUP` bytes) and the high watermark the response carries is used.
        Retries until every partition has answered.
        """
        return self._fetch_from(start, heads=False)[0]

    def backlog(self, start: dict[str, int]) -> tuple[dict[str, int], dict[str, int]]:
        """High watermarks, and the timestamp (ms) of the first record at or after `start`.

        The second dict has an entry for each partition with records not yet
        read (high watermark > start) whose first such record arrived within
        the discovery timeout: the Kafka timestamp of the oldest update not yet
        processed there (what the job's time lag is measured from).
        """
        return self._fetch_from(start, heads=True)

    def _fetch_from(self, start: dict[str, int], heads: bool) -> tuple[dict[str, int], dict[str, int]]:
        from kafka import TopicPartition

        try:
            tps = [TopicPartition(self.topic, p) for p in self._partitions()]
            consumer = self._heads_consumer() if heads else self._metadata()
            consumer.unsubscribe()  # fresh partition state: no stale high watermark
            consumer.assign(tps)
            for tp in tps:
                consumer.seek(tp, start.get(str(tp.partition), 0))
            first: dict[str, int] = {}
            deadline = time.monotonic() + _DISCOVER_TIMEOUT
            while True:
                got = consumer.poll(timeout_ms=_LOOKUP_POLL_MS, max_records=len(tps) if heads else 1)
                for tp, records in got.items():
                    at = start.get(str(tp.partition), 0)
                    ts = next((r.timestamp for r in records if r.offset >= at), None)
                    if ts is not None:
                        first.setdefault(str(tp.partition), ts)
                high = {str(tp.partition): consumer.highwater(tp) for tp in tps}
                known = all(h is not None for h in high.values())
                waiting = [p for p, h in high.items() if h is not None and h > start.get(p, 0)]
                if known and (not heads or all(p in first for p in waiting)):
                    return high, {p: first[p] for p in waiting if p in first}
                if time.monotonic() > deadline:
                    if known:  # a head that did not come in time: its age is unknown, not zero
                        return high, {p: first[p] for p in waiting if p in first}
                    missing = sorted(p for p, h in high.items() if h is None)
                    raise KafkaSourceError(
                        f"no high watermark for {self.topic} partitions {missing} "
                        f"from {self.bootstrap} after {_DISCOVER_TIMEOUT:.0f} s")
        except KafkaSourceError:
            self._close_meta()
            raise
        except Exception as exc:
            self._close_meta()
            raise KafkaSourceError(f"reading offsets of {self.topic!r} from {self.bootstrap} "
                                   f"failed: {exc}") from exc

    def _close_meta(self) -> None:
        clients, self._meta, self._heads, self._parts = (self._meta, self._heads), None, None, None
        for client in clients:
            if client is not None:
                client.close()

    def initialOffset(self) -> dict:
        """Start offsets for a query without checkpoint, per `startingOffsets`."""
        parts = [str(p) for p in self._partitions()]
        if self.starting == "earliest":
            return dict.fromkeys(parts, 0)
        if self.starting == "latest":
            return self.high_watermarks({})
        try:
            given = json.loads(self.starting)
            return {p: int(given.get(p, 0)) for p in parts}
        except (ValueError, TypeError, AttributeError):
            raise ValueError("startingOffsets must be 'earliest', 'latest' or a JSON object "
                             f"{{\"<partition>\": offset}}, got {self.starting!r}") from None

    def getDefaultReadLimit(self) -> ReadLimit:
        """`ReadMaxRows(maxOffsetsPerTrigger)` when that option is set."""
        return ReadMaxRows(self.max_rows) if self.max_rows else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Trigger.AvailableNow: read up to the high watermarks of this moment."""
        self._target = self.high_watermarks({})

    def latestOffset(self, start: dict | None = None, limit: ReadLimit | None = None) -> dict:
        """End offsets of the next micro-batch.

        High watermarks of all partitions (new partitions included, from 0),
        capped by the Trigger.AvailableNow target and by `ReadMaxRows`; other
        limits read everything available, as Spark requires.
        """
        start = {p: int(o) for p, o in (start or {}).items()}
        high = self.high_watermarks(start)
        lost = {p: (start[p], h) for p, h in high.items() if h < start.get(p, 0)}
        if lost:
            raise KafkaSourceError(
                f"topic {self.topic!r} on {self.bootstrap} ends before the checkpointed "
                f"offsets (partition: (checkpoint, broker end) = {lost}): the broker lost data "
                "(in-memory broker restarted?); start over with a new checkpoint and a new state "
                "namespace, or continue the state with --starting-offsets (see docs/operations/runbook.md)")
        if self._target is not None:
            high = {p: min(h, self._target.get(p, 0)) for p, h in high.items()}
        high = {p: max(h, start.get(p, 0)) for p, h in high.items()}  # never backwards
        for p, o in start.items():
            high.setdefault(p, o)
        if isinstance(limit, ReadMaxRows):
            return fair_limit(start, high, limit.max_rows)
        return high

    def partitions(self, start: dict, end: dict) -> list[KafkaInputPartition]:
        """One input partition per Kafka partition with records in [start, end)."""
        out = []
        for p in sorted(end, key=int):
            lo, hi = int(start.get(p, 0)), int(end[p])
            if hi > lo:
                out.append(KafkaInputPartition(self.topic, int(p), lo, hi))
        return out

    def commit(self, end: dict) -> None:
        """No-op: offsets live in Spark's checkpoint, not in Kafka."""

    def stop(self) -> None:
        """Close the driver-side metadata consumer."""
        self._close_meta()

    # -- executor side (or the driver: `read_table`) ------------------------

    def read_table(self, partitions: list[KafkaInputPartition]):
        """The records of planned `partitions`, read in this process, as one Arrow table (SCHEMA's columns).

        What Spark's job over the batch would bring to the driver, without the
        job: the job's driver reads a whole-stream micro-batch so (stream.collect),
        with the consumers `read` keeps in this process between micro-batches.
        """
        import pyarrow as pa

        batches = [b for p in partitions for b in self.read(p)]
        return pa.Table.from_batches(batches, schema=_arrow_schema())

    def read(self, partition: KafkaInputPartition):
        """Yield exactly the records [start, end) of one partition, in offset order, as Arrow batches.

        Read by this process's `PartitionReader` of the partition (connectors.kafka_records)
        when it has one, else a new one; it is kept for the next micro-batch once
        the range is read, and closed when the read fails or is abandoned.
        Raises `KafkaSourceError` after `stallTimeoutSeconds` without a new
        record (broker down or data lost), or when the broker no longer has the range.
        """
        key = (self.bootstrap, partition.topic, partition.partition)
        reader = _take_reader(key) or PartitionReader(self.bootstrap, self.kafka_config, partition.topic,
                                                      partition.partition)  # fmt: skip
        done = False
        try:
            schema = _arrow_schema()
            for columns in reader.read(partition.start, partition.end, self.max_value, self.stall_timeout):
                yield _batch(columns, schema)
            done = True
        except KafkaReadError as exc:
            where = (f"{partition.topic}[{partition.partition}] at offset {reader.at} (batch range "
                     f"{partition.start}..{partition.end}, broker high watermark {reader.highwater()})")  # fmt: skip
            if exc.stalled:
                raise KafkaSourceError(
                    f"no progress reading {where} for {self.stall_timeout:.0f} s: "
                    "broker unreachable or the records were lost (in-memory broker "
                    "restarted under an old checkpoint?)") from None
            raise KafkaSourceError(f"reading {where} failed: {exc} (the broker no longer has "
                                   "these records?)") from None  # fmt: skip
        finally:
            if done:
                _keep_reader(key, reader)
            else:
                reader.close()


class KafkaUpdatesSource(DataSource):
    """The `fluxmat-kafka` streaming source; see the module docstring."""

    @classmethod
    def name(cls) -> str:
        """Format name used in `spark.readStream.format(...)`."""
        return "fluxmat-kafka"

    def schema(self) -> str:
        """Fixed row schema: partition, offset, key, value, timestamp (ms), utf8, size (bytes)."""
        return SCHEMA

    def streamReader(self, schema) -> KafkaStreamReader:
        """Reader for one streaming query."""
        return KafkaStreamReader(self.options)


def register(spark) -> None:
    """Register the `fluxmat-kafka` format with a SparkSession."""
    spark.dataSource.register(KafkaUpdatesSource)
