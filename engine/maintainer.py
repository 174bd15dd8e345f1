"""The `Maintainer` interface: what every maintenance algorithm implements.

A maintainer owns the explicit facts E and the materialisation I = mat(P, E).
`load(facts)` sets E and computes I; `update(add, delete)` applies one update;
both return a `Report`. `facts()`, `explicit()` and `contains()` read the
result. Facts cross this boundary as Python values `(pred, arg, ...)`
(engine.syntax.PyFact); inside they are dictionary-encoded int tuples keyed by
predicate (engine.storage).

An algorithm implements two methods: `materialise(report)` (E is set: compute
I from scratch) and `maintain(update, report)` (apply one normalised `Update`
to E and I, noting the exact delta in the report). `load` and `update` wrap
them with what every algorithm shares: encoding and validation, no-op
detection, and the report's work counters and timing (one place).

Update semantics (shared by all algorithms): adding an already-explicit fact or
deleting a non-explicit fact is a no-op, counted in the report; a fact both
added and deleted by one update is rejected with `UpdateError`.

Not here: evaluating rules (engine.evaluate), the semi-naive materialisation
with counters and modules (engine.seminaive), any algorithm (engine.algorithms,
engine.fd).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from fluxmat.engine.analysis import Analysis, engine_made
from fluxmat.engine.errors import UpdateError
from fluxmat.engine.evaluate import Counts
from fluxmat.engine.limits import NO_LIMITS, Limits
from fluxmat.engine.modules import Module
from fluxmat.engine.printer import FactPrinter
from fluxmat.engine.storage import Dictionary, Fact, Relation, paused_gc, relation_in
from fluxmat.engine.syntax import PyFact

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

    @property
    def total_module_inferences(self) -> int:
        return sum(self.module_inferences.values())

    def note(self, pred: str, added: set, removed: set) -> None:
        """Record that `added` entered and `removed` left relation `pred`."""
        if added:
            self.added_facts[pred] = added
            self.added += len(added)
        if removed:
            self.removed_facts[pred] = removed
            self.removed += len(removed)

    def count_work(self, now: Counts, before: Counts) -> None:
        """The evaluator's work between two snapshots of its counters."""
        self.rule_applications = _growth(now.applications, before.applications)
        self.module_inferences = _growth(now.module_work, before.module_work)
        self.iterations = now.iterations - before.iterations
        self.backward_queries = now.backward_queries - before.backward_queries
        self.backward_matches = now.backward_matches - before.backward_matches
        self.backward_reads = now.backward_reads - before.backward_reads


def _growth(now: Counter, before: Counter) -> dict:
    return {k: n - before.get(k, 0) for k, n in now.items() if n != before.get(k, 0)}


@dataclass
class Update:
    """One update, encoded and normalised against E: E+ (`plus`) and E- (`minus`).

    No-ops are gone from both and only counted: adds of explicit facts, deletes
    of facts that are not explicit.
    """

    plus: Changes
    minus: Changes
    noop_adds: int = 0
    noop_deletes: int = 0

    def apply(self, E: dict[str, set[Fact]]) -> None:
        r"""E := (E \\ E-) u E+ (the one place where an update changes E)."""
        for pred, fs in self.minus.items():
            E[pred] -= fs
        for pred, fs in self.plus.items():
            E.setdefault(pred, set()).update(fs)


class Maintainer(ABC):
    """The interface of every algorithm, over the encoded facts it keeps (see the module doc)."""

    name = "abstract"
    supports_modules = False  # whether `modules=True` selects specialised modules

    def __init__(self, analysis: Analysis, dictionary: Dictionary | None = None):
        self.analysis = analysis
        self.dictionary = dictionary or Dictionary()
        self.arity = dict(analysis.arity)
        self.I: dict[str, Relation] = {}
        self.E: dict[str, set[Fact]] = {}
        self.counts = Counts()  # the evaluator's work, reported per call
        self.modules: dict[int, list[Module]] = {}  # stratum -> the modules it runs
        self.limits: Limits = NO_LIMITS
        self._work_start: int | None = None  # counts.work when the current update began

    own = False  # inside `own_facts`: updates may hold facts of internal relations

    @contextmanager
    def own_facts(self) -> Iterator[None]:
        """Inside, updates may hold facts of the engine's internal relations.

        `given` refuses them from outside; a program change adds its unit fact
        (engine.compact.program) this way.
        """
        self.own = True
        try:
            yield
        finally:
            self.own = False

    # ------------------------------------------------------------ what an algorithm implements
    @abstractmethod
    def materialise(self, report: Report) -> None:
        """Compute I = mat(P, E) from scratch (E is set)."""

    @abstractmethod
    def maintain(self, update: Update, report: Report) -> None:
        """Apply `update` to E and maintain I; note the facts that entered and left I."""

    @property
    def uses_modules(self) -> bool:
        """Whether specialised modules evaluate some rules (engine.modules)."""
        return bool(self.modules)

    def module_specs(self) -> set:
        """The analysis's modules (engine.analysis.ModuleSpec) this maintainer runs."""
        return {m.spec for ms in self.modules.values() for m in ms}

    # ------------------------------------------------------------ limits
    def set_limits(self, limits: Limits) -> None:
        """The budget of later loads and updates (engine.limits); `NO_LIMITS` lifts it.

        Checked between fixpoint rounds and strata: a load or update that runs out
        raises `WorkLimitExceeded` or `FactLimitExceeded` and leaves the state
        mid-way (the caller rebuilds it).
        """
        self.limits = limits

    def check_limits(self) -> None:
        """Raise if the current update's work or the materialisation is over budget."""
        if self._work_start is not None:
            self.limits.check_work(self.counts.work - self._work_start)
        if self.limits.facts is not None and self.size_bound() > self.limits.facts:
            self.limits.check_facts(self.size())

    def size(self) -> int:
        """Facts in I (algorithms add those an update is adding before its commit)."""
        return sum(map(len, self.I.values()))

    def size_bound(self) -> int:
        """At least `size()`, and cheap: the fact limit counts the facts only when this passes it."""
        return self.size()

    # ------------------------------------------------------------ the calls
    def load(self, facts: Iterable[PyFact]) -> Report:
        """Set E to `facts` and compute mat(P, E) from scratch (only the fact limit applies)."""
        self._work_start = None
        with paused_gc(), self._measured() as report:
            self.set_explicit(facts)
            self.materialise(report)
        return report

    def update(self, add: Iterable[PyFact] = (), delete: Iterable[PyFact] = ()) -> Report:
        r"""Apply one update (E := (E \\ delete) u add) and maintain I."""
        self._work_start = self.counts.work
        try:
            with paused_gc(), self._measured() as report:
                update = self.normalise(add, delete)
                report.noop_adds, report.noop_deletes = update.noop_adds, update.noop_deletes
                self.maintain(update, report)
        finally:
            self._work_start = None
        return report

    @contextmanager
    def _measured(self) -> Iterator[Report]:
        """A report for one call: the evaluator's work and the wall time it took."""
        start = time.perf_counter()
        before = self.counts.snapshot()
        report = Report(self.name)
        yield report
        report.count_work(self.counts, before)
        report.seconds = time.perf_counter() - start

    @contextmanager
    def unreported(self) -> Iterator[None]:
        """Work inside is an algorithm's bookkeeping: no report counts it (the time is counted)."""
        before = self.counts.snapshot()
        yield
        self.counts.rewind(before)

    # ------------------------------------------------------------ encoding
    def rel(self, pred: str) -> Relation:
        """I's relation `pred` (created empty when missing)."""
        return relation_in(self.I, pred)

    def show_fact(self, fact: PyFact) -> str:
        """A Python fact in program syntax, with the program's prefixes."""
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
                self._relation(given(fact), arity)
                added.add(fact)
            for fact in delete:
                self._relation(given(fact), arity)
                if fact in added:
                    raise UpdateError(_both(self.show_fact(fact)))

        return check

    def decode(self, pred: str, fact: Fact) -> PyFact:
        values = self.dictionary.values
        return (self.analysis.display.get(pred, pred), *(values[i] for i in fact))

    # ------------------------------------------------------------ reading
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

    # ------------------------------------------------------------ explicit facts and updates
    def set_explicit(self, facts: Iterable[PyFact]) -> None:
        """E := the encoded `facts` (a load's first step)."""
        self.E.clear()
        for fact in facts:
            pred, f = self.encode(given(fact))
            self.E.setdefault(pred, set()).add(f)

    def normalise(self, add: Iterable[PyFact], delete: Iterable[PyFact]) -> Update:
        """Encode an update and drop its no-ops against E now."""
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
        known = len(self.arity)  # new predicates are appended (dicts keep insertion order)
        try:
            for fact in add:
                pred, f = self.encode(fact if self.own else given(fact))
                plus.setdefault(pred, set()).add(f)
            for fact in delete:
                pred, f = self.encode(fact if self.own else given(fact))
                if f in plus.get(pred, ()):
                    raise UpdateError(_both(self.show_fact(fact)))
                minus.setdefault(pred, set()).add(f)
        except UpdateError:
            for pred in list(self.arity)[known:]:
                del self.arity[pred]
            raise
        return plus, minus

    def drop_noops(self, plus: Changes, minus: Changes) -> Update:
        """Drop adds of explicit facts and deletes of non-explicit ones, against E now."""
        update = Update({}, {})
        for pred, fs in plus.items():
            fresh = fs - self.E.get(pred, set())
            update.noop_adds += len(fs) - len(fresh)
            if fresh:
                update.plus[pred] = fresh
        for pred, fs in minus.items():
            real = fs & self.E.get(pred, set())
            update.noop_deletes += len(fs) - len(real)
            if real:
                update.minus[pred] = real
        return update

    def record_diff(self, report: Report, old: dict[str, set[Fact]]) -> None:
        """Add to `report` the facts that entered or left I since `old` (a copy of I)."""
        for pred in set(old) | set(self.I):
            if pred in self.analysis.internal:
                continue
            rel = self.I.get(pred)
            was, now = old.get(pred, set()), rel.facts if rel is not None else set()
            report.note(pred, now - was, was - now)


def given(fact: PyFact) -> PyFact:
    """`fact` as given in an update or a load; its relation must not be one the engine makes itself.

    Projected negations (`__negN`), the unit relation (`__unit`) and
    equality's rule constants (`__const...`) are the engine's bookkeeping
    (engine.analysis.engine_made): a fact of one given from outside would
    change what the engine derives.
    """
    pred = fact[0] if fact else None
    if engine_made(pred):
        raise UpdateError(f"predicate {pred!r} is reserved for the engine's internal relations")
    return fact


def _both(fact: str) -> str:
    return f"invalid update: fact {fact} is both added and deleted"


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
