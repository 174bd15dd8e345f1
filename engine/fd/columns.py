"""The fully dynamic engine's state as integer columns: what a local snapshot holds.

The same state as engine.fd.snapshot's stored form (format 2): the term
dictionary, the explicit facts, every present fact with its birth stamp and
(FD-Counting) the derivation log, with the *same term ids* as the state store
holds, but as numpy columns of term ids instead of texts. Restoring from them
skips parsing millions of texts (about two thirds of a restore from the store):
argument tuples are built by `zip` over whole columns.

A `StateColumns` is taken at an export point only (right after
`export_changes`, whose terms the store then holds: `take` refuses an engine
with unexported changes), and `restore_columns` gives the engine it was taken
from, with a clean journal: the store already holds that state, so the next
export writes only what changes after it. Counters are recomputed from the log
as in `restore`.

Not here: how the columns are framed in a file (connectors.snapshot_file).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain, repeat

import numpy as np

from fluxmat.engine import wire
from fluxmat.engine.errors import FluxmatError
from fluxmat.engine.fd.core import FullyDynamic
from fluxmat.engine.fd.snapshot import (
    StateDamaged,
    clear_state,
    finish_restore,
    meta,
    pred_json,
    set_clock,
    set_term_ids,
    term_ids,
    term_json,
)
from fluxmat.engine.storage import paused_gc


@dataclass
class StateColumns:
    """The state as columns of term ids (int64 arrays, one row per fact or log entry).

    `terms`: term id -> JSON text (as the store's `terms`); `explicit[pred]`:
    (n, arity); `facts[pred]`: ((n, arity), (n,) birth stamps); `log[rule id]`:
    (n, width), each row the head's arguments, then the positive and the negated
    body facts' arguments in the rule's order.
    """

    meta: dict[str, object]
    terms: dict[int, str]
    next_term: int
    explicit: dict[str, np.ndarray] = field(default_factory=dict)
    facts: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    log: dict[int, np.ndarray] = field(default_factory=dict)

    def counts(self) -> tuple[int, int]:
        """(facts, log entries) the state holds."""
        return sum(len(v) for _m, v in self.facts.values()), sum(len(m) for m in self.log.values())


class NotAtExport(FluxmatError):
    """The engine has changes not exported yet: its columns would hold terms the store does not."""


def take(fd: FullyDynamic) -> StateColumns:
    """The engine's state as columns (at an export point: `NotAtExport` otherwise)."""
    j = fd.journal
    if j.full or j.explicit or j.facts or j.log or not fd.quiescent:
        raise NotAtExport(
            "the engine has changes not yet exported (take the columns right after a commit)"
        )
    values, preds, next_term = term_ids(fd)
    terms = {int(tid): term_json(fd, eid) for eid, tid in values.items()}
    terms.update((int(tid), pred_json(p)) for p, tid in preds.items())
    tid_of = np.full(len(fd.dictionary) + 1, -1, dtype=np.int64)
    if values:
        tid_of[np.fromiter(values, np.int64, len(values))] = np.fromiter(
            map(int, values.values()), np.int64
        )
    out = StateColumns(meta(fd), terms, next_term)
    with paused_gc():
        for pred, fs in fd.E.items():
            out.explicit[pred] = _matrix(fs, fd.arity[pred], tid_of)
        by_pred: dict[str, tuple[list, list]] = {}
        for (pred, f), born in fd.born.items():
            found = by_pred.get(pred)
            if found is None:
                found = by_pred[pred] = ([], [])
            found[0].append(f)
            found[1].append(born)
        for pred, (fs, stamps) in by_pred.items():
            out.facts[pred] = (
                _matrix(fs, fd.arity[pred], tid_of),
                np.array(stamps, dtype=np.int64),
            )
        if hasattr(fd, "log_entries"):
            out.log = _log_columns(fd, tid_of)
    return out


def _matrix(facts, arity: int, tid_of: np.ndarray) -> np.ndarray:
    """Facts (tuples of constant ids) as an (n, arity) matrix of term ids."""
    n = len(facts)
    flat = np.fromiter(chain.from_iterable(facts), np.int64, n * arity)
    ids = tid_of[flat]
    if (ids < 0).any():
        raise NotAtExport("a fact holds a constant with no term id (not exported yet)")
    return ids.reshape(n, arity)


def _log_columns(fd: FullyDynamic, tid_of: np.ndarray) -> dict[int, np.ndarray]:
    rows: dict[int, list] = {}
    for lk, head in fd.log_entries():  # type: ignore[attr-defined]
        flat = rows.get(lk[0])
        if flat is None:
            flat = rows[lk[0]] = []
        flat.extend(head[1])
        for args in lk[1:]:
            flat.extend(args)
    out = {}
    for rid, flat in rows.items():
        width = sum(_widths(fd, rid))
        ids = tid_of[np.array(flat, dtype=np.int64)] if flat else np.zeros(0, np.int64)
        if (ids < 0).any():
            raise NotAtExport("a log entry holds a constant with no term id (not exported yet)")
        out[rid] = ids.reshape(-1, width)
    return out


def _widths(fd: FullyDynamic, rid: int) -> list[int]:
    """The arities of a log row's parts: the head, then the rule's positive and negated body atoms."""
    pos, neg = fd.shape[rid]  # type: ignore[attr-defined]
    return [
        fd.arity[_rule(fd, rid).head.pred],
        *(fd.arity[p] for p in pos),
        *(fd.arity[p] for p in neg),
    ]


def _rule(fd: FullyDynamic, rid: int):
    return next(r for r in fd.analysis.rules if r.id == rid)


def restore_columns(fd: FullyDynamic, cols: StateColumns) -> None:
    """Rebuild the engine from columns (the inverse of `take`); `StateDamaged` if they do not fit the program."""
    clear_state(fd)
    with paused_gc():
        try:
            _fill(fd, cols)
        except (KeyError, ValueError, IndexError) as exc:
            raise StateDamaged(f"the snapshot's columns do not fit the program ({type(exc).__name__} {exc}); "
                               "delete the snapshot (the state store holds the state)") from None  # fmt: skip
        finish_restore(fd, full=False)


def _fill(fd: FullyDynamic, cols: StateColumns) -> None:
    eid_of, values, preds = _interned(fd, cols.terms)
    set_term_ids(fd, values, preds, cols.next_term)
    canon: dict[
        tuple, tuple
    ] = {}  # one tuple object per distinct argument tuple, as the texts' decoder shares
    share = canon.setdefault

    def rows(ids: np.ndarray) -> list[tuple]:
        if ids.shape[1] == 0:
            return [()] * len(ids)
        if ids.size and ids.min() < 0:  # numpy would read a negative id from the end of `eid_of`
            raise ValueError("a row names a negative term id")
        eids = eid_of[ids]
        if (eids < 0).any():
            raise ValueError("a row names a term id that is no constant of the snapshot")
        return [share(t, t) for t in zip(*eids.T.tolist(), strict=True)]

    born = fd.born
    for pred, (ids, stamps) in cols.facts.items():
        fs = rows(ids)
        born.update(zip(zip(repeat(pred), fs), stamps.tolist(), strict=True))
        fd.rel(pred).update(fs)
        fd.arity.setdefault(pred, ids.shape[1])
    for pred, ids in cols.explicit.items():
        fd.E[pred] = set(rows(ids))
    set_clock(fd, cols.meta)
    if hasattr(fd, "log_entries"):
        fd.clear_log()  # type: ignore[attr-defined]
        for rid, ids in cols.log.items():
            fd.restore_log(_log_entries(fd, rid, ids, rows))  # type: ignore[attr-defined]


def _interned(
    fd: FullyDynamic, terms: dict[int, str]
) -> tuple[np.ndarray, dict[int, str], dict[str, str]]:
    """Term id -> the engine's constant id (an array; -1 for relations), and the engine's term ids."""
    import json

    intern = fd.dictionary.intern
    eid_of = np.full(max(terms, default=-1) + 1, -1, dtype=np.int64)
    values: dict[int, str] = {}
    preds: dict[str, str] = {}
    for tid, text in terms.items():
        item = json.loads(text)
        if isinstance(item, list):
            preds[item[0]] = str(tid)
        else:
            eid = intern(wire.value_from_json(item))
            eid_of[tid] = eid
            values[eid] = str(tid)
    return eid_of, values, preds


def _log_entries(fd: FullyDynamic, rid: int, ids: np.ndarray, rows):
    """`(instance, head)` pairs of a rule's log rows, for `restore_log`."""
    widths = _widths(fd, rid)
    if ids.shape[1] != sum(widths):
        raise ValueError(
            f"log rows of rule {rid} have {ids.shape[1]} columns, the rule needs {sum(widths)}"
        )
    parts, at = [], 0
    for w in widths:
        parts.append(rows(ids[:, at : at + w]))
        at += w
    head_pred = _rule(fd, rid).head.pred
    return zip(zip(repeat(rid), *parts[1:]), zip(repeat(head_pred), parts[0]), strict=False)
