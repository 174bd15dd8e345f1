"""The per-batch processor alone (issue 16): fact operations per second and where a batch's time goes.

    python -m tests.benchmarks.batch_processor [--batches 3] [--updates 500] [--algorithm fd-counting]
                                               [--redis] [--universities N]

No Spark or Kafka: `stream.batch.BatchProcessor.process` over an in-memory
state store (with `--redis`: a RedisStateStore on a local redis-server with AOF,
`appendfsync always`, as tests/servers.py starts it) and a publisher that keeps
nothing, on the issue's workload: the
corpus program `programs/lubm.dlog` over `lubm_gen.generate(1, 2)` (minus held-out
facts), updates of 1 add + 1 delete made by the pipeline benchmark's
`UpdateMaker` and sent as JSON messages. Prints, per batch, fact operations per
second and the phases of `BatchOutcome.phases` (decode, engine, export, commit,
publish), then the totals; every batch's delta is checked by folding all deltas
into the initial materialisation and comparing with `remat` over the final
explicit facts.

With `--universities N` the data is LUBM-N (`lubm_gen.generate(N)`: 15-25
departments per university, as LUBM draws them) instead of LUBM-1 with two
departments. With `--redis` it also measures what a restart needs (the state
read back from Redis and a new engine restored from it: a restarted job is
ready after this plus Spark's start-up), Redis's `used_memory` against the
materialisation written as N-Triples, and this process's peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from connectors.state import MemoryStateStore, RedisStateStore
from engine import EngineOptions, Reasoner, atom_to_fact
from engine.wire import fact_from_json
from stream.batch import BatchProcessor
from tests.benchmarks.lubm_gen import generate
from tests.benchmarks.pipeline import HELD_OUT, PROGRAM, UpdateMaker
from tests.benchmarks.workloads import corpus_dir


class _Collect:
    def __init__(self):
        self.deltas = []

    def publish_delta(self, batch, through, added, removed):
        self.deltas.append((added, removed))

    def publish_dead_letter(self, *args, **kw):
        raise AssertionError(f"unexpected dead letter: {args[:1]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--updates", type=int, default=500, help="updates (1 add + 1 delete) per batch")
    ap.add_argument("--algorithm", default="fd-counting")
    ap.add_argument("--redis", action="store_true", help="commit to a local redis-server (AOF, fsync always)")
    ap.add_argument("--universities", type=int, default=None,
                    help="LUBM-N data instead of LUBM-1 with two departments (e.g. 5)")
    args = ap.parse_args(argv)
    if not args.redis:
        return run(args, MemoryStateStore())
    from tests.servers import RedisServer

    with tempfile.TemporaryDirectory(prefix="fluxmat-bench-") as tmp:
        server = RedisServer(Path(tmp)).start()
        try:
            return run(args, RedisStateStore(server.url, "bench"))
        finally:
            server.stop()


def run(args, store) -> int:
    program = corpus_dir() / PROGRAM
    reasoner = Reasoner.from_file(program, options=EngineOptions(args.algorithm, schedule="interleaved"))
    if args.universities:
        data, label = generate(args.universities, prefixes=reasoner.prefixes), f"generate({args.universities})"
    else:
        data, label = generate(1, 2, prefixes=reasoner.prefixes), "generate(1, 2)"
    maker = UpdateMaker(data, HELD_OUT)
    pub = _Collect()
    proc = BatchProcessor(reasoner, store, pub)
    t = time.perf_counter()
    proc.start(maker.initial)
    print(f"# {program.name} over lubm_gen.{label}: {len(maker.initial):,} explicit facts, "
          f"{reasoner.sizes()['facts']:,} in the materialisation; initial load {time.perf_counter() - t:.2f} s; "
          f"{args.algorithm}; {type(store).__name__}; load average {os.getloadavg()[0]:.2f}")
    totals: dict[str, float] = {}
    ops = 0
    seconds = 0.0
    offset = 0
    for b in range(args.batches):
        rows = []
        for _ in range(args.updates):
            add, dele = maker.make(1, 1)
            msg = json.dumps({"add": [list(f) for f in add], "del": [list(f) for f in dele]})
            rows.append((0, offset, None, msg, None, True, len(msg)))
            offset += 1
        outcome = proc.process(b, rows)
        n = outcome.adds + outcome.deletes
        ops += n
        seconds += outcome.seconds
        for k, v in outcome.phases.items():
            totals[k] = totals.get(k, 0.0) + v
        shares = ", ".join(f"{k} {v:.3f} s" for k, v in outcome.phases.items())
        print(f"batch {b}: {outcome.updates} updates, {n} fact ops in {outcome.seconds:.3f} s "
              f"= {n / outcome.seconds:,.0f} fact ops/s ({shares})")
    share = ", ".join(f"{k} {100 * v / seconds:.0f}%" for k, v in totals.items())
    print(f"total: {ops:,} fact ops in {seconds:.2f} s = {ops / seconds:,.0f} fact ops/s; breakdown: {share}")
    current = {atom_to_fact(fact_from_json(f, reasoner.prefixes)) for f in pub.deltas[0][0]}
    for added, removed in pub.deltas[1:]:
        current |= {atom_to_fact(fact_from_json(f, reasoner.prefixes)) for f in added}
        current -= {atom_to_fact(fact_from_json(f, reasoner.prefixes)) for f in removed}
    ref = Reasoner.from_file(program, "remat")
    ref.load(maker.present)
    ok = current == ref.facts()
    print(f"check: the deltas fold into remat's result: {'ok' if ok else 'DIFFERENT'}")
    if isinstance(store, RedisStateStore):
        restart(store, program, args.algorithm, reasoner)
    return 0 if ok else 1


RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"


def _ntriples_like(facts):
    """Each fact as an N-Triples-like line: `C(x)` as `<x> <rdf:type> <C> .`, `p(x, y)` as `<x> <p> <y> .`."""

    def term(value) -> str:
        text = str(value)
        return text if text.startswith('"') else f"<{text}>"

    for fact in facts:
        s, p, o = (fact[1], RDF_TYPE, fact[0]) if len(fact) == 2 else (fact[1], fact[0], fact[2])
        yield f"{term(s)} {term(p)} {term(o)} ."


def restart(store, program: Path, algorithm: str, reasoner: Reasoner) -> None:
    """What a restarted job does before its first batch (minus Spark): read the state, restore an engine."""
    import resource

    t = time.perf_counter()
    snap = store.load()
    read = time.perf_counter() - t
    fresh = Reasoner.from_file(program, options=EngineOptions(algorithm, schedule="interleaved"))
    t = time.perf_counter()
    fresh.restore(snap)
    restored = time.perf_counter() - t
    same = fresh.facts() == reasoner.facts()
    text = sum(len(line.encode("utf-8")) + 1 for line in _ntriples_like(reasoner.facts()))
    used = store.memory_bytes()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"restart: read the state from Redis {read:.2f} s + restore {restored:.2f} s = {read + restored:.2f} s "
          f"({fresh.sizes()['facts']:,} facts, {fresh.sizes()['log']:,} log entries; same facts: {same})")
    print(f"memory: Redis used_memory {used / 2**20:,.0f} MiB = {used / max(text, 1):.2f}x the materialisation "
          f"as N-Triples-like text ({text / 2**20:,.0f} MiB: `C(x)` as x rdf:type C, `p(x, y)` as x p y); "
          f"peak RSS of this process {rss / 2**20:,.0f} MiB")


if __name__ == "__main__":
    sys.exit(main())
