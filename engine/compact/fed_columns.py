"""The arrays core takes a batch's updates as columns (engine.update_columns) for its next run.

`submit_columns(m, cols, rejected, result)` queues the updates of `cols` on the
`FedMaintainer` `m` exactly as submitting them one by one through
`encode_update` and `submit_encoded` would, without a Python tuple per fact:

* An update is *checked* -- encoded one by one by `encode_update`, which may
  refuse it (`rejected(key, error)`, as engine.feed does) -- when one of its
  facts has a predicate the engine does not know at that arity or one of its
  internal relations (`__negN`, ...: refused), or it both adds and deletes a fact.
  Every other update cannot be refused: its facts go to the
  run's operations (`m.ops`, engine.compact.net) as term-id columns.
* Term values are interned in the order the one-by-one submission interns them
  (update by update, each fact's terms in order; a checked update interns its
  own as `encode_update` does), so the term ids -- and with them the order of
  the core's rows and of the deltas -- are the same either way.
* Sequence numbers go to the accepted updates in order, as `submit_encoded`
  numbers them; `result.keys` maps them to the caller's keys.

Not here: the netting (engine.compact.net), the run (engine.compact.fed).
"""

from __future__ import annotations

import numpy as np

from fluxmat.engine.analysis import engine_made
from fluxmat.engine.compact.net import unique_rows
from fluxmat.engine.errors import FluxmatError
from fluxmat.engine.feed import FeedResult
from fluxmat.engine.update_columns import FactColumns, UpdateColumns


def submit_columns(m, cols: UpdateColumns, rejected, result: FeedResult) -> None:
    """Queue `cols`' updates on `m` for its next run (module docstring)."""
    n = len(cols)
    checked = np.zeros(n, np.bool_)
    groups = _groups(m, cols, checked)
    _both(groups, checked)
    slow = cols.facts_of(checked)
    ids = np.full(len(cols.values), -1, np.int64)
    accepted = np.ones(n, np.bool_)
    encoded: dict[int, tuple] = {}
    flat_update, flat_codes = _flat(groups, checked)
    at = 0
    for i in np.flatnonzero(checked).tolist():
        cut = int(np.searchsorted(flat_update, i))
        _intern(m, cols.values, flat_codes[at:cut], ids)
        at = cut
        try:
            encoded[i] = m.encode_update(*slow[i])
        except Exception as exc:  # a bad update stops only itself, as engine.feed says
            accepted[i] = False
            _refuse(cols.keys[i], exc, rejected, result)
    _intern(m, cols.values, flat_codes[at:], ids)
    seqs = np.zeros(n, np.int64)
    seqs[accepted] = m.seq + 1 + np.arange(int(np.count_nonzero(accepted)))
    for i in np.flatnonzero(accepted).tolist():
        seq = int(seqs[i])
        plus, minus = encoded.get(i, (None, None))
        m.inbox.append((seq, cols.ids[i], plus, minus))
        result.keys[seq] = cols.keys[i]
    m.seq += len(result.keys)
    result.submitted = len(result.keys)
    result.peak_pending = max(result.peak_pending, m.pending)
    for rel, fcs in groups.items():
        for fc in fcs:
            keep = ~checked[fc.update]
            if keep.any():
                rows = ids[fc.codes[keep]].reshape(int(keep.sum()), fc.codes.shape[1])
                m.ops.setdefault(rel, []).append((seqs[fc.update[keep]], fc.add[keep], rows))


def _groups(m, cols: UpdateColumns, checked: np.ndarray) -> dict[str, list[FactColumns]]:
    """The fact columns whose predicate the engine knows at their arity, by relation; the others' updates checked."""
    groups: dict[str, list[FactColumns]] = {}
    overloads = m.analysis.overloads
    for (pred, arity), fc in cols.facts.items():
        rel = m.analysis.relation(pred, arity) if overloads else pred
        if m.arity.get(rel) != arity or engine_made(rel):  # the latter: refused
            checked[fc.update] = True
        else:
            groups.setdefault(rel, []).append(fc)
    return groups


def _both(groups: dict[str, list[FactColumns]], checked: np.ndarray) -> None:
    """Check the updates that both add and delete a fact (encode_update refuses them, with its message)."""
    for fcs in groups.values():
        update = np.concatenate([fc.update for fc in fcs])
        add = np.concatenate([fc.add for fc in fcs])
        if add.all() or not add.any():
            continue
        rows = np.column_stack([update, np.concatenate([fc.codes for fc in fcs])])
        uniq, inverse = unique_rows(rows)
        adds, dels = np.zeros(len(uniq), np.bool_), np.zeros(len(uniq), np.bool_)
        adds[inverse[add]] = True
        dels[inverse[~add]] = True
        checked[uniq[adds & dels, 0]] = True


def _flat(
    groups: dict[str, list[FactColumns]], checked: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The unchecked facts' term codes in the order one-by-one submission reads them, with each code's update."""
    pos, update, codes = [], [], []
    width = 1 + max((fc.codes.shape[1] for fcs in groups.values() for fc in fcs), default=0)
    for fcs in groups.values():
        for fc in fcs:
            keep = ~checked[fc.update]
            k, arity = int(keep.sum()), fc.codes.shape[1]
            pos.append((fc.pos[keep][:, None] * width + np.arange(arity)[None, :]).reshape(-1))
            update.append(np.repeat(fc.update[keep], arity))
            codes.append(fc.codes[keep].reshape(k * arity))
    if not pos:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    order = np.argsort(np.concatenate(pos), kind="stable")
    return np.concatenate(update)[order], np.concatenate(codes)[order]


def _intern(m, values: list, codes: np.ndarray, ids: np.ndarray) -> None:
    """Intern the values of `codes` not interned yet, in their order of first appearance."""
    if not len(codes):
        return
    uniq, first = np.unique(codes, return_index=True)
    fresh = uniq[np.argsort(first)]
    fresh = fresh[ids[fresh] < 0]
    intern = m.dictionary.intern
    ids[fresh] = [intern(values[c]) for c in fresh.tolist()]


def _refuse(key: object, exc: Exception, rejected, result: FeedResult) -> None:
    """A refused update: to `rejected`, or raised with its key (engine.feed's contract)."""
    if rejected is None:
        if isinstance(exc, FluxmatError):
            raise FluxmatError(f"{key}: {exc}") from None
        raise exc
    rejected(key, exc)
    result.rejected += 1
