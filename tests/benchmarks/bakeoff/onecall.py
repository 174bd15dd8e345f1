"""The hybrid's Python side: which updates take the one-call path, and the store the interpreter reads.

`OneCall` is the arrays candidate's hook (ArraysCore.update): an update with
at most `THRESHOLD` explicit changes runs as one call of the compiled
interpreter (interp.cascade); a larger one takes the set-at-a-time path
(arrays.py), after which the store re-reads the relations (`stale`). The
threshold was measured on LUBM-1 (docs/_incoming/hybrid.md): the one-call
path is 2-3x faster up to ~256 changes and slower beyond ~512.

`Store` builds the interpreter's view of the relations (interp_rel.py's
module docstring) from the `Rel` objects' own buffers, no copy, and hands
back what a call changed (`sync_back`). Explicit changes are packed as
`xrel` (each changed fact's relation), `xsign` (-1 delete, +1 add, deletions
first), `xoff` (where each fact's values start in `xvals`, plus the end).
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.typed import List

from tests.benchmarks.bakeoff.encode import encode
from tests.benchmarks.bakeoff.interp import cascade
from tests.benchmarks.bakeoff.interp_rel import GROWN, KINDS, SEEN_GROWN

THRESHOLD = (
    256  # explicit changes up to which an update takes the one-call path (measured: hybrid.md)
)


# Typed lists are built and changed only through these cached functions: done from Python, every
# typed-list operation compiles numba's list methods afresh in each process (~5 s CPU at start).
@njit(cache=True)
def _new_list(first):
    out = List()
    out.append(first)
    return out


@njit(cache=True)
def _append(lst, a):
    lst.append(a)


@njit(cache=True)
def _set(lst, i, a):
    lst[i] = a


@njit(cache=True)
def _get(lst, i):
    return lst[i]


class Store:
    """The relations as the interpreter reads them: typed lists of the `Rel` objects' own buffers."""

    def __init__(self, rels: list) -> None:
        self.rels = rels
        names = (*KINDS, "imask", "full", "seen")
        self.lists = {name: _new_list(getattr(rels[0], name)) for name in names}
        for rel in rels[1:]:
            for name, lst in self.lists.items():
                _append(lst, getattr(rel, name))
        self.ns = np.array([r.n for r in rels], np.int64)
        self.caps = np.array([r.cap for r in rels], np.int64)
        self.maxids = np.array([r.maxid for r in rels], np.int64)
        self.nstamps = np.array([r.node_stamp for r in rels], np.int64)
        self.dirty = np.zeros(len(rels), np.int64)
        self.seencap = [len(r.seen) for r in rels]
        self.st = (*self.lists.values(), self.ns, self.caps, self.maxids, self.nstamps, self.dirty)

    def refresh(self) -> None:
        """Re-read the relations after the set-at-a-time path changed them."""
        for i, rel in enumerate(self.rels):
            if rel.cap != self.caps[i]:
                for name in KINDS:
                    _set(self.lists[name], i, getattr(rel, name))
            if len(rel.seen) != self.seencap[i]:
                _set(self.lists["seen"], i, rel.seen)
                self.seencap[i] = len(rel.seen)
        self.ns[:] = [r.n for r in self.rels]
        self.caps[:] = [r.cap for r in self.rels]
        self.maxids[:] = [r.maxid for r in self.rels]
        self.nstamps[:] = [r.node_stamp for r in self.rels]

    def sync_back(self) -> None:
        """Hand what the call changed (row counts, grown buffers) back to the `Rel` objects."""
        for i in np.flatnonzero(self.dirty).tolist():
            rel, flags = self.rels[i], int(self.dirty[i])
            rel.n, rel.maxid, rel.node_stamp = (
                int(self.ns[i]),
                int(self.maxids[i]),
                int(self.nstamps[i]),
            )
            if flags & GROWN:
                rel.cap = int(self.caps[i])
                for name in KINDS:
                    setattr(rel, name, _get(self.lists[name], i))
            if flags & SEEN_GROWN:
                rel.seen = _get(self.lists["seen"], i)
                self.seencap[i] = len(rel.seen)
        self.dirty[:] = 0


class OneCall:
    """The one-call path of an ArraysCore: `fits` decides, `update` runs the cascade in one compiled call."""

    def __init__(self, core, threshold: int = THRESHOLD) -> None:
        self.core, self.threshold = core, threshold
        self.program = encode(core)
        self.ids = {p: i for i, p in enumerate(core.rels)}
        self.store: Store | None = None
        self.entry = None  # the compiled cascade for these argument types (see `_call`)

    def fits(self, add: dict, delete: dict) -> bool:
        return sum(map(len, add.values())) + sum(map(len, delete.values())) <= self.threshold

    def stale(self) -> None:
        """The relations changed outside the interpreter (set-at-a-time path): re-read before the next call."""
        if self.store is not None:
            self.store.refresh()

    def update(self, add: dict, delete: dict) -> tuple[int, int]:
        if self.store is None:
            self.store = Store(list(self.core.rels.values()))
        added, removed = self._call(
            self.store.st, self.program, *self._pack(add, delete), self.core.epoch
        )
        self.store.sync_back()
        return added, removed

    def _call(self, *args) -> tuple[int, int]:
        """`cascade(*args)`, after the first call through its compiled entry point directly.

        The dispatcher types every argument on every call, and typing the store's
        typed lists takes it ~200 us (the Python fallback of `typeof`); the
        argument types never change, so the overload is looked up once.
        """
        if self.entry is None:
            out = cascade(*args)
            self.entry = cascade.overloads[tuple(cascade.typeof_pyval(a) for a in args)].entry_point
            return out
        return self.entry(*args)

    def _pack(self, add: dict, delete: dict) -> tuple:
        """The explicit changes as (xrel, xsign, xoff, xvals), deletions first (see the module docstring)."""
        rel, sign, lens, vals = [], [], [], []
        for s, facts in ((-1, delete), (1, add)):
            for p, keys in facts.items():
                n = len(keys)
                if n:
                    rel += [self.ids[p]] * n
                    sign += [s] * n
                    lens += [self.core.rels[p].arity] * n
                    vals.append(np.ascontiguousarray(keys, np.int64).ravel())
        xoff = np.zeros(len(rel) + 1, np.int64)
        np.cumsum(lens, out=xoff[1:])
        xvals = np.concatenate(vals) if vals else np.empty(0, np.int64)
        return np.asarray(rel, np.int64), np.asarray(sign, np.int64), xoff, xvals
