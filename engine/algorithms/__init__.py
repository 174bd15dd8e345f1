"""Maintenance algorithms behind one interface, selectable by name (`ALGORITHMS`, `create`).

Every algorithm implements the `Maintainer` interface (engine.maintainer):
`load(facts)` computes mat(P, E); `update(add, delete)` maintains it and
returns a `Report`. This package holds `remat` and the classic algorithms, one
update at a time: `dred`, `counting`, `dredc` and `bf` maintain an update
stratum by stratum through the Delete/Rederive machinery of
engine.algorithms.stratified (a `Run` per update), `dredc` with levels
(engine.levels); equality by rewriting is engine.equality (`rewrite`, B/F~ in
`bfeq`).
The fully dynamic algorithms (`fd-dred`, `fd-counting`) are engine.fd; the
registry lists them too. All of them evaluate rules through the shared
evaluator and its single fixpoint loop (engine.evaluate).

Not here: parsing, analysis, plans, storage, specialised modules (engine.modules).
"""

from __future__ import annotations

from fluxmat.engine.algorithms.bf import BF
from fluxmat.engine.algorithms.counting import Counting
from fluxmat.engine.algorithms.dred import DRed
from fluxmat.engine.algorithms.dredc import DRedC
from fluxmat.engine.algorithms.remat import Remat
from fluxmat.engine.analysis import Analysis
from fluxmat.engine.equality import MODES
from fluxmat.engine.equality.bfeq import BFEq
from fluxmat.engine.equality.rewrite import Rewrite
from fluxmat.engine.errors import AlgorithmError
from fluxmat.engine.fd.policies import FDCounting, FDDRed
from fluxmat.engine.maintainer import Maintainer, Report
from fluxmat.engine.storage import Dictionary

ALGORITHMS: dict[str, type[Maintainer]] = {
    cls.name: cls for cls in (Remat, DRed, Counting, DRedC, BF, FDDRed, FDCounting)
}
FULLY_DYNAMIC = ("fd-dred", "fd-counting")  # whose updates can overlap (engine.fd, engine.feed)
EQUALITY_ALGORITHMS = ("remat", "dred", "dredc", "bf")  # those that accept equality="rewrite"


def check_equality(equality: str) -> None:
    """`AlgorithmError` unless `equality` is a known equality mode (either core)."""
    if equality not in MODES:
        raise AlgorithmError(f"unknown equality mode '{equality}'; choose one of: {', '.join(MODES)}")


def check_algorithm(name: str) -> None:
    """`AlgorithmError` unless `name` is a known algorithm (either core: the door checks it first)."""
    if name not in ALGORITHMS:
        raise AlgorithmError(
            f"unknown algorithm '{name}'; choose one of: {', '.join(sorted(ALGORITHMS))}"
        )


def create(
    name: str,
    analysis: Analysis,
    dictionary: Dictionary | None = None,
    modules: bool = True,
    hypertree: bool = True,
    equality: str = "off",
    levels: bool = True,
) -> Maintainer:
    """Instantiate the algorithm called `name` for an analysed program.

    `modules` selects the tc/stc modules where the algorithm supports them
    (`Maintainer.supports_modules`); other algorithms ignore it. `hypertree`
    evaluates cyclic rules over hypertree decompositions (all algorithms).
    `equality` is "off" (the default: `owl:sameAs` is an ordinary predicate) or
    "rewrite" (equality by rewriting to representatives, engine.equality: `bf`
    is B/F~, the others recompute when the classes can change; only the
    algorithms in `EQUALITY_ALGORITHMS` accept it). `levels` lets
    `dredc` stop overdeletion at well-founded derivations (engine.algorithms.dredc);
    other algorithms ignore it.
    """
    check_equality(equality)
    check_algorithm(name)
    cls = ALGORITHMS[name]
    if equality == "rewrite":
        if name not in EQUALITY_ALGORITHMS:
            raise AlgorithmError(
                f"algorithm '{name}' does not support equality=rewrite; "
                f"choose one of: {', '.join(EQUALITY_ALGORITHMS)}"
            )
        if name == "bf":  # B/F~: equality changes are incremental
            return BFEq(analysis, dictionary, hypertree=hypertree)
        return Rewrite(analysis, cls, dictionary, modules, hypertree, levels=levels)
    return cls(analysis, dictionary, modules=modules, hypertree=hypertree, levels=levels)


__all__ = [
    "ALGORITHMS", "EQUALITY_ALGORITHMS", "FULLY_DYNAMIC", "Maintainer", "Report", "check_algorithm", "create",
]  # fmt: skip
