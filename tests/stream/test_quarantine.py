"""Work limits and quarantine in the per-batch processor (engine.limits).

The program is Hu, Motik & Horrocks's SSPE path lengths
(tests/golden/builtins/path_lengths.dl): one `b` fact closing a cycle makes the
materialisation infinite. An update that exceeds `--max-update-work` or
`--max-facts` must be quarantined: a dead letter with the reason, the rest of
the batch applied as if it had never arrived -- the result equals `remat` over
the valid updates and the committed state equals a fresh load -- and the job
goes on.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fluxmat.connectors.state import MemoryStateStore
from fluxmat.engine import EngineOptions, Reasoner
from fluxmat.engine.limits import FactLimitExceeded, Limits, WorkLimitExceeded
from fluxmat.stream.batch import BatchProcessor
from tests.support.shared import Recorder
from tests.support.state import decoded

ROOT = Path(__file__).resolve().parent.parent.parent
PROGRAM = (ROOT / "tests/golden/builtins/path_lengths.dl").read_text(encoding="utf-8")
RUNAWAY = {"add": [["b", "e", "a", 1]]}  # e -> a closes a cycle: a path length per lap
RUNAWAY_2 = {"add": [["b", "d2", "b1", 3]]}  # b1 -> d2 -> b1: another endless cycle
LIMITS = {"work": Limits(work=3_000), "facts": Limits(facts=1_000)}
REASON = {"work": "work limit exceeded: ", "facts": "fact limit exceeded: "}
CORES = ["arrays", "objects"]  # the default core and the reference one: quarantine is the job's on both


def reasoner(alg: str, core: str) -> Reasoner:
    return Reasoner.from_text(PROGRAM, alg, options=EngineOptions(core=core))


def processor(alg: str, limits: Limits, store=None, pub=None, budget: int = 2, core: str = "arrays"):
    p = BatchProcessor(reasoner(alg, core), store or MemoryStateStore(),
                       pub or Recorder(), budget, limits=limits)  # fmt: skip
    p.start([])
    return p


def rows(updates: list[dict], start: int = 0) -> list[tuple]:
    return [(0, start + i, None, json.dumps(u), 1, True, None) for i, u in enumerate(updates)]


def program_facts() -> set[tuple]:
    return set(Reasoner.from_text(PROGRAM, "remat").program_facts())


def apply(explicit: set, updates: list[dict]) -> set[tuple]:
    for u in updates:
        explicit = (explicit - {tuple(f) for f in u.get("del", [])}) | {tuple(f) for f in u.get("add", [])}
    return explicit


def remat(explicit: set) -> set[tuple]:
    ref = Reasoner.from_text(PROGRAM, "remat", options=EngineOptions(core="objects"))
    ref.maintainer.load(sorted(explicit, key=repr))  # the oracle: the reference core, from scratch
    return ref.facts()


def check(p: BatchProcessor, alg: str, explicit: set) -> None:
    """The engine equals remat, and the committed state a fresh load of `explicit` (through the door).

    The fresh load runs on the processor's core: the objects core stores facts with
    birth stamps and log entries, the arrays core facts with counts and no log; either
    way the stored tables hold the same keys as a fresh export, and restore to `explicit`.
    """
    expected = remat(explicit)
    assert p.facts() == expected
    core = p.reasoner.core
    fresh = reasoner(alg, core)  # E exactly (Reasoner.load would add back the program facts deleted)
    fresh.maintainer.load(sorted(explicit, key=repr))
    changes = fresh.export_changes().as_texts()  # the same facts and log entries (birth stamps differ)
    stored = decoded(p.store.tables)
    loaded = decoded({"explicit": changes.explicit, "facts": changes.facts, "terms": changes.terms,
                       "log": {k: v for k, v in changes.log.items() if v is not None}})  # fmt: skip
    for name in ("explicit", "facts", "log"):
        assert set(stored[name]) == set(loaded[name]), name
    if core == "arrays":  # its values are derivation counts: a function of E, so equal to a fresh load's
        assert stored["facts"] == loaded["facts"]
    committed = reasoner(alg, core)
    committed.restore(p.store.load())
    assert committed.facts() == expected and committed.explicit() == explicit


VALID = [
    {"add": [["b", "e", "f", 1]]},  # reads d(e, .): overlaps the runaway's facts
    {"del": [["b", "a", "b1", 1]]},  # a deletion in the cycle's way
    {"add": [["b", "f", "g", 2]], "id": "valid-3"},
    {"add": [["b", "a", "b2", 4]]},
]


@pytest.mark.parametrize("core", CORES)
@pytest.mark.parametrize("limit", ["work", "facts"])
@pytest.mark.parametrize("alg", ["fd-counting", "fd-dred"])
def test_a_runaway_update_in_the_middle_of_a_batch_is_quarantined(alg, limit, core):
    p = processor(alg, LIMITS[limit], core=core)
    batch = VALID[:2] + [RUNAWAY] + VALID[2:]
    out = p.process(0, rows(batch))
    assert (out.updates, out.dead, out.quarantined) == (4, 1, 1)
    ((reason, partition, offset, raw, _),) = p.publisher.dead
    assert reason.startswith(REASON[limit]) and (partition, offset) == (0, 2), reason
    assert json.loads(raw) == RUNAWAY
    assert out.through == "0:4"
    check(p, alg, apply(program_facts(), VALID))


@pytest.mark.parametrize("core", CORES)
@pytest.mark.parametrize("alg", ["fd-counting", "fd-dred"])
def test_two_runaway_updates_are_both_quarantined(alg, core):
    p = processor(alg, Limits(work=3_000, facts=1_000), core=core)
    batch = [VALID[0], RUNAWAY_2, VALID[1], RUNAWAY, VALID[2]]
    out = p.process(0, rows(batch))
    assert (out.updates, out.quarantined) == (3, 2)
    assert [d[2] for d in p.publisher.dead] == [1, 3]
    assert all(" limit exceeded: " in d[0] for d in p.publisher.dead), p.publisher.dead
    check(p, alg, apply(program_facts(), [VALID[0], VALID[1], VALID[2]]))


@pytest.mark.parametrize("core", CORES)
@pytest.mark.parametrize("limits", [Limits(work=20_000), Limits(facts=2_000)])
@pytest.mark.parametrize("alg", ["fd-counting", "fd-dred"])
def test_a_runaway_that_overlaps_valid_updates_blames_only_itself(alg, limits, core):
    """Valid updates submitted around it grow what the runaway's facts reach (b(e, .)),
    delete in its cycle and re-add; with overlap their units meet its facts (and
    may be the ones running when a limit runs out). Only the runaway is
    quarantined, and the rest equals remat over the valid updates."""
    p = processor(alg, limits, budget=50, core=core)
    valid_before = [{"add": [["b", "e", x, 1]]} for x in "xyz"]
    valid_after = [{"add": [["b", x, "w", 1]]} for x in "xyz"] + [
        {"del": [["b", "b1", "d1", 1]]}, {"add": [["b", "b1", "d1", 1]]}, {"del": [["b", "c1", "e", 2]]}]
    out = p.process(0, rows(valid_before + [RUNAWAY] + valid_after))
    assert [d[2] for d in p.publisher.dead] == [3], p.publisher.dead
    assert out.updates == len(valid_before) + len(valid_after)
    check(p, alg, apply(program_facts(), valid_before + valid_after))


@pytest.mark.parametrize("core", CORES)
def test_the_job_goes_on_and_a_restart_or_replay_never_reapplies_a_quarantined_update(core):
    store, pub = MemoryStateStore(), Recorder()
    p = processor("fd-counting", LIMITS["facts"], store, pub, core=core)
    p.process(0, rows([VALID[0], RUNAWAY]))
    p.process(1, rows([VALID[1], VALID[2]], start=2))
    explicit = apply(program_facts(), VALID[:3])
    check(p, "fd-counting", explicit)
    assert len(pub.dead) == 1
    # Spark replays batch 1 after a crash: re-published, not re-applied; batch 0 likewise
    q = processor("fd-counting", LIMITS["facts"], store, pub, core=core)
    assert q.process(1, rows([VALID[1], VALID[2]], start=2)).replayed
    assert q.process(0, rows([VALID[0], RUNAWAY])).replayed
    assert len(pub.dead) == 2 and pub.dead[1] == pub.dead[0], "batch 0's dead letter re-published"
    out = q.process(2, rows([VALID[3]], start=4))
    assert (out.updates, out.dead) == (1, 0)
    check(q, "fd-counting", apply(explicit, [VALID[3]]))


@pytest.mark.parametrize("core", CORES)
def test_without_limits_nothing_is_quarantined(core):
    p = processor("fd-counting", Limits(), core=core)
    out = p.process(0, rows(VALID))
    assert (out.updates, out.dead) == (4, 0)
    check(p, "fd-counting", apply(program_facts(), VALID))


@pytest.mark.parametrize("core", CORES)
def test_a_state_or_initial_load_over_the_fact_limit_is_refused(core):
    with pytest.raises(FactLimitExceeded, match="fact limit exceeded: "):
        processor("fd-counting", Limits(facts=10), core=core)  # the program's facts make 16
    store = MemoryStateStore()
    processor("fd-counting", Limits(), store, core=core)
    with pytest.raises(FactLimitExceeded, match="fact limit exceeded: 16 facts"):
        BatchProcessor(reasoner("fd-counting", core), store, Recorder(),
                       limits=Limits(facts=15)).start([])  # fmt: skip


# ------------------------------------------------------------------ the engine's own contract


@pytest.mark.parametrize("alg", ["remat", "dred", "dredc", "bf", "fd-dred", "fd-counting"])
def test_every_algorithm_stops_a_runaway_update_at_its_limits(alg):
    for limits, error in ((Limits(work=2_000), WorkLimitExceeded), (Limits(facts=500), FactLimitExceeded)):
        r = Reasoner.from_text(PROGRAM, alg)
        r.maintainer.set_limits(limits)
        r.load()
        with pytest.raises(error) as caught:
            r.update(add=[tuple(RUNAWAY["add"][0])])
        # checked between rounds or units: it stops close to the limit, not far beyond it
        counted = int(str(caught.value).split(": ")[1].split(" ")[0].replace(",", ""))
        assert (limits.work or limits.facts) < counted <= 2 * (limits.work or limits.facts)
    r = Reasoner.from_text(PROGRAM, alg)
    r.maintainer.set_limits(Limits(work=2_000, facts=500))
    r.load()
    r.update(add=[("b", "e", "f", 1)])  # a finite update passes
    assert {("d", "f", 4), ("d", "f", 8)} <= r.facts()


@pytest.mark.parametrize("alg", ["remat", "dredc", "bf"])
def test_equality_rewriting_stops_a_runaway_update_at_its_limits(alg):
    """remat~/dredc~ pass the limits to their inner maintainer; B/F~ checks its own saturation.

    Rewriting takes no built-ins, so nothing runs without end: a closure over a
    chain of 100 edges (5,050 pairs) stands in for a runaway update.
    """
    program = "t(X, Y) :- e(X, Y).\nt(X, Z) :- e(X, Y), t(Y, Z)."
    chain = [("e", i, i + 1) for i in range(100)]
    for limits, error in ((Limits(work=2_000), WorkLimitExceeded), (Limits(facts=500), FactLimitExceeded)):
        r = Reasoner.from_text(program, alg, equality="rewrite")
        r.maintainer.set_limits(limits)
        r.load()
        with pytest.raises(error):
            r.update(add=chain)
    r = Reasoner.from_text(program, alg, equality="rewrite")
    r.maintainer.set_limits(Limits(work=2_000, facts=500))
    r.load()
    r.update(add=chain[:10])  # 55 pairs: within both limits
    assert ("t", 0, 10) in r.facts()


def test_non_recursive_algorithms_check_their_limits_between_strata():
    """`counting` has no fixpoint loop: the limits are checked after each stratum."""
    square = [("p", i, j) for i in range(10) for j in range(10)]
    r = Reasoner.from_text("g(X, Z) :- p(X, Y), p(Y, Z).", "counting")
    r.maintainer.set_limits(Limits(work=999))
    r.load()
    with pytest.raises(WorkLimitExceeded, match="1,000 rule applications"):
        r.update(add=square)
    r = Reasoner.from_text("g(X, Z) :- p(X, Y), p(Y, Z).", "counting")
    r.maintainer.set_limits(Limits(facts=199))
    with pytest.raises(FactLimitExceeded, match="200 facts"):
        r.load(square)
