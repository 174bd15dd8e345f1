"""The engine's options, one frozen value built once (from flags or environment) and handed down.

`EngineOptions` says which algorithm maintains the materialisation and how:
`modules` (the tc/stc/ltc modules where the algorithm supports them),
`hypertree` (cyclic rules over hypertree decompositions), `levels` (`dredc`
stops overdeletion at well-founded derivations), `equality` ("off", or
"rewrite": owl:sameAs as equality, engine.equality), and for the fully dynamic
algorithms how updates are fed (engine.feed): `schedule` ("interleaved", the
default: their processing overlaps; "sequential": each update to quiescence
before the next, as `fluxmat replay` does unless told otherwise),
`seed` (the fair scheduler's choices) and `budget` (units of work between two
submitted updates). `limits` bounds the work of one update and the size of the
materialisation (engine.limits). `core` says how facts are kept: "arrays"
(the default, engine.compact: int64 columns and numpy hash tables with
numba-compiled loops) or "objects" (Python sets and dicts: the reference core
the property tests use as their oracle, and the one whose fully dynamic
updates overlap within a batch).

Not here: parsing flags or environment variables (ops), the stream's options
(stream.job.JobConfig holds one of these).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fluxmat.engine.errors import FluxmatError
from fluxmat.engine.limits import NO_LIMITS, Limits

SCHEDULES = ("sequential", "interleaved")
CORES = ("objects", "arrays")


@dataclass(frozen=True)
class EngineOptions:
    """How the engine reasons (see the module docstring)."""

    algorithm: str = "dredc"
    modules: bool = True
    hypertree: bool = True
    levels: bool = True
    equality: str = "off"
    schedule: str = "interleaved"
    seed: int = 0
    budget: int = 1000
    limits: Limits = field(default=NO_LIMITS)
    core: str = "arrays"

    def __post_init__(self) -> None:
        if self.schedule not in SCHEDULES:
            raise FluxmatError(f"unknown schedule '{self.schedule}'; choose one of: {', '.join(SCHEDULES)}")
        if self.core not in CORES:
            raise FluxmatError(f"unknown core '{self.core}'; choose one of: {', '.join(CORES)}")
        if self.budget < 0:
            raise FluxmatError(f"the budget must be at least 0, got {self.budget}")

    @property
    def interleaved(self) -> bool:
        """Whether fully dynamic updates overlap (`schedule="interleaved"`)."""
        return self.schedule == "interleaved"
