"""The bulk layout of the arrays core's state in Redis (connectors.bulk_state), on a real redis-server.

A run of batches with restarts restores the same engine as the per-field
layout and as a materialisation from scratch (with chunks, sections and
compactions made small, so every path runs); a crash before or after a
commit's transaction loses nothing and applies nothing twice; a state in the
per-field layout still restores, and the next commit rewrites it in bulk; a
truncated, corrupted or misplaced chunk is refused in one line naming its key;
a keyed state on a Redis Cluster keeps every key in its hash slot.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import redis

from fluxmat.connectors import bulk_state
from fluxmat.connectors.state import MemoryStateStore, RedisStateStore
from fluxmat.engine import EngineOptions, Reasoner, StateColumns, StateSnapshot
from fluxmat.engine.fd.snapshot import StateDamaged
from fluxmat.stream.batch import BatchProcessor
from tests.support.servers import RedisCluster
from tests.support.shared import NullPublisher

PROGRAM = """\
path(X, Y) :- edge(X, Y).
path(X, Z) :- path(X, Y), edge(Y, Z).
cut(X) :- node(X), not path(X, X).
flag() :- node(X), path(X, X).
"""
NODES = "abcdef"
POOL = [["edge", x, y] for x in NODES for y in NODES] + [["node", x] for x in NODES]
INITIAL = [("edge", "a", "b"), ("edge", "b", "c"), ("node", "a")]


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks, sections and the compaction threshold small enough that a few facts use them all."""
    monkeypatch.setattr(bulk_state, "SECTION_ROWS", 3)
    monkeypatch.setattr(bulk_state, "CHUNK_BYTES", 1500)
    monkeypatch.setattr(bulk_state, "COMPACT_MIN_BYTES", 0)
    monkeypatch.setattr(bulk_state, "COMPACT_FRACTION", 3.0)
    monkeypatch.setattr(bulk_state, "READ_GROUP", 2)


def _processor(store) -> BatchProcessor:
    r = Reasoner.from_text(PROGRAM, options=EngineOptions("fd-counting", core="arrays"))
    return BatchProcessor(r, store, NullPublisher())


def _rows(rnd: random.Random, offset: int) -> list[tuple]:
    rows = []
    for i in range(rnd.randint(1, 8)):
        add = rnd.sample(POOL, rnd.randint(0, 3))
        delete = [f for f in rnd.sample(POOL, rnd.randint(0, 3)) if f not in add]
        value = json.dumps({"add": add, "del": delete, "id": f"u{offset + i}"})
        rows.append((0, offset + i, None, value, None, True, len(value)))
    return rows


def _scratch(explicit: set) -> set:
    ref = Reasoner.from_text(PROGRAM, "remat")
    ref.load(sorted(explicit))
    return ref.facts()


def _store(server, namespace: str, **kw) -> RedisStateStore:
    store = RedisStateStore(server.url, namespace, retry_seconds=0, **kw)
    store.clear()
    return store


def test_restores_equal_the_per_field_layout_and_a_materialisation_from_scratch(redis_server, small_chunks):
    rnd = random.Random(5)
    bulk, texts = _store(redis_server, "bulk-eq"), MemoryStateStore()
    procs = [_processor(bulk), _processor(texts)]
    for p in procs:
        p.start(INITIAL)
    generations, logs, offset = set(), 0, 0
    for batch in range(30):
        rows = _rows(rnd, offset)
        offset += len(rows)
        outs = [p.process(batch, rows).output for p in procs]
        assert sorted(map(json.dumps, outs[0]["added"])) == sorted(map(json.dumps, outs[1]["added"]))
        manifest = bulk.bulk.manifest()
        generations.add(manifest["gen"])
        logs = max(logs, manifest["log"])
        loaded = bulk.load()
        assert isinstance(loaded, StateColumns) and isinstance(texts.load(), StateSnapshot)
        again = [_processor(bulk), _processor(texts)]
        for p in again:
            assert "restored state of batch" in p.start(INITIAL)
        expected = _scratch(procs[0].reasoner.explicit())
        assert again[0].facts() == again[1].facts() == procs[0].facts() == expected, f"batch {batch}"
        assert again[0].reasoner.explicit() == procs[0].reasoner.explicit()
        if rnd.random() < 0.3:  # a restart: the restored engines go on
            procs = again
    assert len(generations) > 2 and logs > 2  # compactions and log chunks both happened
    assert bulk.size() >= len(procs[0].facts()) and bulk.namespace_bytes() > 0


class _Crash(redis.ConnectionError):
    pass


def _crash_at(store: RedisStateStore, after_exec: bool) -> None:
    """The next transaction's EXEC fails as a lost connection: before it runs, or after it ran."""
    real = store.client.pipeline

    def pipeline(transaction=True, **kw):
        pipe = real(transaction=transaction, **kw)
        if transaction:
            store.client.pipeline = real  # once
            run = pipe.execute

            def execute(*a, **k):
                if after_exec:
                    run(*a, **k)
                raise _Crash("connection lost")

            pipe.execute = execute
        return pipe

    store.client.pipeline = pipeline


@pytest.mark.parametrize("after_exec", [False, True], ids=["before-exec", "after-exec"])
def test_a_crash_around_a_commit_loses_nothing_and_applies_nothing_twice(redis_server, small_chunks, after_exec):
    rnd = random.Random(11)
    batches, offset = [], 0
    for _ in range(12):
        batches.append(_rows(rnd, offset))
        offset += len(batches[-1])
    ref = _processor(MemoryStateStore())
    ref.start(INITIAL)
    expected = [ref.process(b, rows).output for b, rows in enumerate(batches)]
    store = _store(redis_server, f"crash-{after_exec}")
    proc = _processor(store)
    proc.start(INITIAL)
    for b, rows in enumerate(batches):
        if b in (4, 9):
            _crash_at(store, after_exec)
            with pytest.raises(_Crash):
                proc.process(b, rows)
            proc = _processor(store)  # the job restarts from the store; Spark replays the batch
            proc.start(INITIAL)
        outcome = proc.process(b, rows)
        assert outcome.replayed == (after_exec and b in (4, 9))  # committed: published again, not applied
        out = store.output(b) if outcome.replayed else outcome.output
        assert sorted(out["added"]) == sorted(expected[b]["added"]), f"batch {b}"
        assert sorted(out["removed"]) == sorted(expected[b]["removed"]), f"batch {b}"
    again = _processor(store)
    again.start(INITIAL)
    assert again.facts() == ref.facts() == _scratch(ref.reasoner.explicit())


def _per_field(server, namespace: str, state: StateSnapshot) -> None:
    """Write `state` (texts) in the per-field layout: hashes `meta`, `E`, `I`, `T` (as fluxmat wrote them before)."""
    client = redis.Redis.from_url(server.url)
    prefix = f"fluxmat:{namespace}:"
    client.hset(prefix + "meta", mapping={k: (str(v) if k == "batch" else json.dumps(v)) for k, v in state.meta.items()})
    client.hset(prefix + "E", mapping=dict.fromkeys(state.explicit, 1))
    client.hset(prefix + "I", mapping=state.facts)
    client.hset(prefix + "T", mapping=state.terms)
    client.close()


def test_a_per_field_state_restores_and_the_next_commit_rewrites_it_in_bulk(redis_server):
    rnd = random.Random(3)
    texts = MemoryStateStore()
    ref = _processor(texts)
    ref.start(INITIAL)
    for b in range(5):
        ref.process(b, _rows(rnd, 10 * b))
    store = _store(redis_server, "old-layout")
    _per_field(redis_server, "old-layout", texts.load())
    assert isinstance(store.load(), StateSnapshot)
    proc = _processor(store)
    assert "restored state of batch 4" in proc.start(INITIAL)
    assert proc.facts() == ref.facts()
    rows = _rows(rnd, 100)
    assert sorted(proc.process(5, rows).output["added"]) == sorted(ref.process(5, rows).output["added"])
    assert isinstance(store.load(), StateColumns)
    assert store.client.exists(*(store.prefix + k for k in bulk_state.PER_FIELD_KEYS)) == 0
    again = _processor(store)
    again.start(INITIAL)
    assert again.facts() == ref.facts() == _scratch(ref.reasoner.explicit())


def _damaged(store: RedisStateStore) -> str:
    with pytest.raises(StateDamaged) as caught:
        store.load()
    return str(caught.value)


def test_a_truncated_corrupted_misplaced_or_missing_chunk_is_refused_in_one_line(redis_server, small_chunks):
    store = _store(redis_server, "damage")
    proc = _processor(store)
    proc.start(INITIAL)
    rnd = random.Random(2)
    for b in range(3):
        proc.process(b, _rows(rnd, 10 * b))
    raw = redis.Redis.from_url(redis_server.url)
    first, second = bulk_state.BulkLayout(raw, store.prefix).keys(store.bulk.manifest())[:2]
    good = raw.get(first)
    raw.set(first, good[:-7])
    message = _damaged(store)
    assert "\n" not in message and first in message and "truncated" in message
    raw.set(first, good[:30] + bytes([good[30] ^ 0xFF]) + good[31:])
    assert "corrupted (CRC-32C mismatch)" in _damaged(store)
    raw.set(first, raw.get(second))
    assert "holds chunk" in _damaged(store)
    raw.set(first, b"not a chunk")
    assert "is not a fluxmat state chunk" in _damaged(store)
    raw.delete(first)
    assert "is missing" in _damaged(store)
    raw.set(first, good)
    assert isinstance(store.load(), StateColumns)


def test_a_keyed_state_on_a_cluster_keeps_its_keys_in_one_slot(tmp_path, small_chunks):
    from redis.crc import key_slot

    cluster = RedisCluster(tmp_path / "cluster").start()
    try:
        store = RedisStateStore(cluster.url, "ns", retry_seconds=0, key="k1", cluster=True)
        proc = _processor(store)
        proc.start(INITIAL)
        rnd = random.Random(4)
        for b in range(8):
            proc.process(b, _rows(rnd, 10 * b))
        names = [store.prefix + k for k in ("meta", "out")] + store.bulk.keys(store.bulk.manifest())
        assert len(names) > 4 and len({key_slot(n.encode()) for n in names}) == 1
        again = _processor(store)
        assert "restored state of batch 7" in again.start(INITIAL)
        assert again.facts() == proc.facts()
        store.close()
    finally:
        cluster.stop()


def test_a_read_decompresses_into_the_system_allocator_not_arrows_default_pool():
    """Arrow's default pool (mimalloc) keeps freed pages: ~45 MB of a LUBM-5 restart's peak RSS."""
    import pyarrow as pa

    from fluxmat.connectors.snapshot_file import int_table, ipc_bytes, read_ipc

    data = ipc_bytes(int_table(np.arange(300_000, dtype=np.int64).reshape(100_000, 3)))
    default, system = pa.default_memory_pool().bytes_allocated(), pa.system_memory_pool().bytes_allocated()
    table = read_ipc(data)
    assert table.num_rows == 100_000 and pa.default_memory_pool().bytes_allocated() == default
    assert pa.system_memory_pool().bytes_allocated() > system  # the table's buffers, held
