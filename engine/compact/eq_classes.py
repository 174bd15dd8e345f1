"""Equivalence classes of term ids for the arrays core's equality (engine.compact.equality).

`TermClasses` is a flat union-find over dictionary ids in numpy: `rep[t]` is
the representative of term t -- the smallest member of its class by the fixed
order on constants (engine.equality.order_key, as the objects core picks it) --
so rewriting a block of rows is one gather, `rep[cols]`. Non-trivial classes
keep their members (for the expansion F^pi of normal facts). Classes only
grow here: a split (deleting an equality) rebuilds them from scratch
(engine.compact.equality).

`expand_rows` is F^pi over an int64 block of normal rows: every tuple of
class members of each row's representatives.
"""

from __future__ import annotations

from itertools import product

import numpy as np

from fluxmat.engine.equality import order_key
from fluxmat.engine.storage import Dictionary

Members = dict[int, tuple[int, ...]]  # representative -> its class (non-trivial classes only)


class TermClasses:
    """pi over term ids as an int64 array (see the module docstring)."""

    def __init__(self, dictionary: Dictionary):
        self.dictionary = dictionary
        self.rep = np.zeros(0, np.int64)
        self.members: Members = {}

    def key(self, term: int) -> tuple:
        return order_key(self.dictionary.values[term])

    def grow(self) -> None:
        """Cover every interned term (new terms are their own representatives)."""
        n, m = len(self.dictionary), len(self.rep)
        if n > m:
            self.rep = np.concatenate([self.rep, np.arange(m, max(n, 2 * m), dtype=np.int64)])

    def image(self, cols: np.ndarray) -> np.ndarray:
        """The image of a block of rows under pi (every term id replaced by its representative)."""
        self.grow()
        return self.rep[cols] if self.members else cols

    def find(self, term: int) -> int:
        return int(self.rep[term]) if term < len(self.rep) else term

    def merge(self, pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Union the classes of each pair (rows of two term ids); (moved, affected, was) term ids.

        `moved`: the terms whose representative changed; `affected`: every member
        of a class that changed (its old representatives included); `was`: the
        moved terms' representatives before.
        """
        self.grow()
        parent: dict[int, int] = {}

        def root(x: int) -> int:
            while parent.get(x, x) != x:
                x = parent[x]
            return x

        for a, b in self.rep[pairs].tolist():
            ra, rb = root(a), root(b)
            if ra != rb:
                parent[ra] = rb
        groups: dict[int, list[int]] = {}
        for r in parent:
            groups.setdefault(root(r), []).append(r)
        moved: list[int] = []
        to: list[int] = []
        affected: list[int] = []
        for top, reps in groups.items():
            reps.append(top)
            new = min(reps, key=self.key)
            classes = [self.members.pop(r, (r,)) for r in reps]
            for r, ms in zip(reps, classes, strict=True):
                if r != new:
                    moved += ms
                    to += [new] * len(ms)
            self.members[new] = tuple(m for ms in classes for m in ms)
            affected += self.members[new]
        moved_ids = np.array(moved, np.int64)
        was = self.rep[moved_ids]
        self.rep[moved_ids] = np.array(to, np.int64)
        return moved_ids, np.array(affected, np.int64), was

    def assign(self, members: np.ndarray, reps: np.ndarray) -> None:
        """Set the classes from (member, representative) term ids (a restore; others stay alone)."""
        self.grow()
        top = int(max(members.max(initial=-1), reps.max(initial=-1))) + 1
        if top > len(self.rep):
            self.rep = np.concatenate([self.rep, np.arange(len(self.rep), top, dtype=np.int64)])
        self.rep[members] = reps
        self.members = {}
        for m, r in zip(members.tolist(), reps.tolist(), strict=True):
            self.members.setdefault(r, []).append(m)
        self.members = {r: tuple(ms) for r, ms in self.members.items() if len(ms) > 1}

    def pairs(self) -> np.ndarray:
        """(member, representative) rows of every member of a non-trivial class."""
        rows = [(m, r) for r, ms in self.members.items() for m in ms]
        return np.array(rows, np.int64).reshape(len(rows), 2)

    def copy_members(self) -> Members:
        """The classes now (members tuples are never changed in place)."""
        return dict(self.members)


def expand_rows(cols: np.ndarray, members: Members) -> set[tuple]:
    """F^pi of each normal row of `cols`: every tuple of members of its representatives."""
    rows = cols.tolist()
    if not members or not len(cols):
        return set(map(tuple, rows))
    reps = np.fromiter(members, np.int64, len(members))
    hit = np.isin(cols, reps).any(axis=1).tolist()
    out = set()
    for row, h in zip(rows, hit, strict=True):
        if h:
            out.update(product(*(members.get(v, (v,)) for v in row)))
        else:
            out.add(tuple(row))
    return out


def expanded_count(cols: np.ndarray, members: Members, n_terms: int) -> int:
    """|F^pi| over the rows of `cols`, without building it."""
    if not members or not len(cols):
        return len(cols)
    size = np.ones(max(n_terms, int(cols.max()) + 1), np.int64)
    for rep, ms in members.items():
        size[rep] = len(ms)
    return int(size[cols].prod(axis=1).sum())
