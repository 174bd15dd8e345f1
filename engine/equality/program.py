"""The programs of rewrite mode: what it accepts, pi(P), rule constants as facts, the oracle.

Pure functions from programs to programs (and the signatures of facts); no
evaluation. `check` refuses what rewrite mode cannot evaluate soundly,
`rewrite_rules` is pi(P) plus the reflexivity rules (~4) for
engine.equality.rewrite, `constants_as_facts` moves rule constants into facts so
that B/F~ rewrites them like data, and `axiomatise` builds the oracle.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator

from fluxmat.engine.analysis import INTERNAL_PREFIX, Analysis
from fluxmat.engine.equality.classes import Classes, PyFact
from fluxmat.engine.errors import AnalysisError
from fluxmat.engine.syntax import Atom, BinOp, Call, Comparison, Const, Negation, Program, Rule, Var

SAME_AS = "http://www.w3.org/2002/07/owl#sameAs"
MODES = ("off", "rewrite")


def check(analysis: Analysis) -> None:
    """Refuse programs rewrite mode cannot evaluate (engine.equality's contract)."""
    check_program(analysis.program)
    if analysis.overloads:
        names = ", ".join(sorted(analysis.overloads))
        raise AnalysisError(
            f"equality rewriting does not support predicates used with several arities ({names})"
        )


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
        if any(isinstance(t, BinOp | Call) for t in atom.args):
            raise AnalysisError(
                f"{atom.pos}: equality rewriting does not support arithmetic in atoms ('{atom}')"
            )
        if atom.pred == SAME_AS and len(atom.args) != 2:
            raise AnalysisError(f"{atom.pos}: owl:sameAs takes 2 arguments, not {len(atom.args)}")


def _atoms(program: Program) -> Iterator[Atom]:
    for rule in program.rules:
        yield from _rule_atoms(rule)
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


def constants_as_facts(program: Program) -> tuple[Program, list[PyFact]]:
    """Each rule's constants as one fact of an internal relation the rule joins.

    `q(X) :- p(X, c0).` becomes `q(X) :- p(X, K0), __const_H(K0).` with the fact
    `__const_H(c0)` returned; rules without constants are kept. The compiled plans
    then hold no constants: rewriting a rule constant (Algorithm 6 lines 55-56) is
    rewriting that fact, which re-evaluates the rule through the ordinary delta
    plans (lines 57-58). Rule order, and so rule ids, are unchanged. H is a
    digest of the rule's text (`const_relation`), so a rule keeps its relation
    when other rules are added or removed (a program change, engine.compact.eq_program).
    """
    rules: list[Rule] = []
    facts: list[PyFact] = []
    for rule in program.rules:
        values = list(dict.fromkeys(t.value for a in _rule_atoms(rule) for t in a.args
                                    if isinstance(t, Const)))  # fmt: skip
        if not values:
            rules.append(rule)
            continue
        names = {t.name for a in _rule_atoms(rule) for t in a.args if isinstance(t, Var)}
        stem = f"{INTERNAL_PREFIX}K"
        while any(n.startswith(stem) for n in names):
            stem = "_" + stem
        slot = {v: Var(f"{stem}{k}") for k, v in enumerate(values)}

        def atom(a: Atom, slot=slot) -> Atom:
            args = tuple(slot[t.value] if isinstance(t, Const) else t for t in a.args)
            return Atom(a.pred, args, a.pos, a.rdf)

        pred = const_relation(rule)
        body = (*(atom(b) for b in rule.body), Atom(pred, tuple(slot.values()), rule.pos))
        rules.append(Rule(atom(rule.head), body, rule.pos))  # type: ignore[arg-type]
        facts.append((pred, *values))
    return Program(tuple(rules), (), program.prefixes, program.source), facts


def const_relation(rule: Rule) -> str:
    """The internal relation holding `rule`'s constants: named by a digest of the rule's text."""
    digest = hashlib.sha256(str(rule).encode("utf-8")).hexdigest()[:12]
    return f"{INTERNAL_PREFIX}const_{digest}"


def legacy_const_relations(program: Program) -> dict[str, str]:
    """The names earlier versions gave the constants' relations (`__constI`, by rule index) -> today's."""
    return {
        f"{INTERNAL_PREFIX}const{i}": const_relation(rule)
        for i, rule in enumerate(program.rules)
        if any(isinstance(t, Const) for a in _rule_atoms(rule) for t in a.args)
    }


def _rule_atoms(rule: Rule) -> Iterator[Atom]:
    yield rule.head
    yield from (lit for lit in rule.body if isinstance(lit, Atom))
