"""The Illich & Glimm update-stream corpus as the tests read it: streams, programs, updates, reference states."""

from __future__ import annotations

import functools
import os
from pathlib import Path

from fluxmat.connectors.files import read_updates
from fluxmat.engine import Reasoner
from tests.support.shared import corpus_dir

FULL = bool(os.environ.get("FLUXMAT_FULL_CORPUS"))


CORPUS = corpus_dir(full=FULL)


MISSING = (
    f"Illich & Glimm corpus incomplete: expected streams/ and programs/ in {CORPUS} "
    "(tests/data/illich-glimm is part of the repository; FLUXMAT_CORPUS names the whole "
    "corpus for the full run)"
)


def stream_id(stream: Path) -> str:
    return f"{stream.parent.parent.name}/{stream.parent.name}/{stream.stem}"


def program_of(kb: str) -> Path:
    return CORPUS / "programs" / f"{kb}.dlog"


@functools.cache
def updates_of(stream: Path) -> tuple:
    prefixes = Reasoner.from_file(program_of(stream.parent.name), "remat").prefixes
    updates = tuple(read_updates(stream, prefixes))
    assert updates, f"{stream}: empty stream"
    assert not updates[0].delete, f"{stream}: the initial line deletes facts"
    return updates


@functools.cache
def reference_state(stream: Path) -> frozenset:
    """The final materialisation of `remat` replaying the stream."""
    r = Reasoner.from_file(program_of(stream.parent.name), "remat", modules=False)
    updates = updates_of(stream)
    r.load(updates[0].add)
    for u in updates[1:]:
        r.update(u.add, u.delete)
    return frozenset(r.facts())
