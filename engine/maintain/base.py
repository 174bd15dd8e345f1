"""The `Maintainer` interface and the state every algorithm shares.

A maintainer owns the explicit facts E, the materialisation I = mat(P, E) and
whatever bookkeeping its algorithm needs (counters). `load` computes the initial
materialisation; `update(add, delete)` applies one update and returns a
`Report`. Facts cross this boundary as Python values `(pred, arg, ...)`;
inside, they are dictionary-encoded int tuples keyed by predicate.

Specialised modules (engine.modules, Hu, Motik & Horrocks 2019) take over the
rules they capture in algorithms with `supports_modules`, when the maintainer is
created with `modules=True` (the default); otherwise every rule is evaluated
generically. C_r then counts only the instances of generic recursive rules.
With `hypertree=True` (the default, every algorithm) cyclic rules are evaluated
over hypertree decompositions (engine.hypertree), with the same results.

Update semantics (shared by all algorithms): adding an already-explicit fact or
deleting a non-explicit fact is a no-op, counted in the report; a fact both
added and deleted by one update is rejected with `UpdateError`.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from engine.analysis import Analysis, ModuleSpec, Stratum
from engine.errors import UpdateError
from engine.evaluate import Derived, Evaluator, saturate
from engine.limits import NO_LIMITS, Limits
from engine.modules import Module, build
from engine.storage import Dictionary, Fact, Relation, Weighted, paused_gc

PyFact = tuple  # (pred: str, *args: Value)
Changes = dict[str, set[Fact]]


@dataclass
class Report:
    """What one call did. The engine returns these; it never prints."""

    algorithm: str
    added: int = 0
    removed: int = 0
    noop_adds: int = 0
    noop_deletes: int = 0
    rule_applications: dict[int, int] = field(default_factory=dict)
    module_inferences: dict[str, int] = field(default_factory=dict)  # module -> candidates
    iterations: int = 0
    backward_queries: int = 0
    backward_matches: int = 0
    backward_reads: int = 0
    seconds: float = 0.0
    details: dict[str, int] = field(default_factory=dict)  # algorithm-specific counters
    added_facts: Changes = field(default_factory=dict, repr=False)
    removed_facts: Changes = field(default_factory=dict, repr=False)

    @property
    def total_applications(self) -> int:
        return sum(self.rule_applications.values())

    def note(self, pred: str, added: set, removed: set) -> None:
        """Record that `added` entered and `removed` left relation `pred`."""
        if added:
            self.added_facts[pred] = added
            self.added += len(added)
        if removed:
            self.removed_facts[pred] = removed
            self.removed += len(removed)

    @property
    def total_module_inferences(self) -> int:
        return sum(self.module_inferences.values())


class Maintainer(ABC):
    """Base class: storage, encoding, initial materialisation and the update driver."""

    name = "abstract"
    counts_nonrecursive = False  # keep C_nr (explicit + non-recursive derivations)
    counts_recursive = False  # keep C_r (recursive derivations)
    incremental = True  # compile delta plans and build their indexes at load time
    supports_modules = False  # use tc/stc modules (materialisation and updates)
    module_kinds = ("tc", "stc")  # which; ltc: remat, dredc and the fully dynamic ones

    def __init__(
        self,
        analysis: Analysis,
        dictionary: Dictionary | None = None,
        modules: bool = True,
        hypertree: bool = True,
        levels: bool = True,
    ):
        """State shared by every algorithm.

        `levels` lets `dredc` stop overdeletion at well-founded derivations
        (engine.maintain.dredc); other algorithms ignore it.
        """
        self.analysis = analysis
        self.levels = levels
        self.dictionary = dictionary or Dictionary()
        self.arity = dict(analysis.arity)
        self.I: dict[str, Relation] = {}
        self.E: dict[str, set[Fact]] = {}
        self.cnr: dict[str, Weighted] = {}
        self.cr: dict[str, Weighted] = {}
        self.ev = Evaluator(analysis, self.dictionary, lambda p: len(self.rel(p)), hypertree)
        self.body_preds = {s.index: analysis.body_preds(s) for s in analysis.strata}
        self.D: dict[str, Relation] = {}
        self.A: dict[str, Relation] = {}
        self._dma: dict[str, set[Fact]] = {}
        self._amd: dict[str, set[Fact]] = {}
        self.limits: Limits = NO_LIMITS
        self._work_start: int | None = None  # counts.work when the current update began
        self.modules: dict[int, list[Module]] = {}  # stratum -> its active modules
        if modules and self.supports_modules:
            for spec in analysis.modules:
                if self.takes(spec):
                    m = build(spec, self.ev.counts, analysis.rules)
                    self.modules.setdefault(spec.stratum, []).append(m)
        # the rules the active modules evaluate instead of the generic loop
        self.module_rules = frozenset(rid for ms in self.modules.values() for m in ms for rid in m.rules)
        self.generic = {  # stratum -> recursive rules evaluated semi-naively
            s.index: tuple(r for r in s.recursive if r not in self.module_rules)
            for s in analysis.strata
        }

    def takes(self, spec: ModuleSpec) -> bool:
        """Whether this algorithm evaluates the module `spec` (modules on)."""
        return spec.kind in self.module_kinds

    @property
    def uses_modules(self) -> bool:
        return bool(self.modules)

    # ------------------------------------------------------------ limits
    def set_limits(self, limits: Limits) -> None:
        """The budget of later loads and updates (engine.limits); `NO_LIMITS` lifts it.

        Checked between fixpoint rounds: a load or update that runs out raises
        `WorkLimitExceeded` or `FactLimitExceeded` and leaves the state mid-way.
        """
        self.limits = limits
        self.ev.guard = self.check_limits if limits.active else None

    def check_limits(self) -> None:
        """Raise if the current update's work or the materialisation is over budget."""
        if self._work_start is not None:
            self.limits.check_work(self.ev.counts.work - self._work_start)
        if self.limits.facts is not None:
            self.limits.check_facts(self.size())

    def size(self) -> int:
        """Facts in I, plus those the current update is adding (A) before its commit."""
        return sum(map(len, self.I.values())) + sum(map(len, self.A.values()))

    # ------------------------------------------------------------ storage helpers
    def rel(self, pred: str) -> Relation:
        return self._get(self.I, pred)

    @staticmethod
    def _get(table: dict[str, Relation], pred: str) -> Relation:
        r = table.get(pred)
        if r is None:
            r = table[pred] = Relation()
        return r

    def show_fact(self, fact: PyFact) -> str:
        """A Python fact in program syntax, with the program's prefixes."""
        from engine.printer import FactPrinter

        return FactPrinter(self.analysis.program.prefixes).fact(fact)[:-1]

    def stratum_of(self, pred: str) -> int:
        return self.analysis.stratum_of.get(pred, 0)

    def encode(self, fact: PyFact) -> tuple[str, Fact]:
        return self._relation(fact, self.arity), tuple(map(self.dictionary.intern, fact[1:]))

    def _relation(self, fact: PyFact, arity: dict[str, int]) -> str:
        """The relation of `fact`; its arity must agree with `arity` (a new one is added)."""
        pred, n = fact[0], len(fact) - 1
        if self.analysis.overloads:
            pred = self.analysis.relation(pred, n)
        known = arity.get(pred)
        if known is None:
            arity[pred] = n
        elif known != n:
            raise UpdateError(
                f"fact {self.show_fact(fact)} has {_n(n, 'argument')} but predicate "
                f"{self.show_fact((fact[0],))} has {known}"
            )
        return pred

    def update_checker(self) -> Callable[[Iterable[PyFact], Iterable[PyFact]], None]:
        """A function that validates updates in order without applying them.

        Each call checks one update `(add, delete)` as `encode_update` would when
        it is applied after the ones checked before: every fact's arity agrees
        with the program, the current state and the earlier updates, and no fact
        is both added and deleted. Nothing is interned or stored: a whole stream
        can be validated before its first update is applied (`fluxmat replay`).
        """
        arity = dict(self.arity)

        def check(add: Iterable[PyFact], delete: Iterable[PyFact]) -> None:
            added = set()
            for fact in add:
                self._relation(fact, arity)
                added.add(fact)
            for fact in delete:
                self._relation(fact, arity)
                if fact in added:
                    raise UpdateError(_both(self.show_fact(fact)))

        return check

    def decode(self, pred: str, fact: Fact) -> PyFact:
        values = self.dictionary.values
        return (self.analysis.display.get(pred, pred), *(values[i] for i in fact))

    def facts(self, include_internal: bool = False) -> Iterator[PyFact]:
        """The materialisation as Python facts (unsorted)."""
        for pred, rel in self.I.items():
            if not include_internal and pred in self.analysis.internal:
                continue
            for f in rel.facts:
                yield self.decode(pred, f)

    def explicit(self) -> Iterator[PyFact]:
        for pred, fs in self.E.items():
            for f in fs:
                yield self.decode(pred, f)

    def contains(self, fact: PyFact) -> bool:
        pred, args = self.analysis.relation(fact[0], len(fact) - 1), fact[1:]
        ids = tuple(self.dictionary.lookup(a) for a in args)
        return None not in ids and ids in self.rel(pred)

    def counters(self, fact: PyFact) -> tuple[int, int]:
        """(C_nr, C_r) of a fact, for algorithms that keep them."""
        pred, f = self.encode(fact)
        return self.cnr.get(pred, {}).get(f, 0), self.cr.get(pred, {}).get(f, 0)

    # ------------------------------------------------------------ views
    def OLD(self, pred: str) -> list:
        return [(self.rel(pred), None)]

    def NEW(self, pred: str) -> list:
        r"""(I \\ D) u A."""
        return [(self.rel(pred), self._get(self.D, pred).facts), (self._get(self.A, pred), None)]

    def I_MINUS_DMA(self, pred: str) -> list:
        r"""I \\ (D \\ A)."""
        return [(self.rel(pred), self.d_minus_a(pred))]

    def I_PLUS_A(self, pred: str) -> list:
        """I u A."""
        return [(self.rel(pred), None), (self._get(self.A, pred), self.rel(pred).facts)]

    def d_minus_a(self, pred: str) -> set[Fact]:
        d = self._get(self.D, pred).facts
        a = self.A.get(pred)
        if not a:
            return d
        if self.stratum_of(pred) >= self.current:
            return d - a.facts
        cached = self._dma.get(pred)
        if cached is None:
            cached = self._dma[pred] = d - a.facts
        return cached

    def a_minus_d(self, pred: str) -> set[Fact]:
        a = self._get(self.A, pred).facts
        d = self.D.get(pred)
        if not d:
            return a
        if self.stratum_of(pred) >= self.current:
            return a - d.facts
        cached = self._amd.get(pred)
        if cached is None:
            cached = self._amd[pred] = a - d.facts
        return cached

    def lower_changes(self, s: Stratum) -> tuple[Changes, Changes]:
        r"""(D \\ A, A \\ D) of the predicates stratum s reads from lower strata."""
        P, N = {}, {}
        for p in self.body_preds[s.index]:
            if self.stratum_of(p) < s.index:
                dma, amd = self.d_minus_a(p), self.a_minus_d(p)
                if dma:
                    P[p] = dma
                if amd:
                    N[p] = amd
        return P, N

    # ------------------------------------------------------------ counting helpers
    @staticmethod
    def heads(derived: Derived) -> Changes:
        """The derived heads as a set per predicate (multiplicities dropped)."""
        out: Changes = {}
        for rule, hs in derived:
            pred = rule.pred if isinstance(rule, Module) else rule.head.pred
            out.setdefault(pred, set()).update(hs)
        return out

    def tally(self, derived: Derived, sign: int, into: Changes | None = None) -> Changes:
        """Add `sign` to the counters of derived heads (C_nr or C_r by rule kind)."""
        into = {} if into is None else into
        for rule, heads in derived:
            if isinstance(rule, Module):  # module inferences are not counted
                if rule.pred in into:
                    into[rule.pred].update(heads)
                else:  # a module's result is a fresh set: taken over, not copied
                    into[rule.pred] = heads
                continue
            pred = rule.head.pred
            table = self.cr if rule.recursive else self.cnr
            if (table is self.cr and self.counts_recursive) or (
                table is self.cnr and self.counts_nonrecursive
            ):
                self._get_w(table, pred).add_all(heads, sign)
            into.setdefault(pred, set()).update(heads)
        return into

    @staticmethod
    def _get_w(table: dict[str, Weighted], pred: str) -> Weighted:
        w = table.get(pred)
        if w is None:
            w = table[pred] = Weighted()
        return w

    # ------------------------------------------------------------ materialisation
    def load(self, facts: Iterable[PyFact]) -> Report:
        """Set E to `facts` and compute mat(P, E) from scratch (only the fact limit applies)."""
        self._work_start = None
        with paused_gc():
            return self._load(facts)

    def _load(self, facts: Iterable[PyFact]) -> Report:
        start = time.perf_counter()
        before = self._snapshot_counts()
        self.I.clear()
        self.cnr.clear()
        self.cr.clear()
        self.set_explicit(facts)
        self.materialise()
        if self.incremental:
            self.prepare()
        report = self._report(before, start)
        report.added = sum(len(r) for p, r in self.I.items() if p not in self.analysis.internal)
        return report

    def set_explicit(self, facts: Iterable[PyFact]) -> None:
        """E := the encoded `facts` (a load's first step)."""
        self.E.clear()
        for fact in facts:
            pred, f = self.encode(fact)
            self.E.setdefault(pred, set()).add(f)

    def materialise(self) -> None:
        """Semi-naive evaluation of every stratum over E, keeping counters if asked.

        With modules this is MAT-MOD (Hu, Motik & Horrocks 2019, Algorithm 2): the
        first round applies the generic recursive rules to the whole stratum and
        gives each module all facts of its relation; later rounds are semi-naive.
        """
        for ms in self.modules.values():
            for m in ms:
                m.reset()
        for pred, fs in self.E.items():
            if self.stratum_of(pred) == 0:
                self._insert_all(pred, fs)
        OLD = self.OLD
        for s in self.analysis.strata:
            self.current = s.index
            for p in s.preds:
                fs = self.E.get(p)
                if fs:
                    if self.counts_nonrecursive:
                        self._get_w(self.cnr, p).add_all(fs)
                    self._insert_all(p, fs)
            new = self.tally(self.ev.derive(s.nonrecursive, OLD, OLD), +1)
            for p, fs in new.items():
                self._insert_all(p, fs)
            if self.ev.guard is not None:  # limits: also between strata
                self.ev.guard()
            if not s.recursive:
                continue
            stratum = {p: self.rel(p).facts for p in s.preds}  # live: read before absorbed

            def accept(derived: Derived, _delta: Changes) -> Changes:
                return self._absorb(self.tally(derived, +1))

            steps = [(m, lambda d, m=m: m.add(OLD, d)) for m in self.modules.get(s.index, ())]
            saturate(self.ev, self.generic[s.index], OLD, OLD, stratum, accept, steps, full=True)

    def prepare(self) -> None:
        """Compile every delta plan and build the indexes it probes.

        Done at load time, when relation sizes are known, so that updates never pay
        for planning or index construction.
        """
        for rule in self.analysis.rules:
            if rule.id in self.module_rules:
                continue
            for lit in range(len(rule.positives) + len(rule.negatives)):
                for whole in {False, self.whole_instances(rule)}:
                    plan = self.ev.plan(rule, "delta", lit, whole)
                    for need in plan.needs:
                        if need.cols is not None:
                            self.rel(plan.literal_preds[need.lit]).index(need.cols)

    def whole_instances(self, rule) -> bool:
        """Whether updates also evaluate `rule` as whole instances (`prepare` compiles both)."""
        return False

    def _insert_all(self, pred: str, facts) -> None:
        """Insert facts into I during materialisation (subclasses stamp them)."""
        self.rel(pred).update(facts)

    def _absorb(self, derived: Changes) -> Changes:
        """Add derived facts to I; return those that were new.

        `derived`'s sets (tally's own) are trimmed in place and returned: removing
        the facts already present costs the smaller side, not a copy of the larger.
        """
        out: Changes = {}
        for p, fs in derived.items():
            rel = self.rel(p)
            fs -= fs & rel.facts
            if fs:
                self._insert_all(p, fs)
                out[p] = fs
        return out

    # ------------------------------------------------------------ updates
    def normalise(self, add: Iterable[PyFact], delete: Iterable[PyFact]):
        """Encode an update; return (E+, E-, no-op adds, no-op deletes)."""
        return self.drop_noops(*self.encode_update(add, delete))

    def encode_update(
        self, add: Iterable[PyFact], delete: Iterable[PyFact]
    ) -> tuple[Changes, Changes]:
        """Validate and encode an update (a fact both added and deleted is an error).

        A rejected update leaves no trace: arities it would have introduced for new
        predicates are forgotten again.
        """
        plus: Changes = {}
        minus: Changes = {}
        known = set(self.arity)
        try:
            for fact in add:
                pred, f = self.encode(fact)
                plus.setdefault(pred, set()).add(f)
            for fact in delete:
                pred, f = self.encode(fact)
                if f in plus.get(pred, ()):
                    raise UpdateError(_both(self.show_fact(fact)))
                minus.setdefault(pred, set()).add(f)
        except UpdateError:
            for pred in set(self.arity) - known:
                del self.arity[pred]
            raise
        return plus, minus

    def drop_noops(self, plus: Changes, minus: Changes):
        """Drop adds of explicit facts and deletes of non-explicit ones, against E now."""
        noop_add = noop_del = 0
        out_plus: Changes = {}
        out_minus: Changes = {}
        for pred, fs in plus.items():
            fresh = fs - self.E.get(pred, set())
            noop_add += len(fs) - len(fresh)
            if fresh:
                out_plus[pred] = fresh
        for pred, fs in minus.items():
            real = fs & self.E.get(pred, set())
            noop_del += len(fs) - len(real)
            if real:
                out_minus[pred] = real
        return out_plus, out_minus, noop_add, noop_del

    def update(self, add: Iterable[PyFact] = (), delete: Iterable[PyFact] = ()) -> Report:
        r"""Apply one update (E := (E \\ delete) u add) and maintain I."""
        self._work_start = self.ev.counts.work
        try:
            with paused_gc():
                return self._update(add, delete)
        finally:
            self._work_start = None

    def _update(self, add: Iterable[PyFact], delete: Iterable[PyFact]) -> Report:
        start = time.perf_counter()
        before = self._snapshot_counts()
        plus, minus, noop_add, noop_del = self.normalise(add, delete)
        self.D, self.A, self._dma, self._amd = {}, {}, {}, {}
        self.current = 0
        for pred, fs in minus.items():
            if self.stratum_of(pred) == 0:
                self._get(self.D, pred).update(fs)
        for pred, fs in plus.items():
            if self.stratum_of(pred) == 0:
                self._get(self.A, pred).update(fs)
        self.plus, self.minus = plus, minus
        guard = self.ev.guard
        for s in self.analysis.strata:
            self.current = s.index
            if self._affected(s):
                self.update_stratum(s)
                if guard is not None:  # limits: also between strata
                    guard()
        for pred, fs in minus.items():
            self.E[pred] -= fs
        for pred, fs in plus.items():
            self.E.setdefault(pred, set()).update(fs)
        report = self._report(before, start)
        report.noop_adds, report.noop_deletes = noop_add, noop_del
        self.commit(report)
        report.seconds = time.perf_counter() - start
        return report

    def _affected(self, s: Stratum) -> bool:
        if any(p in self.plus or p in self.minus for p in s.preds):
            return True
        return any(self.D.get(p) or self.A.get(p) for p in self.body_preds[s.index])

    @abstractmethod
    def update_stratum(self, s: Stratum) -> None:
        """Maintain stratum `s` for the current update (D, A, E+, E- are set)."""

    def commit(self, report: Report) -> None:
        r"""I := (I \\ D) u A; record the exact delta in `report`."""
        for pred in set(self.D) | set(self.A):
            d = self.D.get(pred)
            a = self.A.get(pred)
            dset = d.facts if d else set()
            aset = a.facts if a else set()
            removed, added = dset - aset, aset - dset
            rel = self.rel(pred)
            rel.difference_update(removed)
            rel.update(added)
            for table in self.per_fact_tables():
                w = table.get(pred)
                if w:
                    for f in removed:
                        w.pop(f, None)
            if pred not in self.analysis.internal:
                report.note(pred, added, removed)
        self.D, self.A, self._dma, self._amd = {}, {}, {}, {}

    def per_fact_tables(self) -> tuple[dict, ...]:
        """Tables pred -> {fact: value} whose entries go when their fact leaves I."""
        return self.cnr, self.cr

    # ------------------------------------------------------------ reports
    def record_diff(self, report: Report, old: dict[str, set[Fact]]) -> None:
        """Add to `report` the facts that entered or left I since `old` (a copy of I)."""
        for pred in set(old) | set(self.I):
            if pred in self.analysis.internal:
                continue
            rel = self.I.get(pred)
            was, now = old.get(pred, set()), rel.facts if rel is not None else set()
            report.note(pred, now - was, was - now)

    def _snapshot_counts(self):
        c = self.ev.counts
        return (
            dict(c.applications), c.iterations, c.backward_queries, c.backward_matches,
            c.backward_reads, dict(c.module_work),
        )  # fmt: skip

    def _report(self, before, start: float) -> Report:
        apps, its, bq, bm, br, mods = before
        c = self.ev.counts
        r = Report(self.name)
        r.rule_applications = {
            rid: n - apps.get(rid, 0) for rid, n in c.applications.items() if n != apps.get(rid, 0)
        }
        r.module_inferences = {
            m: n - mods.get(m, 0) for m, n in c.module_work.items() if n != mods.get(m, 0)
        }
        r.iterations = c.iterations - its
        r.backward_queries = c.backward_queries - bq
        r.backward_matches = c.backward_matches - bm
        r.backward_reads = c.backward_reads - br
        r.seconds = time.perf_counter() - start
        return r


def _both(fact: str) -> str:
    return f"invalid update: fact {fact} is both added and deleted"


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
