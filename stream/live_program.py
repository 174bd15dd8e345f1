"""The program in force in the streaming job: applied from a program message, kept with the committed state.

A program message (connectors.files.ProgramChange) is applied by the batch
processor (stream.batch) at its place in the batch; the program it leaves in
force is written with every commit, in the state's metadata:

* `program`: the program's text (`Reasoner.program_text`),
* `program_version`: 1 for the configured program, +1 per change,
* `program_history`: per change, its version and lines (`Reasoner.program_history`),
* `program_origin`: a digest of the configured program the changes started from.

On start (and when a batch is re-run from the store) the reasoner is rebuilt
from the stored program when the stored state *descends* from the configured
program: its `program_version` is above 1 and its `program_origin` is the
configured program's. Otherwise the configured reasoner is kept and the
fingerprint check decides as before (a state of another program is refused
with StateMismatch, "built for another program").
"""

from __future__ import annotations

import hashlib

from fluxmat.connectors.files import Update
from fluxmat.engine import Reasoner, Report, parse_program

STORED_SOURCE = "<stored program>"  # names the stored program's text in errors


def origin(program) -> str:
    """A digest of a program's text: what the stored program's changes started from."""
    return hashlib.sha256(str(program).encode("utf-8")).hexdigest()[:16]


def changeable(reasoner: Reasoner) -> bool:
    """Whether the job can change this reasoner's program (the arrays core, not over triples)."""
    return reasoner.core == "arrays" and not reasoner.triples


def program_meta(reasoner: Reasoner, start: str) -> dict[str, object]:
    """The state metadata that names the program in force (module docstring)."""
    return {"program": reasoner.program_text(), "program_version": reasoner.program_version,
            "program_history": list(reasoner.program_history), "program_origin": start}  # fmt: skip


def descends(meta: dict, start: str) -> bool:
    """Whether a stored state's program is a changed version of the configured program (digest `start`)."""
    return int(meta.get("program_version") or 1) > 1 and meta.get("program_origin") == start


def rebuilt(reasoner: Reasoner, meta: dict) -> Reasoner:
    """A reasoner like `reasoner` (its options) for the stored program, at the stored version."""
    fresh = Reasoner(parse_program(str(meta["program"]), STORED_SOURCE), options=reasoner.options)
    fresh.program_version = int(meta["program_version"])
    fresh.program_history = list(meta.get("program_history") or [])
    return fresh


def apply(reasoner: Reasoner, update: Update) -> Report:
    """Apply a program message (FluxmatError when it fails validation: nothing changed)."""
    change = update.program
    where = update.where or "<program>"
    return reasoner.change_program(change.add, change.delete, change.whole, where)
