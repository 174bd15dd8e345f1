"""Explainable deltas -- each added or removed fact names the update whose work changed it.

The engine records, for every fact that changed since the last consistency
point, the update charged for the insertion (or for the deletion wave that took
its support away), or 0 when the work of several updates changed it. Checked
against an oracle: the updates applied one at a time with `remat`, where the
updates that changed a fact are known exactly. A name is only given when it is
the one update that changed the fact; otherwise the page says "batch N".

The cores name as precisely when each update is its own run. The arrays core
(the default) integrates a batch's overlapping updates as one set update, so it
names a derived fact's update only when that update alone changed the facts its
predicate depends on within the run (engine.compact.fed); the objects core names
the update whose work changed the fact. Both never name a wrong update.
"""

import json
import random

import pytest

from fluxmat.connectors.state import MemoryStateStore
from fluxmat.engine import EngineOptions, Fed, Reasoner
from fluxmat.stream.batch import BatchProcessor
from tests.support.shared import NullPublisher

PROGRAM = """\
path(X, Y) :- edge(X, Y).
path(X, Z) :- path(X, Y), edge(Y, Z).
cut(X) :- node(X), not path(X, X).
"""
POOL = [("edge", a, b) for a in "abcd" for b in "abcd"] + [("node", a) for a in "abcd"]


def _mat(explicit: set) -> set:
    r = Reasoner.from_text(PROGRAM, "remat")
    r.load(sorted(explicit))
    return r.facts()


CORES = ["arrays", "objects"]


@pytest.mark.parametrize(("core", "overlap"), [("arrays", False), ("arrays", True), ("objects", False)])
@pytest.mark.parametrize("algorithm", ["fd-counting", "fd-dred"])
@pytest.mark.parametrize("seed", range(6))
def test_a_named_cause_is_the_one_update_that_changed_the_fact(algorithm, seed, core, overlap):
    """Each update its own run; and on the arrays core a batch as one run too (what the job does).

    The objects core with overlapping updates names the update whose work made the
    change, which may have met the others' facts: no sequential oracle for that.
    """
    rnd = random.Random(seed)
    explicit = set(rnd.sample(POOL, 6))
    r = Reasoner.from_text(PROGRAM, algorithm, options=EngineOptions(core=core))
    r.load(sorted(explicit))
    r.poll()
    named = total = 0
    for _batch in range(8):
        updates, changed_by = [], {}  # the oracle: fact -> the updates whose application changed it
        before = _mat(explicit)
        for _ in range(rnd.randint(1, 4)):
            add = set(rnd.sample(POOL, 2))
            delete = set(rnd.sample(sorted(explicit), min(2, len(explicit)))) - add
            updates.append((add, delete))
            explicit = (explicit - delete) | add
            after = _mat(explicit)
            for f in before ^ after:
                changed_by.setdefault(f, []).append(len(updates))
            before = after
        fed = r.feed([Fed(i + 1, a, d) for i, (a, d) in enumerate(updates)], overlap=overlap)
        point = r.poll()
        assert set(point.added) | set(point.removed) <= set(changed_by)
        for facts, by in ((point.added, point.added_by), (point.removed, point.removed_by)):
            for f, seq in zip(facts, by, strict=True):
                total += 1
                if seq:  # named: exactly this update, alone, changed the fact
                    named += 1
                    assert changed_by[f] == [fed.keys[seq]], (f, seq, changed_by[f])
    # not a cause hidden behind "several" for most facts (a batch as one run: for many of them)
    assert named >= total / (3 if overlap else 2)


def _row(offset: int, update: dict) -> tuple:
    value = json.dumps(update)
    return (0, offset, None, value, None, True, len(value))


# What each core names for the derived facts of the test below's first two batches (None: "batch N").
DERIVED = {
    # the objects core: the update whose work derived the fact
    "objects": [{("path", "b", "c"): "u1", ("path", "a", "c"): "u1", ("path", "x", "y"): "0:1"},
                {("cut", "q"): "n"}],
    # the arrays core, one run per batch: u1 and 0:1 both changed edge, which path depends on;
    # d and a both toggled edge(x, y), which cut depends on (through `not path`)
    "arrays": [{("path", "b", "c"): None, ("path", "a", "c"): None, ("path", "x", "y"): None},
               {("cut", "q"): None}],
}  # fmt: skip


def _added(o) -> dict:
    return dict(zip(map(tuple, o.output["added"]), o.causes["added"], strict=True))


@pytest.mark.parametrize("core", CORES)
def test_a_batch_names_each_fact_s_update_by_id_or_offset_and_says_when_it_cannot(core):
    options = EngineOptions(core=core)
    p = BatchProcessor(Reasoner.from_text(PROGRAM, "fd-counting", options=options), MemoryStateStore(), NullPublisher())
    p.start([("edge", "a", "b")])
    assert p.initial.causes == {}  # the initial facts: no update caused them
    o = p.process(0, [_row(0, {"id": "u1", "add": [["edge", "b", "c"]]}), _row(1, {"add": [["edge", "x", "y"]]})])
    causes = _added(o)
    assert causes[("edge", "b", "c")] == "u1"
    assert causes[("edge", "x", "y")] == "0:1"  # no id: partition:offset
    assert {f: causes[f] for f in DERIVED[core][0]} == DERIVED[core][0]
    assert len(causes) == 5
    # added by one update, deleted by the next and added again by a third: several updates' work
    o = p.process(1, [_row(2, {"id": "d", "del": [["edge", "x", "y"]]}), _row(3, {"id": "a", "add": [["edge", "x", "y"]]}),
                      _row(4, {"id": "n", "add": [["node", "q"]]})])  # fmt: skip
    assert _added(o) == {("node", "q"): "n", **DERIVED[core][1]}  # edge(x, y) is back: no change to show
    o = p.process(2, [_row(5, {"add": [["edge", "p", "q"]]}), _row(6, {"del": [["edge", "p", "q"]]}),
                      _row(7, {"add": [["edge", "p", "q"]]})])  # fmt: skip
    assert o.causes["added"] == [None, None] and len(o.output["added"]) == 2  # the page says "batch 2"
    o = p.process(3, [_row(8, {"id": "d2", "del": [["edge", "a", "b"]]})])
    assert set(o.causes["removed"]) == {"d2"} and len(o.causes["removed"]) == len(o.output["removed"]) == 3
    # two updates, one of them alone reaching path's dependencies (edge): named on both cores
    o = p.process(4, [_row(9, {"id": "e1", "add": [["edge", "m", "n"]]}), _row(10, {"id": "n2", "add": [["node", "z"]]})])
    cut = {"objects": "n2", "arrays": None}[core]  # arrays: e1 also changed edge, which cut depends on
    assert _added(o) == {("edge", "m", "n"): "e1", ("path", "m", "n"): "e1", ("node", "z"): "n2", ("cut", "z"): cut}
