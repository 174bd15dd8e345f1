"""A keyed job's engines on the arrays core, without Spark: an engine host (stream.engine_host) keeps
one arrays engine per key, a killed host's successor rebuilds a key from its state in Redis (real
redis-server, real broker), and the key's deltas fold to remat.
"""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import replace

import pytest

from fluxmat.connectors.state import RedisStateStore
from fluxmat.stream import engine_host
from fluxmat.stream.job import JobConfig
from tests.messages import read_deltas
from tests.test_pipeline import PROGRAM, remat


@pytest.fixture
def cfg(broker, redis_server, tmp_path):
    from fluxmat.connectors.broker import ensure_topics

    program = tmp_path / "path.dl"
    program.write_text(PROGRAM, encoding="utf-8")
    n = time.time_ns()
    ensure_topics(broker.bootstrap, {f"au{n}": 1, f"ad{n}": 1})
    c = JobConfig(program=str(program), bootstrap_servers=broker.bootstrap, updates_topic=f"au{n}",
                  deltas_topic=f"ad{n}", checkpoint=str(tmp_path / "ckpt"), redis=redis_server.url,
                  namespace=f"arrays{n}", partition_by="message-key", core="arrays")  # fmt: skip
    yield c
    engine_host.stop_hosts(c)


def rows(offset: int, key: str, *updates: dict) -> list[tuple]:
    return [(0, offset + i, key, json.dumps(u), None, True, None) for i, u in enumerate(updates)]


def test_keyed_engines_on_the_arrays_core_survive_a_host_crash(cfg):
    first = engine_host.call(cfg, 0, 0, {"k1": rows(0, "k1", {"add": [["edge", "a", "b"]], "id": "1"},
                                                    {"add": [["edge", "b", "c"]], "id": "2"}),
                                          "k2": rows(2, "k2", {"add": [["edge", "x", "y"]], "id": "3"})})  # fmt: skip
    assert [s["key"] for s in first] == ["k1", "k2"]
    pid = first[0]["pid"]
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while engine_host.address(cfg, 0).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    again = engine_host.call(cfg, 0, 1, {"k1": rows(3, "k1", {"del": [["edge", "a", "b"]], "id": "4"},
                                                    {"add": [["edge", "c", "d"]], "id": "5"})})  # fmt: skip
    assert again[0]["cache"] == "miss" and again[0]["pid"] != pid  # rebuilt from Redis
    msgs = [m for m in read_deltas(cfg.bootstrap_servers, cfg.deltas_topic) if m["key"] == "k1"]
    state: set[tuple] = set()
    for m in {(m["batch"], m["part"]): m for m in msgs}.values():
        state = (state - {tuple(f) for f in m["removed"]}) | {tuple(f) for f in m["added"]}
    assert state == remat({("edge", "b", "c"), ("edge", "c", "d")})
    store = RedisStateStore(cfg.redis, cfg.namespace, key="k1")
    try:
        assert store.meta().get("core") == "arrays"
    finally:
        store.close()
    assert replace(cfg, core="objects").engine.core == "objects"
