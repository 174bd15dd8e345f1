"""fluxmat's reasoning engine: language, analysis, storage, evaluation, maintenance.

Contract: pure Python (plus numeric libraries); it imports no Spark, Kafka or
Redis and never prints. Stages, each with its own type and printer:
text -> `Program` (engine.parser / engine.syntax) -> `Analysis` (engine.analysis)
-> compiled `Plan`s (engine.plans) -> execution over indexed relations
(engine.storage, engine.evaluate) driven by a maintenance algorithm behind the
`Maintainer` interface (engine.maintainer; the algorithms in engine.maintain and
engine.fd, specialised modules in engine.modules). `Reasoner` is the facade used
by the CLI. engine/ALGORITHMS.md describes the layout and the algorithms.

Not here: reading or writing Kafka, Redis or files of facts (connectors), the
streaming job (stream), the CLI and operations (ops).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from engine.analysis import Analysis, analyse
from engine.errors import AlgorithmError, AnalysisError, FluxmatError, ParseError, UpdateError
from engine.lexer import read_source
from engine.limits import FactLimitExceeded, LimitExceeded, Limits, WorkLimitExceeded
from engine.maintain import ALGORITHMS, Maintainer, Report, create
from engine.parser import fact_from_json, parse_facts, parse_program
from engine.printer import FactPrinter
from engine.syntax import Atom, Iri, Program

__all__ = [
    "ALGORITHMS", "AlgorithmError", "Analysis", "AnalysisError", "FactLimitExceeded",
    "FluxmatError", "Iri", "LimitExceeded", "Limits", "Maintainer", "ParseError", "Program",
    "Reasoner", "Report", "UpdateError", "WorkLimitExceeded", "analyse", "atom_to_fact", "create",
    "fact_from_json", "parse_facts", "parse_program", "read_source",
]  # fmt: skip


def atom_to_fact(atom: Atom) -> tuple:
    """A ground AST atom as a Python fact `(pred, *values)`."""
    return (atom.pred, *(a.value for a in atom.args))  # type: ignore[union-attr]


class Reasoner:
    """A program, its analysis and one maintainer, with convenient I/O.

    >>> r = Reasoner.from_text("path(X, Y) :- edge(X, Y). path(X, Z) :- path(X, Y), edge(Y, Z).")
    >>> _ = r.load([("edge", "a", "b"), ("edge", "b", "c")])
    >>> r.lines()[-1]
    'path(b, c).'
    """

    def __init__(
        self,
        program: Program,
        algorithm: str = "dredc",
        modules: bool = True,
        hypertree: bool = True,
        equality: str = "off",
        levels: bool = True,
    ):
        """A reasoner running `algorithm` over `program`.

        `modules` enables the tc/stc modules where `algorithm` supports them;
        `hypertree` evaluates cyclic rules over hypertree decompositions;
        `equality="rewrite"` treats owl:sameAs as equality (engine.equality; with
        `bf` that is B/F~, incremental under equality changes);
        `levels` lets `dredc` stop overdeletion at well-founded derivations;
        `facts()` is then the expanded materialisation, `rewritten_lines()` the
        compact one.
        """
        self.program = program
        self.analysis = analyse(program)
        self.maintainer: Maintainer = create(
            algorithm, self.analysis, modules=modules, hypertree=hypertree, equality=equality,
            levels=levels,
        )
        self.prefixes = dict(program.prefixes)
        self.printer = FactPrinter(program.prefixes)

    @classmethod
    def from_text(
        cls,
        text: str,
        algorithm: str = "dredc",
        source: str = "<input>",
        modules: bool = True,
        hypertree: bool = True,
        equality: str = "off",
        levels: bool = True,
    ) -> Reasoner:
        return cls(parse_program(text, source), algorithm, modules, hypertree, equality, levels)

    @classmethod
    def from_file(
        cls,
        path: str | Path,
        algorithm: str = "dredc",
        modules: bool = True,
        hypertree: bool = True,
        equality: str = "off",
        levels: bool = True,
    ) -> Reasoner:
        text = read_source(path)
        return cls(
            parse_program(text, str(path)), algorithm, modules, hypertree, equality, levels
        )

    def program_facts(self) -> list[tuple]:
        return [atom_to_fact(a) for a in self.program.facts]

    def load(self, facts: Iterable[tuple] = ()) -> Report:
        """E := the program's own facts plus `facts`; compute the materialisation."""
        return self.maintainer.load([*self.program_facts(), *facts])

    def update(self, add: Iterable[tuple] = (), delete: Iterable[tuple] = ()) -> Report:
        return self.maintainer.update(add, delete)

    def facts(self) -> set[tuple]:
        return set(self.maintainer.facts())

    def lines(self) -> list[str]:
        return self.printer.lines(self.maintainer.facts())

    def rewritten_lines(self) -> list[str]:
        """The compact materialisation (equality="rewrite" only): normal facts only."""
        rewritten = getattr(self.maintainer, "rewritten", None)
        if rewritten is None:
            raise AlgorithmError("rewritten facts exist only with equality=rewrite")
        return self.printer.lines(rewritten())
