"""`Reasoner`: the engine's one door, for the CLI, the stream and the dashboard.

A reasoner is a program, its analysis and one maintainer built from one
`EngineOptions` (engine.options): an object algorithm (engine.algorithms,
engine.fd) or, with `core="arrays"`, the arrays core (engine.compact; the
fully dynamic algorithms and their state through engine.compact.fed and
engine.compact.state; equality through engine.compact.equality and
engine.compact.eq_fed, their state through engine.compact.eq_state; `bf`
through engine.compact.bf). Everything outside engine/ goes through it:
loading and updating (`load`, `update`), the fully dynamic driver (`feed`,
`poll`, `poll_rows`, `work_counts`; engine.feed), the work per rule by its file:line
(`rule_work`, `rules_since`, `rule_texts`), reading (`facts`, `lines`, `match`,
`explain`, `show`, `sizes`), validating updates without applying them
(`update_checker`, `check_update`), program changes on the arrays core
(`change_program`, `program_text`, `program_version`, `program_history`;
engine.program_change, engine.compact.program, with equality
engine.compact.eq_program), and the fully dynamic state
(`export_changes`, `restore`, `state_meta`; engine.fd.snapshot; as integer
columns for a local snapshot: `state_columns`, `restore_columns`; engine.fd.columns). Facts cross
the door as Python values `(pred, arg, ...)` (engine.syntax.PyFact).

Not here: files, messages, Redis (connectors), batches (stream), flags (ops).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from fluxmat.engine.algorithms import (
    FULLY_DYNAMIC,
    Maintainer,
    Report,
    check_algorithm,
    check_equality,
    create,
)
from fluxmat.engine.analysis import analyse
from fluxmat.engine.compact.readview import FactsView
from fluxmat.engine.errors import AlgorithmError, FluxmatError
from fluxmat.engine.evaluate import Evaluator
from fluxmat.engine.fd.columns import StateColumns, restore_columns, take
from fluxmat.engine.fd.core import ConsistencyPoint, FullyDynamic
from fluxmat.engine.fd.records import PointRows
from fluxmat.engine.fd.snapshot import (
    StateChanges,
    StateSnapshot,
    check_core,
    check_fingerprint,
    export_changes,
    meta,
    restore,
)
from fluxmat.engine.feed import Fed, FeedResult, feed
from fluxmat.engine.lexer import read_source
from fluxmat.engine.options import EngineOptions
from fluxmat.engine.parser import parse_program
from fluxmat.engine.plans import Plan
from fluxmat.engine.printer import FactPrinter
from fluxmat.engine.program_change import analyse_change, changed_program, describe
from fluxmat.engine.storage import Dictionary
from fluxmat.engine.syntax import Atom, Program, PyFact, Rule
from fluxmat.engine.triples import fact_in, facts_in, facts_out, program_in, uses_triples
from fluxmat.engine.update_columns import UpdateColumns, feed_columns
from fluxmat.engine.why import Explainer, Proof, match

if TYPE_CHECKING:
    import numpy as np


def rule_label(rule: Rule, rid: int) -> str:
    """Where a rule is written, as `file:line` (the file's name only); `rule N` when it has no place."""
    pos = rule.pos
    return f"{Path(pos.file).name}:{pos.line}" if pos.line > 0 else f"rule {rid}"


def atom_to_fact(atom: Atom) -> tuple:
    """A ground AST atom as a Python fact `(pred, *values)`."""
    return (atom.pred, *(a.value for a in atom.args))  # type: ignore[union-attr]


def _maintainer(analysis, o: EngineOptions) -> Maintainer:
    """The maintainer the options name: an object algorithm, or the arrays core (engine.compact)."""
    check_equality(o.equality)
    check_algorithm(o.algorithm)  # an unknown name is unknown on both cores, not "not supported yet"
    if o.core == "arrays" and o.equality == "rewrite":  # owl:sameAs as equality (engine.compact.equality)
        from fluxmat.engine.compact.eq_fed import create_arrays_equality

        return create_arrays_equality(analysis, o.algorithm, o.modules)
    if o.core == "arrays" and o.algorithm in FULLY_DYNAMIC:  # imported here: numba is loaded only then
        from fluxmat.engine.compact.fed import create_fed

        return create_fed(analysis, o.algorithm, o.modules, o.equality)
    if o.core == "arrays":
        from fluxmat.engine.compact.maintainer import create_compact

        return create_compact(analysis, o.algorithm, o.modules, o.equality)
    return create(o.algorithm, analysis, modules=o.modules, hypertree=o.hypertree, equality=o.equality,
                  levels=o.levels)  # fmt: skip


class Reasoner:
    """A program, its analysis and one maintainer, behind one door (see the module docstring).

    >>> r = Reasoner.from_text("path(X, Y) :- edge(X, Y). path(X, Z) :- path(X, Y), edge(Y, Z).")
    >>> _ = r.load([("edge", "a", "b"), ("edge", "b", "c")])
    >>> r.lines()[-1]
    'path(b, c).'
    """

    def __init__(
        self,
        program: Program,
        algorithm: str | None = None,
        modules: bool | None = None,
        hypertree: bool | None = None,
        equality: str | None = None,
        levels: bool | None = None,
        *,
        options: EngineOptions | None = None,
    ):
        """A reasoner over `program` with `options` (engine.options).

        The keyword arguments, when given, replace the fields of that name
        (a shorthand for `options=EngineOptions(algorithm=..., ...)`).
        """
        given = {"algorithm": algorithm, "modules": modules, "hypertree": hypertree,
                 "equality": equality, "levels": levels}  # fmt: skip
        self.options = replace(options or EngineOptions(), **{k: v for k, v in given.items() if v is not None})
        self.triples = uses_triples(program)  # the triple view (engine.triples): converted at the door
        if self.triples:  # cyclic through the one relation: hypertree decomposition measured 4-70x slower
            self.options = replace(self.options, hypertree=False)
        o = self.options
        self.program = program_in(program) if self.triples else program
        self.analysis = analyse(self.program)
        self.maintainer: Maintainer = _maintainer(self.analysis, o)
        self.prefixes = dict(program.prefixes)
        self.printer = FactPrinter(program.prefixes)
        self.rule_labels = {r.id: rule_label(r.rule, r.id) for r in self.analysis.rules}  # rule id -> file:line
        self.program_version = 1  # grows by one with each program change (`change_program`)
        self.program_history: list[dict] = []  # per change: version and its lines (engine.program_change.describe)
        self._apply_options()

    @classmethod
    def from_text(cls, text: str, algorithm: str | None = None, source: str = "<input>", **kw) -> Reasoner:
        """A reasoner over the program in `text` (`source` names it in errors)."""
        return cls(parse_program(text, source), algorithm, **kw)

    @classmethod
    def from_file(cls, path: str | Path, algorithm: str | None = None, **kw) -> Reasoner:
        """A reasoner over the program in the file `path`."""
        return cls(parse_program(read_source(path), str(path)), algorithm, **kw)

    def reconfigure(self, **changes) -> None:
        """Change the options that do not rebuild the maintainer: schedule, seed, budget, limits."""
        rebuild = set(changes) & {"algorithm", "modules", "hypertree", "levels", "equality", "core"}
        if rebuild:
            raise AlgorithmError(f"cannot change {', '.join(sorted(rebuild))} of a reasoner: make a new one")
        self.options = replace(self.options, **changes)
        self._apply_options()

    def _apply_options(self) -> None:
        o = self.options
        self.maintainer.set_limits(o.limits)
        if self.fully_dynamic:
            self.maintainer.configure(seed=o.seed, interleaved=o.interleaved)

    @property
    def name(self) -> str:
        """The algorithm, as it reports itself (`dredc`, `bf`, `remat~`, ...)."""
        return self.maintainer.name

    # ------------------------------------------------------------ load and update
    def program_facts(self) -> list[tuple]:
        """The facts written in the program."""
        return [atom_to_fact(a) for a in self.program.facts]

    def load(self, facts: Iterable[tuple] = ()) -> Report:
        """E := the program's own facts plus `facts`; compute the materialisation."""
        return self.maintainer.load(self._in([*self.program_facts(), *facts]))

    def _in(self, facts: Iterable[tuple]) -> Iterable[tuple]:
        return facts_in(facts) if self.triples else facts

    def _out(self, facts: Iterable[tuple]) -> Iterable[tuple]:
        return facts_out(facts) if self.triples else facts

    def update(self, add: Iterable[tuple] = (), delete: Iterable[tuple] = ()) -> Report:
        """Apply one update and maintain the materialisation (every algorithm)."""
        return self.maintainer.update(self._in(add), self._in(delete))

    def change_program(self, add: str = "", delete: str = "", whole: str | None = None,
                       source: str = "<program>", id: object = None) -> Report:  # fmt: skip
        """Add and delete rules (and the program's facts) in the running materialisation; core=arrays only.

        `whole` is the entire new program instead (the engine computes the
        difference; engine.program_change; `source` names it in errors). The report is the delta, as an
        update's. A change that fails validation (parse, safety,
        stratification, arities against the state) changes nothing. With a
        fully dynamic algorithm, `id` (when given) becomes `last_id`: the
        change is the last update integrated.
        """
        if self.options.core != "arrays":
            raise AlgorithmError("program changes need the arrays core (--core arrays)")
        if self.triples:
            raise AlgorithmError("program changes are not supported for programs over triples yet")
        if self.options.equality != "off":  # owl:sameAs as equality: engine.compact.eq_program
            from fluxmat.engine.compact.eq_program import change_program
        else:  # imported here: numba only with the arrays core
            from fluxmat.engine.compact.program import change_program

        program = changed_program(self.program, add, delete, whole, source)
        before = self.analysis
        report = change_program(self.maintainer, analyse_change(before, program))
        self.program, self.analysis = program, self.maintainer.analysis
        self.program_history.append({"version": self.program_version + 1, "changes": describe(before, self.analysis)})
        self.prefixes = dict(program.prefixes)
        self.printer = FactPrinter(program.prefixes)
        self.rule_labels = {r.id: rule_label(r.rule, r.id) for r in self.analysis.rules}
        self.program_version += 1
        if id is not None and self.fully_dynamic:
            self._fd().last_id = id
        return report

    def describe_change(self, program: Program) -> list[str]:
        """The lines saying how `program` differs from the one in force (rules removed and added, strata)."""
        return describe(self.analysis, analyse_change(self.analysis, program))

    def program_text(self) -> str:
        """The program in force, as text (rules, then the program's facts)."""
        return str(self.program)

    def update_checker(self) -> Callable[[Iterable[PyFact], Iterable[PyFact]], None]:
        """Validates updates in order without applying them (engine.maintainer)."""
        check = self.maintainer.update_checker()
        if not self.triples:
            return check
        return lambda add, delete: check(facts_in(add), facts_in(delete))

    def check_update(self, add: Iterable[PyFact], delete: Iterable[PyFact]) -> None:
        """Raise `UpdateError` if the update would be refused now; nothing is applied."""
        self.update_checker()(add, delete)

    # ------------------------------------------------------------ fully dynamic
    @property
    def fully_dynamic(self) -> bool:
        """Whether updates can overlap (`fd-dred`, `fd-counting`): `feed` and the state apply."""
        return self.options.algorithm in FULLY_DYNAMIC

    def _fd(self) -> FullyDynamic:
        """The fully dynamic engine: the objects one, or the arrays core's (engine.compact.fed, same interface)."""
        if not self.fully_dynamic:
            raise FluxmatError(
                f"this needs a fully dynamic algorithm (fd-dred or fd-counting), not {self.name}"
            )
        return self.maintainer

    def feed(self, updates: Iterable[Fed], rejected=None, after_each=None,
             overlap: bool | None = None) -> FeedResult:  # fmt: skip
        """Submit `updates` with the options' budget between them, then work until quiescent.

        `overlap` defaults to the options' schedule (engine.feed has the contract).
        """
        o = self.options
        overlap = o.interleaved if overlap is None else overlap
        if self.triples:
            updates = (replace(u, add=facts_in(u.add), delete=facts_in(u.delete)) for u in updates)
        return feed(self._fd(), updates, o.budget, overlap, rejected, after_each)

    def feed_columns(self, cols: UpdateColumns, rejected=None) -> FeedResult:
        """`feed` with overlap for updates given as columns (engine.update_columns: no tuple per fact)."""
        adapt = None
        if self.triples:
            adapt = lambda u: replace(u, add=facts_in(u.add), delete=facts_in(u.delete))  # noqa: E731
        return feed_columns(self._fd(), cols, self.options.budget, rejected, adapt)

    def poll(self) -> ConsistencyPoint | None:
        """The delta since the last poll, when the engine is quiescent."""
        point = self._fd().poll()
        if point is None or not self.triples:
            return point
        return replace(point, added=facts_out(point.added), removed=facts_out(point.removed))

    def poll_rows(self) -> PointRows | None:
        """`poll` as rows of term ids per predicate (engine.fd.records.PointRows), without a tuple per fact.

        None when the engine does not give its delta so (the objects core,
        equality, a program over triples) or is not quiescent: use `poll`.
        """
        fd = self._fd()
        rows = getattr(fd, "poll_rows", None)
        return None if rows is None or self.triples else rows()

    @property
    def pending(self) -> int:
        """Operations waiting in the fully dynamic engine (0 when quiescent)."""
        return self._fd().pending

    @property
    def last_id(self) -> object:
        """The id of the last update integrated (fully dynamic)."""
        return self._fd().last_id

    def work_counts(self) -> dict[str, int]:
        """Cumulative counters: the fully dynamic engine's (FDStats) and rule applications."""
        m = self.maintainer
        counts = m.stats.as_dict() if self.fully_dynamic else {}
        counts["rule_applications"] = sum(m.counts.applications.values())
        return counts

    @staticmethod
    def counts_since(now: dict[str, int], before: dict[str, int]) -> dict[str, int]:
        """`work_counts` growth between two readings (the one place they are diffed).

        Never negative: a program change takes the counts of the rules it removes with it (and
        with equality a rebuild renumbers the internal rules), so a counter may read lower than
        before; what it lost is not work undone, and its growth is then counted as 0.
        """
        return {k: max(n - before.get(k, 0), 0) for k, n in now.items()}

    def rule_work(self) -> dict[str, tuple[int, int]]:
        """Work per rule, by `rule_label`: (rule applications so far, derivation-log entries now).

        Rules on one line share a label (their numbers add up). A module that
        evaluates a stratum in its rules' place (engine.modules) reports as
        `module NAME`: (candidate facts so far, 0). Only `fd-counting` on the
        objects core keeps a derivation log; the others report 0 entries. The
        arrays core counts the head instances its compiled plans produced.
        """
        m = self.maintainer
        applied, logged = m.counts.applications, getattr(m, "log_by_rule", {})
        out: dict[str, tuple[int, int]] = {}
        for rid in applied.keys() | logged.keys():
            label = self.rule_labels.get(rid) or f"rule {rid}"
            a, n = out.get(label, (0, 0))
            out[label] = (a + applied.get(rid, 0), n + logged.get(rid, 0))
        for name, n in m.counts.module_work.items():
            a, _ = out.get(f"module {name}", (0, 0))
            out[f"module {name}"] = (a + n, 0)
        return out

    @staticmethod
    def rules_since(now: dict[str, tuple[int, int]], before: dict[str, tuple[int, int]]) -> dict[str, tuple]:
        """`rule_work` between two readings: label -> (applications, log growth, log entries now).

        Only the rules whose numbers changed. Applications never go negative (`counts_since`);
        the log's growth may (deletions shrink it).
        """
        out = {}
        for label, (applied, logged) in now.items():
            a, n = before.get(label, (0, 0))
            grown = max(applied - a, 0)
            if grown or logged != n:
                out[label] = (grown, logged - n, logged)
        return out

    def work_mark(self) -> tuple[dict[str, int], dict[str, tuple[int, int]]]:
        """Both readings at once (`work_counts`, `rule_work`), to be diffed later by `work_since`."""
        return self.work_counts(), self.rule_work()

    def work_since(self, mark: tuple[dict, dict]) -> tuple[dict[str, int], dict[str, tuple]]:
        """The work done since `work_mark` gave `mark`: (`counts_since`, `rules_since`), in one call."""
        counts, rules = mark
        return self.counts_since(self.work_counts(), counts), self.rules_since(self.rule_work(), rules)

    def rule_texts(self) -> dict[str, str]:
        """Each `rule_label` with its rules as text (rules sharing a line joined by a space)."""
        out: dict[str, str] = {}
        for r in self.analysis.rules:
            label = self.rule_labels[r.id]
            out[label] = f"{out[label]} {r.rule}" if label in out else str(r.rule)
        return out

    # ------------------------------------------------------------ the fully dynamic state
    def export_changes(self) -> StateChanges:
        """The state's changes since the last export (engine.fd.snapshot)."""
        if self.core == "arrays":
            return self._arrays_state().export_changes(self._fd())
        return export_changes(self._fd())

    def restore(self, snap: StateSnapshot | StateColumns) -> None:
        """Rebuild the engine from a stored state (`StateMismatch`: built for another program).

        A state the store kept as columns (connectors.bulk_state) is restored by
        `restore_columns`. A state larger than the fact limit is refused too
        (`FactLimitExceeded`).
        """
        if isinstance(snap, StateColumns):
            self.restore_columns(snap)
            return
        self._rebuild(snap, snap.meta, restore, "restore")

    def state_columns(self) -> StateColumns:
        """The state as integer columns with the store's term ids (engine.fd.columns), right after a commit.

        Raises `engine.fd.columns.NotAtExport` when changes are not exported yet.
        """
        return self._arrays_state().take(self._fd()) if self.core == "arrays" else take(self._fd())

    def restore_columns(self, cols: StateColumns) -> None:
        """Rebuild the engine from `state_columns` (`StateMismatch`: another program; `FactLimitExceeded`)."""
        self._rebuild(cols, cols.meta, restore_columns, "restore_columns")

    def _rebuild(self, state, stored: dict, objects_restore, arrays_restore: str) -> None:
        """Restore a stored state of this core (`objects_restore`, or engine.compact.state's function of that name)."""
        fd = self._fd()
        check_core(stored, self.core, self.name)
        if self.core == "arrays":
            getattr(self._arrays_state(), arrays_restore)(fd, state)
        else:
            check_fingerprint(fd, state)
            objects_restore(fd, state)
        self.options.limits.check_facts(fd.size() if self.core == "arrays" else len(fd.born))

    def state_meta(self) -> dict[str, object]:
        """What a stored state says about itself (fingerprint, algorithm, clock)."""
        if self.core == "arrays":
            return self._arrays_state().meta(self._fd())
        return meta(self._fd())

    def _arrays_state(self):
        """engine.compact.state (with equality: eq_state), imported when the arrays core keeps the state (numba)."""
        if self.options.equality != "off":
            from fluxmat.engine.compact import eq_state

            return eq_state
        from fluxmat.engine.compact import state

        return state

    # ------------------------------------------------------------ reading
    def facts(self) -> set[tuple]:
        """The materialisation as Python facts."""
        return set(self._out(self.maintainer.facts()))

    def fact_rows(self) -> tuple[list, Iterator[tuple[str, np.ndarray]]] | None:
        """The materialisation as rows of term ids per predicate, without a Python tuple per fact.

        `(values, groups)`: `values[i]` is term i's constant, each group is
        `(predicate, rows)` with an int64 array of shape (facts, arity), as
        `facts()` names the predicate. None when the engine does not keep its
        facts so (the objects core, equality, a program over triples): use `facts()`.
        """
        rows = getattr(self.maintainer, "fact_rows", None)
        if rows is None or self.triples:
            return None
        return self.maintainer.dictionary.values, rows()

    def explicit(self) -> set[tuple]:
        """The explicit facts E as Python facts (the program's own included)."""
        return set(self._out(self.maintainer.explicit()))

    def lines(self) -> list[str]:
        """The materialisation in program syntax, sorted."""
        return self.printer.lines(self._out(self.maintainer.facts()))

    def rewritten_lines(self) -> list[str]:
        """The compact materialisation (equality="rewrite" only): normal facts only."""
        rewritten = getattr(self.maintainer, "rewritten", None)
        if rewritten is None:
            raise AlgorithmError("rewritten facts exist only with equality=rewrite")
        return self.printer.lines(rewritten())

    def show(self, fact: PyFact) -> str:
        """A fact in program syntax with the program's prefixes, without the final dot."""
        return self.maintainer.show_fact(fact)

    def match(self, pattern: Atom) -> Iterator[PyFact]:
        """The facts of the materialisation matching a pattern atom (engine.why)."""
        if self.triples:
            return iter(self._out(match(self.maintainer, program_in(Program((), (pattern,))).facts[0])))
        return match(self.maintainer, pattern)

    @property
    def core(self) -> str:
        """How facts are kept: "objects" or "arrays" (engine.options)."""
        return self.options.core

    def explain(self, fact: PyFact, max_facts: int = 200_000) -> Proof | None:
        """A well-founded proof of `fact`, visiting at most `max_facts` facts (engine.why)."""
        if self.options.equality != "off":  # proofs would have to go through the rewriting
            raise AlgorithmError(f"explaining facts (why) is not available with equality={self.options.equality} yet")
        state = FactsView(self.maintainer) if self.options.core == "arrays" else self.maintainer
        return Explainer(state, max_facts, program=self.program).explain(fact_in(fact) if self.triples else fact)

    def sizes(self) -> dict[str, int]:
        """Facts in the materialisation and explicit facts; `log`: derivation-log entries.

        With core=arrays also `bytes`: what its arrays hold.
        """
        m = self.maintainer
        if self.options.core == "arrays":
            return m.sizes()
        internal = self.analysis.internal
        return {
            "facts": sum(len(r) for p, r in m.I.items() if p not in internal),
            "explicit": sum(len(s) for s in m.E.values()),
            "log": m.log_size() if isinstance(m, FullyDynamic) else 0,
        }

    def version(self) -> tuple:
        """Changes whenever the materialisation may have changed (for caches of its facts)."""
        m = self.maintainer
        if self.options.core == "arrays":
            return (id(m.core), m.core.epoch)
        return (getattr(m, "clock", None), getattr(m, "last_seq", None), id(m.I),
                sum(len(r) for r in m.I.values()))  # fmt: skip

    def modules_used(self) -> set:
        """The specs of the modules the maintainer runs (engine.analysis.ModuleSpec).

        The objects core: its tc, stc and ltc modules (engine.modules) when modules are on; the
        arrays core: the stc modules its closure module keeps (engine.compact.closure, modules on)
        and each linear closure it inserts by reachability (engine.compact.reach, always).
        """
        return self.maintainer.module_specs()

    def plans(self) -> Iterator[Plan]:
        """Every rule's compiled plans -- full, then one per delta literal -- as before a load."""
        ev = Evaluator(self.analysis, Dictionary(), lambda _pred: 0, self.options.hypertree)
        for r in self.analysis.rules:
            yield ev.plan(r, "full", None)
            for i in range(len(r.positives) + len(r.negatives)):
                yield ev.plan(r, "delta", i)
