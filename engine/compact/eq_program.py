"""Program changes with equality (`equality="rewrite"`) on the arrays core: in place, or by a rebuild.

The arrays core with equality (engine.compact.equality) runs pi(P): P's rules
with their constants moved into facts of internal relations, each named by a
digest of its rule's text (engine.equality.constants_as_facts), plus a
reflexivity rule per predicate and position. A rule keeps its relation
whatever other rules come and go, so a change of P is the same change of
pi(P), plus the constants' facts of the rules added and removed, plus the
reflexivity rules of predicates new to the program.

* A change that can only make classes grow is maintained **in place**: it
  removes no rule and no program fact, or it removes some while no rule of
  the old program derives owl:sameAs (and, when program facts are removed,
  none of the new program either, and no sameAs fact is among them). The
  core's rules move to the new pi(P) as any program change on the arrays
  core (engine.compact.program: the removed rules' instances retracted, the
  added ones' inserted, strata the change does not reach not visited); then
  the program's facts and the constants' facts of the added and removed rules
  go through the core as an update's (a constant is rewritten to its
  representative like data), and the rounds merge the classes of every
  sameAs the new rules derive, rewriting the rows that hold a moved term.
* Any other change (one that may split a class) **rebuilds** (pi, I) from E
  under the new program, as an update that may split a class does
  (`details["equality_recomputed"]` is 1).

Validation comes before anything changes: what rewrite mode refuses
(negation, built-ins, predicates used with several arities;
engine.equality.check) and arities against the materialisation. The report
is the change's delta of J, the expanded materialisation; with `fd-counting`
and `fd-dred` (engine.compact.eq_fed) it also joins the next poll, as the last
update integrated.

Not here: the new program and its difference (engine.program_change), the
change of the core's rules (engine.compact.program), the classes
(engine.compact.eq_classes).
"""

from __future__ import annotations

from fluxmat.engine.analysis import Analysis, analyse
from fluxmat.engine.compact.eq_fed import EqualityFed
from fluxmat.engine.compact.equality import ArraysEquality, rewritten_program
from fluxmat.engine.compact.program import where
from fluxmat.engine.equality import SAME_AS, check, constants_as_facts, signatures
from fluxmat.engine.maintainer import Report
from fluxmat.engine.program_change import ProgramChangeError, RuleChanges, rule_changes
from fluxmat.engine.syntax import Atom


def _derives_equality(analysis: Analysis) -> bool:
    return any(r.head.pred == SAME_AS for r in analysis.program.rules)


def in_place(m: ArraysEquality, new: Analysis, changes: RuleChanges) -> bool:
    """Whether the change can only make classes grow (module docstring): then it is maintained in place."""
    if not changes.removed and not changes.facts_removed:
        return True
    if m.derives_equality:
        return False
    if not changes.facts_removed:
        return True
    return not _derives_equality(new) and all(f.pred != SAME_AS for f in changes.facts_removed)


def check_arities(m: ArraysEquality, new: Analysis) -> None:
    """Refuse a predicate of the new program whose arity differs from the materialisation's."""
    for p, a in new.arity.items():
        known = m.arity.get(p)
        if known is not None and known != a:
            raise ProgramChangeError(
                f"predicate {p} has {a} arguments here but {known} in the materialisation",
                where(new.program, p),
            )


def _facts(atoms: list[Atom]) -> list[tuple]:
    return [(a.pred, *(t.value for t in a.args)) for a in atoms]  # type: ignore[union-attr]


def change_program(m: ArraysEquality, new: Analysis) -> Report:
    """Move `m` to the program analysed in `new` (module docstring); errors leave everything unchanged."""
    check(new)
    check_arities(m, new)
    changes = rule_changes(m.analysis, new)
    if isinstance(m, EqualityFed):
        m.run()  # the updates submitted before the change are integrated first
    plus, minus = m.encode_update(_facts(changes.facts_added), _facts(changes.facts_removed))
    inner = None
    if in_place(m, new, changes):
        pi_p, _facts_of_constants = constants_as_facts(new.program)
        inner = analyse(rewritten_program(pi_p, m.sigs | signatures(new.program)))
    else:  # the core's rule ids are the program's (the reflexivity rules after them)
        apps = m.counts.applications
        kept = {changes.kept[rid]: n for rid, n in apps.items() if rid in changes.kept}
        apps.clear()
        apps.update(kept)
    report = m.change_program(new, inner, plus, minus)
    if isinstance(m, EqualityFed):
        m.program_changed(report)
    return report
