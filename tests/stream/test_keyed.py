"""The keyed operator's parts without Spark: keys of messages, the engine cache, engine hosts.

Engine hosts are tested for real: a host process started on demand, its
engines reused between batches, a host killed (the next call starts another,
which rebuilds from Redis, exactly), and stopped with the job.
"""

from __future__ import annotations

import json
import os
import signal
import time
from types import SimpleNamespace

import pytest

from fluxmat.connectors.rdf import graph_of
from fluxmat.stream import engine_host
from fluxmat.stream.key_engines import Engines
from fluxmat.stream.keyed import KeyedDriver, key_of
from tests.support.keyed_job import cfg, rows  # noqa: F401 (cfg: the fixture)
from tests.support.pipeline import remat

EX = "http://ex.org/"


def quads(*rows: tuple[str, str, str, str | None]) -> str:
    return "".join(f"<{EX}{s}> <{EX}{p}> <{EX}{o}>" + (f" <{EX}{g}>" if g else "") + " .\n" for s, p, o, g in rows)


@pytest.mark.parametrize(("item", "graph"), [
    ({"format": "nquads", "add": quads(("a", "p", "b", "g1"))}, EX + "g1"),
    ({"format": "nquads", "add": quads(("a", "p", "b", "g1")), "del": quads(("b", "p", "c", "g1"))}, EX + "g1"),
    ({"format": "nquads", "add": quads(("a", "p", "b", None))}, None),  # the default graph
    ({"format": "nquads", "add": quads(("a", "p", "b", "g1"), ("a", "p", "b", "g2"))}, None),  # two graphs
    ({"format": "ntriples", "add": quads(("a", "p", "b", None))}, None),
    ({"format": "nquads", "add": "<a> <b"}, None),  # malformed: no key, a dead letter
    ({"add": [["edge", "a", "b"]]}, None),
    ([1, 2], None),
])  # fmt: skip
def test_graph_of(item, graph):
    assert graph_of(item) == graph


def test_key_of_rows():
    row = (0, 5, "tenant1", json.dumps({"format": "nquads", "add": quads(("a", "p", "b", "g"))}), None, True, 9)
    assert key_of(row, "message-key") == "tenant1"
    assert key_of((0, 5, "", "{}", None, True, 2), "message-key") is None
    assert key_of((0, 5, None, "{}", None, True, 2), "message-key") is None
    assert key_of(row, "graph") == EX + "g"
    assert key_of((0, 5, "k", "{not json", None, True, 9), "graph") is None
    assert key_of((0, 5, "k", None, None, True, None), "graph") is None


def _entry(facts: int):
    sizes = {"facts": facts}
    return SimpleNamespace(processor=SimpleNamespace(reasoner=SimpleNamespace(sizes=lambda: sizes)), facts=0)


def test_engine_cache_evicts_least_recently_used_by_facts():
    cache = Engines(max_facts=100)
    for key in "abc":
        cache.put(key, _entry(40))
    assert list(cache.entries) == ["b", "c"] and cache.facts == 80  # a went first
    cache.get("b")  # used: c is now the oldest
    cache.put("d", _entry(40))
    assert list(cache.entries) == ["b", "d"] and cache.facts == 80
    cache.put("e", _entry(500))  # larger than the bound alone: kept, the others go
    assert list(cache.entries) == ["e"] and cache.facts == 500
    cache.drop("e")
    assert cache.facts == 0 and not cache.entries


def test_driver_outcome_sums_keys():
    keys = [
        {"key": "a", "replayed": False, "updates": 2, "adds": 3, "deletes": 1, "dead": 1, "quarantined": 0,
         "added": 5, "removed": 1, "detail": json.dumps({"phases": {"engine": 0.5}, "stats": {"units": 7},
                                                         "timestamps": [10, 20], "dead": [["bad", 0, 3]]})},
        {"key": "b", "replayed": False, "updates": 1, "adds": 1, "deletes": 0, "dead": 0, "quarantined": 0,
         "added": 2, "removed": 0, "detail": json.dumps({"phases": {"engine": 0.25}, "stats": {"units": 3},
                                                         "timestamps": [5], "dead": []})},
    ]  # fmt: skip
    out = KeyedDriver._outcome(4, keys, [["no key", 1, 9, "{}", False]], 1.5)
    assert (out.batch, out.updates, out.adds, out.deletes, out.added, out.removed) == (4, 3, 4, 1, 7, 1)
    assert out.dead == 2 and out.phases == {"engine": 0.75} and out.stats == {"units": 10}
    assert out.oldest_timestamp_ms == 5 and not out.replayed
    assert sorted(d[:3] for d in out.output["dead"]) == [["bad", 0, 3], ["no key", 1, 9]]


# ------------------------------------------------------------------ engine hosts (real processes)


def test_engine_host_keeps_engines_survives_a_crash_and_stops(cfg):  # noqa: F811 - the imported fixture
    from tests.support.messages import read_deltas

    first = engine_host.call(cfg, 0, 0, {"k1": rows(0, "k1", {"add": [["edge", "a", "b"]], "id": "1"}),
                                          "k2": rows(1, "k2", {"add": [["edge", "x", "y"]], "id": "2"})})  # fmt: skip
    assert [(s["key"], s["cache"]) for s in first] == [("k1", "new"), ("k2", "new")]
    pid = first[0]["pid"]
    assert pid != os.getpid() and engine_host.address(cfg, 0).exists()
    second = engine_host.call(cfg, 0, 1, {"k1": rows(2, "k1", {"add": [["edge", "b", "c"]], "id": "3"})})
    assert second[0]["cache"] == "hit" and second[0]["pid"] == pid
    again = engine_host.call(cfg, 0, 1, {"k1": rows(2, "k1", {"add": [["edge", "b", "c"]], "id": "3"})})
    assert again[0]["replayed"]  # a retried task: the key's batch is re-published, not re-applied
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while engine_host._connect(engine_host.address(cfg, 0)) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    third = engine_host.call(cfg, 0, 2, {"k1": rows(3, "k1", {"del": [["edge", "a", "b"]], "id": "4"})})
    assert third[0]["cache"] == "miss" and third[0]["pid"] != pid  # a new host rebuilt k1 from Redis
    msgs = [m for m in read_deltas(cfg.bootstrap_servers, cfg.deltas_topic) if m["key"] == "k1"]
    state: set[tuple] = set()
    for m in {(m["batch"], m["part"]): m for m in msgs}.values():
        state = (state - {tuple(f) for f in m["removed"]}) | {tuple(f) for f in m["added"]}
    assert state == remat({("edge", "b", "c")})
    assert engine_host.stop_hosts(cfg) == 1
    assert not engine_host.address(cfg, 0).exists()


def test_engine_host_reports_errors_to_the_task(cfg, tmp_path):  # noqa: F811 - the imported fixture
    from dataclasses import replace

    broken = replace(cfg, program=str(tmp_path / "missing.dl"))
    with pytest.raises(RuntimeError, match="engine host .*missing.dl"):
        engine_host.call(broken, 0, 0, {"k": rows(0, "k", {"add": [["edge", "a", "b"]]})})
    engine_host.stop_hosts(broken)


def test_engine_sockets_live_where_only_this_user_may_enter(monkeypatch, tmp_path):
    monkeypatch.setattr(engine_host.tempfile, "gettempdir", lambda: str(tmp_path))
    assert oct(engine_host.socket_dir().stat().st_mode & 0o777) == "0o700"
    (tmp_path / f"fluxmat-engines-{os.getuid()}").chmod(0o777)  # opened up by someone: refused
    with pytest.raises(RuntimeError, match="no one else may enter"):
        engine_host.socket_dir()
