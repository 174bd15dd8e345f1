"""A micro-batch's messages decoded: dead letters with their reasons, the updates as columns.

`Decoder.batch(reasoner, rows)` reads every message of a batch (stream.batch's
module docstring says what makes one a dead letter) and gives a `Decoded`:

* the reason of each message that is a dead letter (`reasons`);
* each valid update's id and how many facts it adds and deletes;
* `columns`: the valid updates as columns of term codes
  (engine.update_columns, built by connectors.json_columns), for the engine's
  `Reasoner.feed_columns`. A plain update (JSON arrays of strings and
  integers) goes in without a Python tuple per fact; any other message is
  decoded one by one (`Decoder.one`), so a dead letter has the same reason
  either way, and a valid update that is not plain (a literal, an RDF update)
  is added to the columns as its Python facts;
* `decoded[i]`: message i as an `Update` or its reason, as `Decoder.one` gives
  it (made when asked: the one-by-one feed of a quarantine re-run, a program
  change, a key's shared facts).

A batch with a program change has no columns (its updates are fed one by one,
around the change).

Not here: what is applied (stream.batch), reading JSON facts (connectors).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fluxmat.connectors.files import Update, decode_json, parse_update
from fluxmat.connectors.json_columns import ColumnsBuilder, Scanned
from fluxmat.connectors.message import Message, Messages
from fluxmat.engine import FluxmatError, JsonFacts, Reasoner, UpdateColumns

DEFAULT_MAX_MESSAGE_BYTES = 1 << 20  # 1 MiB
DEFAULT_MAX_MESSAGE_BYTES = 1 << 20  # 1 MiB
DEAD_RAW_CHARS = 65_536  # a dead letter's raw value is cut here: it must fit a Kafka message
REASON_CHARS = 2_000  # and so is its reason (which may quote the message)
# Why a message became a dead letter, as a bounded set (a metric label): by its reason's start.
DEAD_LETTER_KINDS = {
    "message too large": "too_large", "value is not valid UTF-8": "not_utf8",
    "invalid JSON": "invalid_json", "work limit exceeded": "work_limit",
    "fact limit exceeded": "fact_limit", "cannot decode the message": "error",
}  # fmt: skip
OTHER_KIND = "invalid_update"  # not an update, unknown key, wrong arity, added and deleted, ...


def dead_letter_kind(reason: str) -> str:
    """The kind of a dead letter's reason (`DEAD_LETTER_KINDS`, else `OTHER_KIND`)."""
    return next(
        (kind for start, kind in DEAD_LETTER_KINDS.items() if reason.startswith(start)), OTHER_KIND
    )


@dataclass(frozen=True)
class DeadLetter:
    """A message that was not applied, and why (published by connectors.kafka_sink, stored with its batch).

    A batch's output (connectors.state) keeps each as the JSON list
    `[reason, partition, offset, raw, truncated]` (`stored()`); `read()` reads
    one back, also the `[reason, partition, offset]` of a keyed job's summaries.
    """

    reason: str
    partition: int
    offset: int
    raw: str | None = None  # the message's value, cut to DEAD_RAW_CHARS
    truncated: bool = False  # `raw` is not the whole value

    @classmethod
    def of(cls, reason: str, partition: int, offset: int, raw: str | None = None,
           size: int | None = None) -> DeadLetter:  # fmt: skip
        """A dead letter whose reason and raw value fit a Kafka message (REASON_CHARS, DEAD_RAW_CHARS).

        `size` is the message's length in bytes when known: a value the source
        cut short (an oversized message) is `truncated` too.
        """
        if len(reason) > REASON_CHARS:
            reason = reason[: REASON_CHARS - 1] + "…"
        if raw is None:
            return cls(reason, partition, offset)
        cut = len(raw) > DEAD_RAW_CHARS or (size is not None and _size(raw) < size)
        return cls(reason, partition, offset, raw[:DEAD_RAW_CHARS], cut)

    @classmethod
    def read(cls, item) -> DeadLetter:
        """A stored dead letter (`stored()`, or its first three items)."""
        reason, partition, offset, *rest = item
        return cls(reason, partition, offset, rest[0] if rest else None, bool(rest[1:] and rest[1]))

    def stored(self) -> list:
        return [self.reason, self.partition, self.offset, self.raw, self.truncated]

    def publish(self, publisher) -> None:
        """Send it to the dead-letter topic (or the log) through `publisher` (connectors.kafka_sink)."""
        publisher.publish_dead_letter(
            self.reason, self.partition, self.offset, self.raw, truncated=self.truncated
        )


def _runs(
    build: ColumnsBuilder, values: list, eligible: np.ndarray
) -> list[tuple[int, int, Scanned | None]]:
    """The batch as runs of messages `(start, stop, scanned)`: read at once (connectors.json_scan), or one by one (None).

    When the scan cannot be used at all, the whole batch is one run read one by one.
    """
    try:
        # numba is loaded by the first batch, not by every import (and a batch without it reads one by one)
        from fluxmat.connectors.json_scan import scan

        sc = scan(values, eligible)
        scanned = Scanned(build, sc) if sc is not None else None
    except (
        Exception
    ):  # a scan that fails (two strings sharing a hash) leaves every message to `one`
        scanned = None
    if scanned is None:
        return [(0, len(values), None)]
    return [(a, b, scanned if ok else None) for a, b, ok in scanned.runs()]


def _size(value: str | None) -> int:
    """A value's length in bytes (UTF-8)."""
    return 0 if value is None else len(value.encode("utf-8", errors="replace"))


@dataclass
class Decoded:
    """A batch's messages decoded (module docstring)."""

    decoder: Decoder
    reasoner: Reasoner
    rows: Messages
    n: int  # messages
    reasons: dict[int, str] = field(default_factory=dict)  # row -> why it is a dead letter
    ids: list = field(
        default_factory=list
    )  # each row's update id in the deltas' `through` (None: dead)
    adds: np.ndarray | None = None  # facts each valid update lists to add
    deletes: np.ndarray | None = None
    columns: UpdateColumns | None = None
    one: dict[int, Update | str] = field(default_factory=dict)  # messages decoded one by one

    def __getitem__(self, i: int) -> Update | str:
        found = self.one.get(i)
        if found is None:
            found = self.one[i] = self.decoder.one(self.reasoner, self.rows.row(i))
        return found

    def __iter__(self):
        return (self[i] for i in range(self.n))

    def uid(self, i: int) -> object:
        """Row i's update id in the deltas' `through`."""
        return self.ids[i]


class Decoder:
    """Reads a stream's messages (module docstring); keeps what it read of predicates across batches."""

    def __init__(self, max_message_bytes: int, key: str | None, bulk: bool = True):
        self.max_message_bytes, self.key = max_message_bytes, key
        self.bulk = bulk  # plain messages read at once (connectors.json_scan); False: one by one, as a reference
        self.json_facts: JsonFacts | None = None  # the updates' predicates and constants, read once
        self.preds: dict[str, str] = {}

    def batch(self, reasoner: Reasoner, rows: Messages) -> Decoded:
        """Every message of a batch (`rows` in order)."""
        n = len(rows.offset)
        out = Decoded(
            self,
            reasoner,
            rows,
            n,
            ids=[None] * n,
            adds=np.zeros(n, np.int64),
            deletes=np.zeros(n, np.int64),
        )
        if self.json_facts is None or self.json_facts.prefixes is not reasoner.prefixes:
            self.json_facts, self.preds = (
                JsonFacts(reasoner.prefixes),
                {},
            )  # a program change may bring others
        build = ColumnsBuilder(self.json_facts, self.preds)
        keys: list[int] = []
        eligible = np.fromiter(map(self._eligible, rows.value, rows.utf8, rows.size), np.bool_, n)
        program = False
        runs = _runs(build, rows.value, eligible) if self.bulk else [(0, n, None)]
        for a, b, scanned in runs:
            if scanned is not None:
                build.take_scanned(scanned, a, b)
                keys.extend(range(a, b))
                out.ids[a:b] = build.ids[len(build.ids) - (b - a) :]
                out.adds[a:b], out.deletes[a:b] = scanned.sc.adds[a:b], scanned.sc.dels[a:b]
                continue
            for i in range(a, b):
                program = self._one_of_batch(out, build, keys, i, eligible[i]) or program
        part, off = rows.partition, rows.offset
        out.ids = [u if u is not None else f"{part[i]}:{off[i]}" for i, u in enumerate(out.ids)]
        if not program:
            out.columns = build.columns(keys)
            out.columns.ids = [out.ids[i] for i in keys]
        return out

    def _eligible(self, value: str | None, utf8: bool | None, size: int | None) -> bool:
        """Whether a message may be read in bulk (else only one by one: `one` gives its reason)."""
        return (value is not None and utf8 is not False
                and (size if size is not None else _size(value)) <= self.max_message_bytes)  # fmt: skip

    def _one_of_batch(
        self, out: Decoded, build: ColumnsBuilder, keys: list, i: int, plain: bool
    ) -> bool:
        """Message i read on its own: into `build` (a plain update, else as validated) or a dead letter.

        True: it is a program change.
        """
        try:  # whatever the bulk reader raises, the message is decoded one by one (for its reason)
            taken = plain and build.plain_text(out.rows.value[i])
        except Exception:
            taken = False
        if taken:
            keys.append(i)
            out.ids[i], out.adds[i], out.deletes[i] = build.last
            return False
        upd = out[i]
        if isinstance(upd, str):
            out.reasons[i] = upd
            return False
        keys.append(i)
        build.update(upd.add, upd.delete, upd.id)
        out.ids[i], out.adds[i], out.deletes[i] = upd.id, len(upd.add), len(upd.delete)
        return upd.program is not None

    def one(self, reasoner: Reasoner, message: Message) -> Update | str:
        """One message as a validated update, or the reason it is a dead letter."""
        value = message.value
        size = message.size if message.size is not None else _size(value)
        if size > self.max_message_bytes:
            return f"message too large: {size:,} bytes (limit {self.max_message_bytes:,})"
        if message.utf8 is False:
            return "value is not valid UTF-8"
        try:
            item = decode_json(value) if value is not None else None
            where = f"partition {message.partition} offset {message.offset}"
            if self.json_facts is None or self.json_facts.prefixes is not reasoner.prefixes:
                self.json_facts, self.preds = JsonFacts(reasoner.prefixes), {}
            update = parse_update(item, reasoner.prefixes, where, self.json_facts)
        except FluxmatError as exc:
            return str(exc)
        except Exception as exc:  # whatever one message does, it stops only itself
            return f"cannot decode the message: {type(exc).__name__}: {exc}"
        if update.program is not None and reasoner.core != "arrays":
            return f"{where}: program changes need the arrays core (--core arrays); nothing was changed"
        if update.program is not None and self.key is not None:
            return (f"{where}: a keyed job's program change applies to every key: send it without a key "
                    "(fluxmat program apply does); nothing was changed")  # fmt: skip
        return update
