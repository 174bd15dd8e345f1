"""Equality (owl:sameAs) programs and the axiomatised oracle the rewriting is checked against."""

from __future__ import annotations

from fluxmat.engine import Reasoner, parse_program
from fluxmat.engine.equality import axiomatise

OWL = "@prefix owl: <http://www.w3.org/2002/07/owl#> .\n"


# Motik, Horrocks & Kim 2015, section 3.1 "Main Difficulty", over predicate r
# (our predicates are not constants, so the paper's R ~ R and ~ ~ ~ do not arise).
PAPER = OWL + "\n".join([
    "owl:sameAs(Y1, Y2) :- r(Y1, X), r(Y2, X).",
    "owl:sameAs(Y1, Y2) :- r(X, Y1), r(X, Y2).",
    "r(a, b). r(c, d). r(a, d).",
])  # fmt: skip


def oracle(text: str, explicit) -> set[tuple]:
    """mat(P u P_sameAs, E) with sameAs an ordinary predicate (the axiomatisation)."""
    explicit = list(explicit)
    program = axiomatise(parse_program(text), explicit)
    r = Reasoner(program, "remat")
    r.maintainer.load(explicit)
    return r.facts()
