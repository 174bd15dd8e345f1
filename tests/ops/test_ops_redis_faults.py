"""A Redis stall and a Redis outage, seen through the whole job (real tansu, redis-server, Spark).

One job per module on its own redis-server (AOF), started as a user would,
with `--redis-timeout 1` (a stalled command fails after 1 s and is retried)
and `--redis-retry-seconds 8` (retries give up after 8 s instead of the
default 30: the flag is what keeps this module near a minute). First Redis is
paused (`CLIENT PAUSE ... ALL`) while updates keep arriving: the job says
"degraded: retrying Redis" on /healthz, the metrics and the dashboard, then
catches up and is healthy again. Then redis-server is killed (SIGKILL) for
longer than the retry window: the failed batch is counted and /healthz answers
503 "failing: ..." before the job exits non-zero; Redis restarts from its AOF,
the job restarts from its checkpoint, and the deltas still fold to a
from-scratch evaluation (nothing lost).
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request

import pytest
import redis

from tests.support.live_job import TOKEN, LiveJob, assert_nothing_lost, healthz, updates
from tests.support.pipeline import (
    encode,
    make_setup,
    produce,
    start_job,
    wait_for_log,
    wait_for_through,
)
from tests.support.servers import RedisServer, free_port

RETRY_SECONDS = 8  # --redis-retry-seconds of the job under test


def start(s, name: str) -> LiveJob:
    mport, dport = free_port(), free_port()
    proc = start_job(s, name, None, "--metrics-port", str(mport), "--dashboard-port", str(dport),
                     "--auth-token", TOKEN, "--trigger-interval", "300ms", "--redis-timeout", "1",
                     "--redis-retry-seconds", str(RETRY_SECONDS))  # fmt: skip
    job = LiveJob(s, proc, mport, dport)
    wait_for_log(proc, "dashboard on http://127.0.0.1:")
    return job


@pytest.fixture(scope="module")
def faults(broker, tmp_path_factory):
    directory = tmp_path_factory.mktemp("redis-faults")
    server = RedisServer(directory / "redis").start()
    s = make_setup(broker, server, directory)
    state = {"server": server, "setup": s, "sent": [], "jobs": []}
    try:
        job = start(s, "faults-job")
        state["jobs"].append(job)
        warm = updates("w", 3)
        produce(s.bootstrap, s.updates, [(0, encode(u)) for u in warm])
        wait_for_through(s, job.proc, "w2")
        state["sent"] += warm
        yield state
    finally:
        for job in state["jobs"]:
            job.proc.cleanup()
        server.stop()


def test_a_redis_stall_degrades_the_health_then_the_job_catches_up(faults):
    s, job = faults["setup"], faults["jobs"][-1]
    assert healthz(job)[0] == 200
    before = job.metrics().get("fluxmat_retries_total{target=redis}", 0)
    stalled = updates("p", 10)
    admin = redis.Redis.from_url(faults["server"].url)
    admin.execute_command("CLIENT", "PAUSE", "6000", "ALL")  # every client waits 6 s (writes and reads)
    paused_until = time.monotonic() + 6
    admin.close()
    feeder = threading.Thread(target=produce, args=(s.bootstrap, s.updates, [(0, encode(u)) for u in stalled]),
                              kwargs={"delay": 0.4})  # fmt: skip
    feeder.start()
    seen, shown = [], []
    while time.monotonic() < paused_until:
        seen.append(healthz(job))
        if seen[-1] and seen[-1][1].startswith("degraded"):
            shown.append(job.get("/api/status")["health"])  # the page's header says so too
        time.sleep(0.25)
    feeder.join()
    faults["sent"] += stalled
    degraded = [body for status, body in filter(None, seen) if body.startswith("degraded: retrying Redis")]
    assert degraded, f"/healthz never said it retries Redis during the pause: {seen}"
    assert all(status == 200 for status, _ in filter(None, seen)), seen  # degraded is not failing
    assert "Timeout" in degraded[-1], degraded[-1]  # the reason names what failed
    assert shown and shown[-1]["state"] == "degraded" and shown[-1]["reason"].startswith("retrying Redis")
    m = job.metrics()
    assert m["fluxmat_retries_total{target=redis}"] > before
    assert m["fluxmat_batch_failures_total"] == 0  # retried, not failed
    wait_for_through(s, job.proc, "p9")  # caught up once the pause ended
    deadline = time.monotonic() + 20
    while not (h := healthz(job))[1].startswith("healthy") and time.monotonic() < deadline:
        time.sleep(0.25)
    assert h[0] == 200 and h[1].startswith("healthy"), h
    assert job.get("/api/status")["health"]["state"] == "healthy"
    assert job.metrics()["fluxmat_health_state"] in (0, 1)  # sampled once a second: may lag by one
    assert_nothing_lost(s, faults["sent"])


def test_redis_killed_longer_than_the_retry_window_fails_loudly_and_loses_nothing(faults):
    s, server, job = faults["setup"], faults["server"], faults["jobs"][-1]
    assert job.proc.returncode is None, job.proc.tail()
    server.stop(kill=True)  # SIGKILL by PID: only the AOF survives
    killed = time.monotonic()
    lost_while_down = updates("k", 3)
    produce(s.bootstrap, s.updates, [(0, encode(u)) for u in lost_while_down])
    faults["sent"] += lost_while_down
    seen, failures = [], []
    while job.proc.returncode is None and time.monotonic() < killed + RETRY_SECONDS + 60:
        seen.append(healthz(job))
        try:
            failures.append(job.metrics()["fluxmat_batch_failures_total"])
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.05)
    exited = time.monotonic() - killed
    code = job.proc.wait(30)
    assert code != 0, job.proc.tail()
    answered = [h for h in seen if h]
    assert any(body.startswith("degraded: retrying Redis") for _, body in answered), answered[:5]
    failing = [(status, body) for status, body in answered if body.startswith("failing")]
    assert failing, f"/healthz never said failing before the job exited: {answered[-5:]}{job.proc.tail()}"
    assert failing[-1][0] == 503 and failing[-1][1].startswith("failing: a batch failed: ConnectionError")
    assert max(failures) == 1, "the failed batch was not counted before the job gave up"
    assert RETRY_SECONDS <= exited < RETRY_SECONDS + 20, f"gave up after {exited:.1f} s"  # --redis-retry-seconds
    errors = [ln for ln in job.proc.stderr().splitlines() if ln.startswith("fluxmat: error:")]
    assert len(errors) == 1, job.proc.tail()  # one line saying why, after Spark's own report
    assert errors[0].startswith("fluxmat: error: a batch failed: ConnectionError") and "retries it" in errors[0]

    server.start()  # the same port, from its AOF
    again = start(s, "faults-job-again")
    faults["jobs"].append(again)
    marker = {"add": [["edge", "z1", "z2"]], "id": "last"}
    produce(s.bootstrap, s.updates, [(0, encode(marker))])
    faults["sent"].append(marker)
    wait_for_through(s, again.proc, "last")
    assert "restored state of batch" in again.proc.stderr(), again.proc.tail()
    assert_nothing_lost(s, faults["sent"])  # k0..k2 were not acknowledged: applied after the restart
    assert again.proc.terminate() == 0, again.proc.tail()
