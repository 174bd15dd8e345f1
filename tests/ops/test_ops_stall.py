"""A Redis stall is seen with the default settings (real tansu, redis-server, Spark).

The job runs as the README shows it: no `--redis-timeout` (a command may wait
120 s before it counts as failed) and no `--stall-seconds` (default 5 s). Redis
is paused while an update waits: the batch in flight stops on its first Redis
call (`CLIENT PAUSE ... ALL`: reading the batch id) or on its commit
(`CLIENT PAUSE ... WRITE`). /healthz must say `degraded`, naming the phase
and its seconds, while the pause lasts, `fluxmat_batch_in_flight_seconds` must
pass the threshold with `fluxmat_batch_in_flight_phase{phase}` naming it; then the
job is healthy again and the deltas fold to a from-scratch evaluation.
"""

from __future__ import annotations

import re
import time

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

STALL_SECONDS = 5  # the default of --stall-seconds
LOADED = 600.0  # seconds Spark may take to start and run its first batch on a machine shared with others


@pytest.fixture(scope="module")
def stall(broker, tmp_path_factory):
    directory = tmp_path_factory.mktemp("redis-stall")
    server = RedisServer(directory / "redis").start()
    s = make_setup(broker, server, directory)
    mport, dport = free_port(), free_port()
    proc = start_job(s, "stall-job", None, "--metrics-port", str(mport), "--dashboard-port", str(dport),
                     "--auth-token", TOKEN)  # fmt: skip
    job = LiveJob(s, proc, mport, dport)
    state = {"server": server, "setup": s, "job": job, "sent": []}
    try:
        wait_for_log(proc, "reading ", timeout=LOADED)
        warm = updates("w", 3)
        produce(s.bootstrap, s.updates, [(0, encode(u)) for u in warm])
        wait_for_through(s, proc, "w2", timeout=LOADED)
        state["sent"] += warm
        yield state
    finally:
        proc.cleanup()
        server.stop()


def pause_while_an_update_waits(state, mode: str, seconds: int, prefix: str, phase: str) -> None:
    """Pause Redis (`mode` ALL or WRITE) for `seconds`, send one update, watch /healthz and /metrics."""
    s, job = state["setup"], state["job"]
    assert healthz(job)[1].startswith("healthy"), healthz(job)
    admin = redis.Redis.from_url(state["server"].url)
    admin.execute_command("CLIENT", "PAUSE", str(seconds * 1000), mode)
    paused_until = time.monotonic() + seconds
    admin.close()
    update = updates(prefix, 1)
    sent = time.monotonic()
    produce(s.bootstrap, s.updates, [(0, encode(u)) for u in update])
    state["sent"] += update
    seen, gauges, first = [], [], None
    while time.monotonic() < paused_until - 0.5:
        seen.append(healthz(job))
        if seen[-1] and seen[-1][1].startswith("degraded"):
            first = first or time.monotonic() - sent
            m = job.metrics()
            gauges.append((m["fluxmat_batch_in_flight_seconds"], m[f"fluxmat_batch_in_flight_phase{{phase={phase}}}"],
                           m["fluxmat_health_state"]))  # fmt: skip
        time.sleep(0.25)
    print(f"CLIENT PAUSE {seconds} s {mode}: degraded {first:.1f} s after the update was sent" if first else "")
    stalled = [body for status, body in filter(None, seen) if status == 200 and body.startswith("degraded")]
    assert stalled, f"/healthz never said degraded during a {seconds} s pause: {seen}"
    reason = re.compile(rf"degraded: {re.escape(PHASE_TEXT[phase])} for (\d+) s \(batch \d+, in flight for (\d+) s\)")
    matched = [reason.fullmatch(body.strip()) for body in stalled]
    assert all(matched), stalled  # the phase, and how long
    assert int(matched[-1].group(2)) >= STALL_SECONDS
    assert any(age > STALL_SECONDS and in_phase == 1 for age, in_phase, _ in gauges), gauges  # for alerting
    assert any(h == 1 for *_, h in gauges), gauges  # fluxmat_health_state: degraded (sampled each second)
    assert job.get("/api/status")["health"]["state"] in ("degraded", "healthy")
    m = job.metrics()
    assert m.get("fluxmat_retries_total{target=redis}", 0) == 0  # the default: nothing failed, it waited
    wait_for_through(s, job.proc, f"{prefix}0", timeout=LOADED)
    deadline = time.monotonic() + 20
    while not (h := healthz(job))[1].startswith("healthy") and time.monotonic() < deadline:
        time.sleep(0.25)
    assert h[0] == 200 and h[1].startswith("healthy"), h
    assert job.metrics()["fluxmat_batch_in_flight_seconds"] == 0
    assert_nothing_lost(s, state["sent"])


PHASE_TEXT = {"check": "reading the batch id from Redis", "commit": "committing to Redis"}


def test_redis_paused_for_every_client_degrades_the_health_naming_the_read(stall):
    pause_while_an_update_waits(stall, "ALL", 20, "a", "check")


def test_redis_paused_for_writes_degrades_the_health_naming_the_commit(stall):
    pause_while_an_update_waits(stall, "WRITE", 15, "c", "commit")
