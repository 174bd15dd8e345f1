"""Metrics, dashboard and questions against a running job (real tansu, redis-server, Spark).

One job per module, started as a user would (`python -m fluxmat.ops.cli run ... --metrics-port
--dashboard-port --auth-token`), fed a known stream: the tests compare what the
metrics, the dashboard API, `fluxmat query` / `fluxmat why` (against the Redis
state) and the standalone `fluxmat dashboard` report with the stream's exact
numbers and with a from-scratch evaluation; a real headless chromium reads the
dashboard of the same job.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from tests.support.browser import Browser
from tests.support.live_job import TOKEN, LiveJob
from tests.support.messages import read_deltas
from tests.support.pipeline import (
    INITIAL,
    Proc,
    encode,
    job_env,
    make_setup,
    produce,
    remat,
    start_job,
    wait_for_log,
    wait_for_through,
)
from tests.support.servers import free_port

UPDATES = 40  # valid updates, each adding one fact and (from the 2nd on) deleting one


def stream() -> tuple[list[dict], int, int]:
    """UPDATES valid updates over nodes n0..n40 (a growing then shrinking chain), and counts."""
    ups, adds, dels = [], 0, 0
    for i in range(UPDATES):
        u = {"add": [["edge", f"n{i}", f"n{i + 1}"]], "id": f"u{i}"}
        adds += 1
        if i % 4 == 3:  # delete an edge added earlier: the chain breaks
            u["del"] = [["edge", f"n{i - 2}", f"n{i - 1}"]]
            dels += 1
        ups.append(u)
    return ups, adds, dels


def explicit_after(ups: list[dict]) -> set[tuple]:
    e = set(INITIAL)
    for u in ups:
        e -= {tuple(f) for f in u.get("del", [])}
        e |= {tuple(f) for f in u["add"]}
    return e


@pytest.fixture(scope="module")
def live(broker, redis_server, tmp_path_factory):
    s = make_setup(broker, redis_server, tmp_path_factory.mktemp("ops-live"))
    mport, dport = free_port(), free_port()
    proc = start_job(s, "ops-job", None, "--metrics-port", str(mport), "--dashboard-port", str(dport),
                     "--auth-token", TOKEN, "--max-updates-per-batch", "4",
                     "--trigger-interval", "400ms", "--verify-every", "2")  # fmt: skip
    job = LiveJob(s, proc, mport, dport)
    try:
        wait_for_log(proc, "reading ")
        wait_for_log(proc, "dashboard on http://127.0.0.1:")
        ups, adds, dels = stream()
        records = [(0, encode(u)) for u in ups] + [(0, b"{not json")]
        marker = {"add": [["edge", "z1", "z2"]], "id": "last"}
        produce(s.bootstrap, s.updates, records + [(0, encode(marker))])
        deadline = time.monotonic() + 180
        while True:  # watch the backlog drain through the dashboard (4 messages per batch)
            status = job.get("/api/status")
            job.statuses.append(status)
            job.max_lag_seen = max(job.max_lag_seen, sum(status["now"]["lag"].values()))
            if status["now"]["through"] == "last" or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        wait_for_through(s, proc, "last")
        job.expected_explicit = explicit_after([*ups, marker])
        job.expected_facts = remat(job.expected_explicit)
        job.counts = {"updates": UPDATES + 1, "adds": adds + 1, "deletes": dels, "dead": 1}
        time.sleep(3.5)  # one more lag sample after the last batch
        yield job
    finally:
        proc.terminate()
        proc.cleanup()


def test_metrics_report_the_stream_exactly(live):
    m = live.metrics()
    c = live.counts
    assert m["fluxmat_updates_consumed_total"] == c["updates"]
    assert m["fluxmat_fact_operations_total{op=add}"] == c["adds"]
    assert m["fluxmat_fact_operations_total{op=delete}"] == c["deletes"]
    assert m["fluxmat_dead_letters_total"] == c["dead"]
    assert m["fluxmat_batch_failures_total"] == 0
    facts = {f for f in live.expected_facts}
    assert m["fluxmat_materialisation_facts"] == len(facts)
    assert m["fluxmat_explicit_facts"] == len(live.expected_explicit)
    applied = m["fluxmat_batches_total{outcome=applied}"]
    assert applied >= (c["updates"] + c["dead"]) / 4  # at most 4 messages per batch
    sent = read_deltas(live.s.bootstrap, live.s.deltas)  # every message on the deltas topic, batch -1 included
    assert m["fluxmat_delta_messages_total"] == len(sent) > applied
    assert m["fluxmat_delta_facts_total{kind=added}"] == sum(len(d["added"]) for d in sent)
    assert m["fluxmat_delta_facts_total{kind=removed}"] == sum(len(d["removed"]) for d in sent)
    assert m["fluxmat_batch_duration_seconds_count"] == applied
    assert m["fluxmat_update_latency_seconds_count"] > 0
    assert m["fluxmat_last_consistency_point_batch"] == live.statuses[-1]["now"]["last_batch"]
    assert time.time() - m["fluxmat_last_consistency_point_timestamp_seconds"] < 120
    assert m[f"fluxmat_consumer_lag_messages{{partition=0,topic={live.s.updates}}}"] == 0
    assert m[f"fluxmat_consumer_lag_messages{{partition=1,topic={live.s.updates}}}"] == 0
    assert m["fluxmat_pending_operations"] == 0
    assert m["fluxmat_derivation_log_entries"] == 0  # the job's default core (arrays) keeps counters, no log
    assert m["fluxmat_state_entries"] > m["fluxmat_materialisation_facts"]
    assert m["fluxmat_redis_used_memory_bytes"] > m["fluxmat_state_namespace_bytes"] > 0
    added = m["fluxmat_delta_facts_total{kind=added}"]
    removed = m["fluxmat_delta_facts_total{kind=removed}"]
    assert added - removed == len(facts)  # the initial materialisation is counted as sent too
    assert m["fluxmat_time_lag_seconds"] == 0  # drained: nothing waits
    info = [k for k in m if k.startswith("fluxmat_info{")]
    assert info == [f"fluxmat_info{{algorithm=fd-counting,namespace={live.s.namespace},program={live.s.program}}}"]


def test_the_job_verifies_itself_against_a_from_scratch_evaluation(live):
    """`--verify-every 2`: self-checks ran during the stream and found the state exact."""
    m = live.metrics()
    assert m["fluxmat_verifications_total{result=exact}"] >= 1
    assert m.get("fluxmat_verifications_total{result=different}", 0) == 0
    assert m["fluxmat_verified_batch"] >= 0
    verified = live.get("/api/status")["now"]["verified"]
    assert verified["result"] == "exact" and verified["missing"] == verified["extra"] == 0


def test_spark_phases_are_reported_beside_ours(live):
    m = live.metrics()
    assert m["fluxmat_spark_phase_seconds_count{phase=triggerExecution}"] >= 1
    assert m["fluxmat_spark_phase_seconds_sum{phase=addBatch}"] > 0


def test_the_dashboard_saw_a_backlog_drain(live):
    assert live.max_lag_seen > 0, "the lag never showed the 42 queued messages"
    pending_peaks = [b["peak_pending"] for st in live.statuses for b in st["batches"]]
    assert max(pending_peaks) > 0
    final = live.get("/api/status")
    assert final["now"]["lag"] == {"0": 0, "1": 0}
    assert final["totals"]["updates"] == live.counts["updates"]
    assert final["now"]["facts"] == len(live.expected_facts)
    facts_series = [p["facts"] for p in final["history"]]
    assert len(facts_series) > 5 and facts_series[-1] == len(live.expected_facts)
    assert final["deltas"] and final["deltas"][-1]["through"] == "last"
    assert sorted(final["deltas"][-1]["added"]) == [["edge", "z1", "z2"], ["path", "z1", "z2"], ["src", "z1"]]


def test_dashboard_auth_and_errors(live):
    for token in (None, "wrong"):
        with pytest.raises(urllib.error.HTTPError) as exc:
            live.get("/api/status", token=token)
        assert exc.value.code == 401
    with urllib.request.urlopen(live.base + "/healthz", timeout=10) as resp:  # 200 with its state
        assert resp.status == 200 and resp.read().startswith((b"healthy: ", b"degraded: 1 dead letter"))
    with urllib.request.urlopen(f"{live.base}/?token={TOKEN}", timeout=10) as resp:
        assert b'id="why-fact"' in resp.read()
    with pytest.raises(urllib.error.HTTPError) as exc:
        live.get("/api/query?pattern=path(a,")
    assert exc.value.code == 400 and "expected" in json.loads(exc.value.read())["error"]
    with pytest.raises(urllib.error.HTTPError) as exc:
        live.get("/api/query?pattern=nope(%3FX)")
    assert exc.value.code == 400 and "unknown predicate nope/1" in json.loads(exc.value.read())["error"]


def test_dashboard_questions_match_the_materialisation(live):
    r = live.get("/api/query?pattern=" + urllib.parse.quote("path(a, ?X)"))
    want = sorted(f"path(a, {f[2]})" for f in live.expected_facts if f[0] == "path" and f[1] == "a")
    assert r["facts"] == want and r["count"] == len(want)
    why = live.get("/api/why?fact=" + urllib.parse.quote("path(n2, n4)"))
    assert why["found"] and why["proof"]["steps"][0]["fact"] == "path(n2, n4)"
    assert why["lines"][0].startswith("path(n2, n4)  <- path(X, Z) :- path(X, Y), edge(Y, Z).")
    leaves = [line.split("─ ")[-1] for line in why["lines"] if line.endswith("[explicit]")]
    assert leaves == ["edge(n2, n3)  [explicit]", "edge(n3, n4)  [explicit]"]
    assert live.get("/api/why?fact=" + urllib.parse.quote("edge(n2, n3)"))["lines"] == [
        "edge(n2, n3)  [explicit]"]
    assert not live.get("/api/why?fact=" + urllib.parse.quote("edge(n1, n2)"))["found"]  # deleted
    assert not live.get("/api/why?fact=" + urllib.parse.quote("path(n0, n2)"))["found"]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fluxmat.ops.cli", *args], capture_output=True, text=True,
                          timeout=120, env=job_env())  # fmt: skip


def test_cli_query_and_why_against_the_redis_state(live):
    s = live.s
    where = ["--redis", s.redis_url, "--namespace", s.namespace]
    q = _cli("query", str(s.program), "path(?X, n4)", *where)
    assert q.returncode == 0, q.stderr
    want = sorted(f"path({f[1]}, n4)." for f in live.expected_facts if f[0] == "path" and f[2] == "n4")
    assert q.stdout.splitlines() == want
    w = _cli("why", str(s.program), "src(n0)", *where)
    assert w.returncode == 0, w.stderr
    assert w.stdout.splitlines()[0].startswith("src(n0)  <- src(X) :- edge(X, _")
    assert "edge(n0, n1)  [explicit]" in w.stdout
    missing = _cli("why", str(s.program), "path(n9, n0)", *where)
    assert missing.returncode == 3 and "not in the materialisation" in missing.stdout
    wrong_ns = _cli("query", str(s.program), "path(?X, ?Y)", "--redis", s.redis_url, "--namespace", "nobody")
    assert wrong_ns.returncode == 1 and "no fluxmat state" in wrong_ns.stderr


def test_standalone_dashboard_over_redis(live):
    s = live.s
    port = free_port()
    proc = Proc([sys.executable, "-m", "fluxmat.ops.cli", "dashboard", str(s.program), "--redis", s.redis_url,
                 "--namespace", s.namespace, "--port", str(port), "--status-url", live.base + "/api/status",
                 "--status-token", TOKEN],
                s.logs, "standalone-dashboard", job_env())  # fmt: skip
    try:
        wait_for_log(proc, "dashboard on http://127.0.0.1:", timeout=60)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status", timeout=30) as resp:
            status = json.loads(resp.read())
        assert status["mode"] == "stored"
        assert status["now"]["through"] == "last"
        assert status["totals"]["updates"] == live.counts["updates"]
        assert status["now"]["lag"] == {"0": 0, "1": 0}
        assert status["health"]["state"] == live.get("/api/status")["health"]["state"]  # the job's own status
        q = urllib.parse.quote("path(n0, ?X)")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/query?pattern={q}", timeout=30) as resp:
            assert json.loads(resp.read())["count"] == sum(
                1 for f in live.expected_facts if f[0] == "path" and f[1] == "n0")
    finally:
        proc.terminate()
        proc.cleanup()


def test_dashboard_refuses_an_open_binding_without_a_token(live, tmp_path):
    s = live.s
    proc = subprocess.run(s.args("--dashboard-port", str(free_port()), "--dashboard-host", "0.0.0.0"),
                          capture_output=True, text=True, timeout=120, env=job_env())  # fmt: skip
    assert proc.returncode == 1
    assert "give --auth-token" in proc.stderr


# ------------------------------------------------------------------ a real browser

@pytest.mark.skipif(not Browser.available(), reason="chromium is not installed (apt-get install chromium)")
def test_dashboard_in_a_real_browser(live, artifacts_dir):
    with Browser() as browser:
        page = browser.open(f"{live.base}/?token={TOKEN}")
        page.wait_for("document.getElementById('status').textContent === 'live'")
        page.wait_for("document.getElementById('facts').textContent !== '–'")
        number = lambda id_: int(page.evaluate(  # noqa: E731
            f"document.getElementById('{id_}').textContent.replace(/,/g, '')"))
        assert number("facts") == len(live.expected_facts)
        assert number("updates") == live.counts["updates"]
        assert number("dead-letters") == 1
        assert number("lag") == 0
        assert "fd-counting" in page.evaluate("document.getElementById('job-info').textContent")
        assert page.evaluate("document.querySelectorAll('#deltas tr').length") > 0
        assert "z1" in page.evaluate("document.getElementById('deltas').textContent")
        drawn = page.evaluate(  # the charts have data: some non-white pixels on each canvas
            "[...document.querySelectorAll('canvas')].map(c => c.getContext('2d')"
            ".getImageData(0, 0, c.width, c.height).data.some((v, i) => i % 4 === 3 && v > 0))")
        assert drawn == [True] * 6
        page.fill("#query-pattern", "path(n2, ?X)")
        page.click("#query-run")
        text = page.wait_for("document.getElementById('query-result').textContent.includes('facts') && "
                             "document.getElementById('query-result').textContent")  # fmt: skip
        want = sorted(f"path(n2, {f[2]})" for f in live.expected_facts if f[0] == "path" and f[1] == "n2")
        assert text.splitlines() == [f"{len(want)} facts", *want]
        page.fill("#why-fact", "path(n2, n4)")
        page.click("#why-run")
        why = page.wait_for("document.getElementById('why-result').textContent.includes('explicit') && "
                            "document.getElementById('why-result').textContent")  # fmt: skip
        assert why.splitlines()[0].startswith("path(n2, n4)  <- path(X, Z)")
        assert page.evaluate("document.getElementById('why-asof').textContent") == "as of update last"
        assert page.evaluate("document.getElementById('query-asof').textContent") == "as of update last"
        page.click("#deltas a.why-link")  # a delta's fact, clicked: "why" answers it (it pastes as text)
        asked = page.wait_for("document.getElementById('why-asof').textContent && "
                              "document.getElementById('why-result').textContent.startsWith("
                              "document.getElementById('why-fact').value) && "
                              "document.getElementById('why-fact').value")  # fmt: skip
        assert asked in page.evaluate("document.getElementById('deltas').textContent")
        assert page.console_errors == []
        page.fill("#why-fact", "path(n2,")
        page.click("#why-run")
        page.wait_for("document.getElementById('why-result').classList.contains('err')")
        shot = page.screenshot(artifacts_dir / "dashboard.png")
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
        print(f"dashboard screenshot: {shot}")
        assert [e for e in page.console_errors if "400 (Bad Request)" not in e] == []
    with Browser() as browser:  # without the token the page says why it shows nothing
        page = browser.open(f"{live.base}/")
        page.wait_for("document.getElementById('status').textContent.includes('token')")
