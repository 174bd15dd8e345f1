"""Today's engine through the bake-off interface: `engine.Reasoner` with fd-counting.

The bake-off rules become program text with predicates renamed `p0, p1, ...`
and constants as their int ids, so the engine holds the same facts as the
other candidates (int term ids; the structure of the program, hence its
analysis, modules and plans, is the LUBM program's own). An update is one
`Reasoner.update` (the whole netted batch as one update, run to quiescence).

Snapshot: the engine's fully dynamic state as the stream stores it in Redis
(engine.fd.snapshot, format 2: facts, birth stamps, the derivation log), here
written to one local JSON file instead of Redis; restore reads it and calls
`Reasoner.restore`, as a restarted job does after reading Redis.
"""

from __future__ import annotations

import json

import numpy as np

from fluxmat.engine import EngineOptions, Reasoner
from fluxmat.engine.fd.snapshot import StateSnapshot


def program_text(rules: list) -> tuple[str, dict[str, str]]:
    """The rules as fluxmat program text, and engine predicate name -> bake-off predicate."""
    names: dict[str, str] = {}

    def pred(p: str) -> str:
        if p not in names:
            names[p] = f"p{len(names)}"
        return names[p]

    def atom(a) -> str:
        p, terms = a
        args = ", ".join(f"V{v}" if kind == "var" else str(v) for kind, v in terms)
        return f"{pred(p)}({args})"

    lines = [f"{atom(r.head)} :- {', '.join(map(atom, r.body))}." for r in rules]
    return "\n".join(lines) + "\n", {v: k for k, v in names.items()}


class CurrentCore:
    """Today's engine (fd-counting) behind the bake-off interface."""

    name = "current"

    def __init__(self, rules: list, arities: dict[str, int]) -> None:
        self.text, self.back = program_text(rules)
        self.names = {v: k for k, v in self.back.items()}
        for p in arities:  # predicates without rules keep their name's slot too
            if p not in self.names:
                self.names[p] = f"p{len(self.names)}"
                self.back[self.names[p]] = p
        self.reasoner = Reasoner.from_text(self.text, options=EngineOptions("fd-counting"), source="<bakeoff>")

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

    def nbytes(self) -> int | None:
        return None  # Python objects: see the process's RSS growth instead

    def save(self, path: str) -> None:
        ch = self.reasoner.export_changes()
        with open(path, "w", encoding="utf-8") as out:
            json.dump({"meta": ch.meta, "explicit": [k for k, v in ch.explicit.items() if v],
                       "facts": {k: v for k, v in ch.facts.items() if v is not None},
                       "log": {k: v for k, v in ch.log.items() if v is not None}, "terms": ch.terms}, out)  # fmt: skip

    @classmethod
    def restore(cls, path: str, rules: list, arities: dict[str, int]) -> CurrentCore:
        core = cls(rules, arities)
        with open(path, encoding="utf-8") as f:
            s = json.load(f)
        core.reasoner.restore(StateSnapshot(s["meta"], s["explicit"], s["facts"], s["log"], s["terms"]))
        return core
