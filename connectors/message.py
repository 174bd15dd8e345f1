"""One message of the updates topic as the job reads it: a named record and the source's schema.

The source (connectors.kafka_source) yields one row per Kafka record in the
columns of `SCHEMA`; the driver and the executors read such a row as a
`Message` (`Message.of`), by name, never by position. Rows shorter than the
schema (tests, older callers) take the defaults: no key, no timestamp, the
value's UTF-8 validity and size unknown (the processor then measures the
value itself).

A micro-batch travels as `Messages`: the same fields as columns, one list
each (from the Arrow table the driver collects, `Messages.from_arrow`, without
a Python object per row); `messages[i]` is row i as a `Message`, made when
asked (a dead letter, an update's `partition:offset`).

Not here: reading Kafka (connectors.kafka_source), decoding the value into an
update (connectors.files, stream.batch).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


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


class Messages(NamedTuple):
    """A micro-batch's rows as columns, one list per field of `Message` (module docstring)."""

    partition: list
    offset: list
    key: list
    value: list
    timestamp: list
    utf8: list
    size: list

    @classmethod
    def of(cls, rows) -> Messages:
        """`rows` as columns ordered by (partition, offset): `Messages`, or source rows (see `Message.of`)."""
        if not isinstance(rows, cls):
            full = [Message.of(r) for r in rows]
            rows = cls(
                *(
                    [list(c) for c in zip(*full, strict=True)]
                    if full
                    else [[] for _ in Message._fields]
                )
            )
        part, off = np.asarray(rows.partition, np.int64), np.asarray(rows.offset, np.int64)
        if (
            len(off) < 2
            or ((part[1:] > part[:-1]) | ((part[1:] == part[:-1]) & (off[1:] >= off[:-1]))).all()
        ):
            return rows
        order = np.lexsort((off, part)).tolist()
        return cls(*([column[i] for i in order] for column in rows))

    @classmethod
    def from_arrow(cls, table) -> Messages:
        """A table in `SCHEMA`'s columns (`df.toArrow()`), each column to a list; missing ones take the defaults."""
        names, default = set(table.column_names), Message._field_defaults
        return cls(*(table.column(f).to_pylist() if f in names else [default.get(f)] * table.num_rows
                     for f in Message._fields))  # fmt: skip

    def row(self, i: int) -> Message:
        """Row i as a `Message`."""
        return Message(*(column[i] for column in self))

    def rows(self):
        """Every row as a `Message`, in order."""
        return map(Message._make, zip(*self, strict=True))
