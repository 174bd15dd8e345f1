"""Specialised recursive modules (Hu, Motik & Horrocks 2019): tc(R) and stc(R).

A module replaces some recursive rules of a stratum (found at compile time by
`engine.analysis.detect_modules`) with a custom algorithm. It implements the
paper's four plug-in functions over one binary relation R; the maintainers call
them from the shared fixpoint loop (`engine.evaluate.saturate`), one call per
round, giving the module the round's new facts minus the ones it produced itself
in the previous round (Algorithm 2 line 14, Algorithm 3 lines 28 and 39):

* `add(Ip, delta)` -- Add (Definition 3): given `delta` (R facts new in `Ip`),
  return the R facts not in `Ip` that the module's rules derive from `Ip`
  using `delta`, closed under those rules.
* `delete(Ip, delta, cnr)` -- Del (Definition 6): `delta` are R facts being
  overdeleted (still in `Ip`); return the further R facts to overdelete. Facts
  with a non-zero non-recursive counter `cnr` are never returned (DRed^c).
  Facts deleted in earlier rounds of the same update are no longer in `Ip`.
* `rederive(deleted)` -- Red (Definition 7): after overdeletion, the facts of
  `deleted` (the overdeleted R facts) that the module's rules derive, in one or
  more steps, from what survived. Ends the deletion phase.
* Diff is always empty: R occurs in the head of the module's rules, so changes
  of lower strata never match their bodies (section 5).

Further hooks: `reset()` forgets all state (before a materialisation);
`start_deletion()` begins an update's overdeletion phase; `external(facts)` is
told, after Red and before the insertion's `add` calls, about the R facts whose
non-recursive counter became positive in this update (explicit or derived by a
non-recursive rule): they are in I when the update is done.

Views are those of engine.evaluate: `Ip(pred)` is a list of `(Relation,
excluded)` sources. Modules never change I; the caller absorbs their results,
which are fresh sets the caller owns (it may keep and change them).
Each call adds the number of candidate facts it derived (the analogue of rule
instances) to `counts.module_work[name]`.

This package knows nothing of algorithms, counters' upkeep or I/O.
"""

from __future__ import annotations

from engine.analysis import ModuleSpec, linear_base
from engine.evaluate import Counts
from engine.modules.base import Module
from engine.modules.ltc import LinearClosure
from engine.modules.stc import SymmetricTransitiveClosure
from engine.modules.tc import TransitiveClosure
from engine.rules import AnalysedRule

MODULES: dict[str, type[Module]] = {
    cls.kind: cls for cls in (TransitiveClosure, SymmetricTransitiveClosure, LinearClosure)
}


def build(spec: ModuleSpec, counts: Counts, rules: tuple[AnalysedRule, ...] = ()) -> Module:
    """The module implementing `spec` (dispatch on its kind; ltc reads its rules)."""
    if spec.kind == "ltc":
        bases = tuple(sorted({linear_base(rules[rid]) for rid in spec.rules}))
        return LinearClosure(spec, counts, bases)
    return MODULES[spec.kind](spec, counts)


__all__ = ["MODULES", "Module", "build"]
