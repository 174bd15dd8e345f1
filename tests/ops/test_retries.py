"""A Redis stall is seen -- retries counted by target, the health degraded with the reason."""

import threading
import time

import redis

from fluxmat.connectors.state import RedisStateStore
from fluxmat.ops.metrics import JobMetrics


def test_a_redis_pause_is_retried_counted_and_shown(redis_server):
    store = RedisStateStore(redis_server.url, namespace="retries", retry_seconds=20, socket_timeout=0.3)
    metrics = JobMetrics("p.dl", "fd-counting", "retries", "updates")
    store.on_retry = lambda why: metrics.on_retry("redis", why)
    admin = redis.Redis.from_url(redis_server.url)
    admin.execute_command("CLIENT", "PAUSE", "1500", "ALL")  # every client waits 1.5 s
    started = time.monotonic()
    assert store.last_batch() is None  # answered once the pause ends, after retries
    assert time.monotonic() - started >= 1.0
    admin.close()
    store.close()
    from prometheus_client import generate_latest

    text = generate_latest(metrics.registry).decode()
    retries = [line for line in text.splitlines() if line.startswith('fluxmat_retries_total{target="redis"}')]
    assert retries and float(retries[0].split()[1]) >= 1
    state, reason = metrics.health()
    assert state == "degraded" and reason.startswith("retrying Redis (") and "Timeout" in reason
    metrics.on_error(redis.TimeoutError("retries exhausted"))
    assert metrics.health()[0] == "failing"  # a failed batch outranks retries


def test_broker_retries_are_counted_apart():
    metrics = JobMetrics("p.dl", "fd-counting", "ns", "updates")
    threads = [threading.Thread(target=metrics.on_retry, args=("broker", "KafkaTimeoutError: x")) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    from prometheus_client import generate_latest

    assert 'fluxmat_retries_total{target="broker"} 3.0' in generate_latest(metrics.registry).decode()
    assert metrics.health()[1].startswith("retrying the broker (3 retries")


def test_the_retry_window_and_timeout_flags_are_honoured(redis_server, tmp_path, monkeypatch):
    """`--redis-retry-seconds` / `--redis-timeout` (env fallbacks) reach the store: a 3 s stall
    outlasts a 0.8 s retry window of 0.2 s commands, so the call fails well before the stall ends."""
    import pytest

    from fluxmat.connectors.state import open_store
    from fluxmat.engine import FluxmatError
    from fluxmat.ops.cli import build_parser
    from fluxmat.ops.stream_cli import job_config

    base = ["run", "p.dl", "--bootstrap-servers", "x:1", "--updates-topic", "u", "--deltas-topic", "d",
            "--redis", "memory://", "--checkpoint", str(tmp_path)]  # fmt: skip
    default = job_config(build_parser().parse_args(base))
    assert (default.redis_retry_seconds, default.redis_timeout) == (30.0, 120.0)
    cfg = job_config(build_parser().parse_args([*base, "--redis-retry-seconds", "0.8", "--redis-timeout", "0.2"]))
    assert (cfg.redis_retry_seconds, cfg.redis_timeout) == (0.8, 0.2)
    monkeypatch.setenv("FLUXMAT_REDIS_RETRY_SECONDS", "5")
    assert job_config(build_parser().parse_args(base)).redis_retry_seconds == 5.0
    for flag, value, message in (("--redis-retry-seconds", "-1", "at least 0"), ("--redis-timeout", "0", "more than 0")):
        with pytest.raises(FluxmatError, match=f"{flag} must be {message}"):
            job_config(build_parser().parse_args([*base, flag, value]))
    with pytest.raises(FluxmatError, match="--redis-timeout expects a number of seconds"):
        job_config(build_parser().parse_args([*base, "--redis-timeout", "soon"]))

    store = open_store(redis_server.url, "flags", retry_seconds=cfg.redis_retry_seconds,
                       socket_timeout=cfg.redis_timeout)  # fmt: skip
    admin = redis.Redis.from_url(redis_server.url)
    admin.execute_command("CLIENT", "PAUSE", "3000", "ALL")
    started = time.monotonic()
    with pytest.raises(redis.TimeoutError):
        store.last_batch()
    assert 0.8 <= time.monotonic() - started < 2.5
    time.sleep(max(0.0, 3.2 - (time.monotonic() - started)))  # let the pause end for the next test
    admin.close()
    store.close()
