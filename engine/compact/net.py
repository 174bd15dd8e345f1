"""A run's net explicit change, computed on columns of term ids (engine.compact.fed).

The updates of a run arrive as *operations*: per predicate, columns of the
update's sequence number, whether the fact is added (else deleted) and the
fact's term ids. Their net change against E before the run is, per fact, what
applying them one by one in submission order leaves: the last operation on a
fact wins, an operation that finds the fact already as it asks (an add of an
explicit fact, a delete of a non-explicit one) is a no-op and dropped. An
operation that is not a no-op *toggles* the fact; a fact toggled an odd number
of times differs from E before the run.

`net(ops, explicit)` computes this with a sort per predicate -- a lexsort on
(fact, seq), the previous state of each operation its fact's previous
operation (or E), no Python loop over facts. Two operations of one update on
one fact (the same fact twice in an update's list) count once; an update never
both adds and deletes a fact (engine.maintainer.encode_update refuses it).

The facts entering and leaving E are given per predicate in the order of their
term ids, whatever the order of the operations, so two ways of submitting the
same updates (one by one, or as columns: engine.compact.fed_columns) give the
core the same arrays.

Not here: applying the change (engine.compact.core), the causes of the flips
(engine.compact.fed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

Ops = dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]]  # pred -> [(seqs, adds, keys)]


@dataclass
class Toggled:
    """A predicate's facts that a run toggled: their keys (sorted), first toggling update and toggle count."""

    keys: np.ndarray  # (m, arity) int64, rows in lexicographic order
    first: np.ndarray  # (m,) int64: the first update that toggled the fact
    count: np.ndarray  # (m,) int64: how many updates toggled it


@dataclass
class Net:
    """One run's net explicit change and who changed what (see engine.compact.fed's docstring)."""

    add: dict[str, np.ndarray] = field(default_factory=dict)  # pred -> (k, arity) rows entering E
    delete: dict[str, np.ndarray] = field(default_factory=dict)  # pred -> (k, arity) rows leaving E
    toggled: dict[str, Toggled] = field(default_factory=dict)  # pred -> the facts the run toggled
    toggling: dict[str, np.ndarray] = field(default_factory=dict)  # pred -> the updates that changed its E
    updates: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # the updates that changed E
    first: int = 0  # the first update of the run
    by_pred: dict[str, int] = field(default_factory=dict)  # pred -> the first update that changed its E
    multi: set[str] = field(default_factory=set)  # preds whose E several updates changed
    noop_adds: int = 0
    noop_deletes: int = 0

    def summarise(self) -> None:
        """`updates`, `by_pred` and `multi` from `toggling` (each pred's updates, sorted)."""
        for p, seqs in self.toggling.items():
            self.by_pred[p] = int(seqs[0])
            if len(seqs) > 1:
                self.multi.add(p)
        if self.toggling:
            self.updates = np.unique(np.concatenate(list(self.toggling.values())))

    def reach(self, cone: frozenset) -> int:
        """The one update that changed E within `cone`; 0: none; -1: several."""
        if not cone.isdisjoint(self.multi):
            return -1
        found = {self.by_pred[p] for p in cone if p in self.by_pred}
        return -1 if len(found) > 1 else (found.pop() if found else 0)

    def several(self) -> Iterator[tuple[str, np.ndarray]]:
        """Per predicate, the facts several updates of the run toggled: `(pred, keys)`, none empty."""
        for pred, t in self.toggled.items():
            keys = t.keys[t.count > 1]
            if len(keys):
                yield pred, keys

    def toggles_of(self, pred: str, facts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per row of `facts`: the first update that toggled it and how many did (0, 0: none)."""
        t = self.toggled.get(pred)
        first, count = np.zeros(len(facts), np.int64), np.zeros(len(facts), np.int64)
        if t is None or not len(facts):
            return first, count
        at = find_rows(t.keys, facts)
        hit = at >= 0
        first[hit], count[hit] = t.first[at[hit]], t.count[at[hit]]
        return first, count


def unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`np.unique(rows, axis=0, return_inverse=True)` (the inverse flat), faster for term ids.

    When the values are non-negative and a row's columns fit 62 bits together,
    each row is packed into one int64 (the first column highest, so the order
    stays lexicographic) and the keys are sorted instead of the rows.
    """
    n, width = rows.shape
    if n and width and rows.min() >= 0:
        bits = [int(rows[:, j].max()).bit_length() for j in range(width)]
        if sum(bits) <= 62:
            key = np.zeros(n, np.int64)
            for j in range(width):
                key = (key << bits[j]) | rows[:, j]
            ukey, inverse = np.unique(key, return_inverse=True)
            inverse = inverse.reshape(-1)
            first = np.empty(len(ukey), np.int64)
            first[inverse] = np.arange(n)
            return rows[first], inverse
    uniq, inverse = np.unique(rows, axis=0, return_inverse=True)
    return uniq, inverse.reshape(-1)


def find_rows(keys: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Per row of `rows`, its index in `keys` (unique rows, lexicographic order), or -1."""
    both = np.concatenate([keys, rows])
    _, inverse = unique_rows(both)
    where = np.full(inverse.max() + 1 if len(inverse) else 0, -1, np.int64)
    where[inverse[: len(keys)]] = np.arange(len(keys))
    return where[inverse[len(keys) :]]


def net(
    ops: Ops, arity: dict[str, int], explicit: Callable[[str, np.ndarray], np.ndarray], first: int
) -> Net:
    """The net change of a run's operations (module docstring).

    `explicit(pred, keys)` says which of the unique `keys` are in E before the run.
    """
    out = Net(first=first)
    for pred, parts in ops.items():
        seqs, adds, keys = (np.concatenate(a) for a in zip(*parts, strict=True))
        _net_pred(out, pred, seqs, adds, keys.reshape(len(seqs), arity[pred]), explicit)
    out.summarise()
    return out


def _net_pred(
    out: Net, pred: str, seqs: np.ndarray, adds: np.ndarray, keys: np.ndarray, explicit
) -> None:
    """One predicate's share of `net`: its toggles, no-ops and net change."""
    if not len(seqs):
        return
    uniq, fact = unique_rows(keys)
    order = np.lexsort((seqs, fact))
    fact, seqs, adds = fact[order], seqs[order], adds[order]
    keep = np.ones(len(fact), np.bool_)
    keep[1:] = (fact[1:] != fact[:-1]) | (seqs[1:] != seqs[:-1])  # one update, one fact: once
    fact, seqs, adds = fact[keep], seqs[keep], adds[keep]
    start = np.ones(len(fact), np.bool_)
    start[1:] = fact[1:] != fact[:-1]
    before = np.asarray(explicit(pred, uniq), np.bool_)
    prev = np.where(
        start, before[fact], np.roll(adds, 1)
    )  # the fact's state when the operation comes
    toggle = adds != prev
    out.noop_adds += int(np.count_nonzero(~toggle & adds))
    out.noop_deletes += int(np.count_nonzero(~toggle & ~adds))
    last = np.ones(len(fact), np.bool_)
    last[:-1] = start[1:]
    final, which = adds[last], fact[last]
    changed = final != before[which]
    if changed.any():
        entering = which[changed & final]
        leaving = which[changed & ~final]
        if len(entering):
            out.add[pred] = uniq[entering]
        if len(leaving):
            out.delete[pred] = uniq[leaving]
    if toggle.any():
        tf, ts = fact[toggle], seqs[toggle]
        heads = np.ones(len(tf), np.bool_)
        heads[1:] = tf[1:] != tf[:-1]
        counts = np.diff(np.append(np.flatnonzero(heads), len(tf)))
        out.toggled[pred] = Toggled(uniq[tf[heads]], ts[heads], counts)
        out.toggling[pred] = np.unique(ts)
