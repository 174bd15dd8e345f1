"""The arrays core through the door: `Reasoner(..., options=EngineOptions(core="arrays", algorithm="counting"))`.

The same renamed program text and int term ids as the `current` candidate
(tests/benchmarks/bakeoff/current.py), so the two differ only in the core.
Facts cross the door as Python tuples, as every caller of `Reasoner` gives
them: the cost of encoding them into the arrays core's term ids (the engine's
dictionary) is part of every number. An update is one `Reasoner.update`.

Snapshot: the explicit facts (JSON); restore loads them into a new reasoner,
i.e. recomputes the materialisation (the arrays core has no state export yet).
"""

from __future__ import annotations

import json

from fluxmat.engine import EngineOptions, Reasoner
from fluxmat.engine.compact import small
from tests.benchmarks.bakeoff.current import CurrentCore

OPTIONS = EngineOptions(core="arrays", algorithm="counting")


class DoorCore(CurrentCore):
    """The engine's arrays core behind the bake-off interface (see the module docstring).

    The `current` candidate's renaming and conversions, with the arrays core's reasoner.
    """

    name = "door"

    def __init__(self, rules: list, arities: dict[str, int]) -> None:
        super().__init__(rules, arities)
        self.reasoner = Reasoner.from_text(self.text, options=OPTIONS, source="<bakeoff>")

    @classmethod
    def warm(cls) -> None:
        """Load (or compile) every kernel and the small-update interpreter (engine.compact.small)."""
        text = ("c(X, Y) :- e(X, Y).\nc(X, Z) :- c(X, Y), e(Y, Z).\ns(X, Y) :- e(X, Y).\n"
                "s(X, Y) :- s(Y, X).\ns(X, Z) :- s(X, Y), s(Y, Z).\nd(X) :- c(X, X), e(X, 1).\n")  # fmt: skip
        small.prepare(wait=True)  # in this process: the update below runs in one call
        r = Reasoner.from_text(text, options=OPTIONS)
        r.load([("e", 0, 1), ("e", 1, 2), ("e", 2, 0)])
        r.update([("e", 4, 4)], [("e", 0, 1)])

    def nbytes(self) -> int:
        return self.reasoner.sizes()["bytes"]

    def save(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as out:
            json.dump(sorted(self.reasoner.explicit()), out)

    @classmethod
    def restore(cls, path: str, rules: list, arities: dict[str, int]) -> DoorCore:
        core = cls(rules, arities)
        with open(path, encoding="utf-8") as f:
            core.reasoner.load(tuple(x) for x in json.load(f))
        return core
