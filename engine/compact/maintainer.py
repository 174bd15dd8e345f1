"""`CompactMaintainer`: the arrays core (engine.compact.core) behind the `Maintainer` interface.

Facts cross the door as Python values; here every constant becomes an int64
term id through the maintainer's dictionary (engine.storage.Dictionary: ints,
strings, IRIs and RDF literals, compared by value), and facts travel as int64
arrays per relation. Validation, encoding and reports are the shared ones
(engine.maintainer); E and I live in the arrays only (no Python set per
relation).

What the arrays core does per algorithm name: `counting`, `dred`, `dredc`
and `remat` all run the same maintenance -- counting for non-recursive
predicates, DRed^c for recursive components, the closure module for
symmetric-transitive relations (unless `modules=False`) -- so `counting` also
accepts recursive programs here. `bf` runs Backward/Forward (B/F^c,
engine.compact.bf) for recursive components instead of DRed^c, and its
deletions always set-at-a-time (the one-call interpreter runs DRed^c).
`remat` evaluates from scratch on every update (engine.compact.remat),
except a program change. Rules without a positive body atom join the unit
relation (engine.compact.unit). Options it cannot run are refused by
`unsupported` with a message naming what is missing.

Not here: the arrays and loops (engine.compact.core, kernels), the door (engine.reasoner).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from fluxmat.engine.analysis import Analysis
from fluxmat.engine.compact.core import ArraysCore
from fluxmat.engine.compact.plans import compile_program
from fluxmat.engine.compact.remat import differences, explicit_after
from fluxmat.engine.compact.small import SmallPath
from fluxmat.engine.compact.unit import UNIT, UNIT_ROW, needs_unit, with_unit
from fluxmat.engine.errors import AlgorithmError
from fluxmat.engine.maintainer import Changes, Maintainer, Report, Update, given
from fluxmat.engine.storage import Dictionary
from fluxmat.engine.syntax import PyFact

ALGORITHMS = (
    "bf",
    "counting",
    "dred",
    "dredc",
    "remat",
)  # remat from scratch, bf counting + B/F^c, the others counting + DRed^c (see the module docstring)


def unsupported(analysis: Analysis, algorithm: str, equality: str) -> str | None:
    """What of these options the arrays core cannot do yet (None: it can do all).

    Every program the analysis accepts runs: expressions in body atoms are
    rewritten by the analysis (engine.analysis.lift_body_expressions), rules
    without a positive body atom join the unit relation (engine.compact.unit).
    """
    if algorithm not in ALGORITHMS:
        return f"algorithm '{algorithm}' (it runs {', '.join(ALGORITHMS)})"
    if equality not in ("off", "rewrite"):  # rewrite: engine.compact.equality
        return f"equality={equality}"
    return None


def _array(facts: set, arity: int) -> np.ndarray:
    return np.array(list(facts), dtype=np.int64).reshape(len(facts), arity)


class CompactMaintainer(Maintainer):
    """The arrays core as a maintainer (see the module docstring)."""

    core_name = "arrays"

    def __init__(self, analysis: Analysis, algorithm: str = "dredc", modules: bool = True,
                 dictionary: Dictionary | None = None):  # fmt: skip
        super().__init__(with_unit(analysis), dictionary)
        self.name = algorithm
        self.closures = modules
        # the core's updates: small ones in one compiled call (engine.compact.small)
        self.small = SmallPath()
        self.core = self._new_core()
        if needs_unit(self.analysis):  # mat(P, {}) from the start (engine.compact.unit)
            self.small.update({UNIT: UNIT_ROW}, {}, start=False)

    def module_specs(self) -> set:
        """The analysis's modules this core runs (a tc module it maintains by DRed^c).

        Each stc as the closure module (engine.compact.closure; with `modules` only),
        each linear closure (ltc) by reachability (engine.compact.reach; always).
        """
        run = {(c.preds[0], "stc") for c in self.core.comps if c.stc}
        run |= {(c.preds[0], "ltc") for c in self.core.comps if c.reach is not None}
        return {m for m in self.analysis.modules if (m.pred, m.kind) in run}

    @property
    def core_algorithm(self) -> str:
        """The algorithm the core runs (what `unsupported` is asked about)."""
        return self.name

    def rules_changed(self) -> None:
        """Told after a program change replaced `analysis` (engine.compact.program), before its update."""

    def _new_core(self) -> ArraysCore:
        comps, plans, masks = compile_program(self.analysis, self.dictionary.intern, self.closures)
        core = ArraysCore(comps, plans, masks, self.arity, self._work, self.check_limits)
        core.backward_forward = self.name == "bf"
        self.small.attach(core)
        return core

    def _work(self, rule: int, instances: int) -> None:
        self.counts.applications[rule] += instances
        self.counts.work += instances
        if self._work_start is not None:
            self.limits.check_work(self.counts.work - self._work_start)

    # ------------------------------------------------------------ Maintainer
    def set_explicit(self, facts: Iterable[PyFact]) -> None:
        """E := the encoded `facts` in a fresh core (a load's first step; `materialise` applies them)."""
        self.core = self._new_core()
        self._loading: Changes = {UNIT: {()}} if needs_unit(self.analysis) else {}
        for fact in facts:
            pred, f = self.encode(given(fact))
            self._loading.setdefault(pred, set()).add(f)

    def materialise(self, report: Report) -> None:
        self.small.update(self._arrays(self._loading), {}, start=False)
        self._loading = {}
        report.added = sum(
            r.size() for p, r in self.core.rels.items() if p not in self.analysis.internal
        )

    def normalise(self, add: Iterable[PyFact], delete: Iterable[PyFact]) -> Update:
        """Encode an update; its no-ops are found by the core (against its explicit flags)."""
        plus, minus = self.encode_update(add, delete)
        return Update(plus, minus)

    def maintain(self, update: Update, report: Report) -> None:
        add, delete = self._arrays(update.plus), self._arrays(update.minus)
        report.noop_adds = self._explicit_count(add)
        report.noop_deletes = sum(len(a) for a in delete.values()) - self._explicit_count(delete)
        if self.name == "remat" and self.core.change is None:
            self._rematerialise(add, delete, report)
            return
        flipped = self.small.update(add, delete)  # small: one compiled call; else set-at-a-time
        self.report_flips(flipped, report)

    def _rematerialise(self, add: dict, delete: dict, report: Report) -> None:
        """`remat`: the new E loaded into a fresh core (engine.compact.remat); its differences reported."""
        old, facts = self.core, explicit_after(self.core, add, delete)
        self.core = self._new_core()
        for p, rel in old.rels.items():  # relations no rule names, created by earlier updates
            self.core.rel(p, rel.arity)
        self.core.update(facts, {})
        for p, (came, gone) in differences(old, self.core).items():
            if p not in self.analysis.internal:
                report.note(p, set(map(tuple, came.tolist())), set(map(tuple, gone.tolist())))

    def report_flips(self, flipped: dict[str, np.ndarray], report: Report) -> None:
        """Note the rows an update flipped (per relation) in its report: present now added, else removed."""
        for p, rows in flipped.items():
            if p in self.analysis.internal or not len(rows):
                continue
            rel = self.core.rels[p]
            rows_alive = zip(rel.cols[rows].tolist(), rel.alive[rows].tolist(), strict=True)
            facts = [(tuple(f), a) for f, a in rows_alive]
            report.note(p, {f for f, a in facts if a}, {f for f, a in facts if not a})

    def _explicit_count(self, facts: dict[str, np.ndarray]) -> int:
        """How many of `facts` (distinct rows per relation) are explicit now."""
        n = 0
        for pred, keys in facts.items():
            rel = self.core.rels[pred]
            rows = rel.lookup(keys)
            n += int(np.count_nonzero(rel.expl[rows[rows >= 0]]))
        return n

    def _arrays(self, changes: Changes) -> dict[str, np.ndarray]:
        """Encoded facts per relation as int64 rows (relations created as needed)."""
        out = {}
        for pred, fs in changes.items():
            if fs:
                self.core.rel(pred, self.arity[pred])
                out[pred] = _array(fs, self.arity[pred])
        return out

    def size(self) -> int:
        return self.core.size()

    def size_bound(self) -> int:
        """The rows held, dead ones included: no pass over the arrays (`size()` makes one).

        The fact limit is checked after every round of a recursive component: counting
        the present rows each time made a recursion that derives a few facts per round
        quadratic.
        """
        return sum(r.n for r in self.core.rels.values())

    # ------------------------------------------------------------ reading
    def _decoded(self, pred: str, rows: np.ndarray) -> Iterator[PyFact]:
        name, values = self.analysis.display.get(pred, pred), self.dictionary.values
        for row in rows.tolist():
            yield (name, *(values[i] for i in row))

    def fact_rows(self) -> Iterator[tuple[str, np.ndarray]]:
        """The materialisation per predicate: its name as `facts` gives it, its rows of term ids (`values`)."""
        for pred, rel in self.core.rels.items():
            if pred not in self.analysis.internal:
                yield self.analysis.display.get(pred, pred), rel.present()

    def facts(self, include_internal: bool = False) -> Iterator[PyFact]:
        for pred, rel in self.core.rels.items():
            if include_internal or pred not in self.analysis.internal:
                yield from self._decoded(pred, rel.present())

    def explicit(self) -> Iterator[PyFact]:
        for pred, rel in self.core.rels.items():
            if pred not in self.analysis.internal:  # the unit fact (engine.compact.unit)
                yield from self._decoded(pred, rel.explicit())

    def contains(self, fact: PyFact) -> bool:
        pred = self.analysis.relation(fact[0], len(fact) - 1)
        rel = self.core.rels.get(pred)
        ids = [self.dictionary.lookup(a) for a in fact[1:]]
        if rel is None or rel.arity != len(ids) or None in ids:
            return False
        row = rel.lookup(np.array([ids], np.int64).reshape(1, len(ids)))[0]
        return bool(row >= 0 and rel.alive[row])

    def match_bound(self, pred: str, bound: list[tuple[int, int]]) -> Iterator[PyFact]:
        """The facts of relation `pred` whose column i holds term id v for each (i, v) in `bound`."""
        rel = self.core.rels.get(pred)
        if rel is None:
            return
        rows = rel.present()
        for i, v in bound:
            rows = rows[rows[:, i] == v]
        yield from self._decoded(pred, rows)

    def sizes(self) -> dict[str, int]:
        """Facts in I (internal relations left out), explicit facts, bytes held by the arrays."""
        internal, rels = self.analysis.internal, self.core.rels
        return {
            "facts": sum(r.size() for p, r in rels.items() if p not in internal),
            "explicit": sum(len(r.explicit()) for p, r in rels.items() if p not in internal),
            "log": 0,
            "bytes": self.core.nbytes(),
        }


def create_compact(
    analysis: Analysis, algorithm: str, modules: bool, equality: str
) -> CompactMaintainer:
    """The arrays core for `analysis`, or `AlgorithmError` naming what it cannot do yet."""
    if equality == "rewrite":  # the door builds it: engine.compact.eq_fed
        raise AlgorithmError("equality=rewrite: use engine.compact.eq_fed.create_arrays_equality")
    missing = unsupported(analysis, algorithm, equality)
    if missing is not None:
        raise AlgorithmError(f"core=arrays does not support {missing} yet; use core=objects")
    return CompactMaintainer(analysis, algorithm, modules)
