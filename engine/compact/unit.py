"""Rules without a positive body atom on the arrays core: joined with a one-fact relation, `__unit()`.

The arrays core starts every plan at a body atom whose delta enters it
(engine.compact.plans), so a rule such as `p(1) :- not q(1).` or
`r(X) :- X = 3.` would never fire. `with_unit` gives each such rule the
positive atom `__unit()` of a nullary internal relation (in front of its
body; the rule's text is kept), and the maintainer makes `__unit()` an
explicit fact of every fresh core (`seed`). The rules are then ordinary
non-recursive rules: evaluated once when the unit fact enters (a load, or
the core's first update), with their negated atoms in the state before that
update, and re-evaluated by counting whenever a relation they negate
changes -- exactly as the objects core evaluates them. The unit fact is a
fact of the stored state like any other (engine.compact.state), so a
restored core has it; it is never shown (internal relations are not).

Not here: the plans (engine.compact.plans), the maintainer (engine.compact.maintainer).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from fluxmat.engine.analysis import INTERNAL_PREFIX, Analysis
from fluxmat.engine.syntax import Atom

UNIT = f"{INTERNAL_PREFIX}unit"
UNIT_ROW = np.zeros((1, 0), np.int64)


def with_unit(analysis: Analysis) -> Analysis:
    """`analysis` with `__unit()` in front of the body of every rule without a positive atom."""
    if all(r.positives for r in analysis.rules) or UNIT in analysis.arity:
        return analysis
    atom = Atom(UNIT, ())
    rules = tuple(r if r.positives else replace(r, positives=(atom,)) for r in analysis.rules)
    return replace(analysis, rules=rules, arity={**analysis.arity, UNIT: 0},
                   stratum_of={**analysis.stratum_of, UNIT: 0},
                   internal=analysis.internal | {UNIT})  # fmt: skip


def needs_unit(analysis: Analysis) -> bool:
    """Whether a rule of `analysis` (after `with_unit`) reads `__unit()`."""
    return UNIT in analysis.arity


def has_unit(core) -> bool:
    """Whether the core's `__unit()` fact is explicit (a fresh core's is not yet)."""
    rel = core.rels.get(UNIT)
    if rel is None or not rel.n:
        return False
    return bool(rel.expl[rel.lookup(UNIT_ROW)[0]])
