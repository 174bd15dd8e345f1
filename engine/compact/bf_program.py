"""A recursive component's plans and relations for the compiled CHECK (engine.compact.bf_check).

`Checker` encodes the component's recursive plans (from the head, for CHECK;
from a body atom of the component, for SATURATE's forward chaining) as the
int64 tables bf_check reads, gathers the relations they touch (the
component's own first) and Backward/Forward's flags (C, P, Y, survivors) as
numba typed lists, and runs `check_rows` 1,024 checks per call, reporting
the rule instances and checking the limits between calls.

Components whose recursive plans apply built-ins (comparisons, arithmetic)
are not encoded (`Checker.build` gives None): engine.compact.bf checks them
in Python.

Not here: the kernels (engine.compact.bf_check), the deletion's rounds (engine.compact.bf).
"""

from __future__ import annotations

import numpy as np
from numba.typed import List

from fluxmat.engine.compact import bf_check as C

BUDGET = 1024  # checks per call: the limits are checked between calls
BOTH, EITHER = 2, 3  # kernels.present's modes: before and now, before or now


def _typed(arrays) -> List:
    out = List()
    for a in arrays:
        out.append(a)
    return out


class _Tables:
    """The plans' tables (bf_check's PT, ST and column tables), filled plan by plan."""

    def __init__(self, own: list[str]):
        self.index = {p: i for i, p in enumerate(own)}
        self.nown = len(own)
        self.pt: list[list[int]] = []
        self.st: list[list[int]] = []
        self.csrc: list[int] = []
        self.cval: list[int] = []
        self.cout: list[int] = []
        self.hsrc: list[int] = []
        self.hval: list[int] = []
        self.ownrel: list[int] = []

    def rel(self, pred: str) -> int:
        return self.index.setdefault(pred, len(self.index))

    def step(self, s) -> None:
        own = self._own(s)
        self.st.append([self.rel(s.pred), s.how, max(s.k, 0), len(self.csrc), len(s.src), int(own),
                        EITHER if s.negated else BOTH])  # fmt: skip
        self.csrc += s.src.tolist()
        self.cval += s.cval.tolist()
        self.cout += s.outslot.tolist()

    def plan(self, pl) -> int:
        own = [self.index[s.pred] for s in pl.steps if self._own(s)]
        self.pt.append([len(self.st), len(pl.steps), pl.nslots, self.rel(pl.head_pred), len(self.hsrc),
                        len(pl.head_src), len(own), len(self.ownrel)])  # fmt: skip
        for s in (pl.start, *pl.steps):
            self.step(s)
        self.hsrc += pl.head_src.tolist()
        self.hval += pl.head_cval.tolist()
        self.ownrel += own
        return len(self.pt) - 1

    def _own(self, s) -> bool:
        i = self.index.get(s.pred)
        return i is not None and i < self.nown and not s.negated

    def encoded(self, head_off, head_list, rec) -> tuple:
        i64 = lambda xs: np.array(xs, np.int64)  # noqa: E731
        csrc = i64(self.csrc)
        widths = [row[C.S_AR] for row in self.st]
        return (i64(self.pt).reshape(-1, C.PF), i64(self.st).reshape(-1, C.SF), csrc, i64(self.cval),
                i64(self.cout), csrc >= -1, i64(self.hsrc), i64(self.hval), max([1, *widths]),
                i64(head_off), i64(head_list), i64(rec), i64(self.ownrel))  # fmt: skip


class Checker:
    """The compiled CHECK of one component in one update (see the module docstring)."""

    def __init__(
        self, core, comp, flags: dict[str, dict], plans: list, program: tuple, rels: list[str]
    ):
        self.core, self.plans = core, plans
        self.pr = program
        self.index = {p: i for i, p in enumerate(rels)}
        R = [core.rels[p] for p in rels]
        for rel in R:
            rel.flush()
        self.db = (_typed(r.cols for r in R), _typed(r.alive for r in R), _typed(r.flip for r in R),
                   _typed(r.slots for r in R), _typed(r.islots for r in R), _typed(r.inext for r in R),
                   np.array([r.n for r in R], np.int64))  # fmt: skip
        own = comp.preds
        self.fl = (*(_typed(flags[name][p] for p in own) for name in ("checked", "proved", "delayed", "survivors")),
                   _typed(core.rels[p].cnt for p in own))  # fmt: skip
        self.work = np.zeros(len(plans), np.int64)
        self.frames = np.empty((64, C.FF), np.int64)
        self.body = np.empty(1024, np.int64)

    @classmethod
    def build(cls, core, comp, flags: dict[str, dict]) -> Checker | None:
        """The checker of this component, or None when a recursive plan applies a built-in."""
        heads, recs = comp.head_plans, comp.rec_starts
        if any(pl.after for pl in (*heads, *recs)):
            return None
        t = _Tables(list(comp.preds))
        plans, head_off, head_list = [], [0], []
        for p in comp.preds:
            for pl in heads:
                if pl.head_pred == p:
                    head_list.append(t.plan(pl))
                    plans.append(pl)
            head_off.append(len(head_list))
        rec = []
        for pl in recs:
            rec.append(t.plan(pl))
            plans.append(pl)
        rels = list(t.index)
        return cls(core, comp, flags, plans, t.encoded(head_off, head_list, rec), rels)

    def unproved(self, p: str, rows: np.ndarray) -> np.ndarray:
        """CHECK `rows` of `p` in order; those left unproved (no longer survivors)."""
        ctl = np.zeros(C.CTL, np.int64)
        lost = np.empty(len(rows), np.int64)
        rows = np.ascontiguousarray(rows, np.int64)
        epoch = np.int64(self.core.epoch)
        while True:
            done, self.frames, self.body = C.check_rows(self.pr, self.db, self.fl, epoch, np.int64(self.index[p]),
                                                        rows, ctl, self.frames, self.body, self.work, lost,
                                                        np.int64(BUDGET))  # fmt: skip
            self._report()
            if done:
                return lost[: ctl[C.C_LOST]]
            self.core.after_component()  # limits: a long proof search

    def _report(self) -> None:
        for i in np.flatnonzero(self.work).tolist():
            self.core.on_work(self.plans[i].rule, int(self.work[i]))
        self.work[:] = 0
