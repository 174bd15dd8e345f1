"""Exporting and restoring the fully dynamic engine's state as plain text values.

The stream keeps this state in Redis (connectors.state); this module knows
nothing about Redis. State = the program fingerprint, the logical clock, the
explicit facts, every present fact with its birth stamp, and (FD-Counting) the
derivation log of applied rule instances. Counters are not stored: they are a
function of the log and the birth stamps and are recomputed on restore.

`export_changes` returns *absolute* values for everything that changed since
the previous export (a fact's birth stamp or None when it is gone), so writing
them is idempotent: replaying a write after a crash gives the same state.

The stored form is dictionary-encoded (format 2). Each relation and constant
has a *term id* (decimal text, numbered by the state from 0, never reused),
with its JSON by engine.wire (the one codec: IRIs as "<...>") in `terms`; a
relation's JSON is the list `[name]`, which no constant's JSON is. A fact is
the text `p,a1,...,an` of its term ids (also its entry's key). A log entry
is keyed by `rule;args;...` (the rule id and its positive body facts'
arguments: the rule fixes their relations, and they fix the instance), its
value is `head;negargs;...` (the head fact, then the negated facts'
arguments). So a LUBM fact of three IRIs takes ~15 bytes instead of ~150, and
the log does not repeat IRIs. An engine keeps its term ids and the texts of
the facts and log entries it exported (`fd.state_texts`, up to `TEXT_CACHE`
of each), so one changed in many batches is encoded once.

A state written by an earlier fluxmat (format 1: facts as JSON texts) is still
restored; the next export then rewrites it whole in format 2.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from fluxmat.engine import wire
from fluxmat.engine.errors import FluxmatError
from fluxmat.engine.fd.change_columns import ChangeColumns
from fluxmat.engine.fd.core import FullyDynamic
from fluxmat.engine.fd.records import Journal, Key
from fluxmat.engine.storage import paused_gc

FORMAT = 2  # the stored form (meta "format"); a state without it is format 1


def fingerprint(fd: FullyDynamic) -> str:
    """Identifies the program and algorithm a state was built for."""
    text = f"{fd.name}\n{fd.analysis.program}"
    if fd.closures:  # closure modules change what the log holds
        text += f"\nmodules: {sorted(fd.closures)}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass
class StateChanges:
    """Absolute values to write: None means "remove this entry"; `terms` only grow."""

    meta: dict[str, object]
    explicit: dict[str, bool] = field(default_factory=dict)
    facts: dict[str, int | None] = field(default_factory=dict)
    log: dict[str, str | None] = field(default_factory=dict)
    terms: dict[str, str] = field(default_factory=dict)  # term id -> JSON (new since the last export)
    full: bool = False  # replace everything stored (first write, or a rebuild)
    columns: ChangeColumns | None = None  # the arrays core's: the changes as columns, the texts left empty

    def size(self) -> int:
        if self.columns is not None:
            return self.columns.rows() + len(self.columns.terms)
        return len(self.explicit) + len(self.facts) + len(self.log) + len(self.terms)

    def as_texts(self) -> StateChanges:
        """These changes with their texts (themselves unless they are columns: `ChangeColumns.texts`)."""
        if self.columns is None:
            return self
        explicit, facts, terms = self.columns.texts()
        return StateChanges(self.meta, explicit, facts, {}, terms, self.full)


@dataclass
class StateSnapshot:
    """Everything needed to rebuild an engine (what a state store loads)."""

    meta: dict[str, object]
    explicit: list[str]
    facts: dict[str, int]
    log: dict[str, str]  # entry key -> entry
    terms: dict[str, str] = field(default_factory=dict)  # term id -> JSON (format 2)

    def counts(self) -> tuple[int, int]:
        """(facts, log entries) the state holds."""
        return len(self.facts), len(self.log)


TEXT_CACHE = 65_536  # fact (and log entry) texts an engine keeps between exports, then starts over

_dumps = json.JSONEncoder(ensure_ascii=False).encode  # = json.dumps(x, ensure_ascii=False), built once


class _Terms:
    """The term ids of an engine's relations and constants (the stored state's dictionary).

    Ids are given in the order terms are first exported; `new` holds the terms
    given since the last export (what the next commit must write). Like the
    journal, they are the export's from then on: after a failed commit the
    engine must be rebuilt from the store (the job stops; a key's engine is
    dropped), as it already must for the facts that export carried.
    """

    __slots__ = ("dictionary", "values", "preds", "next", "new")

    def __init__(self, fd: FullyDynamic, values: dict[int, str] | None = None,
                 preds: dict[str, str] | None = None, next_id: int = 0):  # fmt: skip
        self.dictionary = fd.dictionary
        self.values = values if values is not None else {}  # engine constant id -> term id
        self.preds = preds if preds is not None else {}  # relation -> term id
        self.next = next_id
        self.new: dict[str, str] = {}

    def value(self, eid: int) -> str:
        tid = self.values.get(eid)
        if tid is None:
            tid = str(self.next)
            self.next += 1
            self.new[tid] = _dumps(wire.json_value(self.dictionary.values[eid]))  # = term_json
            self.values[eid] = tid
        return tid

    def pred(self, pred: str) -> str:
        tid = self.preds.get(pred)
        if tid is None:
            tid = str(self.next)
            self.next += 1
            self.new[tid] = _dumps([pred])
            self.preds[pred] = tid
        return tid


class _Texts(dict):
    """Fact texts (`p,a1,...` of term ids), each encoded once; `entries`: log entries' texts.

    A text is a function of its fact (or instance) and the term ids, which only
    grow (never reused), so texts stay true across exports. With `bound`, each
    cache is cleared when it holds that many texts.
    """

    def __init__(self, terms: _Terms, bound: int | None = None):
        super().__init__()
        self.terms = terms
        self.bound = bound
        self.entries: dict[tuple, list] = {}  # (log key, head) -> [key text, value text or None]

    def __missing__(self, key: Key) -> str:
        if self.bound is not None and len(self) >= self.bound:
            self.clear()
        terms = self.terms
        value = terms.value
        text = self[key] = ",".join([terms.pred(key[0]), *[value(i) for i in key[1]]])
        return text

    def args(self, f: tuple) -> str:
        """`a1,...,an`: the term ids of a body fact's arguments."""
        return ",".join(map(self.terms.value, f))


def _kept_texts(fd: FullyDynamic, full: bool) -> _Texts:
    """The engine's text cache across exports; a full export numbers the terms afresh."""
    texts = getattr(fd, "state_texts", None)
    if full or texts is None or texts.terms.dictionary is not fd.dictionary:
        texts = fd.state_texts = _Texts(_Terms(fd), TEXT_CACHE)
    return texts


def _log_entry(fd: FullyDynamic, lk: tuple, head: Key, texts: _Texts) -> tuple[str, str | None]:
    """The log entry's key text, and its value text (None when not logged).

    `lk` is the flat log key: the rule id, then its positive and negated body
    facts' argument tuples (`shape` tells how many of each).
    """
    entries = texts.entries
    found = entries.get((lk, head))
    if found is None:
        if texts.bound is not None and len(entries) >= texts.bound:
            entries.clear()
        n = len(fd.shape[lk[0]][0]) + 1  # type: ignore[attr-defined]
        found = entries[lk, head] = [";".join([str(lk[0]), *map(texts.args, lk[1:n])]), None]
    if not fd.is_logged(lk, head):  # type: ignore[attr-defined]
        return found[0], None
    if found[1] is None:
        n = len(fd.shape[lk[0]][0]) + 1  # type: ignore[attr-defined]
        found[1] = ";".join([texts[head], *map(texts.args, lk[n:])])
    return found[0], found[1]


def meta(fd: FullyDynamic) -> dict[str, object]:
    return {
        "fingerprint": fingerprint(fd),
        "algorithm": fd.name,
        "format": FORMAT,
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
    texts = _kept_texts(fd, j.full)
    if j.full:  # its own texts, as many as it needs (the cache is for small exports)
        texts = _Texts(texts.terms)
    with paused_gc():
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
    out.terms, texts.terms.new = texts.terms.new, {}
    j.clear()
    return out


class StateMismatch(FluxmatError):
    """A stored state was built for another program or algorithm."""


class StateDamaged(FluxmatError):
    """A stored state that cannot be decoded (an entry naming a term the state does not hold)."""


def check_fingerprint(fd: FullyDynamic, snap: StateSnapshot) -> None:
    """Raise `StateMismatch` unless `snap` was built for this engine's program and algorithm."""
    mine, theirs = fingerprint(fd), snap.meta.get("fingerprint")
    if theirs != mine:
        raise StateMismatch(
            f"the stored state was built for another program or algorithm "
            f"(fingerprint {theirs}, this job {mine}, algorithm "
            f"{snap.meta.get('algorithm')}); use another namespace or reset the state"
        )


def check_core(stored: dict, core: str, algorithm: str) -> None:
    """Raise `StateMismatch` unless the stored state (its metadata) was kept by this core."""
    theirs = stored.get("core") or "objects"  # a state without it was kept by the objects engine
    if theirs != core:
        raise StateMismatch(
            f"the stored state was kept by core={theirs} ({stored.get('algorithm')}), this job runs "
            f"core={core} ({algorithm}); run it with --core {theirs}, or use another namespace or reset the state"
        )


def restore(fd: FullyDynamic, snap: StateSnapshot) -> None:
    """Rebuild the engine from a snapshot (the inverse of exporting everything).

    Pending work is discarded and the arities are those of the program and the
    stored facts, so an engine abandoned mid-update (a limit ran out) is the
    same after `restore` as a freshly started one. A format 1 state is read and
    marked for a full rewrite at the next export.
    """
    clear_state(fd)
    v1 = int(snap.meta.get("format", 1) or 1) < FORMAT
    with paused_gc():  # millions of tuples and no cycles: the collector would rescan them all
        try:
            _decode(fd, snap, v1)
        except (KeyError, ValueError, IndexError) as exc:  # a text naming no stored term (or fact), or no text
            raise StateDamaged(f"the stored state is damaged (format {1 if v1 else FORMAT}: "
                               f"{type(exc).__name__} {exc}); restore the Redis data or reset the state") from None
        finish_restore(fd, full=v1)


def clear_state(fd: FullyDynamic) -> None:
    """Empty the engine before a restore: no pending work, no facts, the program's arities."""
    fd.discard_pending()
    fd.arity = dict(fd.analysis.arity)
    fd.I.clear()
    fd.E.clear()
    fd.born.clear()


def finish_restore(fd: FullyDynamic, full: bool) -> None:
    """After the facts, clock and log are in: closures, plans, indexes; a clean journal (`full`: rewrite all)."""
    fd.rebuild_closures()
    fd.prepare()
    fd.dirty.clear()
    fd.changed_by.clear()
    fd.journal = Journal(full=full)


def set_clock(fd: FullyDynamic, meta: dict[str, object]) -> None:
    """The logical clock and the last update's sequence number and id, from a state's metadata."""
    fd.clock = int(meta.get("clock", 0) or 0)
    fd.last_seq = int(meta.get("seq", 0) or 0)
    fd.last_id = meta.get("through")
    fd.seq = fd.last_seq


def term_ids(fd: FullyDynamic) -> tuple[dict[int, str], dict[str, str], int]:
    """The engine's term ids (constant id -> term id, relation -> term id) and the next id to give.

    Empty before the first export (`export_changes` numbers the terms).
    """
    texts = getattr(fd, "state_texts", None)
    if texts is None or texts.terms.dictionary is not fd.dictionary:
        return {}, {}, 0
    t = texts.terms
    return t.values, t.preds, t.next


def set_term_ids(fd: FullyDynamic, values: dict[int, str], preds: dict[str, str], next_id: int) -> None:
    """Give the engine the term ids of a stored state (what `term_ids` returns), with no new terms pending."""
    fd.state_texts = _Texts(_Terms(fd, values, preds, next_id), TEXT_CACHE)


def term_json(fd: FullyDynamic, eid: int) -> str:
    """The stored JSON text of the engine's constant `eid` (a term's entry in `terms`)."""
    return _dumps(wire.json_value(fd.dictionary.values[eid]))


def pred_json(pred: str) -> str:
    """The stored JSON text of a relation (`[name]`, which no constant's JSON is)."""
    return _dumps([pred])


def _decode(fd: FullyDynamic, snap: StateSnapshot, v1: bool) -> None:
    """The snapshot's facts, explicit facts, clock and log into the (cleared) engine."""
    keys = _V1Keys(fd) if v1 else _decoder(fd, snap.terms)
    for text in snap.explicit:
        pred, f = keys[text]
        fd.E.setdefault(pred, set()).add(f)
    by_pred: dict[str, list] = {}
    born = fd.born
    for text, stamp in snap.facts.items():
        key = keys[text]
        born[key] = int(stamp)
        found = by_pred.get(key[0])
        if found is None:
            found = by_pred[key[0]] = []
        found.append(key[1])
    for pred, facts in by_pred.items():
        fd.rel(pred).update(facts)
    set_clock(fd, snap.meta)
    if hasattr(fd, "log_entries"):
        fd.clear_log()
        (_v1_log if v1 else _log)(fd, snap.log, keys)


class _Keys(dict):
    """Fact keys of format 2 texts (`p,a1,...`), each decoded once; `args` the same for argument texts."""

    def __init__(self, preds: dict[str, str], values: dict[str, int], arity: dict[str, int]):
        super().__init__()
        self.preds = preds
        self.args = _ArgTexts(values)
        self.arity = arity

    def __missing__(self, text: str) -> Key:
        p, _, rest = text.partition(",")
        pred = self.preds[p]
        key = self[text] = (pred, self.args[rest])
        if pred not in self.arity:
            self.arity[pred] = len(key[1])
        return key


class _ArgTexts(dict):
    """Argument tuples of texts `a1,...,an` (term ids), each decoded once and shared."""

    def __init__(self, values: dict[str, int]):
        super().__init__()
        self.values = values

    def __missing__(self, text: str) -> tuple:
        args = self[text] = tuple(map(self.values.__getitem__, text.split(","))) if text else ()
        return args


def _decoder(fd: FullyDynamic, terms: dict[str, str]) -> _Keys:
    """The decoder of format 2 texts over the stored terms; sets the engine's term ids (`fd.state_texts`)."""
    intern = fd.dictionary.intern
    preds: dict[str, str] = {}
    values: dict[str, int] = {}
    for tid, text in terms.items():
        item = json.loads(text)
        if isinstance(item, list):
            preds[tid] = item[0]
        else:
            values[tid] = intern(wire.value_from_json(item))
    set_term_ids(fd, {eid: tid for tid, eid in values.items()}, {p: tid for tid, p in preds.items()},
                 1 + max(map(int, terms), default=-1))  # fmt: skip
    return _Keys(preds, values, fd.arity)


def _log(fd: FullyDynamic, log: dict[str, str], keys: _Keys) -> None:
    """Log every stored instance (`rule;args;...` -> `head;negargs;...`) as applied."""
    args, rids = keys.args.__getitem__, {}

    def entries():
        for k, v in log.items():
            rid, *pos = k.split(";")
            head, *neg = v.split(";")
            r = rids.get(rid)
            if r is None:
                r = rids[rid] = int(rid)
            yield (r, *map(args, pos), *map(args, neg)), keys[head]

    fd.restore_log(entries())  # type: ignore[attr-defined]


class _V1Keys(dict):
    """Fact keys of format 1 texts (JSON facts, engine.wire), each decoded once."""

    def __init__(self, fd: FullyDynamic):
        super().__init__()
        self.fd = fd

    def __missing__(self, text: str) -> Key:
        key = self[text] = self.fd.encode(wire.fact_from_text(text))
        return key


def _v1_log(fd: FullyDynamic, log: dict[str, str], keys: _V1Keys) -> None:
    """Log every stored format 1 instance (`[rule, head, [pos...], [neg...]]` of JSON fact texts)."""
    for v in log.values():
        rid, head, pos, neg = json.loads(v)
        fd.log_applied((rid, keys[head], tuple(map(keys.__getitem__, pos)), tuple(map(keys.__getitem__, neg))))
