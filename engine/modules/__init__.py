"""Specialised recursive modules (Hu, Motik & Horrocks 2019): tc(R), stc(R) and ltc(R).

A module replaces some recursive rules of a stratum (found at compile time by
`engine.analysis.detect_modules`) with a custom algorithm over one binary
relation R. There are two kinds, both with MAT-MOD's Add for materialisation
(engine.seminaive calls it from the shared fixpoint loop,
`engine.evaluate.saturate`, once per round, with the round's new facts minus
the ones the module produced itself in the previous round: Algorithm 2 line
14, Algorithm 3 lines 28 and 39):

* `add(Ip, delta)` -- Add (Definition 3): given `delta` (R facts new in `Ip`),
  return the R facts not in `Ip` that the module's rules derive from `Ip`
  using `delta`, closed under those rules.

**Phase modules** (`PhaseModule`: tc, stc) take part in DRed^c-MOD's phases
(engine.algorithms.stratified), one call per round:

* `delete(Ip, delta, cnr)` -- Del (Definition 6): `delta` are R facts being
  overdeleted (still in `Ip`); return the further R facts to overdelete. Facts
  with a non-zero non-recursive counter `cnr` are never returned (DRed^c).
  Facts deleted in earlier rounds of the same update are no longer in `Ip`.
* `rederive(deleted)` -- Red (Definition 7): after overdeletion, the facts of
  `deleted` (the overdeleted R facts) that the module's rules derive, in one or
  more steps, from what survived. Ends the deletion phase.
* Diff is always empty: R occurs in the head of the module's rules, so changes
  of lower strata never match their bodies (section 5).
* `start_deletion()` begins an update's overdeletion phase; `external(facts)`
  is told, after Red and before the insertion's `add` calls, about the R facts
  whose non-recursive counter became positive in this update.

**Upkeep modules** (`UpkeepModule`: `Components` for stc, `Reachability` for
tc and ltc) keep R as the closure of its edges (the base R facts; ltc: along
lower relations S) and change it edge by edge: `build` from a
materialisation, `change` / `link` / `unlink` returning the R facts lost and
gained, `connected`. `dredc` maintains an ltc stratum with one (ltc has no
phase form: its rules read S, so Diff is not empty); the fully dynamic
algorithms keep every module they take as one (engine.fd), operation by
operation.

Views are those of engine.evaluate: `Ip(pred)` is a list of `(Relation,
excluded)` sources. Modules never change I; the caller absorbs their results,
which are fresh sets the caller owns (it may keep and change them). Each call
adds the number of candidate facts it derived (the analogue of rule instances)
to `counts.module_work[name]`.

This package knows nothing of algorithms, counters' upkeep or I/O.
"""

from __future__ import annotations

from fluxmat.engine.analysis import ModuleSpec, linear_base
from fluxmat.engine.evaluate import Counts
from fluxmat.engine.modules.base import Module, PhaseModule, UpkeepModule
from fluxmat.engine.modules.components import Components
from fluxmat.engine.modules.reach import Reachability
from fluxmat.engine.modules.stc import SymmetricTransitiveClosure
from fluxmat.engine.modules.tc import TransitiveClosure
from fluxmat.engine.rules import AnalysedRule

PHASE_MODULES: dict[str, type[PhaseModule]] = {
    "tc": TransitiveClosure, "stc": SymmetricTransitiveClosure,
}  # fmt: skip
UPKEEP_MODULES: dict[str, type[UpkeepModule]] = {
    "tc": Reachability, "stc": Components, "ltc": Reachability,
}  # fmt: skip


def build(spec: ModuleSpec, counts: Counts, rules: tuple[AnalysedRule, ...]) -> Module:
    """The module MAT-MOD runs for `spec`: its phase module, or its upkeep module (ltc)."""
    kind = PHASE_MODULES.get(spec.kind)
    return kind(spec, counts) if kind is not None else build_upkeep(spec, counts, rules)


def build_upkeep(
    spec: ModuleSpec, counts: Counts, rules: tuple[AnalysedRule, ...]
) -> UpkeepModule:
    """The upkeep module keeping `spec`'s relation edge by edge."""
    bases = tuple(sorted({linear_base(rules[rid]) for rid in spec.rules})) if spec.kind == "ltc" else ()
    return UPKEEP_MODULES[spec.kind](spec, counts, bases)


__all__ = [
    "PHASE_MODULES", "UPKEEP_MODULES", "Module", "PhaseModule", "UpkeepModule", "build",
    "build_upkeep",
]  # fmt: skip
