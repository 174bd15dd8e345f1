"""fluxmat: a streaming incremental Datalog reasoner.

The public library API is importable from here (`from fluxmat import Reasoner`); the parts
live in subpackages: `fluxmat.engine` (the reasoning core, no infrastructure),
`fluxmat.connectors` (Kafka, Redis, files, RDF), `fluxmat.stream` (the Spark job),
`fluxmat.ops` (the `fluxmat` command, metrics, dashboard) and `fluxmat.client` (producers
and delta followers, importable without Spark or the engine).

Names are resolved lazily, so `import fluxmat.client` does not import the engine.
"""

from __future__ import annotations

import importlib
from typing import Any

_ENGINE_NAMES = (
    "ALGORITHMS", "FULLY_DYNAMIC", "AlgorithmError", "EngineOptions", "FactLimitExceeded",
    "FluxmatError", "Iri", "LimitExceeded", "Limits", "ParseError", "Program", "Reasoner", "Report",
    "UpdateError", "WorkLimitExceeded", "parse_facts", "parse_program",
)  # fmt: skip

__all__ = [*_ENGINE_NAMES, "__version__"]

def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import version

        return version("fluxmat")
    if name in _ENGINE_NAMES:
        return getattr(importlib.import_module("fluxmat.engine"), name)
    raise AttributeError(f"module 'fluxmat' has no attribute {name!r}")
