"""What an engine host keeps for a keyed job: the keys' engines, and how a key's rows are applied.

An engine host (stream.engine_host) is a long-lived process per task partition on an
executor host; `process_groups` is what it runs for each request. `Worker` holds the
job's program, shared facts, clients and a bounded cache of engines (`Engines`, least
recently used first out, bounded by facts); a cached engine is used only when it is at
the key's last committed batch in Redis, else it is rebuilt from Redis. The driver side
of the keyed operator is stream.keyed.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass

from fluxmat.stream.batch import BatchProcessor


@dataclass
class Entry:
    processor: BatchProcessor
    batch: int | None  # the key's last committed batch this engine is at
    facts: int = 0


class Engines:
    """An engine host's engines by key, least recently used first out, at most `max_facts` facts in all.

    Facts stand in for memory (an engine's size grows with its facts and log); one
    engine larger than the bound alone is kept until the next key needs room.
    """

    def __init__(self, max_facts: int):
        self.max_facts = max_facts
        self.entries: OrderedDict[str, Entry] = OrderedDict()
        self.facts = 0

    def get(self, key: str) -> Entry | None:
        entry = self.entries.get(key)
        if entry is not None:
            self.entries.move_to_end(key)
        return entry

    def put(self, key: str, entry: Entry) -> None:
        self.drop(key)
        entry.facts = entry.processor.reasoner.sizes()["facts"]
        self.entries[key] = entry
        self.facts += entry.facts
        while self.facts > self.max_facts and len(self.entries) > 1:
            _, old = self.entries.popitem(last=False)
            self.facts -= old.facts

    def drop(self, key: str) -> None:
        old = self.entries.pop(key, None)
        if old is not None:
            self.facts -= old.facts


class Worker:
    """What an engine host (stream.engine_host) keeps for its job: program, shared facts, clients, engines."""

    def __init__(self, cfg):
        from fluxmat.client.kafka_config import load
        from fluxmat.connectors.kafka_sink import KafkaPublisher
        from fluxmat.connectors.state import redis_client
        from fluxmat.stream.loading import load_reasoner, shared_facts

        self.cfg = cfg
        reasoner = load_reasoner(cfg, log=lambda msg: None)
        self.program = reasoner.program
        self.facts = shared_facts(cfg, reasoner)
        self.shared = frozenset(self.facts)  # a key's update cannot delete them (BatchProcessor.shared)
        self.client = redis_client(cfg.redis, cfg.redis_cluster, cfg.redis_timeout)
        self.publisher = KafkaPublisher(
            cfg.bootstrap_servers, cfg.deltas_topic, cfg.dead_letter_topic,
            source_topic=cfg.updates_topic, delta_format=cfg.delta_format,
            compression=cfg.delta_compression, kafka=load(cfg.kafka_config),
        )  # fmt: skip
        self.engines = Engines(cfg.engine_cache_facts)

    def process(self, key: str, batch: int, rows: list, program: dict | None = None) -> dict:
        """Apply one key's rows of `batch` (after catching up with `program`, the namespace's); its summary row."""
        from fluxmat.connectors.state import RedisStateStore
        from fluxmat.engine import Reasoner

        cfg, start = self.cfg, time.perf_counter()
        entry = self.engines.get(key)
        store = (entry.processor.store if entry is not None
                 else RedisStateStore(cfg.redis, cfg.namespace, cfg.redis_retry_seconds, key=key,
                                      cluster=cfg.redis_cluster, client=self.client,
                                      wait_replicas=cfg.redis_wait_replicas))  # fmt: skip
        last = store.last_batch()
        cache, rebuild = "hit", None
        if entry is None or entry.batch != last:
            cache = "miss" if last is not None else "new"
            processor = BatchProcessor(
                Reasoner(self.program, options=cfg.engine), store, self.publisher,
                max_message_bytes=cfg.max_message_bytes or sys.maxsize,
                delta_format=cfg.delta_format, key=key, shared=self.shared,
            )  # fmt: skip
            processor.begin(self.facts)
            entry = Entry(processor, last)
            rebuild = time.perf_counter() - start
        try:
            outcome = entry.processor.process(batch, rows, program)
        except BaseException:
            self.engines.drop(key)  # possibly half-way through the batch
            raise
        if not outcome.replayed:
            entry.batch = batch
        self.engines.put(key, entry)
        detail = {"phases": outcome.phases, "stats": outcome.stats, "timestamps": outcome.timestamps_ms,
                  "published": outcome.published, "rules": outcome.rules,
                  "dead": [d[:3] for d in (outcome.output or {}).get("dead", ())],
                  "oldest": outcome.oldest_timestamp_ms}  # fmt: skip
        return {"kind": "key", "key": key, "replayed": outcome.replayed, "updates": outcome.updates,
                "adds": outcome.adds, "deletes": outcome.deletes, "dead": outcome.dead,
                "quarantined": outcome.quarantined, "added": outcome.added, "removed": outcome.removed,
                "seconds": time.perf_counter() - start, "rebuild": rebuild, "cache": cache,
                "facts": entry.facts, "engines": len(self.engines.entries), "pid": os.getpid(),
                "detail": json.dumps(detail)}  # fmt: skip


_WORKERS: dict[str, Worker] = {}  # by the job's configuration: lives as long as the engine host


def worker_for(cfg) -> Worker:
    ident = repr(cfg)
    worker = _WORKERS.get(ident)
    if worker is None:
        _WORKERS.clear()
        worker = _WORKERS[ident] = Worker(cfg)
    return worker


def process_groups(cfg, batch: int, groups: dict[str, list], program: dict | None = None) -> list[dict]:
    """In an engine host: each key's rows of `batch`, in key order; the keys' summaries.

    Each key commits, then sends its delta; the sends are awaited at the end. `program`:
    the namespace's program in force (stream.live_program), which a key behind it takes first.
    """
    worker = worker_for(cfg)
    with worker.publisher.deferred():
        return [worker.process(key, batch, groups[key], program) for key in sorted(groups)]
