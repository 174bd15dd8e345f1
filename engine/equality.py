"""Equality (`owl:sameAs`) by rewriting to representatives (Motik et al. 2015): the pure parts.

Contract. With `equality="rewrite"` the predicate `owl:sameAs`
(<http://www.w3.org/2002/07/owl#sameAs>, binary) means equality: the result is
the materialisation J of P plus the standard equality axioms (`axiomatise`:
reflexivity on every constant occurring in a fact, symmetry, transitivity and
replacement in every argument position of every predicate, sameAs included).
J is *stored* as its rewriting (pi, I) (the paper's r-materialisation): pi maps
each constant to the smallest member of its class by `order_key`, and I = pi(J)
is the compact set of normal facts. `expand` recovers J from (pi, I).

Rewrite mode accepts positive programs without built-ins: under equality a
filter or an arithmetic assignment would have to hold for *some* member of a
class, which evaluating it on the representative does not give, and in the
axiomatised program every predicate with arguments is mutually recursive with
sameAs, so negation could never be stratified. `check_program` refuses the rest.

This module only transforms programs and facts: the union-find `Classes`,
`rewrite_rules` (pi applied to a program's rules plus the reflexivity rules
(~4) that rewriting keeps), `expand`, and the oracle `axiomatise`. The
maintainers that evaluate them are engine.maintain.rewrite (remat, dred,
dredc) and engine.maintain.bfeq (bf: B/F~, with engine.rewriting). Default mode ("off")
never touches this module: `owl:sameAs` is then an ordinary predicate.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import product

from engine.errors import AnalysisError
from engine.syntax import (
    Atom,
    BinOp,
    Comparison,
    Const,
    Iri,
    Negation,
    Program,
    PyFact,
    Rule,
    Value,
    Var,
)

SAME_AS = "http://www.w3.org/2002/07/owl#sameAs"
MODES = ("off", "rewrite")


def order_key(value: Value) -> tuple:
    """The fixed total order on constants: integers, then strings, then IRIs."""
    if isinstance(value, int):
        return (0, value, "")
    if isinstance(value, Iri):
        return (2, 0, value.value)
    return (1, 0, value)


class Classes:
    """Equivalence classes of constants; the representative is the smallest member.

    Flat: every member maps straight to its representative, so `find` is one
    lookup, and a class can be split again (`regroup`, used by B/F~).

    >>> c = Classes()
    >>> c.union("b", "a"); c.union("c", "b")
    >>> c.find("c"), sorted(c.members("a"))
    ('a', ['a', 'b', 'c'])
    """

    def __init__(self) -> None:
        self.parent: dict[Value, Value] = {}  # non-representative member -> representative
        self._members: dict[Value, set[Value]] = {}  # representative -> class (non-singletons)

    def find(self, c: Value) -> Value:
        return self.parent.get(c, c)

    def union(self, a: Value, b: Value) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        if order_key(rb) < order_key(ra):
            ra, rb = rb, ra
        moved = self._members.pop(rb, {rb})
        for m in moved:
            self.parent[m] = ra
        self._members.setdefault(ra, {ra}).update(moved)

    def regroup(self, rep: Value, key) -> None:
        """Split the class of `rep` by `key(member)`, which must be the smallest of its group."""
        members = self._members.pop(rep, None)
        if members is None:
            return
        groups: dict[Value, set[Value]] = {}
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

    def members(self, rep: Value) -> set[Value]:
        """The class whose representative is `rep` (`{rep}` for a singleton)."""
        return self._members.get(rep, {rep})

    def nontrivial(self) -> dict[Value, set[Value]]:
        """Representative -> class, for the classes with more than one member."""
        return dict(self._members)

    def normal(self, fact: PyFact) -> PyFact:
        """pi(fact): every constant replaced by its representative."""
        parent = self.parent
        if not parent:
            return fact
        return (fact[0], *(parent.get(v, v) for v in fact[1:]))


def expand(facts: Iterable[PyFact], classes: Classes) -> Iterator[PyFact]:
    """F^pi for every (normal) F in `facts`: all facts whose normal form is F.

    For a normal sameAs(c, c) this yields sameAs(a, b) for all a, b in c's class.
    """
    return expand_with(facts, classes.members)


def expand_with(facts: Iterable[PyFact], members) -> Iterator[PyFact]:
    """`expand` with the class of each representative given by `members(rep)`."""
    for fact in facts:
        cols = [members(v) for v in fact[1:]]
        if all(len(c) == 1 for c in cols):
            yield fact
            continue
        for args in product(*cols):
            yield (fact[0], *args)


def check_program(program: Program) -> None:
    """Refuse what rewrite mode cannot evaluate soundly (see the module docstring)."""
    for rule in program.rules:
        for lit in rule.body:
            kind = (
                "negation" if isinstance(lit, Negation)
                else "a built-in" if isinstance(lit, Comparison) else None
            )  # fmt: skip
            if kind:
                raise AnalysisError(
                    f"{rule.pos}: equality rewriting supports positive rules without "
                    f"built-ins; rule '{rule}' uses {kind}"
                )
    for atom in _atoms(program):
        if any(isinstance(t, BinOp) for t in atom.args):
            raise AnalysisError(
                f"{atom.pos}: equality rewriting does not support arithmetic in atoms ('{atom}')"
            )
        if atom.pred == SAME_AS and len(atom.args) != 2:
            raise AnalysisError(f"{atom.pos}: owl:sameAs takes 2 arguments, not {len(atom.args)}")


def _atoms(program: Program) -> Iterator[Atom]:
    for rule in program.rules:
        yield rule.head
        yield from (lit for lit in rule.body if isinstance(lit, Atom))
    yield from program.facts


def signatures(program: Program, facts: Iterable[PyFact] = ()) -> set[tuple[str, int]]:
    """(predicate, arity) of every atom of `program` and every fact, sameAs always included."""
    sigs = {(a.pred, len(a.args)) for a in _atoms(program)}
    sigs.update((f[0], len(f) - 1) for f in facts)
    sigs.add((SAME_AS, 2))
    return sigs


def _vars(n: int, name: str = "X") -> tuple[Var, ...]:
    return tuple(Var(f"{name}{i}") for i in range(n))


def _same(a, b) -> Atom:
    return Atom(SAME_AS, (a, b))


def reflexivity(sigs: Iterable[tuple[str, int]]) -> list[Rule]:
    """(~4): sameAs(Xi, Xi) :- p(X0, ..., Xn-1) for every predicate p and position i."""
    out = []
    for pred, n in sorted(sigs):
        xs = _vars(n)
        out += [Rule(_same(x, x), (Atom(pred, xs),)) for x in xs]
    return out


def axiomatise(program: Program, facts: Iterable[PyFact] = ()) -> Program:
    """The oracle: P plus the equality axioms for sameAs over every predicate of P and `facts`.

    Evaluated as an ordinary program (sameAs an ordinary predicate) its
    materialisation is J, which rewrite mode must reproduce after `expand`.
    """
    sigs = signatures(program, facts)
    x, y, z = Var("X"), Var("Y"), Var("Z")
    rules = [
        Rule(_same(y, x), (_same(x, y),)),  # symmetry
        Rule(_same(x, z), (_same(x, y), _same(y, z))),  # transitivity
        *reflexivity(sigs),
    ]
    for pred, n in sorted(sigs):  # replacement (~1)-(~3), one rule per position
        xs = _vars(n)
        for i in range(n):
            head = Atom(pred, (*xs[:i], y, *xs[i + 1 :]))
            rules.append(Rule(head, (Atom(pred, xs), _same(xs[i], y))))
    return Program((*program.rules, *rules), program.facts, program.prefixes, program.source)


def rewrite_rules(program: Program, classes: Classes, sigs: Iterable[tuple[str, int]]) -> Program:
    """pi(P) plus the reflexivity rules (~4), without P's facts (they are explicit facts).

    Replacement, symmetry and transitivity are not needed: facts are kept normal.
    """

    def term(t):
        return Const(classes.find(t.value)) if isinstance(t, Const) else t

    def atom(a: Atom) -> Atom:
        return Atom(a.pred, tuple(term(t) for t in a.args), a.pos, a.rdf)

    rules = [
        Rule(atom(r.head), tuple(atom(lit) for lit in r.body), r.pos)  # type: ignore[arg-type]
        for r in program.rules
    ]
    return Program((*rules, *reflexivity(sigs)), (), program.prefixes, program.source)
