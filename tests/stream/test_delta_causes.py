"""Explainable deltas -- each added or removed fact names the update whose work changed it.

The engine records, for every fact that changed since the last consistency
point, the update charged for the insertion (or for the deletion wave that took
its support away), or 0 when the work of several updates changed it. Checked
against an oracle: the updates applied one at a time with `remat`, where the
updates that changed a fact are known exactly. A name is only given when it is
the one update that changed the fact; otherwise the page says "batch N".
"""

import json
import random

import pytest

from fluxmat.connectors.state import MemoryStateStore
from fluxmat.engine import Fed, Reasoner
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


@pytest.mark.parametrize("algorithm", ["fd-counting", "fd-dred"])
@pytest.mark.parametrize("seed", range(6))
def test_a_named_cause_is_the_one_update_that_changed_the_fact(algorithm, seed):
    rnd = random.Random(seed)
    explicit = set(rnd.sample(POOL, 6))
    r = Reasoner.from_text(PROGRAM, algorithm)
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
        fed = r.feed([Fed(i + 1, a, d) for i, (a, d) in enumerate(updates)], overlap=False)
        point = r.poll()
        assert set(point.added) | set(point.removed) <= set(changed_by)
        for facts, by in ((point.added, point.added_by), (point.removed, point.removed_by)):
            for f, seq in zip(facts, by, strict=True):
                total += 1
                if seq:  # named: exactly this update, alone, changed the fact
                    named += 1
                    assert changed_by[f] == [fed.keys[seq]], (f, seq, changed_by[f])
    assert named >= total / 2  # not a cause hidden behind "several" for most facts


def _row(offset: int, update: dict) -> tuple:
    value = json.dumps(update)
    return (0, offset, None, value, None, True, len(value))


def test_a_batch_names_each_fact_s_update_by_id_or_offset_and_says_when_it_cannot():
    p = BatchProcessor(Reasoner.from_text(PROGRAM, "fd-counting"), MemoryStateStore(), NullPublisher())
    p.start([("edge", "a", "b")])
    assert p.initial.causes == {}  # the initial facts: no update caused them
    o = p.process(0, [_row(0, {"id": "u1", "add": [["edge", "b", "c"]]}), _row(1, {"add": [["edge", "x", "y"]]})])
    causes = dict(zip(map(tuple, o.output["added"]), o.causes["added"], strict=True))
    assert causes[("edge", "b", "c")] == causes[("path", "b", "c")] == "u1"
    assert causes[("edge", "x", "y")] == causes[("path", "x", "y")] == "0:1"  # no id: partition:offset
    # added by one update, deleted by the next and added again by a third: several updates' work
    o = p.process(1, [_row(2, {"id": "d", "del": [["edge", "x", "y"]]}), _row(3, {"id": "a", "add": [["edge", "x", "y"]]}),
                      _row(4, {"id": "n", "add": [["node", "q"]]})])  # fmt: skip
    causes = dict(zip(map(tuple, o.output["added"]), o.causes["added"], strict=True))
    assert causes == {("node", "q"): "n", ("cut", "q"): "n"}  # edge(x, y) is back: no change to show
    o = p.process(2, [_row(5, {"add": [["edge", "p", "q"]]}), _row(6, {"del": [["edge", "p", "q"]]}),
                      _row(7, {"add": [["edge", "p", "q"]]})])  # fmt: skip
    assert o.causes["added"] == [None, None] and len(o.output["added"]) == 2  # the page says "batch 2"
    o = p.process(3, [_row(8, {"id": "d2", "del": [["edge", "a", "b"]]})])
    assert set(o.causes["removed"]) == {"d2"} and len(o.causes["removed"]) == len(o.output["removed"]) == 3
