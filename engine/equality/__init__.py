"""Equality (`owl:sameAs`) by rewriting to representatives (Motik et al. 2015).

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

The package:

- `classes`: the union-find `Classes` (pi and gamma) and `expand`;
- `program`: what rewrite mode accepts, pi(P), rule constants as facts, and
  the oracle `axiomatise`;
- `saturation`: forward chaining with rewriting (Motik et al. 2015b) through
  the engine's compiled plans and its one fixpoint loop (engine.evaluate);
- `bfeq`: B/F~ (`bf`), every update incremental, equality changes included;
- `rewrite`: `remat`, `dred` and `dredc` over pi(P), recomputing the
  r-materialisation when an update can change the classes.

It evaluates nothing itself: rules run as compiled plans (engine.plans) over
dictionary-encoded relations (engine.storage). Default mode ("off") never
touches it: `owl:sameAs` is then an ordinary predicate. Only the pure parts are
imported here; engine.algorithms imports the two maintainers.
"""

from fluxmat.engine.equality.classes import Classes, PyFact, expand, expand_args, order_key
from fluxmat.engine.equality.program import (
    MODES,
    SAME_AS,
    axiomatise,
    check,
    check_program,
    constants_as_facts,
    reflexivity,
    rewrite_rules,
    signatures,
)

__all__ = [
    "MODES", "SAME_AS", "Classes", "PyFact", "axiomatise", "check", "check_program",
    "constants_as_facts", "expand", "expand_args", "order_key", "reflexivity", "rewrite_rules",
    "signatures",
]  # fmt: skip
