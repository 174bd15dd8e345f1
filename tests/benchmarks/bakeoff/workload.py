"""The bake-off's fixed workload: LUBM data and program, dictionary-encoded to int64 columns.

The data and program are those of the per-batch processor benchmark
(tests/benchmarks/batch_processor.py): the corpus program `programs/lubm.dlog`
(read through `workloads.corpus_dir`, as every benchmark reads it) over
`lubm_gen.generate`, minus `HELD_OUT` held-out facts, with updates of 1 add +
1 delete made by the pipeline benchmark's `UpdateMaker` (fixed seed). LUBM-1
is `generate(1, 2)` as that benchmark's default (one university, two
departments); `universities=N > 1` is `generate(N)` (15-25 departments each).

Every constant of the generated data gets an int64 term id (`Dictionary`);
facts travel as `{pred: int64 array (n, arity)}`. Rules are plain tuples:
`Rule(head=(pred, terms), body=((pred, terms), ...))` with a term `("var", name)`
or `("const", id)`, the form tests/benchmarks/bakeoff/core_api.py names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from fluxmat.engine import Program, parse_program
from fluxmat.engine.lexer import read_source
from fluxmat.engine.syntax import Const, Negation, Var

Facts = dict[str, np.ndarray]
PyFacts = list[tuple]


class Rule(NamedTuple):
    head: tuple[str, tuple]
    body: tuple[tuple[str, tuple], ...]


class Dictionary:
    """Term <-> int64 id (ids from 0 in order of first sight)."""

    def __init__(self) -> None:
        self.ids: dict[object, int] = {}
        self.values: list[object] = []

    def intern(self, value: object) -> int:
        i = self.ids.get(value)
        if i is None:
            i = self.ids[value] = len(self.values)
            self.values.append(value)
        return i

    def encode(self, facts: PyFacts, arities: dict[str, int]) -> Facts:
        """Python facts `(pred, *values)` as int64 columns per predicate."""
        rows: dict[str, list] = {}
        for f in facts:
            rows.setdefault(f[0], []).append([self.intern(v) for v in f[1:]])
        return {p: np.asarray(r, dtype=np.int64).reshape(len(r), arities[p]) for p, r in rows.items()}

    def decode(self, facts: dict[str, set[tuple[int, ...]]]) -> set[tuple]:
        """Int facts per predicate as Python facts."""
        vals = self.values
        return {(p, *(vals[i] for i in t)) for p, ts in facts.items() for t in ts}


def convert(program: Program, dictionary: Dictionary) -> tuple[list[Rule], dict[str, int]]:
    """The engine's parsed program as bake-off rules and arities (positive programs only)."""

    def term(t):
        if isinstance(t, Var):
            return ("var", t.name)
        if isinstance(t, Const):
            return ("const", dictionary.intern(t.value))
        raise ValueError(f"unsupported term {t} (the bake-off takes plain Datalog)")

    rules, arities = [], {}
    for r in program.rules:
        body = []
        for lit in r.body:
            if isinstance(lit, Negation) or not hasattr(lit, "pred"):
                raise ValueError(f"unsupported literal {lit} (the bake-off takes positive programs)")
            body.append((lit.pred, tuple(map(term, lit.args))))
            arities[lit.pred] = len(lit.args)
        rules.append(Rule((r.head.pred, tuple(map(term, r.head.args))), tuple(body)))
        arities[r.head.pred] = len(r.head.args)
    return rules, arities


@dataclass
class Workload:
    """A program, its explicit facts and a source of updates, all encoded."""

    text_path: str
    program: Program
    rules: list[Rule]
    arities: dict[str, int]
    dictionary: Dictionary
    initial: PyFacts
    maker: object  # pipeline.UpdateMaker
    label: str
    extra: dict = field(default_factory=dict)

    def encode(self, facts: PyFacts) -> Facts:
        for f in facts:
            self.arities.setdefault(f[0], len(f) - 1)
        return self.dictionary.encode(facts, self.arities)

    def batch(self, updates: int) -> tuple[PyFacts, PyFacts, int]:
        """`updates` updates of 1 add + 1 delete, netted: (added, deleted, fact operations in the updates)."""
        adds: dict[tuple, None] = {}
        dels: dict[tuple, None] = {}
        for _ in range(updates):
            add, dele = self.maker.make(1, 1)
            for f in dele:
                if f in adds:
                    del adds[f]
                else:
                    dels[f] = None
            for f in add:
                if f in dels:
                    del dels[f]
                else:
                    adds[f] = None
        return list(adds), list(dels), 2 * updates


def lubm_program_path() -> str:
    """Where the benchmarks read the corpus program `lubm.dlog`."""
    from tests.benchmarks.pipeline import PROGRAM
    from tests.benchmarks.workloads import corpus_dir

    return str(corpus_dir() / PROGRAM)


def lubm(universities: int = 1, departments: int | None = None, held_out: int | None = None) -> Workload:
    """LUBM-N as the per-batch processor benchmark makes it (see the module docstring).

    `held_out` (default the benchmark's `HELD_OUT`, 300) bounds how far a batch's
    net change can go: the adds are held-out or earlier deleted facts, so a
    batch of N updates nets to at most about `held_out` adds and as many deletes.
    """
    from tests.benchmarks.lubm_gen import generate
    from tests.benchmarks.pipeline import HELD_OUT, UpdateMaker

    path = lubm_program_path()
    program = parse_program(read_source(path), str(path))
    if departments is None and universities == 1:
        departments = 2
    data = generate(universities, departments, prefixes=dict(program.prefixes))
    return _workload(path, program, data, f"lubm_gen.generate({universities}, {departments})",
                     UpdateMaker(data, HELD_OUT if held_out is None else held_out))  # fmt: skip


def _workload(path: str, program: Program, data: PyFacts, label: str, maker) -> Workload:
    d = Dictionary()
    rules, arities = convert(program, d)
    for f in data:
        arities.setdefault(f[0], len(f) - 1)
        for v in f[1:]:
            d.intern(v)
    return Workload(path, program, rules, arities, d, list(maker.initial), maker, label)
