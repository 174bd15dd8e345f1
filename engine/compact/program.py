"""Program changes on the arrays core: rules added to and removed from a materialisation in place.

A rule addition is an insertion of rule instances, a removal a deletion of
them, maintained in the same pass and with the same algorithms as an update
of facts (engine.compact.core.ArraysCore.update), components in the new
program's dependency order:

* the core is recompiled for the new program (engine.compact.plans); its
  relations are kept (new indexes are added where new plans probe);
* a rule is *kept* when its text and its recursiveness are unchanged
  (engine.program_change.rule_changes); every other old rule is removed and
  every other new rule added, so a rule that changes stratum or
  recursiveness is a removal plus an addition;
* at a component's turn (its lower components settled): a removed
  non-recursive rule's instances in the state before the change take 1 off
  their heads' counters, a removed recursive rule's instances touch their
  heads with weight 0 (a head without a counted derivation is then
  over-deleted by DRed^c, or dropped by counting), an added non-recursive
  rule's instances now add 1; an added recursive rule's instances seed DRed^c's
  insertions after its over-deletion and rederivation (engine.compact.dred);
* kept rules see the other changes as deltas, exactly as in an update; a
  component whose rules did not change is maintained as in any update;
* a changed component that the closure module keeps (engine.compact.closure)
  is maintained by DRed^c in this pass, its base flags set afterwards.

The cost is the added and removed rules' instances plus the maintenance of
what they change: strata the change does not reach are not visited.

Not here: the new program and its difference from the old (engine.program_change).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from fluxmat.engine.analysis import INTERNAL_PREFIX, Analysis
from fluxmat.engine.compact.builtins import Runtime
from fluxmat.engine.compact.maintainer import CompactMaintainer, unsupported
from fluxmat.engine.compact.plans import (
    INDEX,
    Component,
    Plan,
    compile_program,
    literals,
    plan,
    rule_builtins,
    uses_builtins,
)  # fmt: skip
from fluxmat.engine.compact.relation import Rel
from fluxmat.engine.compact.unit import UNIT, has_unit, needs_unit, with_unit
from fluxmat.engine.errors import AlgorithmError
from fluxmat.engine.maintainer import Report
from fluxmat.engine.program_change import ProgramChangeError, RuleChanges, rule_changes
from fluxmat.engine.rules import AnalysedRule
from fluxmat.engine.syntax import Atom, Negation, Pos, Program

REMOVED_RULE = -1  # the rule id the work of removed rules is counted under
Plans = dict[str, list[tuple[Plan, bool]]]  # by head: (plan from position 0, recursive)


class RuleChange:
    """The rule instances a program change adds and removes, handed to the core per component."""

    def __init__(self, core, added: Plans, removed: Plans, added_ids: set[int]):
        self.core, self.added, self.removed, self.added_ids = core, added, removed, added_ids
        self.changed: list[Component] = []  # the components whose rules changed

    def component(self, comp: Component, explicit: dict) -> tuple[Component, list[Plan]]:
        """`comp` as this pass maintains it, with the counter changes put in `explicit`; added recursive plans."""
        if all(p not in self.added and p not in self.removed for p in comp.preds):
            return comp, []
        self.changed.append(comp)
        for p in comp.preds:
            parts = [
                (self.core.run_all(pl, old=True), 0 if rec else -1)
                for pl, rec in self.removed.get(p, ())
            ]
            parts += [
                (self.core.run_all(pl, old=False), 1)
                for pl, rec in self.added.get(p, ())
                if not rec
            ]
            self._count(p, parts, explicit)
        counted = {h: {q: [pl for pl in plans if pl.rule not in self.added_ids] for q, plans in by.items()}
                   for h, by in comp.counted.items()}  # fmt: skip
        rec = [pl for p in comp.preds for pl, r in self.added.get(p, ()) if r]
        return replace(comp, counted=counted, stc=False), rec

    def _count(self, p: str, parts: list[tuple[np.ndarray, int]], explicit: dict) -> None:
        """Heads with their weights into `explicit[p]` (rows, weights), after what is there."""
        rel = self.core.rels[p]
        rows = [rel.insert(h) for h, _ in parts]
        weights = [np.full(len(r), w, np.int64) for r, (_, w) in zip(rows, parts, strict=True)]
        if p in explicit:
            rows.insert(0, explicit[p][0])
            weights.insert(0, explicit[p][1])
        if rows:
            explicit[p] = (np.concatenate(rows), np.concatenate(weights))

    def settle(self) -> None:
        """Closure components maintained by DRed^c in this pass: base = counted (engine.compact.closure)."""
        for comp in self.changed:
            if comp.stc:
                rel = self.core.rels[comp.preds[0]]
                rel.base[: rel.n] = rel.cnt[: rel.n] > 0


# ---------------------------------------------------------------- checks


def where(program: Program, pred: str) -> Pos | None:
    """The first place `pred` is written in `program`."""
    for r in program.rules:
        for a in (r.head, *r.body):
            atom = a.atom if isinstance(a, Negation) else a
            if isinstance(atom, Atom) and atom.pred == pred:
                return atom.pos
    return next((f.pos for f in program.facts if f.pred == pred), None)


def check(m: CompactMaintainer, new: Analysis, changes: RuleChanges) -> None:
    """Refuse a change the arrays core cannot apply, before anything changes."""
    missing = unsupported(new, m.core_algorithm, "off")
    if missing is not None:
        raise AlgorithmError(f"core=arrays does not support {missing} yet; use core=objects")
    for p, a in new.arity.items():
        rel = m.core.rels.get(p)
        if rel is not None and rel.arity != a:
            shown = new.display.get(p, p)
            raise ProgramChangeError(
                f"predicate {shown} has {a} arguments here but {rel.arity} in the materialisation",
                where(new.program, p),
            )


# ---------------------------------------------------------------- recompiling


def _full_plans(rules: list[AnalysedRule], term_id, rule_id=None) -> Plans:
    """Each rule's plan from its first positive atom, by head (engine.compact.core.ArraysCore.run_all)."""
    out: Plans = {}
    rt = Runtime(term_id) if uses_builtins(rules) else None
    for r in rules:  # every rule has a positive atom (engine.compact.unit)
        head, body = literals(r, term_id)
        pl = plan(r.id if rule_id is None else rule_id, head, body, 0, rule_builtins(r, rt))
        out.setdefault(head[0], []).append((pl, r.recursive))
    return out


def _recompile(m: CompactMaintainer, new: Analysis, changes: RuleChanges) -> RuleChange:
    """The core's components and plans for `new` (relations kept, indexes added); the change to run."""
    core, term_id = m.core, m.dictionary.intern
    comps, plans, masks = compile_program(new, term_id, m.closures)
    added = _full_plans(changes.added, term_id)
    removed = _full_plans(changes.removed, term_id, REMOVED_RULE)
    extra = [pl for by in (added, removed) for pls in by.values() for pl, _ in pls]
    for pl in extra:
        for s in pl.steps:
            if s.how == INDEX:
                masks.setdefault(s.pred, []).append(s.mask)
    for p, a in new.arity.items():
        if p not in core.rels:
            core.rels[p] = Rel(p, a, [])
    for p, rel in core.rels.items():
        rel.add_masks(masks.get(p, []))
    comps += [Component([p], False) for p in core.rels if p not in new.arity]
    for pl in [*plans, *extra]:
        for step in pl.steps:
            step.k = core.rels[step.pred].index_of(step.mask)
    core.comps = comps
    return RuleChange(core, added, removed, {r.id for r in changes.added})


def _facts(atoms: list[Atom]) -> list[tuple]:
    return [(a.pred, *(t.value for t in a.args)) for a in atoms]  # type: ignore[union-attr]


def change_program(m: CompactMaintainer, new: Analysis) -> Report:
    """Move the maintainer's materialisation to the program analysed in `new` (see the module docstring).

    The report is an update's: facts added and removed, rule instances.
    Errors raised before the change (`check`) leave everything unchanged.
    """
    new = with_unit(new)
    changes = rule_changes(m.analysis, new)
    check(m, new, changes)
    # the unit fact enters with the change when no old rule needed it (engine.compact.unit)
    unit = [(UNIT,)] if needs_unit(new) and not has_unit(m.core) else []
    change = _recompile(m, new, changes)
    apps = m.counts.applications
    kept = {changes.kept[rid]: n for rid, n in apps.items() if rid in changes.kept}
    apps.clear()
    apps.update(kept)
    dropped = {p for p in m.core.rels if p.startswith(INTERNAL_PREFIX) and p not in new.arity}
    m.analysis = replace(
        new, internal=new.internal | dropped
    )  # auxiliary relations stay unreported
    m.arity = {**{p: rel.arity for p, rel in m.core.rels.items()}, **new.arity}
    m.rules_changed()
    m.core.change = change
    with m.own_facts():
        report = m.update(_facts(changes.facts_added) + unit, _facts(changes.facts_removed))
    if m.core.change is not None or m.core.epoch == 0:  # an update path that skipped core.update
        raise RuntimeError("the program change was not applied by the arrays core's update")
    change.settle()
    m.small.attach(m.core)  # the compiled call encodes the new program on its next update
    report.details["program_components_changed"] = len(change.changed)
    return report
