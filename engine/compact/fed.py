"""Fully dynamic updates on the arrays core: updates fed one by one, integrated set-at-a-time.

`FedMaintainer` is the arrays core (engine.compact.maintainer) with the
interface engine.feed drives (`encode_update`, `submit_encoded`, `step`,
`run`, `pending`, `poll`, `last_id`), so `fd-counting` and `fd-dred` run on
it. It keeps no derivation log and no per-fact Python objects.

A *run* is the updates submitted since the last `run`: their net explicit
change -- in submission order, the last operation on a fact wins, relative to
E before the run; no-ops are dropped as they come, against E as the earlier
updates of the run left it -- is applied as ONE set update of the arrays core
(counting, DRed^c, the closure module). So every update completes before the
next one's work starts: one of Illich & Glimm's fair schedules (their
Algorithm 1 with no interleaving), and after a run the state is mat(P, E_n)
of the last update, as with the objects engine's schedules. engine.feed runs
all the updates of a feed as one run when they overlap (the budget does no
work here: `step` does nothing) and each update as its own run when they do
not (`overlap=False`, the stream's quarantine re-run).

`poll` returns the net change since the previous poll (added and removed
facts) and, per fact, the update that changed it (`ConsistencyPoint.added_by`):
* a fact that changed in several runs since the poll: 0 (several updates), as
  the objects engine says it;
* else the run's one update that changed E (the others were no-ops), if there
  was one; else, for a fact of a predicate no rule derives, the one update of
  the run that changed its explicit status; else the one update of the run
  that changed E within the predicates the fact's predicate depends on
  (through positive and negated atoms); else 0.
A name is given only when that update alone changed the fact in the
sequential application of the updates (what the objects engine promises); a
derived fact of a run whose updates reach its predicate's dependencies more
than once gets 0, where the objects engine may name the update whose work
changed it.

Limits (engine.limits): the fact limit as everywhere; the work limit applies
to a run of n updates that change E as n times the limit (their work cannot be
told apart), and a breach is charged to the run's first such update (marked
`shared`), so the stream (stream.batch) and `fluxmat replay` re-run the
updates one at a time, where the limit applies to each update exactly. The
engine is then mid-way and must be rebuilt (`restore`), as the objects engine
must.

Not here: the stored state (engine.compact.state), the driver (engine.feed).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from fluxmat.engine.analysis import Analysis
from fluxmat.engine.compact.fed_columns import submit_columns
from fluxmat.engine.compact.maintainer import CompactMaintainer, unsupported
from fluxmat.engine.compact.net import Net, Ops, find_rows, unique_rows
from fluxmat.engine.compact.net import net as compute_net
from fluxmat.engine.errors import AlgorithmError
from fluxmat.engine.fd.records import ConsistencyPoint, FDStats, PointRows
from fluxmat.engine.limits import LimitExceeded
from fluxmat.engine.maintainer import Changes, Report, Update


@dataclass
class Journal:
    """What changed since the last export (engine.compact.state): explicit keys, and the core's epoch then."""

    explicit: dict = field(default_factory=dict)  # pred -> [(k, arity) keys: E membership changed]
    epoch: int = 0  # rows stamped or flipped after this epoch changed
    full: bool = True  # export everything (after a load)

    def note(self, net: Net) -> None:
        """Remember the facts a run toggled (their E membership may have changed)."""
        for pred, t in net.toggled.items():
            self.explicit.setdefault(pred, []).append(t.keys)

    def keys(self, pred: str) -> np.ndarray:
        """`pred`'s keys noted since the last export, each once (rows in lexicographic order)."""
        return np.ascontiguousarray(unique_rows(np.concatenate(self.explicit[pred]))[0])


class _Changes:
    """Rows that flipped since the last poll: per predicate (rows, was present, cause) arrays, in run order.

    Also what may have changed unseen (a fact changed and changed back within a
    run): the runs with several updates that changed E (`runs`) and the facts
    several updates of one run toggled (`several`).
    """

    def __init__(self):
        self.parts: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
        self.runs: list[Net] = []
        self.several: dict[str, list[np.ndarray]] = {}  # pred -> [(k, arity) keys]

    def unseen(self, net: Net) -> None:
        """Remember what of a run may have changed facts twice (none when one update changed E)."""
        if len(net.updates) > 1:
            self.runs.append(net)
            for pred, keys in net.several():
                self.several.setdefault(pred, []).append(keys)

    def toggled_twice(self, pred: str, facts: np.ndarray) -> np.ndarray:
        """Per row of `facts`: whether several updates of one run toggled it."""
        if pred not in self.several:
            return np.zeros(len(facts), np.bool_)
        return find_rows(unique_rows(np.concatenate(self.several[pred]))[0], facts) >= 0

    def note(self, pred: str, rows: np.ndarray, alive: np.ndarray, causes: np.ndarray) -> None:
        self.parts.setdefault(pred, []).append((rows, alive[rows] == 0, causes))

    def take(self, pred: str, alive: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The rows whose presence differs from the last poll, whether present now, and their causes."""
        rows, was, causes = (np.concatenate(a) for a in zip(*self.parts[pred], strict=True))
        rows, first, counts = np.unique(rows, return_index=True, return_counts=True)
        now = alive[rows] != 0
        keep = now != was[first]
        causes = np.where(counts > 1, 0, causes[first])
        return rows[keep], now[keep], causes[keep]


class Inbox:
    """engine.feed's submitting side: updates queued (`inbox`, numbered by `seq`) for the next `run`."""

    seq: int
    inbox: list[tuple[int, object, Changes, Changes]]
    encode_update: Callable

    @property
    def pending(self) -> int:
        """Updates submitted and not yet integrated (the next run)."""
        return len(self.inbox)

    @property
    def quiescent(self) -> bool:
        return not self.inbox

    def submit_encoded(self, plus: Changes, minus: Changes, id: object = None) -> int:
        """Queue an update `encode_update` validated for the next run; its sequence number."""
        self.seq += 1
        self.inbox.append((self.seq, id, plus, minus))
        return self.seq

    def submit(self, add=(), delete=(), id: object = None) -> int:
        return self.submit_encoded(*self.encode_update(add, delete), id)

    def step(self, budget: int = 1) -> int:
        """No work between submissions: a run integrates its updates (`run`)."""
        return 0


class FedMaintainer(Inbox, CompactMaintainer):
    """The arrays core behind engine.feed's interface (see the module docstring)."""

    def __init__(self, analysis: Analysis, algorithm: str, modules: bool = True):
        super().__init__(analysis, algorithm, modules)
        self.seq = self.last_seq = 0
        self.last_id: object = None
        self.inbox: list[tuple[int, object, Changes, Changes]] = []
        self.ops: Ops = {}  # operations submitted as columns for the next run (engine.compact.fed_columns)
        self.changes = _Changes()
        self.journal = Journal()
        self.stats = FDStats()
        self.terms = None  # the stored state's term ids (engine.compact.state)
        self._flipped: dict[str, np.ndarray] = {}  # the last run's flipped rows
        self.rules_changed()

    @property
    def core_algorithm(self) -> str:
        return "dredc"  # what create_fed asks `unsupported` about

    def rules_changed(self) -> None:
        """The rules' heads and body predicates (the causes' cones), from `analysis`."""
        self.heads = {r.head.pred for r in self.analysis.rules}
        self.body: dict[str, set[str]] = {}
        for r in self.analysis.rules:
            self.body.setdefault(r.head.pred, set()).update(
                a.pred for a in (*r.positives, *r.negatives)
            )
        self._cones: dict[str, frozenset] = {}

    def configure(self, seed: int | None = None, interleaved: bool | None = None) -> None:
        """Accepted for the objects engine's interface: runs have no schedule to choose."""

    # ------------------------------------------------------------ load
    def materialise(self, report: Report) -> None:
        super().materialise(report)
        self.inbox.clear()
        self.ops = {}
        self.changes = _Changes()
        self.journal = Journal()

    def reset_core(self) -> None:
        """An empty core and nothing pending or changed (a restore fills it: engine.compact.state)."""
        self.arity = dict(self.analysis.arity)
        self.core = self._new_core()
        self.inbox.clear()
        self.ops = {}
        self.changes = _Changes()
        self.journal = Journal(full=False)

    # ------------------------------------------------------------ engine.feed's interface
    def submit_columns(self, cols, rejected, result) -> None:
        """Queue a batch's updates given as columns (engine.update_columns; engine.compact.fed_columns)."""
        submit_columns(self, cols, rejected, result)

    def run(self, max_units: int | None = None) -> int:
        """Integrate the queued updates as one set update (module docstring); how many there were."""
        entries, self.inbox = self.inbox, []
        if not entries:
            return 0
        net = self._net(entries)
        self.last_seq, uid = entries[-1][0], entries[-1][1]
        self.last_id = uid if uid is not None else self.last_seq
        self.changes.unseen(net)  # also when the run changed nothing in the end
        if not net.add and not net.delete and self.core.change is None:  # a program change runs
            return len(entries)
        flipped = self._flipped = self._apply(net)
        self.journal.note(net)
        for pred, rows in flipped.items():
            if len(rows) and pred not in self.analysis.internal:
                self.changes.note(
                    pred, rows, self.core.rels[pred].alive, self._causes(net, pred, rows)
                )
        return len(entries)

    def _net(self, entries: list) -> Net:
        """The run's net explicit change against E (module docstring; engine.compact.net computes it)."""
        ops, self.ops = self.ops, {}
        for seq, _uid, plus, minus in entries:
            for changes, value in ((minus, False), (plus, True)):
                for pred, fs in (changes or {}).items():
                    keys = np.array(list(fs), np.int64).reshape(len(fs), self.arity[pred])
                    ops.setdefault(pred, []).append(
                        (np.full(len(fs), seq, np.int64), np.full(len(fs), value), keys)
                    )
        net = compute_net(ops, self.arity, self._explicit_before, entries[0][0])
        self.stats.updates += len(entries)
        self.stats.noop_adds += net.noop_adds
        self.stats.noop_deletes += net.noop_deletes
        return net

    def _explicit_before(self, pred: str, keys: np.ndarray) -> np.ndarray:
        """Whether each of `keys` is in E (before the run)."""
        rel = self.core.rels.get(pred)
        flags = np.zeros(len(keys), np.bool_)
        if rel is None:
            return flags
        rows = rel.lookup(keys)
        found = rows >= 0
        flags[found] = rel.expl[rows[found]] != 0
        return flags

    def _apply(self, net: Net) -> dict[str, np.ndarray]:
        """One set update of the arrays core; a breached limit is charged to the run's first update."""
        for p in (*net.add, *net.delete):
            self.core.rel(p, self.arity[p])
        add, delete = net.add, net.delete
        limits = self.limits
        if limits.work is not None and len(net.updates) > 1:
            self.limits = replace(limits, work=limits.work * len(net.updates))
        self._work_start = self.counts.work
        try:
            return self.core.update(add, delete)
        except LimitExceeded as exc:
            exc.update = int(net.updates[0]) if len(net.updates) else net.first
            exc.shared = len(net.updates) > 1
            raise
        finally:
            self._work_start, self.limits = None, limits

    def _causes(self, net: Net, pred: str, rows: np.ndarray) -> np.ndarray:
        """Per flipped row, the one update of the run that changed it, or 0 (module docstring)."""
        if len(net.updates) == 1:
            return np.full(len(rows), net.updates[0], np.int64)
        if pred not in self.heads:  # E alone decides: the updates that toggled the fact
            first, count = net.toggles_of(pred, self.core.rels[pred].cols[rows])
            return np.where(count == 1, first, 0)
        return np.full(len(rows), max(net.reach(self._cone(pred)), 0), np.int64)

    def _cone(self, pred: str) -> frozenset:
        """`pred` and every predicate it depends on through rules."""
        cone = self._cones.get(pred)
        if cone is None:
            seen, todo = {pred}, [pred]
            while todo:
                for q in self.body.get(todo.pop(), ()):
                    if q not in seen:
                        seen.add(q)
                        todo.append(q)
            cone = self._cones[pred] = frozenset(seen)
        return cone

    def poll(self) -> ConsistencyPoint | None:
        """The net change since the previous poll (None while updates wait for their run)."""
        rows = self.poll_rows()
        return None if rows is None else rows.point()

    def poll_rows(self) -> PointRows | None:
        """`poll` as rows of term ids per predicate (engine.fd.records.PointRows), no tuple per fact."""
        if self.inbox:
            return None
        parts = []
        display = self.analysis.display
        for pred in self.changes.parts:
            rows, now, causes = self.changes.take(pred, self.core.rels[pred].alive)
            cols = self.core.rels[pred].cols
            self._unseen_causes(pred, cols, rows, causes)
            added, removed = cols[rows[now]], cols[rows[~now]]
            parts.append((display.get(pred, pred), added, causes[now], removed, causes[~now]))
        self.changes = _Changes()
        return PointRows(self.last_seq, self.last_id, self.dictionary.values, parts)

    def _unseen_causes(
        self, pred: str, cols: np.ndarray, rows: np.ndarray, causes: np.ndarray
    ) -> None:
        """0 for the facts that may also have changed unseen in a run (`_Changes`): several updates."""
        ch = self.changes
        if pred not in self.heads:
            causes[ch.toggled_twice(pred, cols[rows])] = 0
        elif ch.runs:
            cone = self._cone(pred)
            if any(net.reach(cone) < 0 for net in ch.runs):
                causes[:] = 0

    # ------------------------------------------------------------ the Maintainer interface
    def maintain(self, update: Update, report: Report) -> None:
        """Submit one update and run it (the classic interface; it polls, as the objects engine does).

        A program change's update (engine.compact.program) does not poll: its
        flips stay in the changes since the last poll (a batch's net delta
        includes them); its report is its own run's flips.
        """
        if self.core.change is not None:
            self._program_run(update, report)
            return
        noops = self.stats.noop_adds, self.stats.noop_deletes
        self.submit_encoded(update.plus, update.minus)
        self.run()
        report.noop_adds = self.stats.noop_adds - noops[0]  # the run's net counts them (not `normalise`)
        report.noop_deletes = self.stats.noop_deletes - noops[1]
        point = self.poll()
        for facts, into in (
            (point.added, report.added_facts),
            (point.removed, report.removed_facts),
        ):
            for fact in facts:
                pred, f = self.encode(fact)
                into.setdefault(pred, set()).add(f)
        report.added, report.removed = len(point.added), len(point.removed)

    def _program_run(self, update: Update, report: Report) -> None:
        """Run a program change's update; report the rows it flipped, without polling."""
        self._flipped = {}
        self.submit_encoded(update.plus, update.minus)
        self.run()
        self.report_flips(self._flipped, report)

    def log_size(self) -> int:
        return 0


def create_fed(analysis: Analysis, algorithm: str, modules: bool, equality: str) -> FedMaintainer:
    """`fd-counting` or `fd-dred` on the arrays core, or `AlgorithmError` naming what it cannot do yet."""
    if equality == "rewrite":  # the door builds it: engine.compact.eq_fed
        raise AlgorithmError("equality=rewrite: use engine.compact.eq_fed.create_arrays_equality")
    missing = unsupported(analysis, "dredc", equality)
    if missing is not None:
        raise AlgorithmError(f"core=arrays does not support {missing} yet; use core=objects")
    return FedMaintainer(analysis, algorithm, modules)
