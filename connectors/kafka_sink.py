"""Kafka sink: materialisation deltas and dead letters, as JSON.

Delta messages (deltas topic, partition 0, key `str(batch)`)::

    {"v": 2, "batch": 7, "through": <opaque, e.g. source offsets>, "part": 0, "parts": 2,
     "added": [["edge", "a", "b"], ...], "removed": [...], "causes": [["u7", 0, 12], ...]}

`"v"` is the message format's version, first in every delta (`DELTA_VERSION`)
and dead letter (`MESSAGE_VERSION`); the JSON Schemas of both are shipped in
`client/schemas/`.

* `"causes"` (version 2) names the update that caused each fact, when exactly
  one update of the batch did: runs `[update id, first index, count]` over the
  message's added facts followed by its removed facts, in the order the message
  lists them (with N-Triples: the lines, then `not_triples`). The caller gives
  the runs over the whole batch (`publish_delta(causes=...)`); each part gets
  those of its own facts, renumbered. Absent when no fact has a single cause
  (a key's first batch, the initial materialisation).

With `--partition-by` a delta belongs to one key of the stream: it carries
`"key"` first and is sent with the key as its Kafka message key (partition by
the producer's hash of the key), so each key's deltas are one ordered log.

* With `delta_format="ntriples"` the processor hands over a fact that is a
  triple as its N-Triples line (a string) and any other fact as a JSON array;
  each message then carries `"format": "ntriples"`, `"added"` / `"removed"` as
  N-Triples text (one triple per line), and the other facts as JSON arrays in
  `"not_triples": {"added": [...], "removed": [...]}` (only when there are any),
  so nothing is dropped.
* One micro-batch's delta is split into `parts` messages of at most
  `max_facts_per_message` facts (added and removed counted together) and at
  most `max_message_bytes` bytes (a part over it is halved until it fits or
  holds one fact); an empty delta is still one message, so consumers see every
  batch id. Large facts (a long string) thus never make a delta too large for
  the broker: a single fact is no larger than the update message it came in.
* Messages are compressed by the producer (`compression`: lz4 by default,
  gzip, or none), per record batch, which Kafka stores and serves as such:
  consumers decompress (Java clients and librdkafka do it built in;
  kafka-python needs the `lz4` package). A delta of LUBM facts shrinks about
  8x, and sending and acknowledging a 550 KB message takes ~4 ms instead of ~70
  on tansu. The size limits above apply to the uncompressed value, so a part
  also fits a broker whatever the compression ratio.
* With `delta_format="debezium"` each fact is one change event on its
  predicate's topic (connectors.debezium); the size limits and parts do not
  apply then (one fact is no larger than the update it came in).
* Everything goes to partition 0, so the topic is one totally ordered log:
  a consumer that applies messages in log order rebuilds the materialisation
  without reordering across batches (`read_deltas` does that). The producer
  keeps one request in flight, so retries cannot reorder messages.
* Delivery is at-least-once: `publish_delta` returns only after the broker
  acknowledged every part, and raises otherwise (never drops silently). A
  batch replayed after a crash, or a part resent after an ambiguous failure,
  appears again; consumers deduplicate by `(batch, part)` and ignore batch ids
  they have already applied.

Dead letters (dead-letter topic)::

    {"v": 1, "reason": "...", "source": {"topic": ..., "partition": ..., "offset": ...},
     "raw": "<original value or null>"[, "truncated": true]}

* `raw` is what the caller passes: the stream cuts it short (stream.batch,
  `DEAD_RAW_CHARS`) and says so with `truncated`, so a dead letter always fits
  in a Kafka message; the whole value stays in the source topic at `source`.
* Without a dead-letter topic a dead letter is *logged* instead: one WARNING
  line on the `fluxmat.dead-letters` logger with the partition, offset, reason
  and the start of the message (`LOG_RAW_CHARS` characters, escaped to one
  line). It never raises then, so bad input cannot stop the job; counting is
  the caller's (the job's `fluxmat_dead_letters_total`).

Clients: a `KafkaPublisher` owns a producer and cannot be pickled; create it
where it is used (on the driver inside foreachBatch, or inside an executor-side
function), never capture it in a Spark closure.
"""

from __future__ import annotations

import json
import logging
import time
from contextlib import contextmanager

import orjson

from fluxmat.client.fold import VERSION as DELTA_VERSION
from fluxmat.client.fold import cause_list, cause_runs
from fluxmat.client.kafka_config import NONE, KafkaSettings
from fluxmat.connectors.broker import check_broker, ensure_topics
from fluxmat.connectors.debezium import events

_FLUSH_DEADLINE = 30.0
_MAX_REQUEST = 16 << 20  # client-side bound; one-fact parts may pass max_message_bytes
LOG_RAW_CHARS = 200  # of a dead letter's message, in its log line
COMPRESSIONS = ("lz4", "gzip", "none")  # fluxmat run --delta-compression
DELTA_FORMATS = ("json", "ntriples", "debezium")  # fluxmat run --delta-format
MESSAGE_VERSION = 1  # "v" of dead letters (client/schemas/dead-letter.schema.json); deltas: DELTA_VERSION
log = logging.getLogger("fluxmat.dead-letters")


def _has_float(value) -> bool:
    todo = [value]
    while todo:
        item = todo.pop()
        t = type(item)
        if t is float:
            return True
        if t is list or t is tuple:
            todo.extend(item)
        elif t is dict:
            todo.extend(item.values())
    return False


def _encode(message: dict) -> bytes:
    """Compact JSON as UTF-8, byte for byte `json.dumps(separators=(",", ":"), ensure_ascii=False)`.

    orjson writes those bytes (same escapes, raw non-ASCII) several times faster,
    except for floats (its own notation) and integers beyond 64 bits (refused);
    facts hold neither, but `through` is an update's id, any JSON value: a float
    there, or a huge integer anywhere, is written by json.
    """
    if not _has_float(message.get("through")) and not _has_float(message.get("causes")):
        try:
            return orjson.dumps(message)
        except TypeError:  # orjson.JSONEncodeError: an integer beyond 64 bits
            pass
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _part_causes(parts: list[tuple[list, list]], by: list, n_added: int, lines_first: bool) -> list[list]:
    """The causes runs of each part, from the batch's per-fact causes (added, then removed).

    Parts are consecutive slices of the batch's added and removed facts
    (`_split`, `_halves`); with N-Triples a message lists its lines first.
    """
    out, a0, r0 = [], 0, n_added
    for added, removed in parts:
        ca, cr = by[a0 : a0 + len(added)], by[r0 : r0 + len(removed)]
        a0, r0 = a0 + len(added), r0 + len(removed)
        if lines_first:
            ca, cr = _lines_first(added, ca), _lines_first(removed, cr)
        out.append(cause_runs(ca + cr))
    return out


def _lines_first(items: list, causes: list) -> list:
    """`causes` reordered as a N-Triples message lists `items`: the lines (strings), then the rest."""
    return ([c for x, c in zip(items, causes, strict=True) if isinstance(x, str)]
            + [c for x, c in zip(items, causes, strict=True) if not isinstance(x, str)])  # fmt: skip


def _ntriples(message: dict) -> dict:
    """A delta message with N-Triples text, the facts that are not triples aside."""
    out = {**message, "format": "ntriples"}
    others: dict[str, list] = {}
    for key in ("added", "removed"):
        items = message[key]
        out[key] = "".join(line + "\n" for line in items if isinstance(line, str))
        rest = [f for f in items if not isinstance(f, str)]
        if rest:
            others[key] = rest
    if others:
        out["not_triples"] = {"added": others.get("added", []), "removed": others.get("removed", [])}
    return out


class KafkaPublisher:
    """Publishes deltas and dead letters to Kafka, synchronously.

    Args:
        bootstrap: Kafka bootstrap servers.
        deltas_topic: Topic receiving delta messages (partition 0).
        dead_letter_topic: Topic receiving bad input; None: dead letters are
            logged (see the module docstring).
        max_facts_per_message: Upper bound on facts in one delta message.
        max_message_bytes: Upper bound on a delta message's size, unless it
            holds one fact.
        source_topic: Topic named in dead letters' `source` (informational).
        connect_timeout: Seconds to wait for the broker at construction.
        compression: `lz4` (default), `gzip` or `none`: how the producer
            compresses its record batches.
        kafka: Security settings of the producer (client.kafka_config).

    Raises:
        ConnectionError: the broker cannot be reached at construction.
    """

    def __init__(self, bootstrap: str, deltas_topic: str, dead_letter_topic: str | None = None,
                 max_facts_per_message: int = 5000, source_topic: str | None = None,
                 connect_timeout: float = 5.0, max_message_bytes: int = 512 * 1024,
                 delta_format: str = "json", compression: str = "lz4",
                 kafka: KafkaSettings = NONE) -> None:
        from kafka import KafkaProducer
        from kafka.errors import KafkaError

        if max_facts_per_message < 1:
            raise ValueError(f"max_facts_per_message must be >= 1, got {max_facts_per_message}")
        if compression not in COMPRESSIONS:
            raise ValueError(f"compression must be one of {', '.join(COMPRESSIONS)}, got {compression!r}")
        self.bootstrap = bootstrap
        self.deltas_topic = deltas_topic
        self.dead_letter_topic = dead_letter_topic
        self.max_facts = int(max_facts_per_message)
        self.max_bytes = int(max_message_bytes)
        self.source_topic = source_topic
        self.delta_format = delta_format
        self.on_retry = None  # told why before each resend (the job's metrics)
        self._deferred: list | None = None  # futures to await at the end of `deferred()`
        self.kafka = kafka
        self._topics: set[str] = set()  # Debezium topics known to exist
        check_broker(bootstrap, timeout=connect_timeout, kafka=kafka)
        try:
            self._producer = KafkaProducer(
                bootstrap_servers=bootstrap,
                acks="all",
                retries=5,
                retry_backoff_ms=200,
                max_in_flight_requests_per_connection=1,
                linger_ms=5,
                max_request_size=_MAX_REQUEST,  # the broker's own limit decides
                compression_type=None if compression == "none" else compression,
                **kafka.args,
            )
        except (KafkaError, OSError) as exc:
            raise ConnectionError(f"cannot reach Kafka broker at {bootstrap}: {exc}") from None

    @contextmanager
    def deferred(self):
        """Within the block, messages are sent without waiting; at its end all are awaited.

        For many small deltas in a row (one per key of a keyed batch): one
        flush instead of one round trip each. The order of the messages is
        kept (one request in flight). If any was not delivered by the end,
        the block raises the error (no resend): the caller's unit of work
        fails and is retried as a whole, re-publishing what it had stored.
        """
        self._deferred = []
        try:
            yield self
            futures, self._deferred = self._deferred, None
            self._producer.flush(timeout=_FLUSH_DEADLINE)
            deadline = time.monotonic() + _FLUSH_DEADLINE
            for fut in futures:
                fut.get(timeout=max(deadline - time.monotonic(), 0.1))
        finally:
            self._deferred = None

    def __getstate__(self):
        raise TypeError("KafkaPublisher holds a Kafka client and cannot be pickled; "
                        "create it where it is used instead of capturing it in a closure")

    def _split(self, added: list, removed: list) -> list[tuple[list, list]]:
        parts: list[tuple[list, list]] = []
        cur_a: list = []
        cur_r: list = []
        for kind, facts in (("a", added), ("r", removed)):
            for fact in facts:
                if len(cur_a) + len(cur_r) == self.max_facts:
                    parts.append((cur_a, cur_r))
                    cur_a, cur_r = [], []
                (cur_a if kind == "a" else cur_r).append(fact if isinstance(fact, str) else list(fact))
        parts.append((cur_a, cur_r))
        return parts

    def publish_delta(self, batch: int, through, added: list[list], removed: list[list],
                      key: str | None = None, causes: list | None = None) -> int:  # fmt: skip
        """Publish one micro-batch's delta; return the number of messages sent.

        `causes`: the update that caused each fact, as runs `[update id, first,
        count]` over `added` followed by `removed` (client.fold.cause_runs); each
        message carries those of its own facts (module docstring).

        Blocks until the broker acknowledged every part. `through` must be
        JSON-serialisable (e.g. the source offsets the batch ends at). With a
        `key` (a partition of the stream, `--partition-by`), the messages carry
        `"key"` and are sent with it as their Kafka message key, to the partition
        the producer's partitioner picks for it: one key's deltas stay in order.

        Raises:
            kafka.errors.KafkaError: a part could not be delivered within ~30 s
                (after the producer's own retries and resends with backoff).
        """
        by = cause_list(causes, len(added) + len(removed), f"batch {batch}") if causes else None
        if self.delta_format == "debezium":
            by = by or [None] * (len(added) + len(removed))
            return self._publish_events(events(self.deltas_topic, batch, through, added, removed, key,
                                               by[: len(added)], by[len(added) :]))  # fmt: skip
        parts = self._split(added, removed)
        while True:
            n = len(parts)
            head = {"v": DELTA_VERSION, "batch": batch} if key is None else {
                "v": DELTA_VERSION, "key": key, "batch": batch}
            messages = [{**head, "through": through, "part": i, "parts": n, "added": a, "removed": r}
                        for i, (a, r) in enumerate(parts)]  # fmt: skip
            if self.delta_format == "ntriples":
                messages = [_ntriples(msg) for msg in messages]
            if by is not None:
                for msg, runs in zip(messages, _part_causes(parts, by, len(added), self.delta_format == "ntriples"),
                                     strict=True):  # fmt: skip
                    if runs:
                        msg["causes"] = runs
            values = [_encode(msg) for msg in messages]
            big = {i for i, v in enumerate(values)
                   if len(v) > self.max_bytes and len(parts[i][0]) + len(parts[i][1]) > 1}  # fmt: skip
            if not big:
                break
            parts = [half for i, part in enumerate(parts)
                     for half in (_halves(*part) if i in big else (part,))]  # fmt: skip
        if key is None:
            self._send_all(self.deltas_topic, str(batch).encode("utf-8"), values, partition=0)
        else:
            self._send_all(self.deltas_topic, key.encode("utf-8"), values, partition=None)
        return n

    def _publish_events(self, changes: list[tuple[str, bytes, bytes | None]]) -> int:
        """Send Debezium change events (connectors.debezium), each topic's in order; their number."""
        new = {topic: 1 for topic, _, _ in changes if topic not in self._topics}
        if new:
            ensure_topics(self.bootstrap, new, kafka=self.kafka)
            self._topics.update(new)
        self._send_records([(topic, key, value) for topic, key, value in changes], partition=0)
        return len(changes)

    def publish_dead_letter(self, reason: str, partition: int, offset: int,
                            raw: str | None, truncated: bool = False) -> None:
        """Publish one rejected input record with the reason; blocks until acknowledged.

        Without a dead-letter topic, log it instead (one line; never raises).

        Raises:
            kafka.errors.KafkaError: delivery to the topic failed within ~30 s.
        """
        if self.dead_letter_topic is None:
            log.warning("%s", dead_letter_line(reason, partition, offset, raw, truncated))
            return
        message = {"v": MESSAGE_VERSION, "reason": reason,
                   "source": {"topic": self.source_topic, "partition": partition,
                              "offset": offset},
                   "raw": raw}
        if truncated:
            message["truncated"] = True
        key = f"{partition}:{offset}".encode()
        self._send_all(self.dead_letter_topic, key, [_encode(message)], partition=None)

    def _send_all(self, topic: str, key: bytes, messages: list[bytes], partition) -> None:
        """Send in order and wait for acks; resend failed ones with backoff until 30 s."""
        self._send_records([(topic, key, m) for m in messages], partition)

    def _send_records(self, records: list[tuple[str, bytes, bytes | None]], partition) -> None:
        """`_send_all` of (topic, key, value) records."""
        from kafka.errors import KafkaError

        if self._deferred is not None:  # awaited at the end of `deferred()`
            self._deferred += [self._producer.send(t, key=k, value=m, partition=partition) for t, k, m in records]
            return
        deadline = time.monotonic() + _FLUSH_DEADLINE
        pending = list(records)
        delay = 0.2
        while True:
            futures = [(m, self._producer.send(m[0], key=m[1], value=m[2], partition=partition))
                       for m in pending]
            self._producer.flush(timeout=max(deadline - time.monotonic(), 1.0))
            failed, last = [], None
            for m, fut in futures:
                try:
                    fut.get(timeout=max(deadline - time.monotonic(), 0.1))
                except KafkaError as exc:
                    if not getattr(exc, "retriable", False):
                        raise
                    failed.append(m)
                    last = exc
            if not failed:
                return
            if time.monotonic() + delay > deadline:
                raise last
            if self.on_retry is not None:
                self.on_retry(f"{type(last).__name__}: {last}")
            time.sleep(delay)
            delay = min(delay * 2, 5.0)
            pending = failed

    def close(self) -> None:
        """Flush and close the producer. Idempotent."""
        producer, self._producer = getattr(self, "_producer", None), None
        if producer is not None:
            producer.flush(timeout=10)
            producer.close(timeout=10)

    def __enter__(self) -> KafkaPublisher:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _halves(added: list, removed: list) -> tuple[tuple[list, list], tuple[list, list]]:
    """A delta part as two parts with half of its facts each (added first, as in `_split`)."""
    facts = [(True, f) for f in added] + [(False, f) for f in removed]
    mid = len(facts) // 2
    return tuple(([f for a, f in side if a], [f for a, f in side if not a])
                 for side in (facts[:mid], facts[mid:]))  # type: ignore[return-value]


def dead_letter_line(reason: str, partition: int, offset: int, raw: str | None,
                     truncated: bool = False) -> str:
    """A dead letter as one log line: where, why, and the start of the message."""
    if raw is None:
        shown = "null"
    else:
        cut = truncated or len(raw) > LOG_RAW_CHARS
        shown = json.dumps(raw[:LOG_RAW_CHARS]) + (" (truncated)" if cut else "")
    why = " ".join(reason.split())  # one line, whatever the reason holds
    return f"dead letter: partition {partition} offset {offset}: {why}; message: {shown}"


_FETCH_WAIT_MS = 500  # how long the broker may take to gather a fetch (read_deltas; Kafka's default)


def read_deltas(bootstrap: str, topic: str, timeout: float = 10.0, kafka: KafkaSettings = NONE) -> list[dict]:
    """Every message of `topic` from the beginning, decoded, in log order.

    Reads each partition (the publisher uses only partition 0) up to the high
    watermark seen at the start of the read (taken from fetch responses, since
    tansu's ListOffsets is wrong) and returns the partitions one after another.
    A fetch may wait `_FETCH_WAIT_MS`: tansu with object storage answers a fetch
    with nothing when its store takes longer than the fetch's wait, and a
    shorter wait (100 ms) never got past such an offset.

    Raises:
        ConnectionError: the broker cannot be reached.
        TimeoutError: the end of the topic was not reached within `timeout`.
    """
    from kafka import KafkaConsumer, TopicPartition

    check_broker(bootstrap, kafka=kafka)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             group_id=None, fetch_max_wait_ms=_FETCH_WAIT_MS, **kafka.args)
    try:
        deadline = time.monotonic() + timeout
        parts = None
        while not parts:
            consumer.topics()
            parts = consumer.partitions_for_topic(topic)
            if not parts and time.monotonic() > deadline:
                raise TimeoutError(f"topic {topic!r} not found on {bootstrap}")
            if not parts:
                time.sleep(0.1)
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        got: dict[int, list] = {tp.partition: [] for tp in tps}
        target: dict[int, int] = {}
        pos = dict.fromkeys(got, 0)
        while True:
            for tp, recs in consumer.poll(timeout_ms=200).items():
                for rec in recs:
                    got[tp.partition].append(json.loads(rec.value))
                    pos[tp.partition] = rec.offset + 1
            for tp in tps:
                if tp.partition not in target and consumer.highwater(tp) is not None:
                    target[tp.partition] = consumer.highwater(tp)
            if len(target) == len(tps) and all(pos[p] >= target[p] for p in target):
                return [m for p in sorted(got) for m in got[p]]
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic!r} from {bootstrap}: reached {pos}, "
                                   f"end {target}, after {timeout:.0f} s")
    finally:
        consumer.close()
