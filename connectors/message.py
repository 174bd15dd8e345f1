"""One message of the updates topic as the job reads it: a named record and the source's schema.

The source (connectors.kafka_source) yields one row per Kafka record in the
columns of `SCHEMA`; the driver and the executors read such a row as a
`Message` (`Message.of`), by name, never by position. Rows shorter than the
schema (tests, older callers) take the defaults: no key, no timestamp, the
value's UTF-8 validity and size unknown (the processor then measures the
value itself).

Not here: reading Kafka (connectors.kafka_source), decoding the value into an
update (connectors.files, stream.batch).
"""

from __future__ import annotations

from typing import NamedTuple


class Message(NamedTuple):
    """One record of the updates topic (the columns of `SCHEMA`, in order)."""

    partition: int
    offset: int
    key: str | None = None  # the Kafka message key, decoded as UTF-8 (None: none)
    value: str | None = None  # the value as text (cut at --max-message-bytes by the source)
    timestamp: int | None = None  # the Kafka timestamp, ms since the epoch
    utf8: bool | None = None  # False: the value's bytes are not valid UTF-8 (None: not known)
    size: int | None = None  # the value's size in bytes as read (None: not known)

    @classmethod
    def of(cls, row) -> Message:
        """A source row (a tuple in `SCHEMA`'s order, possibly shorter) as a `Message`."""
        return row if isinstance(row, cls) else cls(*row)


# Spark's type of each column of `Message`, in order: the source's schema is built from both.
SPARK_TYPES = ("int", "long", "string", "string", "long", "boolean", "long")
SCHEMA = ", ".join(
    f"{name} {kind}" for name, kind in zip(Message._fields, SPARK_TYPES, strict=True)
)
