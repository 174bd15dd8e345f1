"""Program changes: the new program, its analysis, and what differs from the program in force.

A change is given as rules (and facts) to add and to delete, or as a whole
new program; `changed_program` builds the new program (a deleted rule must be
in the program in force: rules are compared by their text; the rules to add and
delete are read with the program's `@prefix` declarations, a whole new program
with its own only). `analyse_change`
analyses it (parse, safety and stratification errors carry file, line and
column) keeping the names of the auxiliary relations the analysis invents
(`__negK`, engine.analysis.project_negation_locals) for the same negations,
so an unchanged rule keeps its text. `rule_changes` pairs the rules of two
analyses: a rule is kept when its text and its recursiveness are unchanged;
every other rule of the old program is removed and of the new one added
(changing a rule's text is a removal plus an addition).

Nothing here touches a materialisation (engine.compact.program does).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

from fluxmat.engine.analysis import (
    INTERNAL_PREFIX,
    Analysis,
    analyse,
    overloads,
    project_negation_locals,
    split_overloads,
)
from fluxmat.engine.errors import FluxmatError
from fluxmat.engine.parser import parse_program
from fluxmat.engine.rules import AnalysedRule
from fluxmat.engine.syntax import Atom, Negation, Program, Rule


class ProgramChangeError(FluxmatError):
    """A program change that cannot be applied (nothing was changed)."""


def changed_program(
    old: Program,
    add: str = "",
    delete: str = "",
    whole: str | None = None,
    source: str = "<program>",
) -> Program:
    """The program after the change: `whole` (named `source` in errors), or `old` without `delete` and with `add`."""
    if whole is not None:
        if add or delete:
            raise ProgramChangeError(
                "a program change is a whole program or rules to add and delete, not both"
            )
        return parse_program(whole, source)
    inherited = dict(old.prefixes)  # `add` and `delete` are read with the program's @prefix
    plus, minus = parse_program(add, "<add>", inherited), parse_program(delete, "<del>", inherited)
    rules, facts = list(old.rules), list(old.facts)
    texts = [str(r) for r in rules]
    for r in minus.rules:
        if str(r) not in texts:
            raise ProgramChangeError(
                f"cannot delete rule '{r}': it is not in the program in force", r.pos
            )
        i = texts.index(str(r))
        del rules[i], texts[i]
    for f in minus.facts:
        if f not in facts:
            raise ProgramChangeError(
                f"cannot delete fact '{f}.': it is not in the program in force", f.pos
            )
        facts.remove(f)
    prefixes = dict(old.prefixes) | dict(plus.prefixes)
    return Program(
        tuple(rules) + plus.rules, tuple(facts) + plus.facts, tuple(prefixes.items()), old.source
    )


# ---------------------------------------------------------------- analysis


def _aux_key(rule: Rule) -> tuple:
    """What an auxiliary negation rule `__negK(shared) :- atom.` projects, without its name."""
    return str(rule.body[0]), tuple(str(a) for a in rule.head.args)


def _renamed(program: Program, names: dict[str, str]) -> Program:
    def atom(a: Atom) -> Atom:
        return replace(a, pred=names[a.pred]) if a.pred in names else a

    def lit(x):
        if isinstance(x, Atom):
            return atom(x)
        return Negation(atom(x.atom), x.pos) if isinstance(x, Negation) else x

    rules = tuple(Rule(atom(r.head), tuple(lit(b) for b in r.body), r.pos) for r in program.rules)
    return Program(rules, program.facts, program.prefixes, program.source)


def analyse_change(old: Analysis, program: Program) -> Analysis:
    """The analysis of `program`, its auxiliary relations named as in `old` where they mean the same."""
    table = overloads(program)
    rewritten = project_negation_locals(split_overloads(program))
    known = {_aux_key(r): r.head.pred for r in old.program.rules if r.head.pred in old.internal}
    taken, names, n = set(old.internal), {}, 0
    for r in rewritten.rules:
        p = r.head.pred
        if not p.startswith(INTERNAL_PREFIX) or p in names:
            continue
        name = known.get(_aux_key(r))
        if name is None or name in names.values():
            while f"{INTERNAL_PREFIX}neg{n}" in taken:
                n += 1
            name = f"{INTERNAL_PREFIX}neg{n}"
        taken.add(name)
        names[p] = name
    analysis = analyse(_renamed(rewritten, names))
    display = {name: p for p, by_arity in table.items() for name in by_arity.values()}
    return replace(analysis, overloads=table, display=display)


# ---------------------------------------------------------------- difference


@dataclass
class RuleChanges:
    """How two analyses' rules pair up (see the module docstring)."""

    kept: dict[int, int]  # old rule id -> new rule id
    added: list[AnalysedRule]  # of the new analysis
    removed: list[AnalysedRule]  # of the old analysis
    facts_added: list[Atom]
    facts_removed: list[Atom]

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.facts_added or self.facts_removed)


def _key(r: AnalysedRule) -> tuple[str, bool]:
    return str(r.rule), r.recursive


def rule_changes(old: Analysis, new: Analysis) -> RuleChanges:
    """The rules kept, added and removed, and the program's facts added and removed."""
    waiting: dict[tuple, list[int]] = {}
    for r in old.rules:
        waiting.setdefault(_key(r), []).append(r.id)
    kept, added = {}, []
    for r in new.rules:
        ids = waiting.get(_key(r))
        if ids:
            kept[ids.pop(0)] = r.id
        else:
            added.append(r)
    removed = [r for r in old.rules if r.id not in kept]
    before, after = Counter(old.program.facts), Counter(new.program.facts)
    return RuleChanges(
        kept, added, removed, list((after - before).elements()), list((before - after).elements())
    )


def touched_strata(new: Analysis, changes: RuleChanges) -> tuple[list[int], list[int]]:
    """Strata of the new program whose rules changed, and the strata the change may reach (those and above)."""
    heads = {r.head.pred for r in changes.added} | {r.head.pred for r in changes.removed}
    changed = sorted({new.stratum_of[p] for p in heads if new.stratum_of.get(p, 0) > 0})
    reached, preds = [], set(heads)
    for s in new.strata:
        if s.index in changed or not preds.isdisjoint(new.body_preds(s)):
            reached.append(s.index)
            preds |= s.preds
    return changed, reached


def describe(old: Analysis, new: Analysis) -> list[str]:
    """The difference as lines: rules removed and added (with where they are written), strata touched."""
    changes = rule_changes(old, new)
    lines = [
        f"- {r.rule}  ({r.rule.pos})"
        for r in changes.removed
        if not r.head.pred.startswith(INTERNAL_PREFIX)
    ]
    lines += [
        f"+ {r.rule}  ({r.rule.pos})"
        for r in changes.added
        if not r.head.pred.startswith(INTERNAL_PREFIX)
    ]
    lines += [f"- {f}." for f in changes.facts_removed] + [f"+ {f}." for f in changes.facts_added]
    changed, reached = touched_strata(new, changes)
    lines.append(f"strata whose rules change: {_listed(changed)} (of {len(new.strata)})")
    lines.append(f"strata the change may reach: {_listed(reached)}")
    return lines


def _listed(strata: list[int]) -> str:
    return ", ".join(map(str, strata)) if strata else "none"
