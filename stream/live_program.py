"""The program in force in the streaming job: applied from a program message, kept with the committed state.

A program message (connectors.files.ProgramChange) is applied by the batch
processor (stream.batch) at its place in the batch; the program it leaves in
force is written with every commit, in the state's metadata:

* `program`: the program's text (`Reasoner.program_text`),
* `program_version`: 1 for the configured program, +1 per change,
* `program_history`: per change, its version and lines (`Reasoner.program_history`),
* `program_origin`: a digest of the configured program the changes started from.

On start (and when a batch is re-run from the store) the configured program
meets the stored one (`adopted`):

* the stored state *descends* from the configured program (its
  `program_origin` is the configured program's digest): the reasoner is
  rebuilt from the stored program, at the stored version;
* the configured program *is* the stored program (the operator edited the
  file to match): it is kept, at the stored version and history;
* a changed state (`program_version` above 1) of any other program is refused
  with StateMismatch naming both (`refusal`): a redeployed job never changes
  the program by itself -- a change is a program message, applied in order;
* otherwise the fingerprint check decides as before (a state of another
  program is refused with StateMismatch, "built for another program").
"""

from __future__ import annotations

import hashlib

from fluxmat.connectors.files import Update
from fluxmat.engine import Reasoner, Report, StateMismatch, parse_program

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


def adopted(reasoner: Reasoner, meta: dict, start: str) -> tuple[Reasoner, str]:
    """The reasoner and origin digest a job configured with `reasoner` (digest `start`) goes on with.

    See the module docstring; StateMismatch when a changed state meets another program.
    """
    stored = meta.get("program")
    if stored is None or not changeable(reasoner):
        return reasoner, start
    version = int(meta.get("program_version") or 1)
    if meta.get("program_origin") == start:
        return (rebuilt(reasoner, meta) if version != reasoner.program_version else reasoner), start
    if stored == reasoner.program_text():  # the configured file is the program in force
        reasoner.program_version = version
        reasoner.program_history = list(meta.get("program_history") or [])
        return reasoner, str(meta.get("program_origin") or start)
    if version > 1:
        raise StateMismatch(refusal(meta, reasoner))
    return reasoner, start


def refusal(meta: dict, reasoner: Reasoner) -> str:
    """Why a changed state is not taken by a job of another program: one line naming both."""
    version, source = int(meta["program_version"]), reasoner.program.source or "--program"
    return (f"the stored state was built for another program: it runs program version {version} "
            f"(digest {origin(meta['program'])}, changed from the program of digest {meta.get('program_origin')}), "
            f"and {source} (digest {origin(reasoner.program)}) is neither; to change the program of a running "
            f"job, send the change (fluxmat program apply {source} ...) to a job started with the stored "
            "program; to start over, use another namespace")  # fmt: skip


def apply(reasoner: Reasoner, update: Update, uid: object = None) -> Report:
    """Apply a program message (FluxmatError when it fails validation: nothing changed).

    `uid` becomes the reasoner's `last_id` (the batch's `through` when the change comes last).
    """
    change = update.program
    where = update.where or "<program>"
    return reasoner.change_program(change.add, change.delete, change.whole, where, id=uid)


# ------------------------------------------------------------------ keyed jobs
# A keyed job's program changes apply to every key, lazily: the driver keeps the program in force in
# the namespace's own state (`namespace_program`), each key's state keeps the version it is at, and a
# key catches up (`catch_up`) when it is next touched, before its rows of that batch.


def namespace_program(meta: dict) -> dict | None:
    """The program in force of a keyed namespace's state (None: still the configured program)."""
    if int(meta.get("program_version") or 1) <= 1 or meta.get("program") is None:
        return None
    return {k: meta[k] for k in ("program", "program_version", "program_history", "program_origin") if k in meta}


def changed_namespace(reasoner: Reasoner, current: dict | None, update: Update, start: str) -> dict:
    """The namespace's program meta after a program message (FluxmatError: invalid, nothing changed).

    `reasoner` is a reasoner of the configured program with no facts; the change is validated
    against the program in force (parse, safety, stratification, arities within the program), not
    against any key's facts (a key checks those when it catches up).
    """
    if current is not None:
        reasoner = rebuilt(reasoner, current)
    apply(reasoner, update)
    return program_meta(reasoner, str((current or {}).get("program_origin") or start))


def behind(reasoner: Reasoner, target: dict | None) -> bool:
    """Whether a key's reasoner is at an older program version than its namespace's (`target`)."""
    return target is not None and changeable(reasoner) and reasoner.program_version < int(target["program_version"])


def catch_up(reasoner: Reasoner, target: dict) -> Report:
    """Bring a key's reasoner to the namespace's program: the difference applied as one change."""
    report = reasoner.change_program(whole=str(target["program"]), source=STORED_SOURCE)
    reasoner.program_version = int(target["program_version"])
    reasoner.program_history = list(target.get("program_history") or [])
    return report
