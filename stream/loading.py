"""What a job loads from its configuration: its reasoner and the shared `--facts`.

Used by the driver (stream.job) and by the engine hosts of a keyed job (stream.key_engines).
"""

from __future__ import annotations

from collections.abc import Callable

from fluxmat.connectors.files import read_facts
from fluxmat.connectors.programs import build_reasoner
from fluxmat.engine import Reasoner


def load_reasoner(cfg, log: Callable[[str], None]) -> Reasoner:
    """The job's reasoner: its program (with `--ontology` rules), no facts yet."""
    return build_reasoner(cfg.program or None, cfg.ontology, cfg.engine, cfg.owl_rules,
                          warn=lambda line: log(f"warning: {line}"))


def shared_facts(cfg, reasoner: Reasoner) -> list[tuple]:
    """The `--facts` files' facts (with `--partition-by`: shared by every key)."""
    return [f for path in cfg.facts for f in read_facts(path, reasoner.prefixes, cfg.facts_format)]
