"""Maintenance algorithms behind one interface, selectable by name.

Every algorithm is a `Maintainer` (engine.maintain.base): `load(facts)` computes
mat(P, E); `update(add, delete)` maintains it and returns a `Report`. All of them
use the shared evaluator and its single fixpoint loop (engine.evaluate).
"""

from __future__ import annotations

from engine.analysis import Analysis
from engine.errors import AlgorithmError
from engine.fd.policies import FDCounting, FDDRed
from engine.maintain.base import Maintainer, Report
from engine.maintain.bf import BF
from engine.maintain.counting import Counting
from engine.maintain.dred import DRed
from engine.maintain.dredc import DRedC
from engine.maintain.remat import Remat
from engine.storage import Dictionary

ALGORITHMS: dict[str, type[Maintainer]] = {
    cls.name: cls for cls in (Remat, DRed, Counting, DRedC, BF, FDDRed, FDCounting)
}


def create(
    name: str,
    analysis: Analysis,
    dictionary: Dictionary | None = None,
    modules: bool = True,
    hypertree: bool = True,
) -> Maintainer:
    """Instantiate the algorithm called `name` for an analysed program.

    `modules` selects the tc/stc modules where the algorithm supports them
    (`Maintainer.supports_modules`); other algorithms ignore it. `hypertree`
    evaluates cyclic rules over hypertree decompositions (all algorithms).
    """
    cls = ALGORITHMS.get(name)
    if cls is None:
        raise AlgorithmError(
            f"unknown algorithm '{name}'; choose one of: {', '.join(sorted(ALGORITHMS))}"
        )
    return cls(analysis, dictionary, modules=modules, hypertree=hypertree)


__all__ = ["ALGORITHMS", "Maintainer", "Report", "create"]
