"""What the job publishes through: the `Publisher` protocol (the deltas topic and the dead letters).

`connectors.kafka_sink.KafkaPublisher` is the one the job opens; tests hand in
small ones that record what they are given. The processor (stream.batch)
publishes a batch only after its commit (the state store's contract), so a
publisher may fail and be retried: a replayed batch re-publishes its stored
output, parts and all, identically.

Not here: Kafka (connectors.kafka_sink), the message format (connectors.delta_codec).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class Publisher(Protocol):
    """Where a batch's delta and dead letters go."""

    on_retry: Callable[[str], None] | None  # told why before each resend (the job's metrics)

    def publish_delta(self, batch: int, through, added: list, removed: list, key: str | None = None) -> int:
        """Publish one batch's delta (with a key: one key's delta, `--partition-by`); the messages sent.

        Blocks until the broker acknowledged every part.
        """
        ...

    def publish_dead_letter(self, reason: str, partition: int, offset: int, raw: str | None,
                            truncated: bool = False) -> None:  # fmt: skip
        """Publish one rejected update with the reason (without a dead-letter topic: a log line)."""
        ...

    def close(self) -> None: ...
