"""The stream's state of the arrays core with equality: E, the classes and the rewritten core, without re-deriving.

The stored form is the arrays core's (engine.compact.state: format 2 term
ids, a fact as `p,a1,...,an`, a present fact's value 1 + its counter) over
what `ArraysEquality` (engine.compact.equality) holds:

* `facts`: the rows of the core over pi(P) -- normal facts, owl:sameAs and
  the rule constants' internal relations -- with their counters; and the
  classes, as rows `(member, representative)` of the internal relation
  `CLASSES` (every member of a class of more than one term, value 1);
* `explicit`: E as given (the original terms, not their representatives).

A restore puts them back as they were (`ArraysEquality.restore_state`): the
classes, E, pi(E) with its preimage counts, the core's rows with their
counters and presence; nothing is evaluated, and the next update maintains
them as if they had never left memory.

What changed since the last export (`EqJournal`): the core's rows whose
counter was touched or whose presence flipped after the epoch of the last
export, E's rows the updates named, and the class rows of the terms that
moved (the old row removed, value 0) or whose class grew. An update that
rebuilds (it can split a class) replaces the core, so the next export is a
full one. All values are absolute, as in engine.compact.state.

Not here: Redis (connectors.state), the arrays core's own state (engine.compact.state).
"""

from __future__ import annotations

import numpy as np

from fluxmat.engine.compact import state as S
from fluxmat.engine.compact.equality import EqJournal
from fluxmat.engine.fd.change_columns import ChangeColumns
from fluxmat.engine.fd.columns import NotAtExport, StateColumns
from fluxmat.engine.fd.snapshot import StateChanges, StateDamaged, StateSnapshot, pred_json
from fluxmat.engine.storage import paused_gc

CLASSES = "__classes"  # (member, representative) rows: not a relation of the core

fingerprint, meta = S.fingerprint, S.meta


def _rows(m, full: bool, epoch: int):
    """(relation, rows) of the core to write: all present rows, or those changed after `epoch`."""
    for pred, rel in m.core.rels.items():
        n = rel.n
        if full:
            yield pred, rel, np.flatnonzero(rel.alive[:n])
        else:
            yield pred, rel, np.flatnonzero((rel.stamp[:n] > epoch) | (rel.flip[:n] > epoch))


def export_changes(m) -> StateChanges:
    """What changed since the previous export, as absolute values in columns (module docstring)."""
    j: EqJournal = m.journal
    if j.full or m.terms is None:
        m.terms = S.Terms()
    terms = m.terms
    cols = ChangeColumns()
    for pred, rel, rows in _rows(m, j.full, j.epoch):
        values = np.where(rel.alive[rows] != 0, rel.cnt[rows].astype(np.int64) + 1, 0)
        S.put_rows(cols.facts, m, terms, pred, rel.cols[rows], values)
    if j.full:
        for pred, rel in m.ex.items():
            keys = rel.explicit()
            S.put_rows(cols.explicit, m, terms, pred, keys, np.ones(len(keys), np.int64))
        pairs = m.pi.pairs()
        S.put_rows(cols.facts, m, terms, CLASSES, pairs, np.ones(len(pairs), np.int64))
    else:
        _explicit_changes(m, j, cols)
        _class_changes(m, j, cols)
    cols.preds = dict(terms.preds)
    cols.terms, terms.new = {int(t): text for t, text in terms.new.items()}, {}
    cols.next_term = terms.next
    m.journal = EqJournal(full=False, epoch=m.core.epoch)
    return StateChanges(meta(m), full=j.full, columns=cols)


def _explicit_changes(m, j: EqJournal, cols: ChangeColumns) -> None:
    """Each E row an update named, with whether it is in E now (1) or not (0)."""
    for pred, blocks in j.keys.items():
        keys = np.unique(np.concatenate(blocks), axis=0)
        rel = m.ex[pred]
        rows = rel.lookup(keys)
        now = (rows >= 0) & (rel.expl[np.maximum(rows, 0)] != 0)
        S.put_rows(cols.explicit, m, m.terms, pred, keys, now.astype(np.int64))


def _class_changes(m, j: EqJournal, cols: ChangeColumns) -> None:
    """The moved terms' old class rows (0), then every affected term's row now (1; 0: alone)."""
    if not j.affected:
        return
    moved = np.concatenate([a for a, _ in j.moved])
    was = np.concatenate([b for _, b in j.moved])
    terms = np.unique(np.concatenate(j.affected))
    reps = m.pi.rep[terms]
    alone = np.array([int(r) not in m.pi.members for r in reps.tolist()], np.bool_)
    keys = np.concatenate([np.stack([moved, was], 1), np.stack([terms, reps], 1)])
    values = np.concatenate([np.zeros(len(moved), np.int64), (~alone).astype(np.int64)])
    S.put_rows(cols.facts, m, m.terms, CLASSES, keys, values)


def take(m) -> StateColumns:
    """The state as columns with the store's term ids (right after an export: `NotAtExport` otherwise)."""
    j = m.journal
    if j.full or j.keys or j.affected or m.inbox or m.terms is None or m.core.epoch != j.epoch:
        raise NotAtExport(
            "the engine has changes not yet exported (take the columns right after a commit)"
        )
    terms = m.terms
    out = StateColumns(meta(m), {}, 0)
    for pred, rel, rows in _rows(m, True, 0):
        if len(rows):
            terms.pred(pred)
            out.facts[pred] = (terms.ids(m, rel.cols[rows]), rel.cnt[rows].astype(np.int64) + 1)
    pairs = m.pi.pairs()
    if len(pairs):
        terms.pred(CLASSES)
        out.facts[CLASSES] = (terms.ids(m, pairs), np.ones(len(pairs), np.int64))
    for pred, rel in m.ex.items():
        keys = rel.explicit()
        if len(keys):
            terms.pred(pred)
            out.explicit[pred] = terms.ids(m, keys)
    if terms.new:
        raise NotAtExport("a fact holds a term with no stored id (not exported yet)")
    values = m.dictionary.values
    known = np.flatnonzero(terms.tid >= 0)
    out.terms = {int(terms.tid[e]): S.term_text(values[e]) for e in known.tolist()}
    out.terms.update((t, pred_json(p)) for p, t in terms.preds.items())
    out.next_term = terms.next
    return out


def restore(m, snap: StateSnapshot) -> None:
    """Rebuild the engine from a stored state (texts); the next export writes everything again."""
    S.check_fingerprint(m, snap.meta)
    try:
        preds, eids = S.parse_terms(m, [(int(t), text) for t, text in snap.terms.items()])
        with paused_gc():
            facts = S.parse_facts(snap.facts.keys(), preds, eids)
            values = S.group_values(snap.facts, preds)
            explicit = S.parse_facts(snap.explicit, preds, eids)
    except (KeyError, ValueError, IndexError) as exc:
        raise StateDamaged(f"the stored state is damaged ({type(exc).__name__} {exc}); "
                           "restore the Redis data or reset the state") from None  # fmt: skip
    _fill(m, facts, values, explicit, snap.meta)
    m.terms = S.Terms(S.inverse_ids(eids, len(m.dictionary)), {p: t for t, p in preds.items()},
                      1 + max(map(int, snap.terms), default=-1))  # fmt: skip
    m.journal = EqJournal(full=True)


def restore_columns(m, cols: StateColumns) -> None:
    """Rebuild the engine from `take`'s columns (its store holds that state: the journal is clean)."""
    S.check_fingerprint(m, cols.meta)
    preds, eids = S.parse_terms(m, list(cols.terms.items()))
    facts = {p: eids[tids] for p, (tids, _v) in cols.facts.items()}
    explicit = {p: eids[tids] for p, tids in cols.explicit.items()}
    if any((a < 0).any() for a in (*facts.values(), *explicit.values())):
        raise StateDamaged(
            "the local snapshot is damaged (a fact names a term that is not a constant)"
        )
    _fill(m, facts, {p: v for p, (_t, v) in cols.facts.items()}, explicit, cols.meta)
    m.terms = S.Terms(
        S.inverse_ids(eids, len(m.dictionary)), {p: t for t, p in preds.items()}, cols.next_term
    )
    m.journal = EqJournal(full=m.renamed, epoch=m.core.epoch)  # renamed: the store's names are old


def _fill(m, facts: dict, values: dict, explicit: dict, stored: dict) -> None:
    """The engine holding the stored E, classes and core rows; nothing pending."""
    pairs = facts.pop(CLASSES, np.zeros((0, 2), np.int64))
    values.pop(CLASSES, None)
    try:
        m.restore_state(explicit, pairs, facts, values)
    except ValueError as exc:
        raise StateDamaged(
            f"the stored state is damaged ({exc}); restore the Redis data or reset the state"
        ) from None
    m.inbox.clear()
    m.changed = {}
    m.last_seq = m.seq = int(stored.get("seq", 0) or 0)
    m.last_id = stored.get("through")
