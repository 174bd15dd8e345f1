"""`remat`: recompute mat(P, E) from scratch on every update (the reference)."""

from __future__ import annotations

from fluxmat.engine.maintainer import Report, Update
from fluxmat.engine.seminaive import SemiNaive


class Remat(SemiNaive):
    name = "remat"
    incremental = False
    supports_modules = True

    def maintain(self, update: Update, report: Report) -> None:
        old = {p: r.facts for p, r in self.I.items()}
        update.apply(self.E)
        self.I = {}
        self.evaluate_strata()
        self.record_diff(report, old)
