"""fluxmat's reasoning engine: language, analysis, storage, evaluation, maintenance.

Contract: pure Python (plus numeric libraries); it imports no Spark, Kafka or
Redis and never prints. Stages, each with its own type and printer:
text -> `Program` (engine.parser / engine.syntax) -> `Analysis` (engine.analysis)
-> compiled `Plan`s (engine.plans) -> execution over indexed relations
(engine.storage, engine.evaluate) driven by a maintenance algorithm behind the
`Maintainer` interface (engine.maintainer; the algorithms in engine.algorithms and
engine.fd, specialised modules in engine.modules). `Reasoner` (engine.reasoner),
built from one `EngineOptions`, is the one door the CLI, the stream and the
dashboard use. docs/algorithms.md describes the layout and the algorithms.

Not here: reading or writing Kafka, Redis or files of facts (connectors), the
streaming job (stream), the CLI and operations (ops).
"""

from __future__ import annotations

from fluxmat.engine.algorithms import ALGORITHMS, FULLY_DYNAMIC, Maintainer, Report, create
from fluxmat.engine.analysis import Analysis, analyse
from fluxmat.engine.compact.cache import (
    choose_cache_dir,  # sets a writable numba cache folder (no numba import)
)
from fluxmat.engine.datatypes import VALUE_SPACES
from fluxmat.engine.equality import MODES as EQUALITY_MODES
from fluxmat.engine.equality import SAME_AS
from fluxmat.engine.errors import (
    AlgorithmError,
    AnalysisError,
    FluxmatError,
    InputMemoryError,
    ParseError,
    UpdateError,
)
from fluxmat.engine.fd.change_columns import ChangeColumns
from fluxmat.engine.fd.columns import StateColumns
from fluxmat.engine.fd.records import PointRows
from fluxmat.engine.fd.snapshot import StateChanges, StateDamaged, StateMismatch, StateSnapshot
from fluxmat.engine.feed import Fed, FeedResult
from fluxmat.engine.lexer import read_source
from fluxmat.engine.limits import FactLimitExceeded, LimitExceeded, Limits, WorkLimitExceeded
from fluxmat.engine.options import EngineOptions
from fluxmat.engine.parser import parse_facts, parse_program
from fluxmat.engine.reasoner import Reasoner, atom_to_fact
from fluxmat.engine.storage import paused_gc
from fluxmat.engine.syntax import Iri, Program
from fluxmat.engine.update_columns import FactColumns, UpdateColumns
from fluxmat.engine.wire import JsonFacts, fact_from_json

__all__ = [
    "ALGORITHMS", "EQUALITY_MODES", "FULLY_DYNAMIC", "SAME_AS", "AlgorithmError", "Analysis", "AnalysisError", "ChangeColumns",
    "EngineOptions", "FactColumns",
    "FactLimitExceeded", "Fed", "FeedResult", "FluxmatError", "InputMemoryError", "Iri", "JsonFacts", "LimitExceeded", "Limits",
    "Maintainer", "ParseError", "PointRows", "Program", "Reasoner", "Report", "StateChanges", "StateDamaged", "StateMismatch",
    "StateColumns", "StateSnapshot", "UpdateColumns", "UpdateError", "VALUE_SPACES", "WorkLimitExceeded", "analyse", "atom_to_fact", "choose_cache_dir", "create",
    "fact_from_json", "parse_facts", "parse_program", "paused_gc", "read_source",
]  # fmt: skip
