"""The fully dynamic algorithms on the Illich & Glimm update-stream corpus.

Every stream `streams/<case>/<kb>/<run>.jsonl` for kb in path, sequence, lubm,
dbpedia is replayed under `fd-dred` and `fd-counting` with INTERLEAVED schedules:
each update is submitted while earlier ones may still be propagating (a seeded
random budget of 0..B units between submits; budget 0 = several submits before
any step), then the engine runs to quiescence. Checked: the final
materialisation equals `remat` replaying the stream, the explicit facts equal
those the stream implies, and whenever the engine is quiescent between submits
the consistency-point delta is exact. The `overlap` case (consecutive updates
share added/deleted facts) matters most: there a newer update re-adds or
re-deletes what an older, still running one touches.

Default run (~15 s, over the corpus part in tests/data/illich-glimm): every `overlap` stream
of every kb under five schedules,
and run0 of `random` under two. Everything else is `slow` and needs FLUXMAT_FULL_CORPUS=1
(as tests/engine/test_corpus.py).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from fluxmat.engine import Reasoner
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
FD = ("fd-dred", "fd-counting")
# (seed, max budget between submits)
FULL_SCHEDULES = ((1, 3), (2, 40), (3, 10), (4, 0), (5, 200))
DEFAULT_SCHEDULES = {"overlap": FULL_SCHEDULES, "random": ((3, 10), (4, 0))}

SLOW = [
    pytest.mark.slow,
    pytest.mark.skipif(not FULL, reason="full corpus: set FLUXMAT_FULL_CORPUS=1"),
]


def _streams() -> list[Path]:
    return sorted(p for kb in KBS for p in (CORPUS / "streams").glob(f"*/{kb}/*.jsonl"))


def _params() -> list:
    out = []
    for stream in _streams():
        case = stream.parent.parent.name
        default = DEFAULT_SCHEDULES.get(case, ()) if case == "overlap" or stream.name.startswith("run0-") else ()
        for alg in FD:
            for seed, budget in FULL_SCHEDULES:
                marks = [] if (seed, budget) in default else SLOW
                out.append(
                    pytest.param(
                        stream, alg, seed, budget, marks=marks,
                        id=f"{stream_id(stream)}-{alg}-s{seed}b{budget}",
                    )
                )  # fmt: skip
    return out


def test_fd_corpus_present():
    found = {(s.parent.parent.name, s.parent.name) for s in _streams()}
    assert {("overlap", kb) for kb in KBS} <= found, MISSING


@pytest.mark.parametrize(("stream", "algorithm", "seed", "budget"), _params())
def test_stream_interleaved(stream: Path, algorithm: str, seed: int, budget: int):
    kb = stream.parent.name
    updates = updates_of(stream)
    r = Reasoner.from_file(program_of(kb), algorithm)
    m = r.maintainer
    r.load(updates[0].add)
    m.configure(seed=seed, interleaved=True)
    rng = random.Random(seed)
    explicit = set(m.explicit())
    snap = set(m.facts())
    where = f"{stream_id(stream)} under {algorithm}, seed {seed}, budget {budget}"
    for i, u in enumerate(updates[1:], start=1):
        m.submit(u.add, u.delete, id=i)
        explicit = (explicit - set(u.delete)) | set(u.add)
        m.step(rng.randint(0, budget))
        point = m.poll()
        if m.quiescent:
            now = set(m.facts())
            assert point.through == i, f"{where}, update {i}: through {point.through}"
            assert set(point.added) == now - snap, f"{where}, update {i}: point.added"
            assert set(point.removed) == snap - now, f"{where}, update {i}: point.removed"
            snap = now
        else:
            assert point is None
    facts = sum(len(x.add) + len(x.delete) for x in updates)
    m.run(max_units=1000 * facts + 100_000)
    assert set(m.explicit()) == explicit, f"{where}: explicit facts"
    expected = reference_state(stream)
    got = frozenset(m.facts())
    assert got == expected, (
        f"{where}: final state differs from remat: missing "
        f"{sorted(expected - got, key=repr)[:5]}, extra {sorted(got - expected, key=repr)[:5]}"
    )
