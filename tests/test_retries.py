"""Issue 19: a Redis stall is seen -- retries counted by target, the health degraded with the reason."""

import threading
import time

import redis

from connectors.state import RedisStateStore
from ops.metrics import JobMetrics


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
