"""A rule as the analysis leaves it: positive atoms, negated atoms and built-ins.

`AnalysedRule` is what plans are compiled from and what decompositions
(engine.decompose) partition; `analyse` (engine.analysis) builds them. Nothing
here reads a whole program or evaluates anything.
"""

from __future__ import annotations

from dataclasses import dataclass

from fluxmat.engine.syntax import Atom, BinOp, Call, Rule, Term, Var, postorder


@dataclass(frozen=True, slots=True)
class Filter:
    """A comparison whose variables are all bound when it is evaluated."""

    op: str
    left: Term
    right: Term


@dataclass(frozen=True, slots=True)
class Assign:
    """`var = expr`: binds `var` (or checks it when `check` is set)."""

    var: str
    expr: Term
    check: bool = False


Builtin = Filter | Assign


@dataclass(frozen=True)
class AnalysedRule:
    id: int
    rule: Rule
    positives: tuple[Atom, ...]
    negatives: tuple[Atom, ...]
    builtins: tuple[Builtin, ...]
    stratum: int
    recursive: bool

    @property
    def head(self) -> Atom:
        return self.rule.head

    def __str__(self) -> str:
        return str(self.rule)



def term_vars(term: Term) -> list[str]:
    """The variables of `term`, left to right, with repetitions."""
    if isinstance(term, Var):
        return [term.name]
    if isinstance(term, BinOp | Call):
        return [t.name for t in postorder(term) if isinstance(t, Var)]
    return []
