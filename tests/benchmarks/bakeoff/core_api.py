"""The interface every bake-off candidate implements (tests/benchmarks/bakeoff/run.py drives it).

A candidate keeps the materialisation of a positive Datalog program over
int64 term ids and maintains it under updates. `update` must leave exactly
what evaluation from scratch over the new explicit facts gives; the harness
checks every candidate after every batch against the current engine
(`engine.Reasoner`, fd-counting) on the same decoded facts.
"""

from __future__ import annotations

from typing import Protocol

import numpy


class Core(Protocol):
    name: str

    def __init__(self, rules: list, arities: dict[str, int]) -> None: ...
        # rules: the parsed program's rules as produced by tests/benchmarks/bakeoff/workload.py:
        #   list of Rule(head=(pred, (terms...)), body=((pred, (terms...)), ...)) where a term is
        #   ("var", name) or ("const", int_id); LUBM's program is positive (no negation).
    def load(self, facts: dict[str, numpy.ndarray]) -> None: ...      # explicit facts, int64 (n, arity) per predicate; materialise
    def update(self, add: dict[str, numpy.ndarray], delete: dict[str, numpy.ndarray]) -> tuple[int, int]: ...  # (facts added to, removed from the materialisation)
    def facts(self) -> dict[str, set[tuple[int, ...]]]: ...           # the whole materialisation, for checking
    def nbytes(self) -> int: ...                                     # bytes held by its structures (numpy nbytes etc.)
    def save(self, path: str) -> None: ...                            # a local snapshot (binary, columnar)
    @classmethod
    def restore(cls, path: str, rules: list, arities: dict[str, int]) -> "Core": ...  # noqa: UP037
