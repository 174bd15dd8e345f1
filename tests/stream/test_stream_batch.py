"""The per-batch function of the streaming job, without Spark (docs/streaming.md).

Crashes are simulated at each point of the commit protocol; after a restart from
the state store and Spark's replay of the batch, consumers that deduplicate by
`batch` must rebuild exactly `mat(P, E)`.
"""

import json
import random

import pytest

from fluxmat.connectors.state import MemoryStateStore
from fluxmat.engine import FluxmatError, Reasoner
from fluxmat.stream.batch import BatchProcessor, StateMismatch
from tests.support.state import FlakyStore

PROGRAM = "path(X, Y) :- edge(X, Y). path(X, Z) :- path(X, Y), edge(Y, Z). src(X) :- edge(X, _), not edge(_, X)."
POOL = [["edge", x, y] for x in "abcde" for y in "abcde"]


class Publisher:
    def __init__(self, fail_at: int | None = None):
        self.deltas, self.dead, self.fail_at = [], [], fail_at

    def publish_delta(self, batch, through, added, removed, causes=None):
        if batch == self.fail_at:
            raise ConnectionError("broker lost")
        self.deltas.append({"batch": batch, "through": through, "added": added, "removed": removed})
        return 1

    def publish_dead_letter(self, reason, partition, offset, raw, truncated=False):
        self.dead.append((reason, partition, offset, raw))


def processor(store, pub, alg="fd-counting", budget=2):
    return BatchProcessor(Reasoner.from_text(PROGRAM, alg), store, pub, budget)


def rows_for(batch_updates, start_offset):
    return [(0, start_offset + i, None, json.dumps(u), 1_000 + i) for i, u in enumerate(batch_updates)]


def random_batches(seed, n=8):
    rnd = random.Random(seed)
    batches, offset = [], 0
    for _ in range(n):
        ups = []
        for _ in range(rnd.randint(1, 4)):
            add = rnd.sample(POOL, 2)
            dele = [f for f in rnd.sample(POOL, 2) if f not in add]
            ups.append({"add": add, "del": dele})
        batches.append(rows_for(ups, offset))
        offset += len(ups)
    return batches


def expected(batches, initial):
    explicit = {tuple(f) for f in initial}
    for rows in batches:
        for r in rows:
            u = json.loads(r[3])
            explicit = (explicit - {tuple(f) for f in u.get("del", [])}) | {tuple(f) for f in u.get("add", [])}
    ref = Reasoner.from_text(PROGRAM, "remat")
    ref.load(sorted(explicit))
    return {tuple(f) for f in ref.facts()}


def rebuild(deltas):
    """A consumer: apply deltas in order, ignoring batches already seen."""
    seen, current = set(), set()
    for d in deltas:
        if d["batch"] in seen:
            continue
        seen.add(d["batch"])
        current -= {tuple(f) for f in d["removed"]}
        current |= {tuple(f) for f in d["added"]}
    return current


INITIAL = [("edge", "a", "b"), ("edge", "b", "c")]


@pytest.mark.parametrize("alg", ["fd-counting", "fd-dred"])
@pytest.mark.parametrize("seed", range(3))
def test_deltas_rebuild_the_materialisation(alg, seed):
    batches = random_batches(seed)
    store, pub = MemoryStateStore(), Publisher()
    p = processor(store, pub, alg)
    p.start(INITIAL)
    for b, rows in enumerate(batches):
        out = p.process(b, rows)
        assert not out.replayed and out.updates == len(rows)
    assert pub.deltas[0]["batch"] == -1, "the first delta is the initial materialisation"
    assert rebuild(pub.deltas) == expected(batches, INITIAL) == p.facts()


@pytest.mark.parametrize("crash", ["before-commit", "after-commit", "after-publish"])
def test_crash_and_replay_is_exactly_once(crash):
    """Spark re-runs batch 3 after a crash at each point of the commit protocol."""
    batches = random_batches(11)
    store = FlakyStore(fail_at=3 if crash == "before-commit" else None)
    pub = Publisher(fail_at=3 if crash == "after-commit" else None)
    p = processor(store, pub)
    p.start(INITIAL)
    for b in range(3):
        p.process(b, batches[b])
    if crash == "after-publish":
        p.process(3, batches[3])  # published and committed, but Spark did not record it
    else:
        with pytest.raises(ConnectionError):
            p.process(3, batches[3])
    # the process dies; a new one restarts from the store and Spark replays batch 3
    pub.fail_at = None
    p2 = processor(store, pub)
    p2.start([("edge", "z", "z")])  # ignored: the store is not empty
    out = p2.process(3, batches[3])
    assert out.replayed == (crash != "before-commit")
    for b in range(4, len(batches)):
        p2.process(b, batches[b])
    assert rebuild(pub.deltas) == expected(batches, INITIAL) == p2.facts()
    by_batch = {}
    for d in pub.deltas:
        if d["batch"] in by_batch:
            assert by_batch[d["batch"]] == d, "a re-published batch carries identical deltas"
        by_batch[d["batch"]] = d


def test_dead_letters_carry_reason_and_offset():
    store, pub = MemoryStateStore(), Publisher()
    p = processor(store, pub)
    p.start(INITIAL)
    bad = [
        (0, 0, None, "{not json", 1), (0, 1, None, json.dumps([1, 2]), 2),
        (0, 2, None, json.dumps({"add": [["edge", "a"]]}), 3),
        (0, 3, None, json.dumps({"add": [["edge", "a", "q"]], "del": [["edge", "a", "q"]]}), 4),
        (0, 4, None, json.dumps({"ad": []}), 5), (0, 5, None, None, 6),
        (0, 6, None, json.dumps({"add": [["edge", "c", "d"]], "id": "good"}), 7),
    ]  # fmt: skip
    out = p.process(0, bad)
    assert out.dead == 6 and out.updates == 1 and out.through == "good"
    reasons = {offset: reason for reason, _, offset, _ in pub.dead}
    assert set(reasons) == {0, 1, 2, 3, 4, 5}
    assert "invalid JSON" in reasons[0]
    assert "expected an update object" in reasons[1]
    assert "has 1 argument but predicate edge has 2" in reasons[2]
    assert "both added and deleted" in reasons[3]
    assert "unknown key 'ad'" in reasons[4]
    assert ("path", "c", "d") in p.facts()
    # a bad message does not poison the predicate's arity for later good messages
    p.process(1, [(0, 7, None, json.dumps({"add": [["fresh", "x"]]}), 8)])
    assert ("fresh", "x") in p.facts()


def test_foreign_state_is_refused():
    store = MemoryStateStore()
    processor(store, Publisher()).start(INITIAL)
    other = BatchProcessor(Reasoner.from_text(PROGRAM + " q(X) :- edge(X, X).", "fd-counting"), store, Publisher())
    with pytest.raises(StateMismatch, match="another program"):
        other.start([])


def test_classic_algorithms_are_refused():
    with pytest.raises(FluxmatError, match="fully dynamic algorithm"):
        BatchProcessor(Reasoner.from_text(PROGRAM, "dredc"), MemoryStateStore(), Publisher())


def test_through_is_partition_offset_without_ids():
    store, pub = MemoryStateStore(), Publisher()
    p = processor(store, pub)
    p.start([])
    out = p.process(0, [(2, 41, None, json.dumps({"add": [["edge", "a", "b"]]}), 1)])
    assert out.through == "2:41" and pub.deltas[-1]["through"] == "2:41"


def test_a_rebased_state_numbers_new_batches_after_the_stored_ones():
    store, pub = MemoryStateStore(), Publisher()
    batches = random_batches(5, n=6)
    p = processor(store, pub)
    p.start(INITIAL)
    for i, rows in enumerate(batches[:3]):
        p.process(i, rows)
    assert store.batch_base() == 0
    assert store.rebase() == 3 and store.batch_base() == 3  # a new checkpoint: Spark ids restart at 0
    q = processor(store, pub)
    q.start([])
    assert q.base == 3
    for i, rows in enumerate(batches[3:]):
        out = q.process(i, rows)
        assert out.batch == 3 + i and not out.replayed
    assert [d["batch"] for d in pub.deltas] == [-1, 0, 1, 2, 3, 4, 5]
    assert q.process(1, batches[4]).replayed  # Spark's replay of its batch 1 is batch 4
    assert rebuild(pub.deltas) == expected(batches, INITIAL)
