"""The triple view: a program over one ternary relation `fluxmat:triple(s, p, o)`.

A program whose rules mention the reserved predicate `<urn:fluxmat:triple>`
(the OWL 2 RL/RDF rules of `--owl-rules rdf` do) keeps every RDF fact as a
triple, so a rule can range over predicates and classes (`T(?x, ?p, ?y)`),
and schema triples are data like any other. Outside the engine facts keep
their usual RDF shape (`C[s]` for `s rdf:type C`, `p[s, o]` for `s p o`): the
`Reasoner` converts at its door, in both directions, with `TripleView`:

* in: a fact of arity 1 or 2 whose predicate is an absolute IRI (`scheme:...`)
  becomes `triple(s, rdf:type, C)` or `triple(s, p, o)`; other facts
  (`edge(a, b)`, arity 3) stay as they are;
* out: `triple(s, rdf:type, C)` with an IRI `C` becomes `C[s]`, any other
  triple with an IRI predicate `p[s, o]`;
* the program: an atom of arity 1 or 2 with an IRI predicate in a rule the user
  wrote is read as the triple it stands for, so user rules over `C[?x]` see
  the triples (negation over such an atom then depends on the triples
  themselves and is refused as unstratifiable).

Nothing here knows OWL: the rules come from connectors.owl2rl_rdf.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from fluxmat.engine.syntax import Atom, Const, Iri, Negation, Program, Rule

TRIPLE = "urn:fluxmat:triple"
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
_TYPE = Iri(RDF_TYPE)
_ABSOLUTE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")


def is_rdf_pred(pred: str) -> bool:
    """Whether a predicate name is an absolute IRI (so its facts are triples)."""
    return pred != TRIPLE and _ABSOLUTE.match(pred) is not None


def uses_triples(program: Program) -> bool:
    """Whether the program is over the triple view (a rule mentions `fluxmat:triple`)."""
    for rule in program.rules:
        for lit in (rule.head, *rule.body):
            atom = lit.atom if isinstance(lit, Negation) else lit
            if isinstance(atom, Atom) and atom.pred == TRIPLE:
                return True
    return False


def _atom_in(atom: Atom) -> Atom:
    if not is_rdf_pred(atom.pred) or len(atom.args) not in (1, 2):
        return atom
    if len(atom.args) == 1:
        args = (atom.args[0], Const(_TYPE), Const(Iri(atom.pred)))
    else:
        args = (atom.args[0], Const(Iri(atom.pred)), atom.args[1])
    return Atom(TRIPLE, args, atom.pos)


def _rule_in(rule: Rule) -> Rule:
    body = tuple(
        Negation(_atom_in(b.atom), b.pos) if isinstance(b, Negation) else _atom_in(b) if isinstance(b, Atom) else b
        for b in rule.body
    )
    return Rule(_atom_in(rule.head), body, rule.pos)


def program_in(program: Program) -> Program:
    """The program with every RDF atom read as a triple (see the module docstring)."""
    return Program(tuple(_rule_in(r) for r in program.rules), tuple(_atom_in(a) for a in program.facts),
                   program.prefixes, program.source)  # fmt: skip


def fact_in(fact: tuple) -> tuple:
    """A fact as the engine keeps it in the triple view."""
    n = len(fact)
    if n == 2 and is_rdf_pred(fact[0]):
        return (TRIPLE, fact[1], _TYPE, Iri(fact[0]))
    if n == 3 and is_rdf_pred(fact[0]):
        return (TRIPLE, fact[1], Iri(fact[0]), fact[2])
    return fact


def fact_out(fact: tuple) -> tuple:
    """A fact of the triple view in its usual RDF shape (its inverse: `fact_in(fact_out(f)) == f`)."""
    if fact[0] != TRIPLE or len(fact) != 4:
        return fact
    _, s, p, o = fact
    if not isinstance(p, Iri) or not is_rdf_pred(p.value):
        return fact
    if p == _TYPE and isinstance(o, Iri) and is_rdf_pred(o.value):
        return (o.value, s)
    return (p.value, s, o)


def facts_in(facts: Iterable[tuple]) -> list[tuple]:
    return [fact_in(f) for f in facts]


def facts_out(facts: Iterable[tuple]) -> list[tuple]:
    return [fact_out(f) for f in facts]
