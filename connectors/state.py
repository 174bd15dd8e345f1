"""State stores for the streaming job: where the engine's state survives a crash.

Contract (both stores):
  * `commit(batch, changes, output)` writes the state changes of one micro-batch
    (absolute values, see engine.fd.snapshot), the batch id and the batch's output
    (its delta and dead letters) **atomically**: after a crash either all of it is
    stored or none of it.
  * `last_batch()` is the id of the last committed batch (None when empty). A
    replayed batch (Spark is at-least-once) has an id <= last_batch and must not
    be applied again; `output(batch)` returns what it produced so it can be
    re-published identically (the last `KEEP_OUTPUTS` batches are kept).
  * `load()` returns the whole state, or None for an empty store.
  * `rebase()` stores `base` = last batch + 1 in the metadata: a job that
    continues the state with a new Spark checkpoint (whose batch ids restart at
    0) numbers its batches `base + id`, so batch ids stay increasing.
  * One writer per namespace: two jobs must not share a `--redis` namespace.

Three protocols say who may ask what: `StateStore` is the state (the batch
path: load, last batch, commit, stored outputs, batch numbering),
`StoreMonitor` what operations read about it (sizes, memory, the cluster's
health), `StoreAdmin` the one setting made when a job starts (`set_fsync`);
`JobStore` is all three, what `open_store` returns. A store with no server
behind it answers the last two with `Unmonitored`.

`MemoryStateStore` is the in-process store of `fluxmat demo` (nothing survives
the process). `RedisStateStore` keeps hashes under `fluxmat:<namespace>:` and
writes each batch in one MULTI/EXEC pipeline, with HSET/HDEL in chunks, never
one round trip per fact. With AOF persistence the state survives a Redis restart.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Protocol

from fluxmat.connectors.bulk_state import LAYOUT, BulkLayout
from fluxmat.connectors.output_pack import pack_output, unpack_output
from fluxmat.connectors.redact import redact
from fluxmat.engine import FluxmatError, StateChanges, StateColumns, StateSnapshot

log = logging.getLogger("fluxmat.state")
CONNECT_TIMEOUT = 10.0  # seconds: connecting (TLS handshake included) and the first PING
RETRY_SECONDS = 30.0  # seconds a failing Redis call is retried before it raises (--redis-retry-seconds)
SOCKET_TIMEOUT = 120.0  # seconds one Redis command may take before it fails (and is retried) (--redis-timeout)
KEEP_OUTPUTS = 16
INITIAL = -1  # the batch id of the initial materialisation
CHUNK = 5000
STATE_KEYS = ("meta", "E", "I", "log", "T", "out", "sync")  # a namespace's Redis keys, after its prefix
WAIT_MS = 1000  # milliseconds one WAIT for replicas may block (--redis-wait-replicas); then the commit is retried
MEMORY_SAMPLES = 64  # hash fields MEMORY USAGE samples per key (namespace_bytes)
FSYNC_POLICIES = ("everysec", "always", "keep")  # fluxmat run --redis-fsync


class StoreURLError(FluxmatError, ValueError):
    """A state store URL fluxmat cannot use (unknown scheme, malformed)."""


class StateStore(Protocol):
    """The state of one namespace (or one key of it): what the batch path reads and writes (the contract above)."""

    def load(self) -> StateSnapshot | StateColumns | None: ...

    def last_batch(self) -> int | None: ...

    def state_meta(self) -> dict[str, object]: ...

    def commit(self, batch: int, changes: StateChanges, output: dict) -> None: ...

    def output(self, batch: int) -> dict | None: ...

    def rebase(self) -> int: ...

    def batch_base(self) -> int: ...

    def close(self) -> None: ...


class StoreMonitor(Protocol):
    """What operations read of a store's size and health (the metrics, the dashboard); never the batch path."""

    def size(self) -> int: ...

    def memory_bytes(self) -> int | None: ...

    def maxmemory_bytes(self) -> int | None: ...

    def memory(self) -> tuple[dict[str, int], int]: ...

    def namespace_bytes(self) -> int | None: ...

    def cluster_problem(self) -> str | None: ...


class StoreAdmin(Protocol):
    """Administration of the server behind a store, once when a job starts (`--redis-fsync`)."""

    def set_fsync(self, policy: str) -> str | None: ...


class JobStore(StateStore, StoreMonitor, StoreAdmin, Protocol):
    """What a job opens (`open_store`): the state, read by operations, administered at the start."""


class Unmonitored:
    """`StoreMonitor` and `StoreAdmin` of a store with no server behind it: nothing to measure or set."""

    def size(self) -> int:
        return 0

    def memory_bytes(self) -> int | None:
        return None  # not measured for an in-process store

    def maxmemory_bytes(self) -> int | None:
        return None

    def memory(self) -> tuple[dict[str, int], int]:
        return {}, 0  # no Redis node

    def namespace_bytes(self) -> int | None:
        return None

    def cluster_problem(self) -> str | None:
        return None  # no Redis Cluster

    def set_fsync(self, policy: str) -> str | None:
        return None  # nothing is persisted


class MemoryStateStore(Unmonitored):
    """A state store in process memory (for the demo and unit tests); it counts its entries (`size`)."""

    def __init__(self) -> None:
        self.meta: dict[str, object] = {}
        self.tables: dict[str, dict] = {"explicit": {}, "facts": {}, "log": {}, "terms": {}}
        self.outputs: dict[int, dict] = {}
        self.commits = 0

    def load(self) -> StateSnapshot | None:
        if not self.meta:
            return None
        t = self.tables
        return StateSnapshot(dict(self.meta), list(t["explicit"]), dict(t["facts"]), dict(t["log"]), dict(t["terms"]))

    def state_meta(self) -> dict[str, object]:
        """The stored metadata (empty for an empty store)."""
        return dict(self.meta)

    def last_batch(self) -> int | None:
        b = self.meta.get("batch")
        return None if b is None else int(b)

    def commit(self, batch: int, changes: StateChanges, output: dict) -> None:
        changes = changes.as_texts()
        if changes.full:
            for t in self.tables.values():
                t.clear()
        for name in ("explicit", "facts", "log", "terms"):
            table = self.tables[name]
            for k, v in getattr(changes, name).items():
                if v is None or v is False:
                    table.pop(k, None)
                else:
                    table[k] = v
        self.meta.update(changes.meta)
        self.meta["batch"] = batch
        self.outputs[batch] = json.loads(json.dumps(output))
        for old in sorted(self.outputs)[:-KEEP_OUTPUTS]:
            del self.outputs[old]
        self.commits += 1

    def output(self, batch: int) -> dict | None:
        return self.outputs.get(batch)

    def size(self) -> int:
        return sum(len(t) for t in self.tables.values())

    def rebase(self) -> int:
        """Number the batches of a new checkpoint after the stored ones; returns the offset."""
        base = int(self.meta.get("batch", INITIAL)) + 1
        self.meta["base"] = base
        return base

    def batch_base(self) -> int:
        return int(self.meta.get("base", 0))

    def close(self) -> None:
        pass


class RedisStateStore:
    """The engine state in Redis hashes, one MULTI/EXEC transaction per batch.

    Keys (prefix `fluxmat:<namespace>:`): `meta` (fingerprint, algorithm, clock,
    seq, through, batch, format; `core` when not objects), `E` (explicit facts), `I` (fact -> birth
    stamp; with core=arrays 1 + its counter, engine.compact.state),
    `log` (derivation-log key -> rule instance), `T` (term id -> JSON: the
    dictionary of the facts' texts, engine.fd.snapshot), `out` (batch -> output
    JSON, lz4-compressed when larger than `PACK_OVER` bytes).
    Connection problems at construction raise `ConnectionError` with the URL
    (password shown as `***`) within `CONNECT_TIMEOUT` seconds, TLS handshake
    included; during a run, commits are retried with backoff for `retry_seconds`,
    then the error propagates (the batch is not acknowledged, so nothing is lost).
    `socket_timeout` bounds every later command (large first commits, the whole
    initial state, can take a while under load).
    """

    def __init__(self, url: str, namespace: str = "default", retry_seconds: float = RETRY_SECONDS,
                 socket_timeout: float = SOCKET_TIMEOUT, *, key: str | None = None, cluster: bool = False,
                 client=None, wait_replicas: int = 0):  # fmt: skip
        self.url = url
        self.wait_replicas = wait_replicas
        self.shown = redact(url)
        self.prefix = key_prefix(namespace, key, cluster)
        self.keyed = key is not None
        self.retry_seconds = retry_seconds
        self.on_retry: Callable[[str], None] | None = None  # told why before each retry (the job's metrics)
        self.client = client if client is not None else redis_client(url, cluster, socket_timeout)
        self.cluster = cluster
        self.replicas_seen = 0  # the most replicas a primary had (cluster_problem)
        self.bulk = BulkLayout(self.client, self.prefix)

    def _k(self, name: str) -> str:
        return self.prefix + name

    def _retry(self, fn):
        import redis

        delay, deadline = 0.2, time.monotonic() + self.retry_seconds
        while True:
            try:
                return fn()
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                if time.monotonic() > deadline:
                    raise
                log.warning("Redis at %s unavailable (%s); retrying in %.1f s", self.shown,
                            redact(str(exc)), delay)  # fmt: skip
                if self.on_retry is not None:
                    self.on_retry(redact(f"{type(exc).__name__}: {exc}"))
                time.sleep(delay)
                delay = min(delay * 2, 5.0)

    def load(self) -> StateSnapshot | StateColumns | None:
        """The stored state: texts in the per-field layout, columns in the bulk one (connectors.bulk_state)."""

        def read():
            meta = self.client.hgetall(self._k("meta"))
            if not meta:
                return None
            if json.loads(meta.get("layout", "null")) == LAYOUT:
                return self.bulk.read(_decode_meta(meta), self.meta)
            explicit = [k for k, _ in self.client.hscan_iter(self._k("E"), count=CHUNK)]
            facts = dict(self.client.hscan_iter(self._k("I"), count=CHUNK))
            log = dict(self.client.hscan_iter(self._k("log"), count=CHUNK))
            terms = dict(self.client.hscan_iter(self._k("T"), count=CHUNK))
            return StateSnapshot(_decode_meta(meta), explicit, facts, log, terms)

        return self._retry(read)

    def meta(self) -> dict[str, object]:
        """The stored metadata (fingerprint, algorithm, sizes, through, batch, base), decoded."""
        return _decode_meta(self._retry(lambda: self.client.hgetall(self._k("meta"))))

    def state_meta(self) -> dict[str, object]:
        """`meta()`: the stored metadata (empty for an empty store)."""
        return self.meta()

    def last_batch(self) -> int | None:
        b = self._retry(lambda: self.client.hget(self._k("meta"), "batch"))
        return None if b is None else int(b)

    def commit(self, batch: int, changes: StateChanges, output: dict) -> None:
        """Columns (the arrays core's) in the bulk layout, unless the stored state is per-field: texts then.

        A full export of columns replaces a per-field state by a bulk one.
        """

        def write():
            manifest = None if changes.columns is None else self.bulk.manifest()
            pipe = self.client.pipeline(transaction=True)
            if changes.columns is not None and (changes.full or manifest is not None):
                meta = self.bulk.write(pipe, changes, manifest)
            else:
                self._write_fields(pipe, changes.as_texts())
                meta = {}
            meta.update((k, json.dumps(v)) for k, v in changes.meta.items())
            meta["batch"] = str(batch)
            pipe.hset(self._k("meta"), mapping=meta)
            if self.keyed:  # a key's batches are sparse: only its last output can be replayed
                pipe.delete(self._k("out"))
            pipe.hset(self._k("out"), str(batch), pack_output(output))
            pipe.hdel(self._k("out"), str(batch - KEEP_OUTPUTS))
            pipe.execute()
            if self.wait_replicas:
                self._replicated(batch)

        self._retry(write)

    def _write_fields(self, pipe, changes: StateChanges) -> None:
        """Queue the per-field writes of `changes` (texts): HSET/HDEL in chunks of `CHUNK` fields."""
        if changes.full:
            pipe.delete(self._k("E"), self._k("I"), self._k("log"), self._k("T"))
        for name, key in (("explicit", "E"), ("facts", "I"), ("log", "log"), ("terms", "T")):
            items = getattr(changes, name)
            put = {k: (1 if v is True else v) for k, v in items.items() if v not in (None, False)}
            gone = [k for k, v in items.items() if v is None or v is False]
            puts = list(put.items())
            for i in range(0, len(puts), CHUNK):
                pipe.hset(self._k(key), mapping=dict(puts[i : i + CHUNK]))
            for i in range(0, len(gone), CHUNK):
                pipe.hdel(self._k(key), *gone[i : i + CHUNK])

    def _replicated(self, batch: int) -> None:
        """Return once `wait_replicas` replicas hold the commit of `batch`; else a TimeoutError (retried).

        WAIT counts the replicas that acknowledged the last write of the
        connection it is sent on, so it goes on one connection after a write of
        its own (`sync`, the batch id) to the primary that ran the transaction:
        a replica that has that write has the transaction before it. A retry
        runs the whole (idempotent: absolute values) transaction again, on the
        primary that serves the slot then.
        """
        import redis

        node = self.client.get_node_from_key(self._k("sync")).redis_connection if self.cluster else self.client
        pipe = node.pipeline(transaction=False)
        pipe.set(self._k("sync"), str(batch))
        pipe.execute_command("WAIT", self.wait_replicas, WAIT_MS)
        acked = pipe.execute()[1]
        if acked < self.wait_replicas:
            raise redis.TimeoutError(f"WAIT: {acked} of {self.wait_replicas} Redis replicas acknowledged "
                                     f"batch {batch} within {WAIT_MS} ms")  # fmt: skip

    def output(self, batch: int) -> dict | None:
        raw = self._retry(lambda: self.client.hget(self._k("out"), str(batch)))
        return None if raw is None else unpack_output(raw)

    def size(self) -> int:
        """Stored entries: hash fields of the per-field layout, rows of the bulk one (its manifest's `rows`)."""

        def count():
            pipe = self.client.pipeline(transaction=False)
            for key in ("E", "I", "log", "T"):
                pipe.hlen(self._k(key))
            pipe.hget(self._k("meta"), "bulk")
            *fields, manifest = pipe.execute()
            return sum(fields) + (0 if manifest is None else int(json.loads(manifest)["rows"]))

        return self._retry(count)

    def memory_bytes(self) -> int | None:
        """Memory used by the Redis server (all namespaces): INFO's `used_memory` (summed over a cluster)."""
        return sum(self.memory()[0].values())

    def maxmemory_bytes(self) -> int | None:
        """INFO's `maxmemory` (summed over a cluster's primaries); 0 when a node has no limit."""
        return self.memory()[1]

    def memory(self) -> tuple[dict[str, int], int]:
        """`used_memory` per node and the summed `maxmemory`, from one round of INFO memory.

        Nodes are `host:port` (each primary of a cluster); the limit is 0 when a
        node has none.
        """
        infos = self._memory_info()
        limits = [int(info.get("maxmemory", 0)) for info in infos.values()]
        used = {node: int(info["used_memory"]) for node, info in infos.items()}
        return used, 0 if not limits or 0 in limits else sum(limits)

    def namespace_bytes(self) -> int | None:
        """Bytes of this namespace's own keys (`meta`, `E`, `I`, `log`, `T`, `out`): Redis `MEMORY USAGE`.

        Each hash is estimated from `MEMORY_SAMPLES` of its fields (Redis's own
        sampling: exact for small hashes, an estimate for large ones, and
        O(MEMORY_SAMPLES) per key, never a walk over the state). With
        `--partition-by` the keys' states live under their own prefixes and
        are not counted here (see `memory`).
        """

        def usage():
            sizes = [self.client.memory_usage(self._k(k), samples=MEMORY_SAMPLES) for k in STATE_KEYS]
            manifest = self.bulk.manifest()  # the bulk layout's chunks: their bytes, as the manifest counts them
            chunks = 0 if manifest is None else manifest["base_bytes"] + manifest["log_bytes"]
            return sum(n or 0 for n in sizes) + chunks

        return self._retry(usage)

    def _memory_info(self) -> dict[str, dict]:
        """INFO memory per Redis node (`host:port`; each primary of a cluster)."""
        if not self.cluster:
            info = self._retry(lambda: self.client.info("memory"))
            conn = self.client.connection_pool.connection_kwargs
            return {f"{conn.get('host', 'localhost')}:{conn.get('port', 6379)}": info}
        from redis.cluster import RedisCluster

        return self._retry(lambda: self.client.info("memory", target_nodes=RedisCluster.PRIMARIES))

    def cluster_problem(self) -> str | None:
        """What weakens the Redis Cluster now, None when nothing does (and outside a cluster).

        A node flagged failing (`fail`, `fail?`) or disconnected, or a primary
        serving slots with fewer working replicas than the most any primary has
        had while this store watched: a primary died and its replica took over,
        so that part of the state has no copy until the old node is back (as a
        replica) or another replica is added. One CLUSTER NODES, not retried:
        a cluster that cannot answer is a problem too.
        """
        if not self.cluster:
            return None
        from redis.exceptions import RedisClusterException, RedisError

        try:
            nodes = self.client.cluster_nodes()
        except (RedisError, RedisClusterException) as exc:
            return f"cannot read the Redis Cluster's nodes: {redact(str(exc))}"
        failing = sorted(addr for addr, n in nodes.items() if "fail" in n["flags"] or not n["connected"])
        if failing:
            return f"Redis Cluster node{'s' if len(failing) > 1 else ''} {', '.join(failing)} failing"
        ids = {n["node_id"]: addr for addr, n in nodes.items()}
        replicas = {addr: 0 for addr, n in nodes.items() if "master" in n["flags"] and n["slots"]}
        for n in nodes.values():
            if "slave" in n["flags"] and ids.get(n["master_id"]) in replicas:
                replicas[ids[n["master_id"]]] += 1
        self.replicas_seen = max(self.replicas_seen, *replicas.values(), 0)
        short = sorted(addr for addr, k in replicas.items() if k < self.replicas_seen)
        if short:
            return (f"Redis Cluster primar{'ies' if len(short) > 1 else 'y'} {', '.join(short)} "
                    f"without {'their' if len(short) > 1 else 'its'} replica (after a failover?)")  # fmt: skip
        return None

    def set_fsync(self, policy: str) -> str:
        """Set the server's AOF fsync policy (`appendfsync`); returns a line saying what happened.

        `everysec` or `always` by `CONFIG SET appendfsync` (on every primary of
        a cluster); `keep` leaves the server's own. A server that refuses CONFIG
        (managed services rename or disable it, or an ACL forbids it) keeps its
        own policy: the line then starts with "WARNING" and says which policy
        applies when the server tells.
        """
        import redis

        if policy not in FSYNC_POLICIES:
            raise FluxmatError(f"--redis-fsync must be one of {', '.join(FSYNC_POLICIES)}, got {policy!r}")
        target = {"target_nodes": "primaries"} if self.cluster else {}
        if policy != "keep":
            try:
                self._retry(lambda: self.client.config_set("appendfsync", policy, **target))
            except redis.RedisError as exc:
                return (f"WARNING: Redis at {self.shown} refused CONFIG SET appendfsync {policy} "
                        f"({redact(str(exc))}); it keeps its own policy ({self._fsync_policy()}). "
                        "Set appendfsync in the server's configuration, or pass --redis-fsync keep")  # fmt: skip
        return f"Redis AOF: {self._fsync_policy()}" + (" (kept as configured)" if policy == "keep" else "")

    def _fsync_policy(self) -> str:
        """`appendonly yes, appendfsync P` as the server (a cluster: one of its nodes) reports it."""
        import redis

        try:
            conf = self._retry(lambda: self.client.config_get("append*"))
        except redis.RedisError:
            return "policy unknown: CONFIG GET refused"
        if conf.get("appendonly") != "yes":
            return "appendonly no: the state does not survive a Redis restart"
        return f"appendonly yes, appendfsync {conf.get('appendfsync', 'unknown')}"

    def rebase(self) -> int:
        """Number the batches of a new checkpoint after the stored ones; returns the offset."""
        last = self.last_batch()
        base = (INITIAL if last is None else last) + 1
        self._retry(lambda: self.client.hset(self._k("meta"), "base", json.dumps(base)))
        return base

    def batch_base(self) -> int:
        raw = self._retry(lambda: self.client.hget(self._k("meta"), "base"))
        return 0 if raw is None else int(raw)

    def clear(self) -> None:
        """Remove this namespace (used by tests)."""
        self.client.delete(*(self._k(k) for k in STATE_KEYS), *self.bulk.keys(self.bulk.manifest()))

    def close(self) -> None:
        self.client.close()


def key_prefix(namespace: str, key: str | None = None, cluster: bool = False) -> str:
    """Where a state lives: `fluxmat:<namespace>:`, a key's `fluxmat:{<namespace>:<key>}:`.

    The braces are a Redis Cluster hash tag: every name of one state hashes to
    one slot, so a batch commit is one MULTI/EXEC on one node. A whole-stream
    state in a cluster is tagged by its namespace for the same reason.
    """
    if key is not None:
        return f"fluxmat:{{{namespace}:{key}}}:"
    return f"fluxmat:{{{namespace}}}:" if cluster else f"fluxmat:{namespace}:"


def redis_client(url: str, cluster: bool = False, socket_timeout: float = SOCKET_TIMEOUT):
    """A connected redis-py client for `url` (a `RedisCluster` seeded by it when `cluster`).

    Raises:
        StoreURLError: the URL is malformed.
        ConnectionError: the server (or the cluster) does not answer a PING within
            `CONNECT_TIMEOUT` seconds, TLS handshake included; the message names
            the URL with its password as `***`.
    """
    import redis
    from redis.cluster import RedisCluster
    from redis.exceptions import RedisClusterException

    shown = redact(url)
    timeout = min(CONNECT_TIMEOUT, socket_timeout)
    kind = RedisCluster if cluster else redis.Redis
    try:
        probe = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
    except ValueError as exc:  # redis-py's URL parser
        raise StoreURLError(f"invalid Redis URL {shown}: {redact(str(exc))}") from None
    try:  # the first command, TLS handshake included, within `timeout`
        probe.ping()
        if cluster and not probe.info("cluster").get("cluster_enabled"):
            raise ConnectionError(f"Redis at {shown} is not a cluster node (--redis-cluster was given)")
        return kind.from_url(url, decode_responses=True, socket_timeout=socket_timeout,
                             socket_connect_timeout=timeout)  # fmt: skip
    except (redis.RedisError, RedisClusterException) as exc:
        raise ConnectionError(f"cannot reach Redis at {shown}: {redact(str(exc))}") from None
    finally:
        probe.close()


def _decode_meta(meta: dict[str, str]) -> dict[str, object]:
    out: dict[str, object] = {}
    for k, v in meta.items():
        if k == "batch":
            out[k] = int(v)
            continue
        try:
            out[k] = json.loads(v)
        except ValueError:
            out[k] = v
    return out


def open_store(url: str | None, namespace: str = "default", key: str | None = None,
               cluster: bool = False, retry_seconds: float = RETRY_SECONDS,
               socket_timeout: float = SOCKET_TIMEOUT, wait_replicas: int = 0) -> JobStore:  # fmt: skip
    """`redis://...` gives a RedisStateStore; None or `memory://` an in-process store.

    `key` names one key's state (`--partition-by`); `cluster` makes the URL a
    seed node of a Redis Cluster; `retry_seconds`, `socket_timeout` and
    `wait_replicas` are the RedisStateStore's (`--redis-retry-seconds`,
    `--redis-timeout`, `--redis-wait-replicas`).
    """
    if not url or url.startswith("memory:"):
        if cluster:
            raise StoreURLError("--redis-cluster needs a redis:// URL (a seed node of the cluster)")
        return MemoryStateStore()
    if url.startswith(("redis://", "rediss://", "unix://")):
        return RedisStateStore(url, namespace, retry_seconds, socket_timeout, key=key, cluster=cluster,
                               wait_replicas=wait_replicas)  # fmt: skip
    raise StoreURLError(
        f"unsupported state store URL {redact(url)!r} (expected redis://HOST:PORT/DB, "
        "rediss://... or memory://)"
    )
