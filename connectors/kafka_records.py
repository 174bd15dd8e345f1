"""A Kafka partition's records [start, end) read with confluent-kafka (librdkafka), as Arrow columns.

The `fluxmat-kafka` source (connectors.kafka_source) plans micro-batches with
kafka-python; the records themselves are read here. kafka-python parses each
record in Python (~13-20 us of CPU a message); librdkafka fetches and parses in
C, in its own threads, and the only Python work left is taking a message's
fields into the columns (~3-4 us a message, both measured on the job's LUBM
updates against tansu).

`PartitionReader` reads one partition. It is kept between micro-batches (the
source keeps one per bootstrap, topic and partition), with its connection and
metadata, but unassigned between reads: an assigned librdkafka consumer at the
log's end fetches every `fetch.wait.max.ms` (5 ms) in its own thread, which
cost an idle job 10% of a tansu core and 2% of its own. Each read assigns the
partition at its start offset. `read(start, end)`
yields the rows of [start, end) in offset order, a list of columns per
`consume` that returned any (`partition, offset, key, value, timestamp, utf8,
size`, as connectors.message.SCHEMA).

Fetches: the range's records are below the high watermark planning saw, so
the broker is asked to wait at most `READ_WAIT_MS` for more. A broker that
answers nothing to a short wait (tansu on a slow object store) gets a new
consumer with `PATIENT_WAIT_MS` when a `consume` comes back empty below the
range's end; that one is then kept. Nothing is committed to Kafka: the group id
is never joined (the partition is assigned, not subscribed) and auto-commit is
off. An offset that is no longer on the broker is an error (`KafkaSourceError`),
never a silent jump (librdkafka's `auto.offset.reset=error`).

Security settings (`--kafka-config`) are the same file as everywhere else,
in librdkafka's names (client.kafka_config: `KafkaSettings.librdkafka`).

Not here: planning (offsets, high watermarks: connectors.kafka_source), what
the rows mean (connectors.message).
"""

from __future__ import annotations

import logging
import time

from fluxmat.client.kafka_config import load

READ_WAIT_MS = 5  # see connectors.kafka_source: a fetch at the log's end is held this long
PATIENT_WAIT_MS = 500  # after an empty answer below the range's end (a slow store)
_CONSUME_S = 0.2  # one `consume` waits at most this long for a record
_CONSUME_MAX = 10_000  # messages one `consume` hands over at most (librdkafka allows 1,000,000): an Arrow batch
_QUEUED_KIB = 16_384  # what librdkafka fetches ahead of the reads, per partition (64 MiB by default)
_GROUP = "fluxmat-source"  # librdkafka needs a group id; it is never joined nor committed to
_LOG = logging.getLogger("fluxmat.kafka.records")


class KafkaReadError(RuntimeError):
    """No progress for the stall timeout (`stalled`), or librdkafka reported an error (an offset out of range)."""

    def __init__(self, message: str, stalled: bool = False):
        super().__init__(message)
        self.stalled = stalled


def consumer(bootstrap: str, kafka_config: str | None, wait_ms: int):
    """A librdkafka consumer for reading assigned partitions (module docstring)."""
    from confluent_kafka import Consumer

    return Consumer({
        **load(kafka_config).librdkafka(),
        "bootstrap.servers": bootstrap,
        "group.id": _GROUP,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",
        "enable.partition.eof": False,
        "fetch.wait.max.ms": wait_ms,
        "queued.max.messages.kbytes": _QUEUED_KIB,
    }, logger=_LOG)  # fmt: skip


class PartitionReader:
    """Reads ranges of one partition with a kept librdkafka consumer (module docstring)."""

    def __init__(self, bootstrap: str, kafka_config: str | None, topic: str, partition: int):
        self.bootstrap, self.kafka_config = bootstrap, kafka_config
        self.topic, self.partition = topic, partition
        self.client = None
        self.wait_ms = READ_WAIT_MS
        self.client_wait = READ_WAIT_MS  # the client's fetch wait
        self.at: int | None = None  # the next offset the client hands over (None: not assigned)
        self.idle = False  # unassigned between reads (an assigned client fetches every `wait_ms` at the log's end)

    def read(self, start: int, end: int, max_value: int | None, stall_timeout: float):
        """The rows of [start, end) as column lists, a batch per `consume`; `KafkaReadError` on a stall or error.

        `max_value`: a longer value is cut to it before decoding (`size` keeps its length).
        """
        if self.at != start or self.idle:
            self._assign(start)
        last_progress = time.monotonic()
        while self.at < end:
            msgs = self.client.consume(num_messages=min(end - self.at, _CONSUME_MAX), timeout=_CONSUME_S)
            cols = self._columns(msgs, end, max_value)
            if cols is not None:
                last_progress = time.monotonic()
                yield cols
            elif self.wait_ms < PATIENT_WAIT_MS:  # a broker that answers nothing to a short wait
                self.wait_ms = PATIENT_WAIT_MS
                self._assign(self.at)
            if self.at < end and time.monotonic() - last_progress > stall_timeout:
                raise KafkaReadError(f"no progress at offset {self.at} for {stall_timeout:.0f} s", stalled=True)
        self.client.unassign()  # kept idle: no fetch every `wait_ms` at the log's end
        self.idle = True

    def _partition(self):
        from confluent_kafka import TopicPartition

        return TopicPartition(self.topic, self.partition)

    def highwater(self) -> int | None:
        """The partition's high watermark as the last fetch response gave it (None: not known)."""
        if self.client is None:
            return None
        try:
            high = self.client.get_watermark_offsets(self._partition(), cached=True)[1]
        except Exception:  # noqa: BLE001 - only for an error message
            return None
        return high if high >= 0 else None

    def close(self) -> None:
        client, self.client, self.at = self.client, None, None
        if client is not None:
            client.close()

    def _assign(self, at: int) -> None:
        """A fresh client (when none, or the wait changed) assigned the partition at offset `at`."""
        from confluent_kafka import TopicPartition

        if self.client is None or self.client_wait != self.wait_ms:
            self.close()
            self.client, self.client_wait = consumer(self.bootstrap, self.kafka_config, self.wait_ms), self.wait_ms
        self.client.assign([TopicPartition(self.topic, self.partition, at)])
        self.at, self.idle = at, False

    def _columns(self, msgs: list, end: int, max_value: int | None) -> list[list] | None:
        """The messages below `end` as the source's columns (None: none); moves `at` on."""
        for m in msgs:
            if m.error() is not None:  # the caller closes the client
                raise KafkaReadError(str(m.error()))
        msgs = [m for m in msgs if self.at <= m.offset() < end] if msgs and msgs[-1].offset() >= end else msgs
        if not msgs:
            return None
        self.at = msgs[-1].offset() + 1
        raws = [m.value() for m in msgs]
        sizes = [None if v is None else len(v) for v in raws]
        texts, utf8 = [], []
        for raw, size in zip(raws, sizes, strict=True):
            if max_value is not None and size is not None and size > max_value:  # cut, its validity kept
                text, ok = raw[:max_value].decode("utf-8", errors="replace"), _text(raw)[1]
            else:
                text, ok = _text(raw)
            texts.append(text)
            utf8.append(ok)
        keys = [None if (k := m.key()) is None else k.decode("utf-8", errors="replace") for m in msgs]
        stamps = [ts if kind else None for kind, ts in (m.timestamp() for m in msgs)]
        offsets = [m.offset() for m in msgs]
        return [[self.partition] * len(msgs), offsets, keys, texts, stamps, utf8, sizes]


def _text(raw: bytes | None) -> tuple[str | None, bool]:
    """The value as text (invalid bytes as U+FFFD) and whether it was valid UTF-8."""
    if raw is None:
        return None, True
    try:
        return raw.decode("utf-8"), True
    except UnicodeDecodeError:
        return raw.decode("utf-8", errors="replace"), False

