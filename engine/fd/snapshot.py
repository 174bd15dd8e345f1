"""Exporting and restoring the fully dynamic engine's state as plain JSON values.

The stream keeps this state in Redis (connectors.state); this module knows
nothing about Redis. State = the program fingerprint, the logical clock, the
explicit facts, every present fact with its birth stamp, and (FD-Counting) the
derivation log of applied rule instances. Counters are not stored: they are a
function of the log and the birth stamps and are recomputed on restore.

`export_changes` returns *absolute* values for everything that changed since
the previous export (a fact's birth stamp or None when it is gone), so writing
them is idempotent: replaying a write after a crash gives the same state.

Facts are encoded as JSON text of `[pred, arg, ...]` by engine.wire (the one
codec: IRIs as "<...>", as on the wire), which is also their Redis hash field.
An engine keeps the texts of the facts and log entries it exported (up to
`TEXT_CACHE` of each), so one changed in many batches is encoded once.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from engine import wire
from engine.errors import FluxmatError
from engine.fd.core import FullyDynamic
from engine.fd.records import Journal, Key


def fingerprint(fd: FullyDynamic) -> str:
    """Identifies the program and algorithm a state was built for."""
    text = f"{fd.name}\n{fd.analysis.program}"
    if fd.closures:  # closure modules change what the log holds
        text += f"\nmodules: {sorted(fd.closures)}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def fact_text(fd: FullyDynamic, key: Key) -> str:
    """An encoded fact as its stored text (engine.wire)."""
    return wire.fact_text(fd.decode(*key))


def fact_key(fd: FullyDynamic, text: str) -> Key:
    """The encoded fact of a stored text (engine.wire)."""
    return fd.encode(wire.fact_from_text(text))


@dataclass
class StateChanges:
    """Absolute values to write: None means "remove this entry"."""

    meta: dict[str, object]
    explicit: dict[str, bool] = field(default_factory=dict)
    facts: dict[str, int | None] = field(default_factory=dict)
    log: dict[str, str | None] = field(default_factory=dict)
    full: bool = False  # replace everything stored (first write, or a rebuild)

    def size(self) -> int:
        return len(self.explicit) + len(self.facts) + len(self.log)


@dataclass
class StateSnapshot:
    """Everything needed to rebuild an engine (what a state store loads)."""

    meta: dict[str, object]
    explicit: list[str]
    facts: dict[str, int]
    log: list[str]


TEXT_CACHE = 65_536  # fact (and log entry) texts an engine keeps between exports, then starts over


class _Texts(dict):
    """Fact texts, each encoded once (log entries share their body facts).

    A fact's text is a function of its key and the engine's dictionary, which
    only grows (ids are never reused), so texts stay true across exports; so
    are a logged instance's key and value texts (`entries`, by log key and
    head). With `bound`, each cache is cleared when it holds that many texts.
    """

    def __init__(self, fd: FullyDynamic, bound: int | None = None):
        super().__init__()
        self.fd = fd
        self.dictionary = fd.dictionary
        self.bound = bound
        self.entries: dict[tuple, list] = {}  # (log key, head) -> [key text, value text or None]

    def __missing__(self, key: Key) -> str:
        if self.bound is not None and len(self) >= self.bound:
            self.clear()
        text = self[key] = fact_text(self.fd, key)
        return text


def _kept_texts(fd: FullyDynamic) -> _Texts:
    """The engine's text cache across exports (a new one for a new dictionary)."""
    texts = getattr(fd, "state_texts", None)
    if texts is None or texts.dictionary is not fd.dictionary:
        texts = fd.state_texts = _Texts(fd, TEXT_CACHE)
    return texts


_dumps = json.JSONEncoder(ensure_ascii=False).encode  # = json.dumps(x, ensure_ascii=False), built once


def _log_entry(fd: FullyDynamic, lk, head: Key, texts: _Texts) -> tuple[str, str | None]:
    """The log key as text, and the instance as text (None when not logged)."""
    entries = texts.entries
    found = entries.get((lk, head))
    if found is None:
        if texts.bound is not None and len(entries) >= texts.bound:
            entries.clear()
        inst = fd.instance(lk, head)  # type: ignore[attr-defined]
        found = entries[lk, head] = [_dumps([inst[0], [texts[g] for g in inst[2]]]), None]
    if not fd.is_logged(lk, head):  # type: ignore[attr-defined]
        return found[0], None
    if found[1] is None:
        rid, h, pos, neg = fd.instance(lk, head)  # type: ignore[attr-defined]
        found[1] = _dumps([rid, texts[h], [texts[g] for g in pos], [texts[g] for g in neg]])
    return found[0], found[1]


def meta(fd: FullyDynamic) -> dict[str, object]:
    return {
        "fingerprint": fingerprint(fd),
        "algorithm": fd.name,
        "clock": fd.clock,
        "seq": fd.last_seq,
        "through": fd.last_id,
        "facts": len(fd.born),
        "explicit": sum(len(s) for s in fd.E.values()),
        "log": fd.log_size(),
    }


def export_changes(fd: FullyDynamic) -> StateChanges:
    """What changed since the previous export, as absolute values; clears the journal."""
    j: Journal = fd.journal
    out = StateChanges(meta(fd), full=j.full)
    # a full export may hold more facts than the cache: its own texts, as many as it needs
    texts = _Texts(fd) if j.full else _kept_texts(fd)
    if j.full:
        for pred, fs in fd.E.items():
            for f in fs:
                out.explicit[texts[(pred, f)]] = True
        for key, born in fd.born.items():
            out.facts[texts[key]] = born
        for lk, head in fd.log_entries() if hasattr(fd, "log_entries") else ():
            k, v = _log_entry(fd, lk, head, texts)
            out.log[k] = v
    else:
        for key in j.explicit:
            out.explicit[texts[key]] = key[1] in fd.E.get(key[0], ())
        for key in j.facts:
            out.facts[texts[key]] = fd.born.get(key)
        for lk, head in j.log.items():
            k, v = _log_entry(fd, lk, head, texts)
            out.log[k] = v
    j.clear()
    return out


class StateMismatch(FluxmatError):
    """A stored state was built for another program or algorithm."""


def check_fingerprint(fd: FullyDynamic, snap: StateSnapshot) -> None:
    """Raise `StateMismatch` unless `snap` was built for this engine's program and algorithm."""
    mine, theirs = fingerprint(fd), snap.meta.get("fingerprint")
    if theirs != mine:
        raise StateMismatch(
            f"the stored state was built for another program or algorithm "
            f"(fingerprint {theirs}, this job {mine}, algorithm "
            f"{snap.meta.get('algorithm')}); use another namespace or reset the state"
        )


def restore(fd: FullyDynamic, snap: StateSnapshot) -> None:
    """Rebuild the engine from a snapshot (the inverse of exporting everything).

    Pending work is discarded and the arities are those of the program and the
    stored facts, so an engine abandoned mid-update (a limit ran out) is the
    same after `restore` as a freshly started one.
    """
    fd.discard_pending()
    fd.arity = dict(fd.analysis.arity)
    fd.I.clear()
    fd.E.clear()
    fd.born.clear()
    keys: dict[str, Key] = {}  # each stored text decoded once (log entries repeat their facts)

    def key_of(text: str) -> Key:
        key = keys.get(text)
        if key is None:
            key = keys[text] = fact_key(fd, text)
        return key

    for text in snap.explicit:
        pred, f = key_of(text)
        fd.E.setdefault(pred, set()).add(f)
    for text, born in snap.facts.items():
        key = key_of(text)
        fd.rel(key[0]).add(key[1])
        fd.born[key] = int(born)
    fd.clock = int(snap.meta.get("clock", 0) or 0)
    fd.last_seq = int(snap.meta.get("seq", 0) or 0)
    fd.last_id = snap.meta.get("through")
    fd.seq = fd.last_seq
    if hasattr(fd, "log_entries"):
        fd.clear_log()
        for text in snap.log:
            rid, head, pos, neg = json.loads(text)
            inst = (rid, key_of(head), tuple(map(key_of, pos)), tuple(map(key_of, neg)))
            fd.log_applied(inst)
    fd.rebuild_closures()
    fd.prepare()
    fd.dirty.clear()
    fd.changed_by.clear()
    fd.journal = Journal(full=False)
