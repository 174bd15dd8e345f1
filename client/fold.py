"""Folding delta messages into complete batches, exactly once: the consumer's rules in one place.

A delta topic is folded by these rules (the job's side is described in the
delta schema, `client/schemas/delta.schema.json`):

* every message is checked first (`check_delta`): a message that is not a
  version-1 or version-2 delta (an older fluxmat's, a truncated or corrupted
  part) raises `MessageError` and nothing of its batch is applied;
* a version-2 delta may name the update that caused each fact (`"causes"`:
  runs `[update id, first index, count]` over the message's added then removed
  facts, `cause_list`); a fact outside every run, and every fact of a
  version-1 delta, has no single cause (None);
* a batch is applied only when parts `0 .. parts-1` of it have all arrived;
  a part seen twice (the job resent it) is taken once;
* per key, batch ids only grow: a batch at or below the key's last applied
  batch is a replay (the job re-publishes a batch identically after a crash)
  and is skipped;
* a key's first batch carries its whole materialisation, so a fold that
  starts from the beginning of the topic, or from a saved progress, needs no
  other snapshot.

`Folder` keeps, per key, the last applied batch and at most one batch being
assembled, and says from which offset of each partition a restarted consumer
must read again (`resume`): the first offset of any batch still being
assembled there, else the offset after the last message seen. A store that
saves `resume()` with each applied batch, in the same transaction, continues
exactly after a crash.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from fluxmat.client.wire import WireError, decode_fact, ntriples_facts

try:  # a faster JSON decoder when installed (fluxmat installs it)
    import orjson
except ImportError:  # pragma: no cover - the client works with the standard library alone
    orjson = None

VERSION = 2  # the newest delta format this client reads ("v"); it reads version 1 too
VERSIONS = (1, 2)  # 2: "causes" (the update that changed each fact) may be present
_LONG_DIGITS = re.compile(rb"[0-9]{19}")  # a run of digits that may be an integer beyond 64 bits
_FIELDS = {"v", "key", "batch", "through", "part", "parts", "added", "removed", "format", "not_triples"}
_FIELDS_V2 = _FIELDS | {"causes"}

__all__ = ["VERSION", "VERSIONS", "Batch", "Folder", "MessageError", "cause_list", "cause_runs", "check_delta",
           "decode_message"]  # fmt: skip


class MessageError(ValueError):
    """A delta message refused: not version 1 or 2, truncated, malformed, or out of order."""


@dataclass
class Batch:
    """One complete batch of one key: what entered and left its materialisation."""

    key: str | None
    batch: int
    through: object
    added: list[tuple]
    removed: list[tuple]
    first: bool = False  # the key's first batch (its whole materialisation)
    # the update that caused each fact, parallel to `added` / `removed` (None: several, or not said)
    added_by: list = field(default_factory=list)
    removed_by: list = field(default_factory=list)


@dataclass
class _Pending:
    batch: int
    parts: int
    through: object
    got: dict[int, tuple[list, list, list, list]] = field(default_factory=dict)
    start: tuple[int, int] | None = None  # (partition, offset) of its first message seen


def decode_message(value: bytes | str, where: str = "") -> dict:
    """The JSON object of a record's value (bytes or text).

    Raises:
        MessageError: not JSON (a truncated record), or not an object.
    """
    if value is None:
        raise MessageError(f"{where}: a record without a value is not a delta")
    if type(value) is str:
        value = value.encode("utf-8")
    try:  # orjson reads an integer beyond 64 bits as a float: json reads it exactly
        item = orjson.loads(value) if orjson is not None and _LONG_DIGITS.search(value) is None else json.loads(value)
    except ValueError:
        try:
            item = json.loads(value)
        except ValueError as exc:
            raise MessageError(f"{where}: not JSON (a truncated or corrupted message?): {exc}") from None
    if type(item) is not dict:
        raise MessageError(f"{where}: expected a delta object, found {type(item).__name__}")
    return item


def check_delta(msg: dict, where: str = "") -> None:
    """Check a decoded delta message against the version-1 format (the delta schema's rules).

    Raises:
        MessageError: with `where` and what is wrong.
    """
    def fail(text: str) -> MessageError:
        return MessageError(f"{where}: {text}" if where else text)

    if "v" not in msg:
        raise fail('a delta without "v": written by a fluxmat older than format version 1; '
                   "refold from a topic written by the current job")
    if msg["v"] not in VERSIONS or type(msg["v"]) is not int:
        raise fail(f"a delta of format version {msg['v']!r}; this client reads versions 1 and 2")
    unknown = sorted(set(msg) - (_FIELDS_V2 if msg["v"] == 2 else _FIELDS))
    if unknown:
        raise fail(f"unknown field {unknown[0]!r} in a version-{msg['v']} delta")
    for name in ("batch", "part", "parts"):
        if type(msg.get(name)) is not int:
            raise fail(f'"{name}" must be an integer, found {msg.get(name)!r}')
    if "through" not in msg:
        raise fail('missing "through"')
    if msg["batch"] < -1 or msg["parts"] < 1 or not 0 <= msg["part"] < msg["parts"]:
        raise fail(f"batch {msg['batch']} part {msg['part']} of {msg['parts']}: out of range")
    if "key" in msg and type(msg["key"]) is not str:
        raise fail(f'"key" must be a string, found {msg["key"]!r}')
    text = msg.get("format")
    if text not in (None, "ntriples"):
        raise fail(f'unknown "format" {text!r} (expected "ntriples")')
    kind = str if text else list
    for name in ("added", "removed"):
        if type(msg.get(name)) is not kind:
            raise fail(f'"{name}" must be {"N-Triples text" if text else "an array of facts"}')
    others = msg.get("not_triples")
    if others is not None and (not text or type(others) is not dict or set(others) != {"added", "removed"}
                               or any(type(v) is not list for v in others.values())):  # fmt: skip
        raise fail('"not_triples" must be {"added": [...], "removed": [...]} in an N-Triples delta')
    runs = msg.get("causes")
    if "causes" in msg and (type(runs) is not list or not all(
            type(r) is list and len(r) == 3 and type(r[1]) is int and type(r[2]) is int and r[1] >= 0 and r[2] >= 1
            for r in runs)):  # fmt: skip
        raise fail('"causes" must be an array of [update id, first index, count] runs')


def cause_runs(causes: list) -> list[list]:
    """Per-fact causes (None: no single cause) as runs `[cause, first index, count]` of equal causes."""
    runs: list[list] = []
    for i, cause in enumerate(causes):
        if cause is None:
            continue
        last = runs[-1] if runs else None
        if last is not None and last[1] + last[2] == i and last[0] == cause and type(last[0]) is type(cause):
            last[2] += 1
        else:
            runs.append([cause, i, 1])
    return runs


def cause_list(runs: list | None, n: int, where: str = "") -> list:
    """The per-fact causes of `n` facts from runs (`cause_runs`); None outside every run.

    Raises:
        MessageError: a run reaches past the facts, or two runs overlap.
    """
    out: list = [None] * n
    taken = bytearray(n)
    for cause, first, count in runs or ():
        if first + count > n:
            raise MessageError(f"{where}: causes run [{first}, {first + count}) is past the {n} facts of the message")
        if any(taken[first:first + count]):
            raise MessageError(f"{where}: causes runs overlap at fact {first}")
        taken[first:first + count] = b"\x01" * count
        out[first:first + count] = [cause] * count
    return out


def _facts(msg: dict, where: str) -> tuple[list, list, list, list]:
    """The added and removed facts of a checked message, and their causes (parallel lists)."""
    try:
        if msg.get("format"):
            others = msg.get("not_triples") or {"added": [], "removed": []}
            added, removed = (ntriples_facts(msg[n], f"{where}: {n}") + [decode_fact(f) for f in others[n]]
                              for n in ("added", "removed"))  # fmt: skip
        else:
            added, removed = [decode_fact(f) for f in msg["added"]], [decode_fact(f) for f in msg["removed"]]
    except WireError as exc:
        raise MessageError(f"{where}: {exc}") from None
    by = cause_list(msg.get("causes"), len(added) + len(removed), where)
    return added, removed, by[: len(added)], by[len(added) :]


class Folder:
    """Complete batches from delta messages in log order, each exactly once (module docstring).

    Args:
        applied: the last applied batch per key (None: the unkeyed stream), as saved.
        key: fold only this key's messages (others are skipped); None: every key.
    """

    def __init__(self, applied: dict | None = None, key: str | None = None) -> None:
        self.applied: dict[str | None, int] = dict(applied or {})
        self.only = key
        self.pending: dict[str | None, _Pending] = {}
        self.seen: dict[int, int] = {}  # partition -> offset after the last message offered

    def offer(self, value: bytes | str | dict, partition: int = 0, offset: int = 0) -> Batch | None:
        """Take one record of the delta topic; return the batch it completes, if any.

        Raises:
            MessageError: the message is refused (nothing of its batch was applied).
        """
        where = f"partition {partition} offset {offset}"
        msg = value if type(value) is dict else decode_message(value, where)
        check_delta(msg, where)
        done = self._fold(msg, partition, offset, where)
        self.seen[partition] = max(self.seen.get(partition, 0), offset + 1)  # only once accepted
        return done

    def _fold(self, msg: dict, partition: int, offset: int, where: str) -> Batch | None:
        key, batch = msg.get("key"), msg["batch"]
        if self.only is not None and key != self.only:
            return None
        done = self.applied.get(key)
        if done is not None and batch <= done:
            return None  # a replay of an applied batch
        pend = self.pending.get(key)
        if pend is not None and pend.batch != batch:
            if batch < pend.batch:
                return None  # an older batch's replay while a newer one is assembled
            raise MessageError(f"{where}: batch {batch} of key {key!r} began before batch {pend.batch} was "
                               f"complete (parts {sorted(pend.got)} of {pend.parts}): its other parts are lost")
        fresh = pend is None or pend.parts != msg["parts"]  # the first part, or the batch re-split on replay
        if not fresh and msg["part"] in pend.got:
            return None  # a part resent
        facts = _facts(msg, where)
        if fresh:
            pend = self.pending[key] = _Pending(batch, msg["parts"], msg["through"], start=(partition, offset))
        pend.got[msg["part"]] = facts
        if len(pend.got) < pend.parts:
            return None
        del self.pending[key]
        first = done is None
        self.applied[key] = batch
        added, removed, added_by, removed_by = ([x for i in range(pend.parts) for x in pend.got[i][j]]
                                                for j in range(4))  # fmt: skip
        return Batch(key, batch, pend.through, added, removed, first, added_by, removed_by)

    def resume(self) -> dict[int, int]:
        """Per partition, the offset a restarted consumer reads from (module docstring)."""
        out = dict(self.seen)
        for pend in self.pending.values():
            p, o = pend.start
            out[p] = min(out.get(p, o), o)
        return out
