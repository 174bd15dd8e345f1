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

import numpy as np

from fluxmat.engine import EngineOptions, Reasoner
from tests.benchmarks.bakeoff.current import program_text

OPTIONS = EngineOptions(core="arrays", algorithm="counting")


class DoorCore:
    """The engine's arrays core behind the bake-off interface (see the module docstring)."""

    name = "door"

    def __init__(self, rules: list, arities: dict[str, int]) -> None:
        self.text, self.back = program_text(rules)
        self.names = {v: k for k, v in self.back.items()}
        for p in arities:
            if p not in self.names:
                self.names[p] = f"p{len(self.names)}"
                self.back[self.names[p]] = p
        self.reasoner = Reasoner.from_text(self.text, options=OPTIONS, source="<bakeoff>")

    @classmethod
    def warm(cls) -> None:
        """Load (or compile) every kernel: a tiny program with recursion, a closure and a join."""
        text = ("c(X, Y) :- e(X, Y).\nc(X, Z) :- c(X, Y), e(Y, Z).\ns(X, Y) :- e(X, Y).\n"
                "s(X, Y) :- s(Y, X).\ns(X, Z) :- s(X, Y), s(Y, Z).\nd(X) :- c(X, X), e(X, 1).\n")  # fmt: skip
        r = Reasoner.from_text(text, options=OPTIONS)
        r.load([("e", 0, 1), ("e", 1, 2), ("e", 2, 0)])
        r.update([("e", 4, 4)], [("e", 0, 1)])

    def _py(self, facts: dict[str, np.ndarray]) -> list[tuple]:
        return [(self.names[p], *row) for p, a in facts.items() for row in a.tolist()]

    def load(self, facts: dict[str, np.ndarray]) -> None:
        self.reasoner.load(self._py(facts))

    def update(self, add: dict[str, np.ndarray], delete: dict[str, np.ndarray]) -> tuple[int, int]:
        report = self.reasoner.update(self._py(add), self._py(delete))
        return report.added, report.removed

    def facts(self) -> dict[str, set[tuple[int, ...]]]:
        out: dict[str, set] = {}
        for f in self.reasoner.facts():
            out.setdefault(self.back[f[0]], set()).add(tuple(f[1:]))
        return out

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
