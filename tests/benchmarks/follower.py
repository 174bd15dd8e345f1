"""Follower throughput: facts per second from a delta topic into SQLite and PostgreSQL.

Two phases on one topic of an embedded tansu broker, published by the job's
own sink (connectors.kafka_sink.KafkaPublisher, lz4, 5,000 facts a message):

* snapshot: batch -1 carrying the whole materialisation of `lubm.dlog` over
  LUBM-1 (lubm_gen, one university), as the job publishes it first;
* steady: `--batches` batches of `--batch-facts` changes each (half removals of
  facts present, half additions of facts absent), as a running job publishes
  them.

Each store follows the topic with client.DeltaFollower from the beginning; the
time of each phase runs from the follower's start (the topic is complete by
then) or the end of the previous phase to the commit of the phase's last batch. The job's capacity to compare with is its target of 20,000 fact
operations per second end to end.

    python -m tests.benchmarks.follower [--batches 200] [--batch-facts 200]
"""

from __future__ import annotations

import argparse
import os
import random
import time

from fluxmat.client import DeltaFollower, open_store
from fluxmat.connectors.broker import EmbeddedBroker, ensure_topics
from fluxmat.connectors.kafka_sink import KafkaPublisher
from fluxmat.engine import Reasoner
from fluxmat.engine.wire import fact_json
from tests.benchmarks.workloads import lubm


def materialisation(departments: int) -> list[list]:
    work = lubm(departments=departments)
    reasoner = Reasoner(work.program, "remat")
    reasoner.load(work.facts)
    return sorted((fact_json(f) for f in reasoner.facts()), key=repr)


def publish(bootstrap: str, topic: str, facts: list[list], batches: int, per_batch: int, seed: int = 1) -> int:
    """The snapshot, then the steady batches; returns the facts of the steady phase."""
    rnd = random.Random(seed)
    present = list(facts)
    absent: list[list] = []
    steady = 0
    with KafkaPublisher(bootstrap, topic) as pub:
        pub.publish_delta(-1, None, facts, [])
        for b in range(batches):
            rnd.shuffle(present)
            removed, present = present[: per_batch // 2], present[per_batch // 2:]
            added, absent = absent[: per_batch // 2], absent[per_batch // 2:]
            present += added
            absent += removed
            pub.publish_delta(b, f"u{b}", added, removed)
            steady += len(added) + len(removed)
    return steady


class Timed:
    """A store that notes when the snapshot (batch -1) was committed."""

    def __init__(self, store) -> None:
        self.store = store
        self.snapshot_done: float | None = None

    def load(self, topic: str):
        return self.store.load(topic)

    def apply(self, batch, topic: str, offsets: dict) -> None:
        self.store.apply(batch, topic, offsets)
        if batch.batch == -1:
            self.snapshot_done = time.perf_counter()

    def close(self) -> None:
        self.store.close()


def follow(bootstrap: str, topic: str, url: str, snapshot: int, steady: int, last: int) -> dict:
    store = Timed(open_store(url))
    follower = DeltaFollower(bootstrap, topic, store)
    start = time.perf_counter()  # the topic is complete: reading starts now
    try:
        while follower.folder.applied.get(None, -2) < last:
            follower.poll(0.2)
        end = time.perf_counter()
    finally:
        follower.close()
    times = {"snapshot": store.snapshot_done - start, "steady": end - store.snapshot_done}
    return {"snapshot facts/s": snapshot / times["snapshot"], "snapshot s": times["snapshot"],
            "steady facts/s": steady / times["steady"], "steady s": times["steady"]}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, default=200)
    ap.add_argument("--batch-facts", type=int, default=200)
    ap.add_argument("--departments", type=int, default=10, help="of the one university (LUBM-1)")
    ap.add_argument("--postgres", default=None, help="postgresql://... (default: a server started here, if installed)")
    args = ap.parse_args(argv)
    facts = materialisation(args.departments)
    print(f"LUBM-1 ({args.departments} departments) materialisation: {len(facts):,} facts; load average {os.getloadavg()[0]:.1f}", flush=True)
    server = None
    stores = {"sqlite": None, "postgresql": args.postgres}
    if args.postgres is None:
        from tests.support.servers import PostgresServer, postgres_bin

        if postgres_bin() is not None:
            server = PostgresServer().start()
        else:
            del stores["postgresql"]
    import tempfile

    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as tmp:
        ensure_topics(broker.bootstrap, {"deltas": 1})
        started = time.perf_counter()
        steady = publish(broker.bootstrap, "deltas", facts, args.batches, args.batch_facts)
        print(f"published in {time.perf_counter() - started:.1f} s", flush=True)
        try:
            for name in list(stores):
                url = f"sqlite:///{tmp}/view.db" if name == "sqlite" else (
                    stores[name] or server.create_database("bench"))  # fmt: skip
                row = follow(broker.bootstrap, "deltas", url, len(facts), steady, args.batches - 1)
                print(f"{name:<11} snapshot {row['snapshot facts/s']:>9,.0f} facts/s ({row['snapshot s']:.1f} s)   "
                      f"steady {row['steady facts/s']:>9,.0f} facts/s ({row['steady s']:.1f} s, "
                      f"{args.batches} batches of {args.batch_facts})   load {os.getloadavg()[0]:.1f}",
                      flush=True)  # fmt: skip
        finally:
            if server is not None:
                server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
