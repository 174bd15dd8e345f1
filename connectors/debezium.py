"""Deltas as Debezium change events (`--delta-format debezium`), one Kafka message per fact.

Each predicate is a table and has its own topic, `<deltas topic>.<predicate>`
(characters a topic cannot hold become `_`, followed by `-` and 8 hex digits of
the predicate's SHA-1 so two predicates never share a topic). A fact's arguments
are its columns `arg0`, `arg1`, ... (with `--partition-by`, a first column
`key` holds the stream's key); the whole row is the primary key, so the message
key is the row. Keys and values use Kafka Connect's JSON converter envelope
(`{"schema": ..., "payload": ...}`, `schemas.enable=true`), which a Connect sink
turns into typed records:

* an added fact: `op: "c"` (`"r"` for the initial materialisation, batch -1),
  `before: null`, `after: {row}`;
* a removed fact: `op: "d"`, `before: {row}`, `after: null`, then a tombstone
  (the key with a null value) so a compacted topic forgets the row;
* `source`: `connector: "fluxmat"`, `name` (the deltas topic), `table` (the
  predicate), `snapshot`, `batch`, `through` (the batch's `through` as JSON
  text), `key` (or null), `seq` (the event's index within the batch) and
  `cause` (the id of the update that changed the fact, as JSON text, when
  exactly one update of the batch did; else null).
* `ts_ms` is null: a batch replayed after a crash re-sends byte-identical
  events (same batch, same order), and upserts and deletes by key are
  idempotent, so a sink's table ends up exact.

Integers are `int64` columns, booleans `boolean`, numbers `double`; anything
else is a `string` (IRIs and literals as the JSON deltas write them).
"""

from __future__ import annotations

import hashlib
import json
import re

_BAD = re.compile(r"[^A-Za-z0-9._\-]")


def topic_for(deltas_topic: str, predicate: str) -> str:
    """The topic of a predicate's change events."""
    name = _BAD.sub("_", predicate)
    if name != predicate or not name.strip("."):
        name = f"{name[:200]}-{hashlib.sha1(predicate.encode('utf-8')).hexdigest()[:8]}"
    return f"{deltas_topic}.{name}"[:249]


def _type(value) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "double"
    return "string"


def _cell(value):
    return value if isinstance(value, (bool, int, float, str)) else json.dumps(value, ensure_ascii=False)


def _row(fact: list, key: str | None) -> tuple[list[dict], dict]:
    """(schema fields, payload) of a fact's row."""
    cells = ([("key", key)] if key is not None else []) + [(f"arg{i}", v) for i, v in enumerate(fact[1:])]
    fields = [{"field": name, "type": _type(v), "optional": False} for name, v in cells]
    return fields, {name: _cell(v) for name, v in cells}


_SOURCE = [
    {"field": "version", "type": "string", "optional": False},
    {"field": "connector", "type": "string", "optional": False},
    {"field": "name", "type": "string", "optional": False},
    {"field": "table", "type": "string", "optional": False},
    {"field": "snapshot", "type": "string", "optional": True},
    {"field": "batch", "type": "int64", "optional": False},
    {"field": "through", "type": "string", "optional": True},
    {"field": "key", "type": "string", "optional": True},
    {"field": "seq", "type": "int64", "optional": False},
    {"field": "cause", "type": "string", "optional": True},
]


def _dump(value) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def events(deltas_topic: str, batch: int, through, added: list, removed: list, key: str | None = None,
           added_by: list | None = None, removed_by: list | None = None) -> list[tuple[str, bytes, bytes | None]]:
    """A batch's delta as (topic, message key, value) in send order; value None: a tombstone.

    Removed facts first, then added ones, in the order given; `added_by` and
    `removed_by` (parallel to them) the update that caused each (None: several).
    """
    out: list[tuple[str, bytes, bytes | None]] = []
    changes = [("d", f, c) for f, c in zip(removed, removed_by or [None] * len(removed), strict=True)] + [
        ("r" if batch < 0 else "c", f, c) for f, c in zip(added, added_by or [None] * len(added), strict=True)]
    for seq, (op, fact, cause) in enumerate(changes):
        predicate = str(fact[0])
        name = f"fluxmat.{_BAD.sub('_', predicate)}"
        fields, row = _row(list(fact), key)
        row_schema = {"type": "struct", "name": f"{name}.Value", "optional": True, "fields": fields}
        source = {"version": "1", "connector": "fluxmat", "name": deltas_topic, "table": predicate,
                  "snapshot": "true" if op == "r" else "false", "batch": batch,
                  "through": json.dumps(through, ensure_ascii=False), "key": key, "seq": seq,
                  "cause": None if cause is None else json.dumps(cause, ensure_ascii=False)}  # fmt: skip
        schema = {"type": "struct", "name": f"{name}.Envelope", "optional": False, "fields": [
            {**row_schema, "field": "before"}, {**row_schema, "field": "after"},
            {"field": "op", "type": "string", "optional": False},
            {"field": "source", "type": "struct", "name": "fluxmat.Source", "optional": False, "fields": _SOURCE},
            {"field": "ts_ms", "type": "int64", "optional": True}]}  # fmt: skip
        payload = {"before": row if op == "d" else None, "after": None if op == "d" else row,
                   "op": op, "source": source, "ts_ms": None}  # fmt: skip
        message_key = _dump({"schema": {"type": "struct", "name": f"{name}.Key", "optional": False,
                                        "fields": fields}, "payload": row})  # fmt: skip
        topic = topic_for(deltas_topic, predicate)
        out.append((topic, message_key, _dump({"schema": schema, "payload": payload})))
        if op == "d":
            out.append((topic, message_key, None))
    return out

