"""State bytes of this namespace (MEMORY USAGE sampled) beside the Redis instance and its maxmemory.

Two namespaces in one real redis-server: each counts its own keys only, the
instance-wide `used_memory` holds both, and `maxmemory` is read from INFO.
"""

import redis

from fluxmat.connectors.state import STATE_KEYS, RedisStateStore
from fluxmat.engine import Reasoner
from fluxmat.ops.metrics import JobMetrics
from fluxmat.stream.batch import BatchProcessor
from tests.support.servers import RedisServer
from tests.support.shared import NullPublisher, metric

PROGRAM = "path(X, Y) :- edge(X, Y). path(X, Z) :- path(X, Y), edge(Y, Z)."


def _processor(url: str, namespace: str, n: int) -> BatchProcessor:
    """A namespace holding the state of a chain of `n` edges (n(n+1)/2 paths)."""
    processor = BatchProcessor(Reasoner.from_text(PROGRAM, "fd-counting"), RedisStateStore(url, namespace),
                               NullPublisher())  # fmt: skip
    processor.start([("edge", f"n{i}", f"n{i + 1}") for i in range(n)])
    return processor


def test_each_namespace_counts_its_own_keys_and_redis_its_maxmemory(tmp_path):
    server = RedisServer(tmp_path / "redis").start()
    try:
        small, big = _processor(server.url, "small", 5), _processor(server.url, "big", 60)
        s, b = small.store.namespace_bytes(), big.store.namespace_bytes()
        assert 0 < s < b < small.store.memory_bytes()
        assert s + b < small.store.memory_bytes()  # the instance holds both (and itself)
        raw = redis.Redis.from_url(server.url)
        exact = sum(raw.memory_usage(big.store.prefix + k, samples=0) or 0 for k in STATE_KEYS)
        assert 0.75 * exact <= b <= 1.25 * exact  # sampled, close to the full walk
        assert small.store.maxmemory_bytes() == 0  # no limit set
        raw.config_set("maxmemory", 256 * 1024 * 1024)
        assert small.store.maxmemory_bytes() == 256 * 1024 * 1024
        m = JobMetrics("p.dl", "fd-counting", "small", "updates")
        m.on_start(small, small.store)
        assert metric(m, "fluxmat_state_namespace_bytes") == small.store.namespace_bytes()
        assert metric(m, "fluxmat_redis_maxmemory_bytes") == 256 * 1024 * 1024
        assert metric(m, "fluxmat_redis_used_memory_bytes") > s + b
        assert m.status()["now"]["state_bytes"] == s
        big.store.clear()
        assert big.store.namespace_bytes() == 0 and small.store.namespace_bytes() == s
        raw.close()
        small.store.close()
        big.store.close()
    finally:
        server.stop()
