"""The per-batch processor (stream.batch) on the arrays core equals it on the objects core.

Same messages, batch by batch: the same deltas (added and removed facts), dead
letters and `through`, and a processor restarted from the store (a
MemoryStateStore: the absolute values the job writes to Redis) continues
with the same deltas. A quarantined update (work limit) is a dead letter on
both cores.
"""

from __future__ import annotations

import json
import random

import pytest

from fluxmat.connectors.state import MemoryStateStore
from fluxmat.engine import EngineOptions, Reasoner, StateMismatch
from fluxmat.engine.limits import Limits
from fluxmat.stream.batch import BatchProcessor
from tests.support.shared import NullPublisher

PROGRAM = """\
path(X, Y) :- edge(X, Y).
path(X, Z) :- path(X, Y), edge(Y, Z).
cut(X) :- node(X), not path(X, X).
same(X, Y) :- same(Y, X).
same(X, Z) :- same(X, Y), same(Y, Z).
same(X, Y) :- link(X, Y).
"""
NODES = "abcde"
POOL = ([["edge", x, y] for x in NODES for y in NODES] + [["node", x] for x in NODES]
        + [["link", x, y] for x in NODES for y in NODES])  # fmt: skip


def _processor(core: str, store, limits: Limits | None = None) -> BatchProcessor:
    r = Reasoner.from_text(PROGRAM, options=EngineOptions("fd-counting", core=core))
    return BatchProcessor(r, store, NullPublisher(), limits=limits)


def _rows(rnd: random.Random, offset: int, n: int) -> list[tuple]:
    rows = []
    for i in range(n):
        add = rnd.sample(POOL, rnd.randint(0, 2))
        delete = [f for f in rnd.sample(POOL, rnd.randint(0, 2)) if f not in add]
        value = json.dumps(
            {"add": add, "del": delete, "id": f"u{offset + i}"} if rnd.random() < 0.9 else [1]
        )
        rows.append((rnd.randint(0, 1), offset + i, None, value, None, True, len(value)))
    return rows


def _out(outcome) -> tuple:
    o = outcome.output
    return (
        sorted(map(json.dumps, o["added"])),
        sorted(map(json.dumps, o["removed"])),
        o["through"],
        len(o["dead"]),
    )


@pytest.mark.parametrize("seed", range(4))
def test_arrays_batches_equal_objects_batches_and_restart_from_the_store(seed):
    rnd = random.Random(seed)
    initial = [tuple(f) for f in rnd.sample(POOL, 8)]
    stores = {"arrays": MemoryStateStore(), "objects": MemoryStateStore()}
    procs = {core: _processor(core, stores[core]) for core in stores}
    for p in procs.values():
        p.start(initial)
    assert sorted(procs["arrays"].initial.output["added"]) == sorted(
        procs["objects"].initial.output["added"]
    )
    offset = 0
    for batch in range(10):
        rows = _rows(rnd, offset, rnd.randint(1, 12))
        offset += len(rows)
        outs = {core: _out(p.process(batch, rows)) for core, p in procs.items()}
        assert outs["arrays"] == outs["objects"], f"batch {batch}"
        if rnd.random() < 0.4:  # a restart: a new engine rebuilt from the store
            procs = {core: _processor(core, stores[core]) for core in stores}
            for p in procs.values():
                assert "restored state of batch" in p.start(initial)
        assert procs["arrays"].facts() == procs["objects"].facts(), f"batch {batch}"
    assert stores["arrays"].meta["core"] == "arrays" and "core" not in stores["objects"].meta


def test_a_quarantined_update_is_a_dead_letter_on_both_cores():
    rows = [(0, 0, None, json.dumps({"add": [["edge", "a", "b"], ["edge", "b", "c"]], "id": "ok"}), None, True, 1),
            (0, 1, None, json.dumps({"add": [["edge", x, y] for x in NODES for y in NODES], "id": "big"}),
             None, True, 1),
            (0, 2, None, json.dumps({"add": [["node", "a"]], "id": "last"}), None, True, 1)]  # fmt: skip
    outs = {}
    for core in ("arrays", "objects"):
        p = _processor(core, MemoryStateStore(), Limits.of(work=60))
        p.start([])
        o = p.process(0, rows)
        outs[core] = _out(o)
        assert o.quarantined == 1 and "work limit" in o.output["dead"][0][0]
        assert ("edge", "a", "b") in p.facts() and ("edge", "a", "a") not in p.facts()
    assert outs["arrays"] == outs["objects"]


def test_a_store_of_the_other_core_is_refused_at_start():
    store = MemoryStateStore()
    _processor("objects", store).start([("edge", "a", "b")])
    with pytest.raises(StateMismatch, match="kept by core=objects"):
        _processor("arrays", store).start([("edge", "a", "b")])
