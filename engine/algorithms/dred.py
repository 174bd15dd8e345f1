"""`dred`: Delete/Rederive (Gupta et al. 1993), stratum by stratum.

Follows Algorithm 1 of Hu, Motik & Horrocks (2018): overdelete everything that
depends on a deleted fact, rederive in one step by evaluating rules backwards
over what survives, then insert semi-naively. The phases are those of
engine.algorithms.stratified; the report's details count the overdeleted and the
rederived facts.
"""

from __future__ import annotations

from fluxmat.engine.algorithms.stratified import Run, Stratified
from fluxmat.engine.analysis import Stratum
from fluxmat.engine.maintainer import Report


class DRed(Stratified):
    name = "dred"

    def update_stratum(self, run: Run, s: Stratum) -> None:
        run.overdelete(s, run.lost(s))
        run.insert(s, run.rederive_backward(s))

    def commit(self, run: Run, report: Report) -> None:
        report.details.update(run.overdeletion())
        super().commit(run, report)
