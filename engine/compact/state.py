"""The stream's state of the arrays core: exported as the store's texts, restored without re-deriving.

The same stored form as the objects engine's (engine.fd.snapshot, format 2:
term ids with their JSON in `terms`, a fact as the text `p,a1,...,an` of
term ids) with what the arrays core needs instead of birth stamps and a
derivation log: a present fact's value is 1 + its counter (explicit and
non-recursive derivations, DRed^c's and counting's counter), and there are no
log entries. So a state is rebuilt by inserting the stored rows with their
counters and presence (no evaluation at all), and the next update maintains
them as if they had never left memory.

The metadata says `core: arrays`; a state kept by one core is refused by the
other (`check_core`, engine.fd.snapshot), and by another program or algorithm
(`fingerprint`), with `StateMismatch`.

What changed since the last export: the explicit facts the runs changed
(`FedMaintainer.journal`) and the rows whose counter was touched (`stamp`) or
whose presence flipped (`flip`) after the epoch of the last export; all
values are absolute, so writing them again after a crash gives the same state.
As integer columns (`take`, `restore_columns`; engine.fd.columns.StateColumns,
what a local snapshot holds): the same with `facts[pred] = (term ids, values)`.

Not here: Redis (connectors.state), the objects engine's state (engine.fd.snapshot).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

import numpy as np

from fluxmat.engine import wire
from fluxmat.engine.compact.fed import FedMaintainer, Journal
from fluxmat.engine.fd.change_columns import ChangeColumns
from fluxmat.engine.fd.columns import NotAtExport, StateColumns
from fluxmat.engine.fd.snapshot import (
    FORMAT,
    StateChanges,
    StateDamaged,
    StateMismatch,
    StateSnapshot,
    pred_json,
)
from fluxmat.engine.storage import paused_gc

_dumps = json.JSONEncoder(ensure_ascii=False).encode


class Terms:
    """The stored state's term ids: per engine constant id (`tid`, -1: none yet) and per relation."""

    def __init__(
        self, tid: np.ndarray | None = None, preds: dict[str, int] | None = None, next_id: int = 0
    ):
        self.tid = tid if tid is not None else np.full(0, -1, np.int64)
        self.preds = preds if preds is not None else {}
        self.next = next_id
        self.new: dict[str, str] = {}  # term id -> JSON, given since the last export

    def ids(self, m: FedMaintainer, eids: np.ndarray) -> np.ndarray:
        """The term ids of engine constant ids (any shape), numbering the new ones."""
        if len(self.tid) < len(m.dictionary) + 1:
            grown = np.full(len(m.dictionary) + 1, -1, np.int64)
            grown[: len(self.tid)] = self.tid
            self.tid = grown
        out = self.tid[eids]
        fresh = np.unique(eids[out < 0])
        if len(fresh):
            ids = np.arange(self.next, self.next + len(fresh), dtype=np.int64)
            self.tid[fresh] = ids
            self.next += len(fresh)
            values = m.dictionary.values
            self.new.update(
                (str(t), _dumps(wire.json_value(values[e])))
                for t, e in zip(ids.tolist(), fresh.tolist(), strict=True)
            )
            out = self.tid[eids]
        return out

    def pred(self, pred: str) -> int:
        tid = self.preds.get(pred)
        if tid is None:
            tid = self.preds[pred] = self.next
            self.next += 1
            self.new[str(tid)] = pred_json(pred)
        return tid


def fingerprint(m: FedMaintainer) -> str:
    """Identifies the core, program and algorithm a state was built for."""
    text = f"arrays\n{m.name}\n{m.analysis.program}\nclosures: {m.closures}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def meta(m: FedMaintainer) -> dict[str, object]:
    sizes = m.sizes()
    return {"fingerprint": fingerprint(m), "algorithm": m.name, "core": "arrays", "format": FORMAT, "clock": 0,
            "seq": m.last_seq, "through": m.last_id, "facts": m.size(), "explicit": sizes["explicit"],
            "log": 0}  # fmt: skip


def export_changes(m: FedMaintainer) -> StateChanges:
    """What changed since the previous export, as absolute values in columns (module docstring)."""
    j: Journal = m.journal
    if j.full or m.terms is None:
        m.terms = Terms()
    terms, epoch = m.terms, j.epoch
    cols = ChangeColumns()
    for pred, rel in m.core.rels.items():
        n = rel.n
        if j.full:
            rows = np.flatnonzero(rel.alive[:n])
            keys = rel.cols[rows[rel.expl[rows] != 0]]
            _put(cols.explicit, m, terms, pred, keys, np.ones(len(keys), np.int64))
        else:
            rows = np.flatnonzero((rel.stamp[:n] > epoch) | (rel.flip[:n] > epoch))
        values = np.where(rel.alive[rows] != 0, rel.cnt[rows].astype(np.int64) + 1, 0)
        _put(cols.facts, m, terms, pred, rel.cols[rows], values)
    if not j.full:
        _explicit_changes(m, terms, j, cols.explicit)
    cols.preds = dict(terms.preds)
    cols.terms, terms.new = {int(t): text for t, text in terms.new.items()}, {}
    cols.next_term = terms.next
    m.journal = Journal(epoch=m.core.epoch, full=False)
    return StateChanges(meta(m), full=j.full, columns=cols)


def _put(
    into: dict, m: FedMaintainer, terms: Terms, pred: str, keys: np.ndarray, values: np.ndarray
) -> None:
    """`into[pred]` = (the rows' term ids, values), numbering new terms; nothing for no rows."""
    if len(keys):
        terms.pred(pred)
        into[pred] = (terms.ids(m, keys), values)


def _explicit_changes(m: FedMaintainer, terms: Terms, j: Journal, into: dict) -> None:
    """Each changed explicit key's term ids with whether it is explicit now (1) or not (0)."""
    for pred in j.explicit:
        rel = m.core.rels[pred]
        cols = j.keys(pred)
        rows = rel.lookup(cols)
        now = (rows >= 0) & (rel.expl[np.maximum(rows, 0)] != 0)
        _put(into, m, terms, pred, cols, now.astype(np.int64))


def check_fingerprint(m: FedMaintainer, stored: dict) -> None:
    mine, theirs = fingerprint(m), stored.get("fingerprint")
    if theirs != mine:
        raise StateMismatch(
            f"the stored state was built for another program or algorithm (fingerprint {theirs}, this job "
            f"{mine}, algorithm {stored.get('algorithm')}); use another namespace or reset the state"
        )


def restore(m: FedMaintainer, snap: StateSnapshot) -> None:
    """Rebuild the engine from a stored state: its rows, counters and explicit flags, no evaluation."""
    check_fingerprint(m, snap.meta)
    try:
        preds, eids = _terms(m, [(int(t), text) for t, text in snap.terms.items()])
        with paused_gc():
            facts, values = _parse(snap.facts.keys(), preds, eids), _group(snap.facts, preds)
            explicit = _parse(snap.explicit, preds, eids)
    except (KeyError, ValueError, IndexError) as exc:
        raise StateDamaged(f"the stored state is damaged ({type(exc).__name__} {exc}); "
                           "restore the Redis data or reset the state") from None  # fmt: skip
    _fill(m, facts, values, explicit, snap.meta)
    m.terms = Terms(_inverse(eids, len(m.dictionary)), {p: t for t, p in preds.items()},
                    1 + max(map(int, snap.terms), default=-1))  # fmt: skip
    m.journal = Journal(
        epoch=m.core.epoch, full=True
    )  # texts: the next commit rewrites it in columns


def _terms(m: FedMaintainer, items: list[tuple[int, str]]) -> tuple[dict[int, str], np.ndarray]:
    """Relations by term id, and engine constant ids by term id (-1: not a constant)."""
    preds: dict[int, str] = {}
    pairs = []
    intern = m.dictionary.intern
    tids = [t for t, _ in items]
    parsed = json.loads(
        f"[{','.join(text for _, text in items)}]"
    )  # one parse for all the terms' JSON texts
    if len(parsed) != len(tids):
        raise ValueError(f"{len(tids)} term texts parse as {len(parsed)} JSON values")
    for tid, item in zip(tids, parsed, strict=True):
        if isinstance(item, list):
            preds[tid] = item[0]
        else:
            pairs.append((tid, intern(wire.value_from_json(item))))
    eids = np.full(1 + max([*preds, *(t for t, _ in pairs)], default=-1), -1, np.int64)
    for tid, eid in pairs:
        eids[tid] = eid
    return preds, eids


def _inverse(eids: np.ndarray, size: int) -> np.ndarray:
    tid = np.full(size + 1, -1, np.int64)
    known = np.flatnonzero(eids >= 0)
    tid[eids[known]] = known
    return tid


def _group(facts: dict, preds: dict[int, str]) -> dict[str, np.ndarray]:
    """The stored values per relation, in the order `_parse` gives the facts."""
    by: dict[str, list] = {}
    for text, v in facts.items():
        by.setdefault(preds[int(text.partition(",")[0])], []).append(int(v))
    return {p: np.array(vs, np.int64) for p, vs in by.items()}


def _parse(texts: Iterable[str], preds: dict[int, str], eids: np.ndarray) -> dict[str, np.ndarray]:
    """Fact texts as (n, arity) arrays of engine constant ids per relation."""
    by: dict[str, list[str]] = {}
    for text in texts:
        p, _, rest = text.partition(",")
        by.setdefault(preds[int(p)], []).append(rest)
    out = {}
    for pred, rests in by.items():
        if rests[0] == "":
            out[pred] = np.empty((len(rests), 0), np.int64)
            continue
        tids = np.array(",".join(rests).split(","), dtype=np.int64).reshape(len(rests), -1)
        ids = eids[tids]
        if (ids < 0).any():
            raise KeyError("a fact names a term that is not a constant")
        out[pred] = ids
    return out


def _fill(m: FedMaintainer, facts: dict[str, np.ndarray], values: dict[str, np.ndarray],
          explicit: dict[str, np.ndarray], stored: dict, ids=None) -> None:  # fmt: skip
    """A fresh core holding the rows with their counters (value - 1), presence and explicit flags.

    `ids` maps each relation's key block to engine constant ids just before its
    rows are loaded (term ids in the columns: one relation's copy at a time).
    """
    m.reset_core()
    for pred, keys in facts.items():
        m.arity.setdefault(pred, keys.shape[1])
        rel = m.core.rel(pred, m.arity[pred])
        try:
            rows = rel.load_rows(np.ascontiguousarray(keys if ids is None else ids[keys]))
        except ValueError:
            raise StateDamaged("the stored state is damaged (a fact stored twice)") from None
        cnt = values[pred] - 1
        rel.cnt[rows] = cnt
        rel.alive[rows] = 1
        rel.base[rows] = cnt > 0
    for pred, keys in explicit.items():
        rel = m.core.rels[pred]
        rows = rel.lookup(np.ascontiguousarray(keys if ids is None else ids[keys]))
        if (rows < 0).any():
            raise StateDamaged("the stored state is damaged (an explicit fact that is not present)")
        rel.expl[rows] = 1
    m.last_seq = m.seq = int(stored.get("seq", 0) or 0)
    m.last_id = stored.get("through")


def take(m: FedMaintainer) -> StateColumns:
    """The state as columns with the store's term ids (right after an export: `NotAtExport` otherwise)."""
    j = m.journal
    if j.full or j.explicit or m.inbox or m.terms is None or m.core.epoch != j.epoch:
        raise NotAtExport(
            "the engine has changes not yet exported (take the columns right after a commit)"
        )
    terms = m.terms
    out = StateColumns(meta(m), {}, 0)
    for pred, rel in m.core.rels.items():
        rows = np.flatnonzero(rel.alive[: rel.n])
        if not len(rows):
            continue
        terms.pred(pred)
        cols = rel.cols[rows]
        out.facts[pred] = (terms.ids(m, cols), rel.cnt[rows].astype(np.int64) + 1)
        out.explicit[pred] = terms.ids(m, cols[rel.expl[rows] != 0])
    if terms.new:
        raise NotAtExport("a fact holds a term with no stored id (not exported yet)")
    values = m.dictionary.values
    known = np.flatnonzero(terms.tid[: len(terms.tid)] >= 0)
    out.terms = {int(terms.tid[e]): _dumps(wire.json_value(values[e])) for e in known.tolist()}
    out.terms.update((t, pred_json(p)) for p, t in terms.preds.items())
    out.next_term = terms.next
    return out


def restore_columns(m: FedMaintainer, cols: StateColumns) -> None:
    """Rebuild the engine from `take`'s columns (its store holds that state: the journal is clean)."""
    check_fingerprint(m, cols.meta)
    try:
        preds, eids = _terms(m, list(cols.terms.items()))
    except (KeyError, ValueError, IndexError) as exc:
        raise StateDamaged(f"the local snapshot is damaged ({type(exc).__name__} {exc})") from None
    facts = {p: tids for p, (tids, _v) in cols.facts.items()}
    if not all(_constants(a, eids) for a in (*facts.values(), *cols.explicit.values())):
        raise StateDamaged(
            "the local snapshot is damaged (a fact names a term that is not a constant)"
        )
    _fill(m, facts, {p: v for p, (_t, v) in cols.facts.items()}, cols.explicit, cols.meta, eids)
    m.terms = Terms(
        _inverse(eids, len(m.dictionary)), {p: t for t, p in preds.items()}, cols.next_term
    )


def _constants(ids: np.ndarray, eids: np.ndarray) -> bool:
    """Whether every term id in `ids` is a constant of the snapshot (in range: no wrap-around)."""
    if not ids.size:
        return True
    return bool(ids.min() >= 0 and ids.max() < len(eids) and (eids[ids] >= 0).all())


def term_text(value) -> str:
    """A constant's stored JSON text."""
    return _dumps(wire.json_value(value))


# The same rows and terms, for the state of the arrays core with equality (engine.compact.eq_state).
put_rows = _put
parse_terms = _terms
parse_facts = _parse
group_values = _group
inverse_ids = _inverse
