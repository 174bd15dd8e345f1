"""Storage: dictionary-encoded constants and indexed relations.

Constants are interned to dense integers once, at the boundary; every inner loop
works on tuples of ints. A `Relation` is a set of such tuples plus hash indexes,
built on demand for the column sets that compiled plans probe and then kept up to
date on every insertion and removal.

This module knows nothing about rules or algorithms.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

try:  # the C helper behind Counter.update: counts an iterable into any mapping
    from collections import _count_elements
except ImportError:  # pragma: no cover - other Python implementations

    def _count_elements(mapping, iterable):
        get = mapping.get
        for x in iterable:
            mapping[x] = get(x, 0) + 1

from fluxmat.engine.syntax import Value

Fact = tuple[int, ...]


class Dictionary:
    """A bijection between constants (int, str, Iri) and dense ids."""

    __slots__ = ("_ids", "values")

    def __init__(self) -> None:
        self._ids: dict[tuple[type, Value], int] = {}
        self.values: list[Value] = []

    def intern(self, value: Value) -> int:
        key = (type(value), value)
        found = self._ids.get(key)
        if found is None:
            found = len(self.values)
            self._ids[key] = found
            self.values.append(value)
        return found

    def lookup(self, value: Value) -> int | None:
        """The id of `value`, or None when it was never interned."""
        return self._ids.get((type(value), value))

    def __len__(self) -> int:
        return len(self.values)


def index_key(cols: tuple[int, ...]):
    """A function computing the index key of a fact for `cols` (bare value for one column)."""
    if len(cols) == 1:
        (c,) = cols
        return lambda t: t[c]
    return lambda t: tuple(t[c] for c in cols)


class Relation:
    """A set of int tuples with hash indexes on demand.

    `index(cols)` returns a dict from key to the set of facts with that key, where
    the key is `fact[c]` for a single column and a tuple for several. Indexes are
    live: they reflect every later `add`/`discard`.
    """

    __slots__ = ("facts", "_indexes")

    def __init__(self, facts: Iterable[Fact] = ()) -> None:
        self.facts: set[Fact] = set(facts)
        self._indexes: dict[tuple[int, ...], tuple[object, dict]] = {}

    def __len__(self) -> int:
        return len(self.facts)

    def __contains__(self, fact: Fact) -> bool:
        return fact in self.facts

    def __iter__(self) -> Iterator[Fact]:
        return iter(self.facts)

    def index(self, cols: tuple[int, ...]) -> dict:
        entry = self._indexes.get(cols)
        if entry is None:
            key = index_key(cols)
            idx: dict = {}
            for t in self.facts:
                k = key(t)
                bucket = idx.get(k)
                if bucket is None:
                    idx[k] = {t}
                else:
                    bucket.add(t)
            entry = (key, idx)
            self._indexes[cols] = entry
        return entry[1]

    def indexed(self, cols: tuple[int, ...]) -> dict | None:
        """The index on `cols` when one is kept already, else None (never builds one)."""
        entry = self._indexes.get(cols)
        return None if entry is None else entry[1]

    def add(self, fact: Fact) -> bool:
        if fact in self.facts:
            return False
        self.facts.add(fact)
        for key, idx in self._indexes.values():
            k = key(fact)
            bucket = idx.get(k)
            if bucket is None:
                idx[k] = {fact}
            else:
                bucket.add(fact)
        return True

    def update(self, facts: Iterable[Fact]) -> None:
        """Add many facts (faster than repeated `add` when there are no indexes)."""
        if not self._indexes:
            self.facts.update(facts)
            return
        for f in facts:
            self.add(f)

    def discard(self, fact: Fact) -> bool:
        if fact not in self.facts:
            return False
        self.facts.discard(fact)
        for key, idx in self._indexes.values():
            k = key(fact)
            bucket = idx[k]
            bucket.discard(fact)
            if not bucket:
                del idx[k]
        return True

    def difference_update(self, facts: Iterable[Fact]) -> None:
        if not self._indexes:
            self.facts.difference_update(facts)
            return
        for f in facts:
            self.discard(f)

    def clear(self) -> None:
        self.facts.clear()
        self._indexes.clear()


def relation_in(table: dict[str, Relation], pred: str) -> Relation:
    """`table[pred]`, created empty when missing."""
    r = table.get(pred)
    if r is None:
        r = table[pred] = Relation()
    return r


class Weighted(dict):
    """A weighted multiset of facts (fact -> signed count), as in differential dataflow.

    Used for derivation counters and signed deltas. `consolidate` drops zeros.
    """

    def add(self, fact: Fact, weight: int = 1) -> int:
        w = self.get(fact, 0) + weight
        self[fact] = w
        return w

    def add_all(self, facts: Iterable[Fact], weight: int = 1) -> None:
        if weight == 1:
            _count_elements(self, facts)
            return
        get = self.get
        for f in facts:
            self[f] = get(f, 0) + weight

    def consolidate(self) -> Weighted:
        for f in [f for f, w in self.items() if w == 0]:
            del self[f]
        return self


def weights_in(table: dict[str, Weighted], pred: str) -> Weighted:
    """`table[pred]`, created empty when missing."""
    w = table.get(pred)
    if w is None:
        w = table[pred] = Weighted()
    return w


class paused_gc:  # noqa: N801 - used as a lowercase context manager
    """Pause Python's cyclic garbage collector during bulk engine work.

    Facts are tuples of ints and indexes are dicts/sets of them: they never form
    reference cycles, but allocating millions of them triggers full collections
    that rescan everything (doubling materialisation time). Reference counting
    still frees memory; the collector resumes afterwards. Re-entrant.
    """

    _depth = 0

    def __enter__(self):
        import gc

        if paused_gc._depth == 0:
            self._was = gc.isenabled()
            gc.disable()
        paused_gc._depth += 1
        return self

    def __exit__(self, *exc):
        import gc

        paused_gc._depth -= 1
        if paused_gc._depth == 0 and self._was:
            gc.enable()
        return False
