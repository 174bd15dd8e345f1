"""Equivalence classes of constants (pi, gamma) and the expansion F^pi of normal facts.

The classes work on any hashable members: values (`Classes()`, ordered by
`order_key`, as engine.equality.rewrite keeps them) or dictionary ids (B/F~,
with `key` ordering an id by its value), so the representative is always the
smallest member by the fixed order on constants.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from itertools import product

from fluxmat.engine.syntax import Iri, RdfLiteral, Value

PyFact = tuple  # (pred, *values)


def order_key(value: Value) -> tuple:
    """The fixed total order on constants: integers, then strings, then IRIs, then literals."""
    if isinstance(value, int):
        return (0, value, "")
    if isinstance(value, Iri):
        return (2, 0, value.value)
    if isinstance(value, RdfLiteral):
        return (3, 0, f"{value.lexical}\x00{value.datatype}\x00{value.lang}")
    return (1, 0, value)


class Classes:
    """Equivalence classes of constants; the representative is the smallest member by `key`.

    Flat: every member maps straight to its representative, so `find` is one
    lookup, and a class can be split again (`regroup`, used by B/F~).

    >>> c = Classes()
    >>> c.union("b", "a"); c.union("c", "b")
    >>> c.find("c"), sorted(c.members("a"))
    ('a', ['a', 'b', 'c'])
    """

    def __init__(self, key: Callable[[Hashable], tuple] = order_key) -> None:
        self.key = key
        self.parent: dict = {}  # non-representative member -> representative
        self._members: dict = {}  # representative -> class (non-singletons)

    def find(self, c):
        return self.parent.get(c, c)

    def union(self, a, b) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        if self.key(rb) < self.key(ra):
            ra, rb = rb, ra
        moved = self._members.pop(rb, {rb})
        for m in moved:
            self.parent[m] = ra
        self._members.setdefault(ra, {ra}).update(moved)

    def regroup(self, rep, key: Callable) -> None:
        """Split the class of `rep` by `key(member)`, which must be the smallest of its group."""
        members = self._members.pop(rep, None)
        if members is None:
            return
        groups: dict = {}
        for m in members:
            groups.setdefault(key(m), set()).add(m)
        for r, group in groups.items():
            for m in group:
                if m == r:
                    self.parent.pop(m, None)
                else:
                    self.parent[m] = r
            if len(group) > 1:
                self._members[r] = group

    def members(self, rep) -> set:
        """The class whose representative is `rep` (`{rep}` for a singleton)."""
        return self._members.get(rep, {rep})

    def nontrivial(self) -> dict:
        """Representative -> class, for the classes with more than one member."""
        return dict(self._members)

    def trivial(self, args: tuple) -> bool:
        """Whether every representative in `args` stands for itself alone."""
        members = self._members
        return not members or members.keys().isdisjoint(args)

    def image(self, args: tuple) -> tuple:
        """gamma(args): every member replaced by its representative."""
        parent = self.parent
        return tuple(map(parent.get, args, args)) if parent else args

    def normal(self, fact: PyFact) -> PyFact:
        """pi(fact) for a fact `(pred, *args)`."""
        return (fact[0], *self.image(fact[1:])) if self.parent else fact

    def mapped(self, fn: Callable, key: Callable = order_key) -> Classes:
        """The same classes with every member replaced by `fn(member)` (ids -> values)."""
        out = Classes(key)
        for rep, ms in self._members.items():
            for m in ms:
                out.union(fn(rep), fn(m))
        return out


def expand(facts: Iterable[PyFact], classes: Classes) -> Iterator[PyFact]:
    """F^pi for every (normal) F in `facts`: all facts whose normal form is F.

    For a normal sameAs(c, c) this yields sameAs(a, b) for all a, b in c's class.
    """
    members = classes.members
    for fact in facts:
        for args in expand_args(fact[1:], members):
            yield (fact[0], *args)


def expand_args(args: tuple, members: Callable) -> Iterator[tuple]:
    """Every tuple of class members of `args`' representatives (`members(rep)` gives a class)."""
    cols = [members(v) for v in args]
    if all(len(c) == 1 for c in cols):
        yield args
    else:
        yield from product(*cols)


def sorted_facts(facts: Iterable[PyFact]) -> list[PyFact]:
    """Facts sorted by predicate, then by the order on constants."""
    return sorted(facts, key=lambda f: (f[0], *(order_key(v) for v in f[1:])))
