"""DeltaFollower: reads a delta topic and keeps a view of the materialisation, exactly once.

The follower reads every partition of the topic (or, for one key, the
partition the job's producer sends that key to), folds the messages with
client.fold.Folder and applies each complete batch to its store: an in-memory
view (client.view.MemoryView, the default) or a database
(client.database.open_store).

Position: the follower's position is part of the store's progress (the next
offset per partition), written in the same transaction as the batch it
follows, so a follower killed at any moment restarts where its view is:
nothing applied twice, nothing skipped. A store that keeps nothing across
processes (MemoryView) starts from the beginning of the topic, whose first
batches carry the whole materialisation. With a `group_id`, the same offsets
are also committed to Kafka after each applied batch (all its parts applied),
for tools that watch consumer-group lag; they are never read back.

Compression: the job's producer compresses record batches (lz4 by default);
kafka-python decompresses them (with the `lz4` package installed).

Causes: `on_change` is told of every fact an applied batch added or removed,
with the update that caused it (client.view.Change: `cause`), after the store
committed the batch, whatever the store.

Errors: a message that is not a version-1 or version-2 delta raises client.fold.MessageError
from `poll`; nothing of its batch is applied and the saved position stays
before it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from fluxmat.client.fold import Batch, Folder
from fluxmat.client.view import Change, MemoryView, changes

__all__ = ["DeltaFollower"]


def partition_of(key: str, partitions: int) -> int:
    """The partition the job's producer (kafka-python's default partitioner) sends `key` to."""
    from kafka.partitioner.default import murmur2

    return (murmur2(key.encode("utf-8")) & 0x7FFFFFFF) % partitions


class DeltaFollower:
    """Follows a delta topic into a store (see the module docstring).

    Args:
        bootstrap: Kafka bootstrap servers.
        topic: the delta topic.
        store: where the view and the progress are kept; default a new MemoryView.
        key: follow only this key of a keyed job (`--partition-by`); None: all keys.
        timeout: seconds to wait for the broker and the topic at start.
        consumer_config: extra kafka-python KafkaConsumer settings.
        group_id: a consumer group to commit the follower's offsets to (for monitoring).
        kafka_config: a Kafka client settings file (TLS, SASL: client.kafka_config), as
            `fluxmat run --kafka-config` takes it.
        on_change: called with a `Change` (key, fact, added, batch, through, cause) per
            removed and then added fact of each batch, once the store has applied it.

    Raises:
        ConnectionError: the broker or the topic cannot be reached within `timeout`.
    """

    def __init__(self, bootstrap: str, topic: str, store=None, key: str | None = None,
                 timeout: float = 10.0, consumer_config: dict | None = None,
                 group_id: str | None = None, kafka_config: str | None = None,
                 on_change: Callable[[Change], None] | None = None) -> None:  # fmt: skip
        from kafka import KafkaConsumer, TopicPartition
        from kafka.errors import KafkaError

        from fluxmat.client.kafka_config import load

        self.topic = topic
        self.store = store if store is not None else MemoryView()
        self.key = key
        self.on_change = on_change
        progress = self.store.load(topic)
        self.folder = Folder(progress.batches, key=key)
        self.reflects = dict(progress.through)  # key -> through of its last applied batch
        self.group_id = group_id
        try:
            self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group_id, enable_auto_commit=False,
                                          fetch_max_wait_ms=100, **load(kafka_config).args,
                                          **(consumer_config or {}))  # fmt: skip
        except (KafkaError, OSError) as exc:
            raise ConnectionError(f"cannot reach Kafka broker at {bootstrap}: {exc}") from None
        parts = self._partitions(bootstrap, timeout)
        if key is not None:
            parts = [partition_of(key, len(parts))]
        self.partitions = [TopicPartition(topic, p) for p in parts]
        self.consumer.assign(self.partitions)
        for tp in self.partitions:
            self.consumer.seek(tp, progress.offsets.get(tp.partition, 0))
        self.folder.seen = {p: o for p, o in progress.offsets.items() if p in parts}

    def _partitions(self, bootstrap: str, timeout: float) -> list[int]:
        deadline = time.monotonic() + timeout
        while True:
            self.consumer.topics()
            found = self.consumer.partitions_for_topic(self.topic)
            if found:
                return sorted(found)
            if time.monotonic() > deadline:
                self.consumer.close()
                raise ConnectionError(f"topic {self.topic!r} not found on {bootstrap} within {timeout:.0f} s")
            time.sleep(0.2)

    def poll(self, timeout: float = 1.0) -> list[Batch]:
        """Read what arrived within `timeout` seconds; apply and return the batches it completes.

        Raises:
            client.fold.MessageError: a message was refused (nothing of its batch applied).
        """
        done = []
        records = self.consumer.poll(timeout_ms=int(timeout * 1000))
        for tp in sorted(records, key=lambda t: t.partition):
            for rec in records[tp]:
                batch = self.folder.offer(rec.value, tp.partition, rec.offset)
                if batch is not None:
                    offsets = self.folder.resume()
                    self.store.apply(batch, self.topic, offsets)
                    self.reflects[batch.key] = batch.through
                    done.append(batch)
                    if self.on_change is not None:
                        for change in changes(batch):
                            self.on_change(change)
                    if self.group_id is not None:
                        self._commit(offsets)
        return done

    def _commit(self, offsets: dict[int, int]) -> None:
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata

        self.consumer.commit({TopicPartition(self.topic, p): OffsetAndMetadata(o, "", -1)
                              for p, o in offsets.items()})  # fmt: skip

    def caught_up(self) -> bool:
        """Whether every followed partition has been read to its high watermark (as last fetched)."""
        for tp in self.partitions:
            high = self.consumer.highwater(tp)  # from fetch responses (tansu's ListOffsets is wrong)
            if high is None or self.consumer.position(tp) < high:
                return False
        return True

    def run(self, stop: Callable[[], bool] = lambda: False, on_batch: Callable[[Batch], None] | None = None) -> None:
        """Poll until `stop()` is true; `on_batch` is told of every applied batch."""
        while not stop():
            for batch in self.poll():
                if on_batch is not None:
                    on_batch(batch)

    def through(self, key: str | None = None):
        """The `through` (last update id) that the view of `key` reflects; None before any batch."""
        return self.reflects.get(self.key if key is None else key)

    def view(self, key: str | None = None) -> set[tuple]:
        """The facts of `key`'s view (None: the unkeyed stream, or with `key` given, that key)."""
        key = self.key if key is None else key
        return self.store.facts(key)

    def close(self) -> None:
        self.consumer.close()
        self.store.close()

    def __enter__(self) -> DeltaFollower:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
