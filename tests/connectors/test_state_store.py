"""State stores (docs/architecture.md, "The state in Redis"): atomic absolute writes, restart from Redis, AOF."""

import json
import random
import time

import pytest

from fluxmat.connectors.state import MemoryStateStore, RedisStateStore, open_store
from fluxmat.engine.fd.snapshot import export_changes, restore
from fluxmat.engine.wire import fact_json
from tests.support.servers import RedisServer
from tests.support.state import POOL, maintainer_for


def _drive(store, alg, seed, steps=25):
    """Random overlapping updates; after every quiescent point commit, then restore a
    fresh engine from the store and compare everything observable."""
    rnd = random.Random(seed)
    a = maintainer_for(alg)
    a.load(rnd.sample(POOL, 6))
    store.commit(-1, export_changes(a), {"through": None, "added": [], "removed": [], "dead": []})
    batch = 0
    for _ in range(steps):
        add = set(rnd.sample(POOL, 2))
        a.submit(add, set(rnd.sample(POOL, 2)) - add)
        a.step(rnd.randint(0, 4))
        if rnd.random() < 0.4:
            a.run()
        if a.quiescent:
            store.commit(batch, export_changes(a), {"through": batch, "added": [], "removed": [], "dead": []})
            assert store.last_batch() == batch
            b = maintainer_for(alg)
            restore(b, store.load())
            assert set(b.facts()) == set(a.facts())
            assert set(b.explicit()) == set(a.explicit())
            if alg == "fd-counting":
                assert b.log_size() == a.log_size()
                dec = lambda m: {m.decode(*k): v for k, v in m.support_counts().items()}  # noqa: E731
                assert dec(b) == dec(a)
            batch += 1
    return a


@pytest.mark.parametrize("alg", ["fd-counting", "fd-dred"])
@pytest.mark.parametrize("seed", range(4))
def test_memory_store_round_trip(alg, seed):
    _drive(MemoryStateStore(), alg, seed)


@pytest.mark.parametrize("alg", ["fd-counting", "fd-dred"])
def test_redis_store_round_trip(redis_server, alg):
    store = RedisStateStore(redis_server.url, namespace=f"rt-{alg}")
    store.clear()
    _drive(store, alg, seed=7)
    assert store.size() > 0
    store.close()


def test_redis_state_survives_a_restart_with_aof(tmp_path):
    """Redis restart with AOF on: the committed state is still there, byte for byte."""
    server = RedisServer(tmp_path / "aof").start()
    try:
        store = RedisStateStore(server.url, "aof")
        a = _drive(store, "fd-counting", seed=3, steps=15)
        before = store.load()
        last = store.last_batch()
        store.close()
        server.stop(kill=True)  # no clean shutdown: only the AOF is left
        server.start()
        store = RedisStateStore(server.url, "aof")
        after = store.load()
        assert store.last_batch() == last
        assert after.meta == before.meta
        assert sorted(after.explicit) == sorted(before.explicit)
        assert after.facts == before.facts
        assert after.log == before.log and after.terms == before.terms
        b = maintainer_for("fd-counting")
        restore(b, after)
        if a.quiescent:
            assert set(b.facts()) == set(a.facts())
        store.close()
    finally:
        server.stop()


def test_outputs_are_kept_for_replay_and_pruned():
    store = MemoryStateStore()
    e = maintainer_for("fd-dred")
    e.load([])
    for b in range(40):
        store.commit(b, export_changes(e), {"through": b, "added": [["x", b]], "removed": [], "dead": []})
    assert store.output(39)["added"] == [["x", 39]]
    assert store.output(0) is None  # only the recent outputs are kept


def test_unreachable_redis_is_a_clear_error():
    from tests.support.servers import free_port

    with pytest.raises(ConnectionError, match="cannot reach Redis at redis://127.0.0.1"):
        RedisStateStore(f"redis://127.0.0.1:{free_port()}/0", retry_seconds=0)


def test_open_store_by_url(redis_server):
    assert isinstance(open_store("memory://"), MemoryStateStore)
    assert isinstance(open_store(redis_server.url), RedisStateStore)
    with pytest.raises(ValueError, match="unsupported state store URL"):
        open_store("postgres://x")


def test_tls_against_a_plain_server_fails_within_the_connect_timeout(redis_server, monkeypatch):
    """Issue 14: `rediss://` against a plain Redis hung for the 120 s socket timeout.

    The TLS handshake and first PING are bounded by CONNECT_TIMEOUT (10 s; 1 s
    here), whatever the socket timeout of later commands.
    """
    from fluxmat.connectors import state

    monkeypatch.setattr(state, "CONNECT_TIMEOUT", 1.0)
    tls = redis_server.url.replace("redis://", "rediss://:s3cret@", 1)
    started = time.monotonic()
    with pytest.raises(ConnectionError, match="cannot reach Redis at rediss://:\\*\\*\\*@127.0.0.1") as exc:
        RedisStateStore(tls, retry_seconds=0)
    assert time.monotonic() - started < 5, "the handshake was not bounded by CONNECT_TIMEOUT"
    assert "s3cret" not in str(exc.value)


def test_urls_never_show_their_password(tmp_path, caplog):
    """Errors and retry lines show `redis://:***@...` (issue 14: they showed the password)."""
    from fluxmat.connectors.redact import redact
    from tests.support.servers import RedisServer, free_port

    assert redact("cannot reach Redis at redis://:secret@h:1/0: x") == "cannot reach Redis at redis://:***@h:1/0: x"
    assert redact("rediss://default:p@ss@h:1/0 and redis://u@h") == "rediss://default:***@h:1/0 and redis://u@h"
    assert redact("http://h/metrics?token=abc&x=1") == "http://h/metrics?token=***&x=1"
    url = f"redis://:secret@127.0.0.1:{free_port()}/0"
    with pytest.raises(ConnectionError) as exc:
        RedisStateStore(url, retry_seconds=0)
    assert "secret" not in str(exc.value) and ":***@127.0.0.1" in str(exc.value)
    with pytest.raises(ValueError) as bad:
        open_store("http://:secret@x")
    assert "secret" not in str(bad.value)
    import redis

    server = RedisServer(tmp_path / "redis", password="secret").start()
    try:
        store = RedisStateStore(server.url, retry_seconds=0.5)
        assert store.last_batch() is None  # the password works
        server.stop()
        with caplog.at_level("WARNING", logger="fluxmat.state"), pytest.raises(redis.ConnectionError):
            store.last_batch()
    finally:
        server.stop()
    retries = [r.getMessage() for r in caplog.records if "retrying" in r.getMessage()]
    assert retries and all(":***@127.0.0.1" in m and "secret" not in m for m in retries), retries


def test_the_store_speaks_to_redis_through_hiredis(redis_server):
    """Issue 16: hiredis (a dependency) packs the commit's commands and parses the replies."""
    store = RedisStateStore(redis_server.url, "hiredis")
    try:
        conn = store.client.connection_pool.get_connection()
        assert type(conn._parser).__name__ == "_HiredisParser"
        store.client.connection_pool.release(conn)
    finally:
        store.close()


def test_the_fsync_policy_is_set_or_a_refusal_is_a_warning(redis_server, tmp_path):
    """Issue 16: --redis-fsync sets appendfsync; a server that refuses CONFIG keeps its own, with a warning."""
    import redis

    store = RedisStateStore(redis_server.url, "fsync")
    probe = redis.Redis.from_url(redis_server.url, decode_responses=True)
    try:
        for policy in ("everysec", "always"):
            assert store.set_fsync(policy) == f"Redis AOF: appendonly yes, appendfsync {policy}"
            assert probe.config_get("appendfsync") == {"appendfsync": policy}
        assert store.set_fsync("keep") == "Redis AOF: appendonly yes, appendfsync always (kept as configured)"
    finally:
        store.close()
        probe.close()
    locked = RedisServer(tmp_path / "locked")
    locked.extra = ["--user", "default", "on", "nopass", "~*", "&*", "+@all", "-config"]
    locked.start()
    try:
        store = RedisStateStore(locked.url, "fsync")
        line = store.set_fsync("everysec")
        store.close()
    finally:
        locked.stop()
    assert line.startswith(f"WARNING: Redis at {locked.url} refused CONFIG SET appendfsync everysec (")
    assert "it keeps its own policy (policy unknown: CONFIG GET refused)" in line


def _format_1(fd) -> dict[str, dict]:
    """The engine's state as an earlier fluxmat stored it (format 1: facts as JSON texts, engine.wire)."""
    text = lambda key: json.dumps(fact_json(fd.decode(*key)), ensure_ascii=False)  # noqa: E731
    log = {}
    for lk, head in fd.log_entries():
        rid, h, pos, neg = fd.instance(lk, head)
        body = [text(g) for g in pos]
        log[json.dumps([rid, body], ensure_ascii=False)] = json.dumps(
            [rid, text(h), body, [text(g) for g in neg]], ensure_ascii=False)
    return {"E": {text((p, f)): 1 for p, fs in fd.E.items() for f in fs},
            "I": {text(k): born for k, born in fd.born.items()}, "log": log}


def test_a_format_1_state_is_restored_then_rewritten_compact(redis_server):
    """A state written before the dictionary-encoded form: restored as it is, rewritten whole at the next commit."""
    import redis

    rnd = random.Random(5)
    a = maintainer_for("fd-counting")
    a.load(rnd.sample(POOL, 8))
    old = _format_1(a)
    store = RedisStateStore(redis_server.url, "format1")
    store.clear()
    raw = redis.Redis.from_url(redis_server.url, decode_responses=True)
    try:
        meta = {k: json.dumps(v) for k, v in export_changes(a).meta.items() if k != "format"}
        raw.hset(store._k("meta"), mapping={**meta, "batch": "3"})
        for name, table in old.items():
            raw.hset(store._k(name), mapping=table)
        b = maintainer_for("fd-counting")
        restore(b, store.load())
        assert set(b.facts()) == set(a.facts()) and set(b.explicit()) == set(a.explicit())
        assert b.log_size() == a.log_size() > 0
        store.commit(4, export_changes(b), {"through": 4, "added": [], "removed": [], "dead": []})
        assert json.loads(raw.hget(store._k("meta"), "format")) == 2
        for name, table in old.items():  # every old text is gone, the new ones are term ids
            assert not set(raw.hkeys(store._k(name))) & set(table)
        assert raw.hlen(store._k("I")) == len(old["I"]) and raw.hlen(store._k("log")) == len(old["log"])
        c = maintainer_for("fd-counting")
        restore(c, store.load())
        assert set(c.facts()) == set(a.facts()) and c.log_size() == a.log_size()
        dec = lambda m: {m.decode(*k): v for k, v in m.support_counts().items()}  # noqa: E731
        assert dec(c) == dec(a)
    finally:
        store.clear()
        store.close()
        raw.close()


def test_large_outputs_are_stored_compressed(redis_server):
    """The initial output (the whole materialisation) is kept lz4-compressed; outputs read back exactly."""
    import redis

    from fluxmat.connectors.output_pack import PACK_OVER

    store = RedisStateStore(redis_server.url, "packed")
    store.clear()
    raw = redis.Redis.from_url(redis_server.url, decode_responses=True)
    e = maintainer_for("fd-dred")
    e.load([])
    try:
        big = {"through": None, "added": [["edge", f"<http://example.org/n{i}>", i] for i in range(20_000)],
               "removed": [], "dead": []}  # fmt: skip
        small = {"through": 0, "added": [["x", "é"]], "removed": [], "dead": []}
        store.commit(-1, export_changes(e), big)
        store.commit(0, export_changes(e), small)
        stored = raw.hget(store._k("out"), "-1")
        assert stored.startswith("lz4:") and len(json.dumps(big)) > max(PACK_OVER, 2 * len(stored))
        assert json.loads(raw.hget(store._k("out"), "0")) == small  # small ones stay readable JSON
        assert store.output(-1) == big and store.output(0) == small
    finally:
        store.clear()
        store.close()
        raw.close()


def test_a_large_output_is_packed_slice_by_slice_and_reads_back_exactly(monkeypatch):
    """The initial output's JSON is made and compressed a slice of facts at a time: the same output reads back."""
    from fluxmat.connectors import output_pack

    monkeypatch.setattr(output_pack, "PACK_SLICE", 7)
    out = {"through": 'x "added": [] y', "added": [["e", f"<n{i}>", i, "é"] for i in range(100)],
           "removed": [["r", 1]], "dead": [["why", 0, 1]]}  # fmt: skip
    out["added"][50][2] = 10**30  # a slice orjson cannot write (beyond 64 bits): json writes it
    packed = output_pack.pack_output(out)
    assert packed.startswith("lz4:") and output_pack.unpack_output(packed) == out


def test_a_damaged_state_is_a_clear_error(redis_server):
    """A stored fact naming a term the state does not hold: one error saying the state is damaged."""
    import redis

    from fluxmat.engine import FluxmatError

    a = maintainer_for("fd-counting")
    a.load(POOL[:6])
    store = RedisStateStore(redis_server.url, "damaged")
    store.clear()
    raw = redis.Redis.from_url(redis_server.url, decode_responses=True)
    try:
        store.commit(-1, export_changes(a), {"through": None, "added": [], "removed": [], "dead": []})
        restore(maintainer_for("fd-counting"), store.load())  # whole: fine
        raw.hdel(store._k("T"), "0")  # the first term (a relation) is gone
        with pytest.raises(FluxmatError, match=r"the stored state is damaged \(format 2: KeyError '0'\)"):
            restore(maintainer_for("fd-counting"), store.load())
    finally:
        store.clear()
        store.close()
        raw.close()
