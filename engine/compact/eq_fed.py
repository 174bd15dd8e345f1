"""`fd-counting` and `fd-dred` with `equality="rewrite"` on the arrays core.

`EqualityFed` is the arrays core's equality maintainer (engine.compact.equality)
behind engine.feed's interface (`encode_update`, `submit_encoded`, `step`,
`run`, `pending`, `poll`, `last_id`, `stats`). Each submitted update is
integrated on its own, in submission order, when the run comes (one of
Illich & Glimm's fair schedules with no interleaving: every update completes
before the next one's work starts), so after a run the state is the
materialisation with equality of the last update's explicit facts.

`poll` returns the net change of the expanded materialisation since the
previous poll and, per fact, the update that changed it: the one update
whose integration changed the fact, or 0 when several did (a fact changed
and changed back is not reported).

Its stored state (E, the classes, the rewritten core's rows and counters)
is engine.compact.eq_state's; `terms` holds the store's term ids.

Not here: the stored state (engine.compact.eq_state), the classes (engine.compact.eq_classes).
"""

from __future__ import annotations

from fluxmat.engine.algorithms import FULLY_DYNAMIC
from fluxmat.engine.analysis import Analysis
from fluxmat.engine.compact.equality import ArraysEquality, create_equality, refuse
from fluxmat.engine.compact.fed import Inbox
from fluxmat.engine.fd.records import ConsistencyPoint, FDStats
from fluxmat.engine.limits import LimitExceeded
from fluxmat.engine.maintainer import Changes, Report, Update


class EqualityFed(Inbox, ArraysEquality):
    """The arrays core with equality, fed update by update (see the module docstring)."""

    def __init__(self, analysis: Analysis, algorithm: str, modules: bool = True):
        super().__init__(analysis, "dredc", modules)
        self.name = f"{algorithm}~"
        self.seq = self.last_seq = 0
        self.last_id: object = None
        self.inbox: list[tuple[int, object, Changes, Changes]] = []
        self.stats = FDStats()
        self.changed: dict[tuple, list] = {}  # (pred, ids) -> [present at the last poll, updates]
        self.terms = None  # the stored state's term ids (engine.compact.eq_state)

    def configure(self, seed: int | None = None, interleaved: bool | None = None) -> None:
        """Accepted for the objects engine's interface: updates run one after the other."""

    def materialise(self, report: Report) -> None:
        super().materialise(report)
        self.inbox.clear()
        self.changed = {}

    def run(self, max_units: int | None = None) -> int:
        """Integrate the queued updates, each on its own, in order; how many there were."""
        entries, self.inbox = self.inbox, []
        for seq, uid, plus, minus in entries:
            report = Report(self.name)
            self._work_start = self.counts.work
            try:
                super().maintain(Update(plus, minus), report)
            except LimitExceeded as exc:
                exc.update = seq
                raise
            finally:
                self._work_start = None
            self.stats.updates += 1
            self.stats.noop_adds += report.noop_adds
            self.stats.noop_deletes += report.noop_deletes
            self._remember(seq, report)
            self.last_seq, self.last_id = seq, uid if uid is not None else seq
        return len(entries)

    def _remember(self, seq: int, report: Report) -> None:
        for changes, was in ((report.added_facts, False), (report.removed_facts, True)):
            for pred, fs in changes.items():
                for f in fs:
                    self.changed.setdefault((pred, f), [was, []])[1].append(seq)

    def poll(self) -> ConsistencyPoint | None:
        """The net change since the previous poll (None while updates wait for their run)."""
        if self.inbox:
            return None
        added, removed, added_by, removed_by = [], [], [], []
        for (pred, f), (was, seqs) in self.changed.items():
            if len(seqs) % 2 == 0:  # changed and changed back
                continue
            fact, cause = self.decode(pred, f), seqs[0] if len(seqs) == 1 else 0
            (removed if was else added).append(fact)
            (removed_by if was else added_by).append(cause)
        self.changed = {}
        return ConsistencyPoint(self.last_seq, self.last_id, added, removed, added_by, removed_by)

    def maintain(self, update: Update, report: Report) -> None:
        """One update through the classic interface: its report is its delta (it polls)."""
        super().maintain(update, report)
        self.seq += 1
        self.stats.updates += 1
        self.changed = {}
        self.last_seq = self.last_id = self.seq

    def program_changed(self, report: Report) -> None:
        """A program change (engine.compact.eq_program) is the last update integrated; its delta joins the poll."""
        self.seq += 1
        self.stats.updates += 1
        self.last_seq = self.last_id = self.seq
        self._remember(self.seq, report)

    def log_size(self) -> int:
        return 0


def create_arrays_equality(analysis: Analysis, algorithm: str, modules: bool) -> ArraysEquality:
    """The arrays core with equality=rewrite: fed (`fd-counting`, `fd-dred`) or not; refusals as `refuse`'s."""
    if algorithm in FULLY_DYNAMIC:
        refuse(analysis, "dredc")
        return EqualityFed(analysis, algorithm, modules)
    return create_equality(analysis, algorithm, modules)
