"""`remat`: recompute mat(P, E) from scratch on every update (the reference)."""

from __future__ import annotations

import time

from engine.analysis import Stratum
from engine.maintain.base import Maintainer, Report


class Remat(Maintainer):
    name = "remat"
    incremental = False
    supports_modules = True
    module_kinds = ("tc", "stc", "ltc")

    def _update(self, add, delete) -> Report:
        start = time.perf_counter()
        before = self._snapshot_counts()
        plus, minus, noop_add, noop_del = self.normalise(add, delete)
        old = {p: r.facts for p, r in self.I.items()}
        for pred, fs in minus.items():
            self.E[pred] -= fs
        for pred, fs in plus.items():
            self.E.setdefault(pred, set()).update(fs)
        self.I = {}
        self.materialise()
        report = self._report(before, start)
        report.noop_adds, report.noop_deletes = noop_add, noop_del
        self.record_diff(report, old)
        report.seconds = time.perf_counter() - start
        return report

    def update_stratum(self, s: Stratum) -> None:  # pragma: no cover - not used
        raise AssertionError("remat recomputes everything in update()")
