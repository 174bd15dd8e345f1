"""Regression on the Illich & Glimm update-stream corpus.

Every stream `streams/<case>/<kb>/<run>.jsonl` (kb in path, sequence, lubm,
dbpedia) is replayed under every maintenance algorithm. The first line of a
stream is the initial dataset (`load`), every further line one `update`. Checked:

* the final materialisation equals that of `remat` replaying the same stream;
* after every `CHECK_EVERY`-th update (default 1: every update; env
  FLUXMAT_CORPUS_CHECK_EVERY) and the last one, the materialisation equals a
  fresh `remat` load of the explicit facts so far, and the maintainer's explicit
  facts are exactly those the stream implies;
* after every update the report's `added`/`removed` counts equal the actual
  change of the materialisation.

The algorithms with tc/stc modules (remat, dredc) also run with generic
evaluation only (`<algorithm>/generic`); the oracle is generic remat (lubm and
dbpedia have transitive and symmetric-transitive properties).

`counting` is skipped on recursive programs (it rejects them by design; that
rejection is itself tested). The default run covers run0 of `overlap` and
`random` for each kb; the rest is `slow` and runs only with
FLUXMAT_FULL_CORPUS=1.

The default run reads the part of the corpus vendored under
`tests/data/illich-glimm` (nothing outside the repository). The full run reads
the whole corpus from the directory named by FLUXMAT_CORPUS when that is set,
else the vendored part (its other schedules and runs).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

from fluxmat.engine import (
    ALGORITHMS,
    AlgorithmError,
    EngineOptions,
    Reasoner,
    analyse,
    parse_program,
)
from tests.support.corpus import (
    CORPUS,
    FULL,
    MISSING,
    program_of,
    reference_state,
    stream_id,
    updates_of,
)

KBS = ("path", "sequence", "lubm", "dbpedia")
DEFAULT_CASES = ("overlap", "random")
DEFAULT_RUN = "run0-"
CHECK_EVERY = int(os.environ.get("FLUXMAT_CORPUS_CHECK_EVERY", "1"))


def _streams() -> list[Path]:
    return sorted(p for kb in KBS for p in (CORPUS / "streams").glob(f"*/{kb}/*.jsonl"))


def _is_default(stream: Path) -> bool:
    case = stream.parent.parent.name
    return case in DEFAULT_CASES and stream.name.startswith(DEFAULT_RUN)


@functools.cache
def _recursive(kb: str) -> bool:
    program = program_of(kb)
    return analyse(parse_program(program.read_text(encoding="utf-8"), str(program))).is_recursive


SLOW = [
    pytest.mark.slow,
    pytest.mark.skipif(not FULL, reason="full corpus: set FLUXMAT_FULL_CORPUS=1"),
]


def _params() -> list:
    out = []
    for stream in _streams():
        marks = [] if _is_default(stream) else SLOW
        for alg in ALGORITHMS:
            out.append(pytest.param(stream, alg, marks=marks, id=f"{stream_id(stream)}-{alg}"))
            if ALGORITHMS[alg].supports_modules:
                out.append(
                    pytest.param(
                        stream, f"{alg}/generic", marks=marks, id=f"{stream_id(stream)}-{alg}/generic"
                    )
                )
    return out


def _fresh(kb: str, explicit: set[tuple]) -> set[tuple]:
    r = Reasoner.from_file(program_of(kb), "remat", modules=False)
    r.load(explicit)
    return r.facts()


def test_corpus_present():
    assert _streams(), MISSING
    for kb in KBS:
        assert program_of(kb).is_file(), f"{program_of(kb)}: program missing"


def test_default_subset_covers_every_kb():
    covered = {(s.parent.parent.name, s.parent.name) for s in _streams() if _is_default(s)}
    assert covered == {(c, kb) for c in DEFAULT_CASES for kb in KBS}


@pytest.mark.parametrize("kb", KBS)
def test_counting_rejects_recursive_programs(kb):
    objects = EngineOptions(core="objects")  # the arrays core's counting runs DRed^c for recursive components
    if not _recursive(kb):
        Reasoner.from_file(program_of(kb), "counting", options=objects)
        return
    with pytest.raises(AlgorithmError, match="recursive"):
        Reasoner.from_file(program_of(kb), "counting", options=objects)


@pytest.mark.parametrize(("stream", "algorithm"), _params())
def test_stream(stream: Path, algorithm: str):
    kb = stream.parent.name
    if algorithm == "counting" and _recursive(kb):
        pytest.skip(f"counting handles only non-recursive programs; {kb} is recursive")
    updates = updates_of(stream)
    algorithm, _, generic = algorithm.partition("/")
    r = Reasoner.from_file(program_of(kb), algorithm, modules=not generic)
    explicit = set(updates[0].add)
    r.load(updates[0].add)
    current = r.facts()
    assert current == _fresh(kb, explicit), f"{stream_id(stream)}: initial load differs from remat"
    last = len(updates) - 1
    for i, u in enumerate(updates[1:], start=1):
        report = r.update(u.add, u.delete)
        explicit = (explicit - set(u.delete)) | set(u.add)
        before, current = current, r.facts()
        where = f"{stream_id(stream)} under {algorithm}, update {i} ({u.where})"
        assert (report.added, report.removed) == (
            len(current - before),
            len(before - current),
        ), f"{where}: report counts disagree with the actual change"
        if i % CHECK_EVERY == 0 or i == last:
            assert set(r.maintainer.explicit()) == explicit, f"{where}: explicit facts differ"
            expected = _fresh(kb, explicit)
            assert current == expected, (
                f"{where}: differs from a fresh remat: missing {sorted(expected - current, key=repr)[:5]}, "
                f"extra {sorted(current - expected, key=repr)[:5]}"
            )
    assert current == reference_state(stream), f"{stream_id(stream)} under {algorithm}: final state differs"


def test_bf_add_and_delete_in_one_update():
    """Minimal repro distilled from batch/path/run0-100-10-200, update 35."""
    program = "path(X,Y) :- edge(X,Y) . path(X,Z) :- edge(X,Y), path(Y,Z) ."
    edges = [
        ("103", "108"), ("103", "3"), ("108", "37"), ("25", "108"), ("3", "98"), ("30", "48"),
        ("30", "78"), ("37", "30"), ("48", "96"), ("6", "98"), ("78", "6"), ("96", "25"),
    ]  # fmt: skip
    add, delete = [("edge", "108", "3")], [("edge", "78", "6")]
    states = {}
    for algorithm in ("remat", "bf"):
        r = Reasoner.from_text(program, algorithm)
        r.load([("edge", a, b) for a, b in edges])
        r.update(add, delete)
        states[algorithm] = r.facts()
    # path(30, 98) survives via 30-48-96-25-108-3-98 (108->3 is the added edge)
    assert ("path", "30", "98") in states["remat"]
    assert states["bf"] == states["remat"]
