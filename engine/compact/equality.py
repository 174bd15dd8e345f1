"""Equality (`equality="rewrite"`) on the arrays core: owl:sameAs by rewriting to representatives.

Contract: as engine.equality (the objects core's `remat~`, `dred~`, `dredc~`,
and `bf`, whose B/F~ splits classes incrementally; here `bf~` is the rebuild
below with Backward/Forward, engine.compact.bf, in the core).
`facts()` is the expanded materialisation J of P plus the equality axioms,
`rewritten()` the normal facts I = pi(J), `representative(c)` is pi(c) -- the
smallest member of c's class by engine.equality.order_key -- and a report's
facts are J's delta.

Storage. pi is an int64 array over term ids (engine.compact.eq_classes). The
explicit facts E are kept as given, in hash tables of their own; an arrays
core (engine.compact.maintainer, the same algorithm) holds I over the program
pi(P) plus the reflexivity rules, with rule constants moved into facts of
internal relations (engine.equality.constants_as_facts), so the compiled plans
hold no constants and a merge rewrites rule constants like data. Its explicit
facts are pi(E) plus those constant facts; each normal row counts its
preimages in E.

Maintenance of one update:
* E changes are rewritten by pi (a gather); a normal row enters the core's
  explicit facts with its first preimage and leaves with its last, and the core
  maintains I (counting, DRed^c or B/F^c, closure modules);
* a non-trivial sameAs(a, b) the core derives merges the classes: every normal
  explicit row holding a term whose representative changed is rewritten
  (delete the old rows, add pi of them, set-at-a-time) and the core maintains I
  again, until no merge remains -- Motik et al.'s rounds, each an incremental
  update of the core rather than a recomputation;
* an update that can split a class -- it deletes a sameAs fact, or deletes
  anything when some rule derives sameAs -- or brings a new predicate (a new
  reflexivity rule) rebuilds everything from E, as the objects core's
  `remat~`/`dred~`/`dredc~` do (`details["equality_recomputed"]`).

A program change (engine.compact.eq_program decides how) is either such a
rebuild under the new program (`change_program` with no inner analysis) or
maintained in place: the core's rules move to the new pi(P)
(engine.compact.program), then E's changes and the rule constants' facts are
pushed as in an update, and the rounds merge what the new rules derive.
J's delta is the expansion F^pi of the normal rows that changed or that hold
a member of a class that changed, before and after (old classes, new classes).

Not here: the classes (engine.compact.eq_classes), the core (engine.compact.core).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from fluxmat.engine.analysis import INTERNAL_PREFIX, Analysis, analyse
from fluxmat.engine.compact.eq_classes import Members, TermClasses, expand_rows, expanded_count
from fluxmat.engine.compact.maintainer import CompactMaintainer, unsupported
from fluxmat.engine.compact.program import change_program as change_rules
from fluxmat.engine.compact.relation import Rel
from fluxmat.engine.equality import SAME_AS, Classes, check, constants_as_facts, reflexivity
from fluxmat.engine.equality.classes import sorted_facts
from fluxmat.engine.equality.program import legacy_const_relations, signatures
from fluxmat.engine.errors import AlgorithmError
from fluxmat.engine.maintainer import Changes, Maintainer, Report, Update, given
from fluxmat.engine.storage import Dictionary, paused_gc
from fluxmat.engine.syntax import Program, PyFact

Arrays = dict[str, np.ndarray]
_EMPTY = np.empty(0, np.int64)


def rewritten_program(program: Program, sigs: set[tuple[str, int]]) -> Program:
    """What the core runs: `program`'s rules (constants as facts) plus the reflexivity rules for `sigs`."""
    rules = (*program.rules, *reflexivity(sigs))
    return Program(rules, (), program.prefixes, program.source)


def _block(facts: Iterable[tuple], arity: int) -> np.ndarray:
    facts = list(facts)
    return np.array(facts, np.int64).reshape(len(facts), arity)


class Flips:
    """The core's rows that flipped during one update, each with its presence before the update."""

    def __init__(self) -> None:
        self.parts: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}

    def note(self, flipped: Arrays, rels: dict[str, Rel]) -> None:
        for p, rows in flipped.items():
            if len(rows):
                self.parts.setdefault(p, []).append((rows, rels[p].alive[rows] == 0))

    def before(self, p: str) -> tuple[np.ndarray, np.ndarray]:
        """(rows, present before the update) for the rows of `p` that flipped at least once."""
        parts = self.parts.get(p)
        if not parts:
            return _EMPTY, np.zeros(0, np.bool_)
        rows, was = (np.concatenate(a) for a in zip(*parts, strict=True))
        rows, first = np.unique(rows, return_index=True)
        return rows, was[first]


@dataclass
class EqJournal:
    """What changed since the last export (engine.compact.eq_state).

    E's changed rows per relation (original term ids), the classes' changes
    (terms that moved, their representatives before, every member of a
    changed class) and the core's epoch at the last export; `full`: export
    everything (after a load or a rebuild: the core is a new one).
    """

    full: bool = True
    epoch: int = 0
    keys: dict[str, list[np.ndarray]] = field(default_factory=dict)
    moved: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    affected: list[np.ndarray] = field(default_factory=list)

    def explicit(self, add: Arrays, delete: Arrays) -> None:
        for changes in (add, delete):
            for p, rows in changes.items():
                self.keys.setdefault(p, []).append(rows)

    def classes(self, moved: np.ndarray, was: np.ndarray, affected: np.ndarray) -> None:
        self.moved.append((moved, was))
        self.affected.append(affected)


class RewrittenCore(CompactMaintainer):
    """The arrays core over pi(P), counting its work and checking limits as the maintainer it serves."""

    flipped: Arrays = {}  # the rows the last update through `update` flipped (a program change's)

    def report_flips(self, flipped: Arrays, report: Report) -> None:
        """Keep the rows (the maintainer it serves reports J's delta, not the core's)."""
        self.flipped = flipped

    def follow(self, counts, limits, work_start: int | None) -> None:
        """Share `counts` (rule ids of P are kept), apply `limits` from `work_start` on."""
        self.counts, self.limits, self._work_start = counts, limits, work_start

    def fill(self, facts: Arrays, values: dict[str, np.ndarray], explicit: Arrays) -> None:
        """A fresh core holding stored rows with their counters (value - 1), presence and explicit flags."""
        self.core = self._new_core()
        for pred, keys in facts.items():
            rel = self.core.rel(pred, self.arity.setdefault(pred, keys.shape[1]))
            rows = rel.insert(np.ascontiguousarray(keys))
            rel.cnt[rows] = values[pred] - 1
            rel.alive[rows] = 1
            rel.base[rows] = values[pred] > 1
        for pred, keys in explicit.items():
            rel = self.core.rel(pred, keys.shape[1])
            rows = rel.lookup(np.ascontiguousarray(keys))
            if (rows < 0).any():
                raise ValueError("an explicit fact of the rewritten program is not present")
            rel.expl[rows] = 1


class ArraysEquality(Maintainer):
    """The arrays core with owl:sameAs as equality (see the module docstring)."""

    core_name = "arrays"

    def __init__(self, analysis: Analysis, algorithm: str = "dredc", modules: bool = True,
                 dictionary: Dictionary | None = None):  # fmt: skip
        check(analysis)
        super().__init__(analysis, dictionary)
        self.arity.setdefault(SAME_AS, 2)
        self.algorithm, self.closures = algorithm, modules
        self.name = f"{algorithm}~"
        self.sigs: set[tuple[str, int]] = set()
        self.adopt(analysis)
        self.ex: dict[str, Rel] = {}  # E as given (original term ids), `expl` flags membership
        self.renamed = False  # a restore renamed the constants' relations of an older state
        self.journal = EqJournal()  # what changed since the last export (engine.compact.eq_state)
        self._build(self.sigs)

    def adopt(self, analysis: Analysis) -> None:
        """Take the program of `analysis`: its rule constants as facts, its signatures (reflexivity rules)."""
        self.analysis = analysis
        self.program, self.const_facts = constants_as_facts(analysis.program)
        self.derives_equality = any(r.head.pred == SAME_AS for r in analysis.program.rules)
        self.sigs = self.sigs | signatures(analysis.program)
        self.arity.update(analysis.arity)

    def _build(self, sigs: set[tuple[str, int]]) -> None:
        """An empty core over pi(P) plus reflexivity for `sigs`, identity classes."""
        self.sigs = set(sigs)
        program = rewritten_program(self.program, self.sigs)
        self.inner = RewrittenCore(analyse(program), self.algorithm, self.closures, self.dictionary)
        self.inner.follow(self.counts, self.limits, self._work_start)
        self.pi = TermClasses(self.dictionary)
        self.norm: dict[str, Rel] = {}  # normal rows of pi(E) and the constant facts
        self.pre: dict[str, np.ndarray] = {}  # per normal row, its preimages

    def set_limits(self, limits) -> None:
        """Limits apply to the core holding I (engine.limits)."""
        super().set_limits(limits)
        self.inner.follow(self.counts, limits, self._work_start)

    @property
    def core(self):
        """The arrays core holding I (engine.reasoner reads its epoch)."""
        return self.inner.core

    # ------------------------------------------------------------ E
    def set_explicit(self, facts: Iterable[PyFact]) -> None:
        self.ex = {}
        loading: Changes = {}
        for fact in facts:
            pred, f = self.encode(given(fact))
            loading.setdefault(pred, set()).add(f)
        self._change_e(loading, {})

    def normalise(self, add: Iterable[PyFact], delete: Iterable[PyFact]) -> Update:
        """Encode an update; its no-ops are found against E's flags (`maintain`)."""
        return Update(*self.encode_update(add, delete))

    def _change_e(self, plus: Changes, minus: Changes) -> tuple[Arrays, Arrays, int, int]:
        """Apply an update to E: (added rows, deleted rows, no-op adds, no-op deletes)."""
        added, deleted, noop_adds, noop_deletes = {}, {}, 0, 0
        for p, fs in minus.items():
            rel = self._ex(p)
            rows = rel.lookup(_block(fs, rel.arity))
            rows = rows[rows >= 0]
            rows = rows[rel.expl[rows] != 0]
            noop_deletes += len(fs) - len(rows)
            rel.expl[rows] = 0
            if len(rows):
                deleted[p] = rel.cols[rows].copy()
        for p, fs in plus.items():
            rel = self._ex(p)
            rows = np.unique(rel.insert(_block(fs, rel.arity)))
            rows = rows[rel.expl[rows] == 0]
            noop_adds += len(fs) - len(rows)
            rel.expl[rows] = 1
            if len(rows):
                added[p] = rel.cols[rows].copy()
        return added, deleted, noop_adds, noop_deletes

    def _ex(self, p: str) -> Rel:
        rel = self.ex.get(p)
        if rel is None:
            rel = self.ex[p] = Rel(p, self.arity[p], [])
        return rel

    # ------------------------------------------------------------ load and update
    def materialise(self, report: Report) -> None:
        self.journal = EqJournal()
        self._rebuild(start=False)
        report.added = self._expanded_size()
        report.details = {"compact_facts": self.size()}

    def _rebuild(self, start: bool = True) -> None:
        """Recompute (pi, I) from E: explicit sameAs classes first, then pi(E) and the rounds."""
        explicit = {p: rows for p, rel in self.ex.items() if len(rows := rel.explicit())}
        self._build(self.sigs | {(p, self.arity[p]) for p in explicit})
        same = explicit.get(SAME_AS, _EMPTY.reshape(0, 2))
        if len(same):
            self.pi.merge(same[same[:, 0] != same[:, 1]])
        add = {**explicit, **self._consts(self.const_facts)}
        flips = Flips()
        self._saturate(self._push(add, {}, flips, start), flips, start)

    def _consts(self, facts: Iterable[PyFact]) -> Arrays:
        """Rule constants' facts (engine.equality.constants_as_facts) as rows per relation, repeats kept."""
        consts: dict[str, list] = {}
        for f in facts:
            consts.setdefault(f[0], []).append([self.dictionary.intern(v) for v in f[1:]])
        return {p: np.array(rows, np.int64) for p, rows in consts.items()}

    def restore_state(self, explicit: Arrays, pairs: np.ndarray, facts: Arrays,
                      values: dict[str, np.ndarray]) -> None:  # fmt: skip
        """Rebuild from a stored state without evaluating: E, the classes, the core's rows and counters.

        The normal explicit rows and their preimage counts are pi(E) plus the
        rule constants' facts, as a load computes them; the core's relations
        get their stored rows (engine.compact.eq_state).
        """
        legacy = legacy_const_relations(self.analysis.program)  # states stored before digest names
        self.renamed = not legacy.keys().isdisjoint(facts)  # then the next export writes everything
        facts = {legacy.get(p, p): k for p, k in facts.items()}
        values = {legacy.get(p, p): v for p, v in values.items()}
        sigs = signatures(self.analysis.program) | {(p, k.shape[1]) for p, k in explicit.items()}
        sigs |= {(p, k.shape[1]) for p, k in facts.items() if not p.startswith(INTERNAL_PREFIX)}
        self._build(sigs)
        self.ex = {}
        for p, keys in explicit.items():
            self.arity.setdefault(p, keys.shape[1])
            rel = self._ex(p)
            rel.expl[rel.insert(keys)] = 1
        if len(pairs):
            self.pi.assign(pairs[:, 0], pairs[:, 1])
        normal = {}
        for p, keys in {**explicit, **self._consts(self.const_facts)}.items():
            rows = self._norm(p).insert(self.pi.image(keys))
            np.add.at(self._pre(p), rows, 1)
            normal[p] = self.norm[p].cols[np.unique(rows)]
        self.inner.fill(facts, values, normal)

    def maintain(self, update: Update, report: Report) -> None:
        self.inner.follow(self.counts, self.limits, self._work_start)
        add, delete, report.noop_adds, report.noop_deletes = self._change_e(
            update.plus, update.minus
        )
        recomputed = 0
        self.journal.explicit(add, delete)
        if self._splits(add, delete):
            self.journal.full = True  # a new core: the next export writes everything
            before = self._expanded()
            self._rebuild()
            self._note_all(report, before, self._expanded())
            recomputed = 1
        elif add or delete:
            flips = Flips()
            old, affected = self._saturate(self._push(add, delete, flips), flips)
            self._report(report, flips, old, affected)
        report.details = {"equality_recomputed": recomputed, "compact_facts": self.size()}

    def _splits(self, add: Arrays, delete: Arrays) -> bool:
        """Whether the update can split a class or needs a new reflexivity rule (then: rebuild)."""
        if SAME_AS in delete or (delete and self.derives_equality):
            return True
        return any((p, self.arity[p]) not in self.sigs for p in add)

    def _push(self, add: Arrays, delete: Arrays, flips: Flips, start: bool = True) -> Arrays:
        """E's changes rewritten by pi into the core's explicit facts; the rows that flipped."""
        ins, outs = {}, {}
        for p in add.keys() | delete.keys():
            norm = self._norm(p)
            a = norm.insert(self.pi.image(add[p])) if p in add else _EMPTY
            d = norm.lookup(self.pi.image(delete[p])) if p in delete else _EMPTY
            pre = self._pre(p)
            touched = np.unique(np.concatenate([a, d]))
            before = pre[touched] > 0
            np.add.at(pre, a, 1)
            np.subtract.at(pre, d, 1)
            after = pre[touched] > 0
            ins[p], outs[p] = (
                norm.cols[touched[after & ~before]],
                norm.cols[touched[before & ~after]],
            )
        return self._run(ins, outs, flips, start)

    def _norm(self, p: str) -> Rel:
        rel = self.norm.get(p)
        if rel is None:
            rel = self.norm[p] = Rel(p, self.inner.arity[p], [])
        return rel

    def _pre(self, p: str) -> np.ndarray:
        """The preimage counters of `p`'s normal rows, grown to its table."""
        pre, cap = self.pre.get(p, _EMPTY), self.norm[p].cap
        if len(pre) < cap:
            pre = self.pre[p] = np.concatenate([pre, np.zeros(cap - len(pre), np.int64)])
        return pre

    def _run(self, ins: Arrays, outs: Arrays, flips: Flips, start: bool) -> Arrays:
        """One update of the core's explicit facts; the rows that flipped (noted in `flips`)."""
        ins = {p: k for p, k in ins.items() if len(k)}
        outs = {p: k for p, k in outs.items() if len(k)}
        if not ins and not outs:
            return {}
        for p in ins.keys() | outs.keys():
            self.inner.core.rel(p, self.inner.arity[p])
        flipped = self.inner.small.update(ins, outs, start=start)
        flips.note(flipped, self.inner.core.rels)
        return flipped

    def _saturate(
        self, flipped: Arrays, flips: Flips, start: bool = True
    ) -> tuple[Members | None, list]:
        """Merge the classes of every non-trivial sameAs derived and rewrite, until none.

        Returns the classes before the first merge (None: no merge) and the
        affected terms of each merge.
        """
        old, affected = None, []
        while True:
            pairs = self._new_equalities(flipped)
            if not len(pairs):
                return old, affected
            if old is None:
                old = self.pi.copy_members()
            moved, touched, was = self.pi.merge(pairs)
            affected.append(touched)
            self.journal.classes(moved, was, touched)
            flipped = self._rewrite(moved, flips, start)

    def _new_equalities(self, flipped: Arrays) -> np.ndarray:
        rows = flipped.get(SAME_AS, _EMPTY)
        rel = self.inner.core.rels.get(SAME_AS)
        if rel is None or not len(rows):
            return _EMPTY.reshape(0, 2)
        cols = rel.cols[rows[rel.alive[rows] != 0]]
        return cols[cols[:, 0] != cols[:, 1]]

    def _rewrite(self, moved: np.ndarray, flips: Flips, start: bool) -> Arrays:
        """Rewrite every normal explicit row holding a `moved` term by pi, set-at-a-time."""
        ins, outs = {}, {}
        for p, norm in self.norm.items():
            n, pre = norm.n, self._pre(p)
            hit = np.flatnonzero((pre[:n] > 0) & np.isin(norm.cols[:n], moved).any(axis=1))
            if not len(hit):
                continue
            outs[p], counts = norm.cols[hit].copy(), pre[hit].copy()
            pre[hit] = 0
            rows = norm.insert(self.pi.image(outs[p]))
            pre = self._pre(p)
            touched = np.unique(rows)
            fresh = touched[pre[touched] == 0]
            np.add.at(pre, rows, counts)
            ins[p] = norm.cols[fresh]
        return self._run(ins, outs, flips, start)

    # ------------------------------------------------------------ program changes
    def change_program(self, analysis: Analysis, inner: Analysis | None, plus: Changes,
                       minus: Changes) -> Report:  # fmt: skip
        """Move to the program of `analysis` with E's changes `plus`/`minus` (the program's facts).

        `inner` is the new pi(P) (`rewritten_program`) to change the core's
        rules to in place; None rebuilds (pi, I) from E (engine.compact.eq_program
        decides). The report is J's delta, as an update's.
        """
        self._work_start = self.counts.work
        try:
            with paused_gc(), self._measured() as report:
                self.inner.follow(self.counts, self.limits, self._work_start)
                if inner is None:
                    self._rebuild_for(analysis, plus, minus, report)
                else:
                    self._change_in_place(analysis, inner, plus, minus, report)
        finally:
            self._work_start = None
        report.details = {"equality_recomputed": int(inner is None), "compact_facts": self.size()}
        return report

    def _rebuild_for(self, analysis: Analysis, plus: Changes, minus: Changes, report: Report):
        before = self._expanded()
        self.adopt(analysis)
        self.journal.explicit(*self._change_e(plus, minus)[:2])
        self.journal.full = True  # a new core: the next export writes everything
        self._rebuild()
        self._note_all(report, before, self._expanded())

    def _change_in_place(self, analysis: Analysis, inner: Analysis, plus: Changes, minus: Changes,
                         report: Report) -> None:  # fmt: skip
        """The core's rules changed (engine.compact.program), then E's and the constants' facts pushed."""
        flips, consts = Flips(), Counter(self.const_facts)
        self.inner.flipped = {}
        change_rules(self.inner, inner)
        self.inner.follow(self.counts, self.limits, self._work_start)
        changed = self.inner.flipped
        flips.note(changed, self.inner.core.rels)
        self.adopt(analysis)
        add, delete, _, _ = self._change_e(plus, minus)
        self.journal.explicit(add, delete)
        now = Counter(self.const_facts)
        pushed = self._push({**add, **self._consts((now - consts).elements())},
                            {**delete, **self._consts((consts - now).elements())}, flips)  # fmt: skip
        same = [f[SAME_AS] for f in (changed, pushed) if SAME_AS in f]
        old, affected = self._saturate({SAME_AS: np.concatenate(same)} if same else {}, flips)
        self._report(report, flips, old, affected)

    # ------------------------------------------------------------ J's delta
    def _report(self, report: Report, flips: Flips, old: Members | None, affected: list) -> None:
        """Note J's delta: F^pi of the rows that changed or hold an affected term, before and after."""
        members = self.pi.members
        terms = np.concatenate(affected) if affected else None
        for p, rel in self.inner.core.rels.items():
            if p in self.inner.analysis.internal:
                continue
            rows, was = flips.before(p)
            now = rel.alive[rows] != 0
            if terms is None:
                changed = now != was
                gone, new = rows[changed & was], rows[changed & now]
                report.note(
                    p, expand_rows(rel.cols[new], members), expand_rows(rel.cols[gone], members)
                )
                continue
            n = rel.n
            scope = np.isin(rel.cols[:n], terms).any(axis=1)
            scope[rows[now != was]] = True
            present = rel.alive[:n] != 0
            before = present.copy()
            before[rows] = was
            was_j = expand_rows(rel.cols[:n][before & scope], old or {})
            now_j = expand_rows(rel.cols[:n][present & scope], members)
            report.note(p, now_j - was_j, was_j - now_j)

    def _expanded(self) -> dict[str, set[tuple]]:
        members = self.pi.members
        return {p: expand_rows(rel.present(), members) for p, rel in self._visible()}

    def _note_all(self, report: Report, before: dict, after: dict) -> None:
        for p in before.keys() | after.keys():
            was, now = before.get(p, set()), after.get(p, set())
            report.note(p, now - was, was - now)

    def _visible(self) -> Iterator[tuple[str, Rel]]:
        internal = self.inner.analysis.internal
        return ((p, r) for p, r in self.inner.core.rels.items() if p not in internal)

    def _expanded_size(self) -> int:
        n = len(self.dictionary)
        return sum(expanded_count(r.present(), self.pi.members, n) for _p, r in self._visible())

    # ------------------------------------------------------------ reading
    def _decoded(self, p: str, facts: Iterable[tuple]) -> Iterator[PyFact]:
        values = self.dictionary.values
        for f in facts:
            yield (p, *(values[i] for i in f))

    def facts(self, include_internal: bool = False) -> Iterator[PyFact]:
        """J: every normal fact expanded over its representatives' classes."""
        for p, rel in self._visible():
            yield from self._decoded(p, expand_rows(rel.present(), self.pi.members))

    def explicit(self) -> Iterator[PyFact]:
        for p, rel in self.ex.items():
            yield from self._decoded(p, map(tuple, rel.explicit().tolist()))

    def rewritten(self) -> list[PyFact]:
        """The compact materialisation I = pi(J): normal facts only, sorted."""
        return sorted_facts(self.compact)

    @property
    def compact(self) -> set[PyFact]:
        """I as Python facts (as engine.equality.rewrite's `compact`)."""
        return {
            f
            for p, rel in self._visible()
            for f in self._decoded(p, map(tuple, rel.present().tolist()))
        }

    @property
    def classes(self) -> Classes:
        """The classes over values (engine.equality.Classes), for reading."""
        out, values = Classes(), self.dictionary.values
        for rep, ms in self.pi.members.items():
            for m in ms:
                out.union(values[rep], values[m])
        return out

    def representative(self, value) -> object:
        """pi(value): the representative of `value`'s class."""
        term = self.dictionary.lookup(value)
        return value if term is None else self.dictionary.values[self.pi.find(term)]

    def contains(self, fact: PyFact) -> bool:
        ids = [self.dictionary.lookup(a) for a in fact[1:]]
        rel = self.inner.core.rels.get(fact[0])
        if rel is None or rel.arity != len(ids) or None in ids:
            return False
        row = rel.lookup(self.pi.image(np.array([ids], np.int64).reshape(1, len(ids))))[0]
        return bool(row >= 0 and rel.alive[row])

    def match_bound(self, pred: str, bound: list[tuple[int, int]]) -> Iterator[PyFact]:
        """The facts of J in `pred` whose column i holds term id v for each (i, v) in `bound`."""
        rel = self.inner.core.rels.get(pred)
        if rel is None or pred in self.inner.analysis.internal:
            return
        rows = rel.present()
        for i, v in bound:
            rows = rows[rows[:, i] == self.pi.find(v)]
        facts = expand_rows(rows, self.pi.members)
        yield from self._decoded(pred, (f for f in facts if all(f[i] == v for i, v in bound)))

    def size(self) -> int:
        return self.inner.core.size() if hasattr(self, "inner") else 0

    def sizes(self) -> dict[str, int]:
        """Facts in J, explicit facts, bytes held by the arrays."""
        own = sum(r.nbytes() for r in (*self.ex.values(), *self.norm.values()))
        return {
            "facts": self._expanded_size(),
            "explicit": sum(len(r.explicit()) for r in self.ex.values()),
            "log": 0,
            "bytes": self.inner.core.nbytes() + own + self.pi.rep.nbytes,
        }


def refuse(analysis: Analysis, algorithm: str) -> None:
    """Raise `AnalysisError`/`AlgorithmError` naming what equality on the arrays core cannot do."""
    check(analysis)
    missing = unsupported(analysis, algorithm, "off")
    if missing is not None:
        raise AlgorithmError(f"core=arrays does not support {missing} yet; use core=objects")


def create_equality(analysis: Analysis, algorithm: str, modules: bool) -> ArraysEquality:
    """The arrays core with equality=rewrite (`refuse` says what it cannot do)."""
    refuse(analysis, algorithm)
    return ArraysEquality(analysis, algorithm, modules)
