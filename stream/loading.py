"""What a job loads from its configuration: its reasoner and the shared `--facts`.

Used by the driver (stream.job) and by the engine hosts of a keyed job (stream.key_engines).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

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


def stored_core(meta: dict) -> str | None:
    """The core that kept a stored state (None: nothing stored yet).

    A state written before states said their core was kept by the objects
    core (as engine.fd.snapshot's `check_core` reads it).
    """
    if meta.get("batch") is None:
        return None
    return str(meta.get("core") or "objects")


def settle_core(cfg, meta: dict, log: Callable[[str], None]):
    """`cfg` with the core of the stored state (its metadata `meta`) when the user chose no core.

    A namespace kept by the objects core before the arrays core became the
    default goes on with the objects core, saying so in one line; a core the
    user chose is kept (a state of the other core is then refused clearly).
    Equality runs on the arrays core only: with it, the stored objects state is
    refused as a chosen core's would be, not gone on with.
    """
    theirs = stored_core(meta)
    if cfg.core_given or theirs is None or theirs == cfg.core or cfg.equality != "off":
        return cfg
    log(f"the stored state of namespace {cfg.namespace!r} was kept by core={theirs}: the job goes on with "
        f"core={theirs} (no --core given; the default is core={cfg.core}); to move to core={cfg.core}, use "
        f"another --namespace (the job starts from --facts) or reset the state; --core {theirs} keeps it")
    return replace(cfg, core=theirs)
