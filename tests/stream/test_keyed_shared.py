"""Keyed state is mat(P, F ∪ E_key): a key cannot delete the shared `--facts` F.

The shared facts are reference data every key reasons over. A key may assert a
fact of F itself; deleting it later removes only the key's own assertion, so
the fact (and its consequences) stays because F holds it. A key that deletes a
fact of F it never added changes nothing (the deletion is counted,
`shared_deletes`). A key's own facts come and go as usual. Each case is
compared with a from-scratch evaluation of F ∪ E_key, after every batch and
after the key is rebuilt from its stored state.

First through a key's per-batch processor (no servers), then through the
engine hosts the keyed job uses (real processes, real Redis and broker), whose
key is rebuilt from Redis after its host is killed.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from fluxmat.connectors.kafka_sink import read_deltas
from fluxmat.connectors.state import MemoryStateStore, RedisStateStore
from fluxmat.engine import Reasoner
from fluxmat.ops.metrics import JobMetrics
from fluxmat.stream import engine_host
from fluxmat.stream.batch import BatchProcessor
from fluxmat.stream.job import JobConfig
from fluxmat.stream.keyed import KeyedDriver
from tests.support.pipeline import PROGRAM, remat
from tests.support.shared import NullPublisher, metric

SHARED = [("edge", "a", "b"), ("edge", "b", "c")]  # F: path(a, c) and src(a) follow from it
# (what a key sends, its own explicit facts E_key afterwards)
STEPS = [
    ({"add": [["edge", "a", "b"], ["edge", "c", "d"]], "id": "adds a shared fact and its own"}, {("edge", "a", "b"), ("edge", "c", "d")}),
    ({"del": [["edge", "a", "b"]], "id": "deletes the shared fact it added"}, {("edge", "c", "d")}),
    ({"del": [["edge", "b", "c"]], "id": "deletes a shared fact it never added"}, {("edge", "c", "d")}),
    ({"add": [["edge", "d", "e"]], "id": "adds its own"}, {("edge", "c", "d"), ("edge", "d", "e")}),
    ({"del": [["edge", "d", "e"]], "id": "deletes its own"}, {("edge", "c", "d")}),
]  # fmt: skip
SHARED_DELETES = [0, 1, 1, 0, 0]  # deletions of facts of F dropped, per step


class KeyedNullPublisher(NullPublisher):
    def publish_delta(self, *args, **kw):  # a key's deltas carry it (key=...)
        pass


def expected(own: set[tuple]) -> set[tuple]:
    """mat(P, F ∪ E_key), from scratch."""
    return remat(set(SHARED) | own)


def row(offset: int, update: dict, key: str = "k") -> tuple:
    value = json.dumps(update)
    return (0, offset, key, value, None, True, len(value))


def key_processor(store) -> BatchProcessor:
    processor = BatchProcessor(Reasoner.from_text(PROGRAM, "fd-counting"), store, KeyedNullPublisher(), key="k",
                               shared=frozenset(SHARED))  # fmt: skip
    processor.begin(SHARED)
    return processor


def test_a_key_cannot_delete_shared_facts_and_rebuilds_exactly_from_its_state():
    store = MemoryStateStore()
    processor = key_processor(store)
    for batch, ((update, own), dropped) in enumerate(zip(STEPS, SHARED_DELETES, strict=True)):
        outcome = processor.process(batch, [row(batch, update)])
        assert processor.facts() == expected(own), update["id"]
        assert outcome.stats.get("shared_deletes", 0) == dropped, update["id"]
        again = key_processor(store)  # the key rebuilt from its stored state (a restart, a cache miss)
        assert again.facts() == expected(own), update["id"]
        processor = again
    assert ("edge", "a", "b") in processor.facts() and ("path", "a", "c") in processor.facts()


def test_a_shared_deletion_inside_a_larger_update_drops_only_that_deletion():
    processor = key_processor(MemoryStateStore())
    processor.process(0, [row(0, {"add": [["edge", "c", "d"], ["edge", "d", "e"]]})])
    outcome = processor.process(1, [row(1, {"del": [["edge", "a", "b"], ["edge", "d", "e"]]})])
    assert outcome.stats["shared_deletes"] == 1 and outcome.deletes == 2
    assert processor.facts() == expected({("edge", "c", "d")})


def test_without_a_key_the_initial_facts_are_the_streams_own():
    """One materialisation (no --partition-by): --facts are its initial E, which updates may change."""
    processor = BatchProcessor(Reasoner.from_text(PROGRAM, "fd-counting"), MemoryStateStore(), NullPublisher())
    processor.start(SHARED)
    processor.process(0, [row(0, {"del": [["edge", "a", "b"]]}, key=None)])
    assert processor.facts() == remat({("edge", "b", "c")})


# ------------------------------------------------------------------ through the engine hosts


@pytest.fixture
def cfg(broker, redis_server, tmp_path):
    from fluxmat.connectors.broker import ensure_topics

    program, facts = tmp_path / "path.dl", tmp_path / "shared.dl"
    program.write_text(PROGRAM, encoding="utf-8")
    facts.write_text("".join(f"edge({x}, {y}).\n" for _, x, y in SHARED), encoding="utf-8")
    n = time.time_ns()
    ensure_topics(broker.bootstrap, {f"su{n}": 1, f"sd{n}": 1})
    c = JobConfig(program=str(program), facts=(str(facts),), bootstrap_servers=broker.bootstrap,
                  updates_topic=f"su{n}", deltas_topic=f"sd{n}", checkpoint=str(tmp_path / "ckpt"),
                  redis=redis_server.url, namespace=f"shared{n}", partition_by="message-key")  # fmt: skip
    yield c
    engine_host.stop_hosts(c)


def folded(cfg, key: str) -> set[tuple]:
    """A consumer of `key`'s deltas: each (batch, part) once, in log order."""
    state: set[tuple] = set()
    msgs = [m for m in read_deltas(cfg.bootstrap_servers, cfg.deltas_topic) if m["key"] == key]
    for m in {(m["batch"], m["part"]): m for m in msgs}.values():
        state = (state - {tuple(f) for f in m["removed"]}) | {tuple(f) for f in m["added"]}
    return state


def stored(cfg, key: str) -> set[tuple]:
    """The key's materialisation as rebuilt from its Redis state."""
    store = RedisStateStore(cfg.redis, cfg.namespace, key=key)
    try:
        reasoner = Reasoner.from_text(PROGRAM, "fd-counting")
        reasoner.restore(store.load())
        return reasoner.facts()
    finally:
        store.close()


def test_engine_hosts_keep_the_shared_facts_of_a_key_through_a_rebuild_from_redis(cfg):
    pid, metrics = None, JobMetrics("path.dl", "fd-counting", cfg.namespace, cfg.updates_topic)
    for batch, ((update, own), dropped) in enumerate(zip(STEPS, SHARED_DELETES, strict=True)):
        if batch == 2:  # the host dies: the key is rebuilt from Redis for the next batches
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while engine_host._connect(engine_host.address(cfg, 0)) is not None and time.monotonic() < deadline:
                time.sleep(0.05)
        (summary,) = engine_host.call(cfg, 0, batch, {"k": [row(batch, update)]})
        assert summary["cache"] == ("new" if batch == 0 else "miss" if batch == 2 else "hit"), summary
        pid = summary["pid"]
        assert json.loads(summary["detail"])["stats"].get("shared_deletes", 0) == dropped, update["id"]
        assert folded(cfg, "k") == expected(own), update["id"]
        assert stored(cfg, "k") == expected(own), update["id"]
        metrics.on_batch(KeyedDriver._outcome(batch, [summary], [], 0.0), None, MemoryStateStore())
    assert metric(metrics, "fluxmat_shared_fact_deletes_total") == sum(SHARED_DELETES)  # what the driver counts
