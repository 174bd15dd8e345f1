"""The arrays core's state in Redis, per-field layout against bulk layout: client CPU time of commits and restarts.

    python -m tests.benchmarks.state_layouts [--universities N]   (default: LUBM-1 with two departments)

One engine, one BatchProcessor, one local redis-server (tests/support/servers.py): each commit goes to
two namespaces, the bulk layout (connectors.bulk_state) and, as texts, the per-field layout; then each
state is restored into a new engine. Prints, per commit and per restore, the client's CPU time
(`time.process_time`, hardly changed by the machine's load) and the wall time, and the state's bytes.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from fluxmat.connectors.state import RedisStateStore
from fluxmat.engine import EngineOptions, Reasoner
from fluxmat.stream.batch import BatchProcessor
from tests.benchmarks.batch_processor import update_rows
from tests.benchmarks.lubm_gen import generate
from tests.benchmarks.pipeline import HELD_OUT, PROGRAM, UpdateMaker
from tests.benchmarks.workloads import corpus_dir
from tests.support.servers import RedisServer
from tests.support.shared import NullPublisher

OPTIONS = EngineOptions("fd-counting", schedule="interleaved", core="arrays")


class _Both:
    """Commits each batch to the bulk store and, as texts, to the per-field store; times each."""

    def __init__(self, bulk: RedisStateStore, fields: RedisStateStore):
        self.bulk, self.fields, self.times = bulk, fields, []

    def __getattr__(self, name):
        return getattr(self.bulk, name)

    def commit(self, batch, changes, output):
        bulk = _timed(lambda: self.bulk.commit(batch, changes, output))
        fields = _timed(lambda: self.fields.commit(batch, changes.as_texts(), output))
        self.times.append((batch, bulk, fields))


def _timed(fn) -> tuple[float, float, object]:
    cpu, wall = time.process_time(), time.perf_counter()
    out = fn()
    return time.process_time() - cpu, time.perf_counter() - wall, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--universities", type=int, default=None, help="LUBM-N (default: LUBM-1, two departments)")
    ap.add_argument("--batches", type=int, default=5)
    ap.add_argument("--updates", type=int, default=500)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="fluxmat-bench-") as tmp:
        server = RedisServer(Path(tmp)).start()
        try:
            return _run(args, server.url)
        finally:
            server.stop()


def _run(args, url: str) -> int:
    reasoner = Reasoner.from_file(corpus_dir() / PROGRAM, options=OPTIONS)
    n = args.universities
    maker = UpdateMaker(generate(n, prefixes=reasoner.prefixes) if n else generate(1, 2, prefixes=reasoner.prefixes),
                        HELD_OUT)  # fmt: skip
    both = _Both(RedisStateStore(url, "bulk"), RedisStateStore(url, "fields"))
    proc = BatchProcessor(reasoner, both, NullPublisher())
    proc.start(maker.initial)
    offset = 0
    for b in range(args.batches):
        proc.process(b, update_rows(maker, args.updates, offset))
        offset += args.updates
    print(f"# LUBM-{n or '1 (two departments)'}: {reasoner.sizes()['facts']:,} facts; "
          f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    for batch, (bc, bw, _), (fc, fw, _) in both.times:
        print(f"commit {batch}: bulk cpu {bc:.3f} s (wall {bw:.3f} s); per-field cpu {fc:.3f} s (wall {fw:.3f} s)")
    for name, store in (("bulk", both.bulk), ("per-field", both.fields)):
        fresh = Reasoner.from_file(corpus_dir() / PROGRAM, options=OPTIONS)
        rc, rw, snap = _timed(store.load)
        sc, sw, _ = _timed(lambda: fresh.restore(snap))  # noqa: B023 -- called at once
        print(f"restart from {name}: read cpu {rc:.2f} s (wall {rw:.2f} s), rebuild cpu {sc:.2f} s (wall {sw:.2f} s); "
              f"same facts: {fresh.facts() == reasoner.facts()}; {store.namespace_bytes():,} bytes in Redis")  # fmt: skip
    print(f"load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
