"""The dashboard's bounds, served for real (ops.dashboard.serve over HTTP, no Spark).

A query stops matching at its limit (the facts the scan visits are
counted), a proof is cut at its depth and node caps with exact `… N more`
counts, the Host header is checked against DNS rebinding, the scheme of
`Authorization: bearer` is case-insensitive, the worker pool is bounded and idle
connections time out, and with Redis stopped (a real redis-server) every API
route answers 503 with the reason within 2 s.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.parse

import pytest

from fluxmat.connectors.state import RedisStateStore
from fluxmat.engine import EngineOptions, Reasoner
from fluxmat.engine.fd.snapshot import export_changes
from fluxmat.ops import dashboard
from fluxmat.ops.dashboard import LiveSource, StoredSource, host_allowed, serve
from fluxmat.ops.inspect import StateView
from fluxmat.ops.metrics import JobMetrics
from tests.support.servers import RedisServer

TOKEN = "t0ken"
FACTS = 20_000


class CountingSet(set):
    """A relation's fact set that counts the facts iterated over (the scan's work)."""

    visited = 0

    def __iter__(self):
        for fact in super().__iter__():
            CountingSet.visited += 1
            yield fact


def _get(port: int, path: str, host: str | None = None, auth: str | None = f"Bearer {TOKEN}"):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Host": host} if host is not None else {}
    if auth:
        headers["Authorization"] = auth
    conn.request("GET", path, headers=headers)
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, (json.loads(body) if resp.getheader("Content-Type") == "application/json" else body)


def _live(program: str, facts, algorithm: str = "remat", **kw):
    reasoner = Reasoner.from_text(program, algorithm, options=EngineOptions(core="objects"))  # reads maintainer.I
    reasoner.load(facts)
    source = LiveSource(JobMetrics("p.dl", algorithm, "default", "updates"), StateView(reasoner))
    server = serve(source, "127.0.0.1", 0, TOKEN, **kw)
    return reasoner, server


@pytest.fixture(scope="module")
def wide():
    """p(0..19999) and q(X) :- p(X), served with a token."""
    reasoner, server = _live("q(X) :- p(X).", [("p", i) for i in range(FACTS)])
    yield reasoner, server.server_address[1]
    server.shutdown()
    server.server_close()


def test_query_stops_matching_at_the_limit(wide):
    reasoner, port = wide
    rel = reasoner.maintainer.I["p"]
    rel.facts = CountingSet(rel.facts)
    for limit, shown in (("100", 100), ("100000000", dashboard.MAX_LIMIT), (None, dashboard.DEFAULT_LIMIT)):
        CountingSet.visited = 0
        query = "/api/query?pattern=" + urllib.parse.quote("p(?X)") + (f"&limit={limit}" if limit else "")
        status, body = _get(port, query)
        assert status == 200, body
        assert len(body["facts"]) == body["count"] == shown and body["truncated"]
        assert body["facts"] == sorted(body["facts"])
        assert CountingSet.visited <= shown + 1, f"visited {CountingSet.visited} facts for {shown}"
    CountingSet.visited = 0
    status, body = _get(port, "/api/query?pattern=" + urllib.parse.quote("p(7)"))
    assert (status, body["facts"], body["truncated"]) == (200, ["p(7)"], False)
    assert _get(port, "/api/query?pattern=p(X)&limit=-1")[0] == 400
    assert _get(port, "/api/query?pattern=p(X)&limit=many")[0] == 400


def test_the_cli_query_still_counts_every_match(wide):
    reasoner, _port = wide
    result = StateView(reasoner).query("q(X)", 3)
    assert result["count"] == FACTS and result["facts"] == ["q(0)", "q(1)", "q(10)"]


def test_host_header_allowlist(wide):
    _reasoner, port = wide
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "LOCALHOST", f"[::1]:{port}",
                 f"app.localhost:{port}", f"10.1.2.3:{port}", None):  # fmt: skip
        assert _get(port, "/api/query?pattern=p(1)", host=host)[0] == 200, host
    for host in (f"evil.example:{port}", "attacker.com", "127.0.0.1.nip.io", "localhost.evil.com"):
        status, body = _get(port, "/", host=host)
        assert status == 403 and "DNS rebinding" in body["error"], host
    assert host_allowed("dash.internal:8088", "dash.internal")  # --dashboard-host adds its name
    assert host_allowed("DASH.internal.", "dash.internal")
    assert not host_allowed("dash.internal.evil.com", "dash.internal")


def test_bearer_scheme_in_any_case(wide):
    _reasoner, port = wide
    for auth in (f"Bearer {TOKEN}", f"bearer {TOKEN}", f"BEARER  {TOKEN}"):
        assert _get(port, "/api/query?pattern=p(1)", auth=auth)[0] == 200, auth
    for auth in ("bearer wrong", f"Basic {TOKEN}", None):
        assert _get(port, "/api/query?pattern=p(1)", auth=auth)[0] == 401, auth


def _shown(proof: dict) -> tuple[int, int, int]:
    """(nodes shown, nodes counted in `more`, depth) of a proof's JSON."""
    steps = proof["steps"]
    depth, level = 0, {proof["root"]: 0}
    for step in steps:  # a premise always comes after the step that uses it first
        for p in step.get("premises", []):
            level[p] = max(level.get(p, 0), level[step["id"]] + 1)
            depth = max(depth, level[p])
    return len(steps), sum(s.get("more", 0) for s in steps), depth


CHAIN = 300


@pytest.fixture(scope="module")
def chain():
    edges = [("edge", i, i + 1) for i in range(CHAIN)]
    reasoner, server = _live("path(X, Y) :- edge(X, Y). path(X, Z) :- path(X, Y), edge(Y, Z).", edges)
    yield reasoner, server.server_address[1]
    server.shutdown()
    server.server_close()


def test_a_deep_proof_is_answered_within_its_caps(chain):
    _reasoner, port = chain
    status, why = _get(port, "/api/why?fact=" + urllib.parse.quote(f"path(0, {CHAIN})"))
    assert status == 200 and why["found"] and why["truncated"]
    assert why["nodes"] == 2 * CHAIN  # CHAIN path steps and CHAIN edges
    shown, more, depth = _shown(why["proof"])
    assert depth == dashboard.PROOF_DEPTH and shown == 2 * dashboard.PROOF_DEPTH + 1
    assert shown + more == why["nodes"]
    cut = [line for line in why["lines"] if line.endswith(" more")]
    assert cut == ["│  " * dashboard.PROOF_DEPTH + f"└─ … {why['nodes'] - shown} more"]
    assert len(why["lines"]) == shown + 1


def test_a_wide_proof_is_cut_at_its_node_cap(chain):
    reasoner, _port = chain
    why = StateView(reasoner).why(f"path(0, {CHAIN})", max_nodes=25)
    shown, more, _depth = _shown(why["proof"])
    assert shown == 25 and shown + more == why["nodes"] and why["truncated"]
    assert why["lines"][-1] == f"… {why['nodes'] - 25} more" and len(why["lines"]) == 26
    whole = StateView(reasoner).why(f"path(0, {CHAIN})")  # the CLI: no caps
    assert not whole["truncated"] and _shown(whole["proof"]) == (2 * CHAIN, 0, CHAIN)


def test_pool_is_bounded_and_idle_connections_time_out():
    _reasoner, server = _live("q(X) :- p(X).", [("p", 1)], request_timeout=0.5)
    port = server.server_address[1]
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(dashboard.WORKERS + dashboard.QUEUED)]
    try:
        refused = socket.create_connection(("127.0.0.1", port), timeout=10)
        refused.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        assert refused.recv(100).startswith(b"HTTP/1.1 503")  # every slot is taken
        refused.close()
        for s in idle:  # the server drops each silent client after its socket timeout
            s.settimeout(10)
            assert s.recv(100) == b""
        assert _get(port, "/api/query?pattern=p(1)")[0] == 200
    finally:
        for s in idle:
            s.close()
        server.shutdown()
        server.server_close()


def test_redis_down_every_answer_within_two_seconds(tmp_path):
    redis = RedisServer(tmp_path / "redis").start()
    program = tmp_path / "p.dl"
    program.write_text("q(X) :- p(X).\n", encoding="utf-8")
    reasoner = Reasoner.from_file(program, "fd-counting", options=EngineOptions(core="objects"))  # export_changes
    reasoner.load([("p", 1), ("p", 2)])
    store = RedisStateStore(redis.url, "dash")
    store.commit(-1, export_changes(reasoner.maintainer), {"through": None, "added": [], "removed": [], "dead": []})
    store.close()
    source = StoredSource(str(program), redis.url, "dash")
    server = serve(source, "127.0.0.1", 0, TOKEN)
    port = server.server_address[1]
    paths = ["/api/status", "/api/query?pattern=q(X)", "/api/why?fact=q(1)"]
    try:
        assert [_get(port, p)[0] for p in paths] == [200, 200, 200]
        redis.stop()
        for path in paths:
            started = time.monotonic()
            status, body = _get(port, path)
            elapsed = time.monotonic() - started
            assert status == 503 and "does not answer" in body["error"] and redis.url in body["error"], body
            assert elapsed < 2.0, f"{path} took {elapsed:.1f} s with Redis down"
    finally:
        server.shutdown()
        server.server_close()
        redis.stop()
