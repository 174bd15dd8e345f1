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
from tests.support.keyed_job import cfg, rows  # noqa: F401 (cfg: the fixture)
from tests.support.messages import read_deltas
from tests.support.pipeline import remat


@pytest.fixture
def arrays_cfg(cfg):  # noqa: F811 -- tests.support.keyed_job's configuration (its hosts stopped after the test), on arrays
    return replace(cfg, core="arrays")


def test_keyed_engines_on_the_arrays_core_survive_a_host_crash(arrays_cfg):
    first = engine_host.call(arrays_cfg, 0, 0, {"k1": rows(0, "k1", {"add": [["edge", "a", "b"]], "id": "1"},
                                                    {"add": [["edge", "b", "c"]], "id": "2"}),
                                          "k2": rows(2, "k2", {"add": [["edge", "x", "y"]], "id": "3"})})  # fmt: skip
    assert [s["key"] for s in first] == ["k1", "k2"]
    pid = first[0]["pid"]
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while engine_host.address(arrays_cfg, 0).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    again = engine_host.call(arrays_cfg, 0, 1, {"k1": rows(3, "k1", {"del": [["edge", "a", "b"]], "id": "4"},
                                                    {"add": [["edge", "c", "d"]], "id": "5"})})  # fmt: skip
    assert again[0]["cache"] == "miss" and again[0]["pid"] != pid  # rebuilt from Redis
    msgs = [
        m
        for m in read_deltas(arrays_cfg.bootstrap_servers, arrays_cfg.deltas_topic)
        if m["key"] == "k1"
    ]
    state: set[tuple] = set()
    for m in {(m["batch"], m["part"]): m for m in msgs}.values():
        state = (state - {tuple(f) for f in m["removed"]}) | {tuple(f) for f in m["added"]}
    assert state == remat({("edge", "b", "c"), ("edge", "c", "d")})
    store = RedisStateStore(arrays_cfg.redis, arrays_cfg.namespace, key="k1")
    try:
        assert store.meta().get("core") == "arrays"
    finally:
        store.close()
    assert replace(arrays_cfg, core="objects").engine.core == "objects"


def _key_facts(job, key: str) -> set[tuple]:
    msgs = [m for m in read_deltas(job.bootstrap_servers, job.deltas_topic) if m["key"] == key]
    state: set[tuple] = set()
    for m in {(m["batch"], m["part"]): m for m in msgs}.values():
        state = (state - {tuple(f) for f in m["removed"]}) | {tuple(f) for f in m["added"]}
    return state


def _key_version(job, key: str) -> int:
    store = RedisStateStore(job.redis, job.namespace, key=key)
    try:
        return int(store.state_meta()["program_version"])
    finally:
        store.close()


def test_a_program_change_reaches_each_key_when_it_is_next_touched(arrays_cfg):
    """stream.keyed: a key at an older program version takes the namespace's program before its rows."""
    from fluxmat.connectors.files import parse_update
    from fluxmat.engine import Reasoner
    from fluxmat.stream import live_program
    from tests.support.pipeline import PROGRAM

    cycle = {"add": [["edge", "a", "b"], ["edge", "b", "a"]], "id": "c"}
    engine_host.call(arrays_cfg, 0, 0, {"k1": rows(0, "k1", cycle), "k2": rows(1, "k2", cycle)})
    configured = Reasoner.from_file(arrays_cfg.program, options=arrays_cfg.engine)
    change = parse_update({"program": {"add": "loop(X) :- path(X, X)."}}, {}, "partition 0 offset 2")
    target = live_program.changed_namespace(configured, None, change, live_program.origin(configured.program))
    assert target["program_version"] == 2
    keyed = rows(3, "k1", {"add": [["edge", "c", "a"]], "id": "k1-2"}, {"program": {"add": "q(X) :- edge(X, Y)."}})
    out = engine_host.call(arrays_cfg, 0, 1, {"k1": keyed}, target)
    [(reason, _, offset)] = json.loads(out[0]["detail"])["dead"]  # a program message with a key:
    assert offset == 4 and "applies to every key" in reason  # every key's program changes together
    assert _key_version(arrays_cfg, "k1") == 2 and _key_version(arrays_cfg, "k2") == 1
    new = PROGRAM + "loop(X) :- path(X, X).\n"
    explicit = {("edge", "a", "b"), ("edge", "b", "a"), ("edge", "c", "a")}
    assert _key_facts(arrays_cfg, "k1") == remat(explicit, new)
    assert _key_facts(arrays_cfg, "k2") == remat(explicit - {("edge", "c", "a")})  # untouched: the old program
    engine_host.call(arrays_cfg, 0, 2, {"k2": rows(5, "k2", {"add": [["edge", "d", "a"]], "id": "k2-2"})}, target)
    assert _key_version(arrays_cfg, "k2") == 2
    assert _key_facts(arrays_cfg, "k2") == remat(explicit - {("edge", "c", "a")} | {("edge", "d", "a")}, new)
    again = engine_host.call(arrays_cfg, 0, 2, {"k2": rows(5, "k2", {"add": [["edge", "d", "a"]], "id": "k2-2"})},
                             target)  # fmt: skip
    assert again[0]["replayed"] and _key_facts(arrays_cfg, "k2") == remat(
        explicit - {("edge", "c", "a")} | {("edge", "d", "a")}, new
    )


def test_the_driver_takes_a_program_message_without_a_key_for_every_key(arrays_cfg):
    """stream.keyed.KeyedDriver.keyless: the namespace's program changes; a bad change and a key-less update are dead."""
    from fluxmat.connectors.state import MemoryStateStore
    from fluxmat.stream.keyed import KeyedDriver
    from tests.support.shared import DeadLetters

    store = MemoryStateStore()
    driver = KeyedDriver(arrays_cfg, store, DeadLetters())
    items = [{"program": {"add": "loop(X) :- path(X, X)."}, "id": "v2"}, {"add": [["edge", "a", "b"]]},
             {"program": {"add": "bad(X) :- edge(X, Y"}}, {"program": {"add": "hop(X) :- edge(X, Y)."}}]  # fmt: skip
    keyless = [{"partition": 0, "offset": i, "raw": json.dumps(u), "size": None} for i, u in enumerate(items)]
    dead, changed = driver.keyless(keyless, "message-key")
    assert [d[2] for d in dead] == [1, 2] and "without a key" in dead[0][0] and "nothing was changed" in dead[1][0]
    assert changed["program_version"] == 3 and "hop(X)" in changed["program"] and "loop(X)" in changed["program"]
    assert [h["version"] for h in changed["program_history"]] == [2, 3]
    assert driver.namespace_program() is None  # not committed yet: the batch commits it
