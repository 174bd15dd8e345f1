"""The per-batch processor alone (issue 16): fact operations per second and where a batch's time goes.

    python -m tests.benchmarks.batch_processor [--batches 3] [--updates 500] [--update-size 1]
                                               [--algorithm fd-counting]
                                               [--core objects|arrays]
                                               [--redis] [--universities N]

No Spark or Kafka: `stream.batch.BatchProcessor.process` over an in-memory
state store (with `--redis`: a RedisStateStore on a local redis-server with AOF,
`appendfsync always`, as tests/support/servers.py starts it) and a publisher that keeps
nothing, on the issue's workload: the
corpus program `programs/lubm.dlog` over `lubm_gen.generate(1, 2)` (minus held-out
facts), updates of 1 add + 1 delete (`--update-size K`: K + K) made by the pipeline benchmark's
`UpdateMaker` and sent as JSON messages. Prints, per batch, fact operations per
second and the phases of `BatchOutcome.phases` (decode, engine, export, commit,
publish), then the totals; every batch's delta is checked by folding all deltas
into the initial materialisation and comparing with `remat` over the final
explicit facts.

With `--universities N` the data is LUBM-N (`lubm_gen.generate(N)`: 15-25
departments per university, as LUBM draws them) instead of LUBM-1 with two
departments. With `--redis` it also measures what a restart needs (the state
read back from Redis and a new engine restored from it: a restarted job is
ready after this plus Spark's start-up; measured in a new process), the same from a local snapshot
(stream.snapshots: its write, its size, a new process restored from it), Redis's `used_memory` against the
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

from fluxmat.connectors.state import MemoryStateStore, RedisStateStore
from fluxmat.engine import EngineOptions, Reasoner, atom_to_fact
from fluxmat.engine.wire import fact_from_json
from fluxmat.stream import batch as batch_module
from fluxmat.stream.batch import BatchProcessor
from fluxmat.stream.batch_outcome import Clock
from fluxmat.stream.snapshots import Snapshots
from tests.benchmarks.lubm_gen import generate
from tests.benchmarks.pipeline import HELD_OUT, PROGRAM, UpdateMaker
from tests.benchmarks.restart_child import digest, timed_calls
from tests.benchmarks.workloads import corpus_dir


class _CpuClock(Clock):
    """A batch's phases in CPU seconds of this process (the machine is shared: wall time is mostly waiting)."""

    timer = staticmethod(time.process_time)


class _Collect:
    def __init__(self):
        self.deltas = []

    def publish_delta(self, batch, through, added, removed, causes=None):
        self.deltas.append((added, removed))

    def publish_dead_letter(self, *args, **kw):
        raise AssertionError(f"unexpected dead letter: {args[:1]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--updates", type=int, default=500, help="updates (1 add + 1 delete) per batch")
    ap.add_argument("--update-size", type=int, default=1,
                    help="additions and deletions per update (batches that change many facts, e.g. 1000)")
    ap.add_argument("--algorithm", default="fd-counting")
    ap.add_argument("--core", default="objects", choices=["objects", "arrays"], help="the engine's core")
    ap.add_argument("--redis", action="store_true", help="commit to a local redis-server (AOF, fsync always)")
    ap.add_argument("--universities", type=int, default=None,
                    help="LUBM-N data instead of LUBM-1 with two departments (e.g. 5)")
    ap.add_argument("--no-check", action="store_true",
                    help="skip folding the deltas against remat (at LUBM-5 it costs minutes and GBs)")
    args = ap.parse_args(argv)
    if not args.redis:
        return run(args, MemoryStateStore())
    from tests.support.servers import RedisServer

    with tempfile.TemporaryDirectory(prefix="fluxmat-bench-") as tmp:
        server = RedisServer(Path(tmp)).start()
        try:
            return run(args, RedisStateStore(server.url, "bench"))
        finally:
            server.stop()


def run(args, store) -> int:
    batch_module.Clock = _CpuClock  # the phases in CPU seconds
    program = corpus_dir() / PROGRAM
    options = EngineOptions(args.algorithm, schedule="interleaved", core=args.core)
    reasoner = Reasoner.from_file(program, options=options)
    if args.universities:
        data, label = generate(args.universities, prefixes=reasoner.prefixes), f"generate({args.universities})"
    else:
        data, label = generate(1, 2, prefixes=reasoner.prefixes), "generate(1, 2)"
    maker = UpdateMaker(data, max(HELD_OUT, args.update_size))
    pub = _Collect()
    proc = BatchProcessor(reasoner, store, pub)
    times: dict[str, list[float]] = {}
    timed_calls(reasoner, "load", times)
    wall, cpu = time.perf_counter(), time.process_time()
    proc.start(maker.initial)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    load_wall, load_cpu = times["load"]
    print(f"# {program.name} over lubm_gen.{label}: {len(maker.initial):,} explicit facts, "
          f"{reasoner.sizes()['facts']:,} in the materialisation; {args.algorithm}, core={args.core}; "
          f"{type(store).__name__}; load average {_loadavg()}")  # fmt: skip
    print(f"initial load: {wall:.2f} s (CPU {cpu:.2f} s): the engine's load {load_wall:.2f} s (CPU {load_cpu:.2f} s), "
          f"encoding the delta and the first commit {wall - load_wall:.2f} s (CPU {cpu - load_cpu:.2f} s)")  # fmt: skip
    totals: dict[str, float] = {}
    ops = 0
    seconds = cpu_seconds = 0.0
    offset = 0
    for b in range(args.batches):
        rows = update_rows(maker, args.updates, offset, args.update_size)
        offset += args.updates
        cpu = time.process_time()
        outcome = proc.process(b, rows)
        cpu = time.process_time() - cpu
        n = outcome.adds + outcome.deletes
        ops += n
        seconds += outcome.seconds
        cpu_seconds += cpu
        for k, v in outcome.phases.items():
            totals[k] = totals.get(k, 0.0) + v
        shares = ", ".join(f"{k} {v:.3f}" for k, v in outcome.phases.items())
        print(f"batch {b}: {outcome.updates} updates, {n} fact ops (delta +{outcome.added} -{outcome.removed}) "
              f"in {outcome.seconds:.3f} s "
              f"= {n / outcome.seconds:,.0f} fact ops/s; CPU {cpu:.3f} s = {n / cpu:,.0f} fact ops/s "
              f"(CPU s: {shares})")  # fmt: skip
    share = ", ".join(f"{k} {100 * v / max(cpu_seconds, 1e-9):.0f}%" for k, v in totals.items())
    print(f"total: {ops:,} fact ops in {seconds:.2f} s = {ops / seconds:,.0f} fact ops/s; CPU {cpu_seconds:.2f} s "
          f"= {ops / cpu_seconds:,.0f} fact ops/s; CPU breakdown: {share}; load average {_loadavg()}")  # fmt: skip
    if args.no_check:
        ok = True
        print("check: skipped (--no-check)")
    else:
        ok = _check(program, maker, pub, reasoner)
    if isinstance(store, RedisStateStore):
        restart(store, program, args.algorithm, reasoner)
    return 0 if ok else 1


def _loadavg() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def _check(program: Path, maker, pub: _Collect, reasoner: Reasoner) -> bool:
    """Whether the published deltas, folded into the initial materialisation, give `remat`'s result."""
    current = {atom_to_fact(fact_from_json(f, reasoner.prefixes)) for f in pub.deltas[0][0]}
    for added, removed in pub.deltas[1:]:
        current |= {atom_to_fact(fact_from_json(f, reasoner.prefixes)) for f in added}
        current -= {atom_to_fact(fact_from_json(f, reasoner.prefixes)) for f in removed}
    ref = Reasoner.from_file(program, "remat")
    ref.load(maker.present)
    ok = current == ref.facts()
    print(f"check: the deltas fold into remat's result: {'ok' if ok else 'DIFFERENT'}")
    return ok


RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"


def update_rows(maker, n: int, offset: int, size: int = 1) -> list[tuple]:
    """`n` update messages of `size` additions + `size` deletions as the Kafka source's rows, from `offset` on."""
    rows = []
    for i in range(n):
        add, dele = maker.make(size, size)
        msg = json.dumps({"add": [list(f) for f in add], "del": [list(f) for f in dele]})
        rows.append((0, offset + i, None, msg, None, True, len(msg)))
    return rows


def _ntriples_like(facts):
    """Each fact as an N-Triples-like line: `C(x)` as `<x> <rdf:type> <C> .`, `p(x, y)` as `<x> <p> <y> .`."""

    def term(value) -> str:
        text = str(value)
        return text if text.startswith('"') else f"<{text}>"

    for fact in facts:
        s, p, o = (fact[1], RDF_TYPE, fact[0]) if len(fact) == 2 else (fact[1], fact[0], fact[2])
        yield f"{term(s)} {term(p)} {term(o)} ."


def restart(store, program: Path, algorithm: str, reasoner: Reasoner) -> None:
    """What a restarted job does before its first batch (minus Spark): read the state, restore an engine.

    Measured in a new process, as a restarted job is one (in this process the
    engine, remat's reference and their garbage would slow the restore ~1.5x).
    """
    import resource

    namespace = store.prefix.split(":")[1]
    command = [sys.executable, "-m", "tests.benchmarks.restart_child", "--restore-from", store.url,
               "--namespace", namespace, "--program", str(program), "--algorithm", algorithm,
               "--core", reasoner.core]  # fmt: skip
    want = digest(reasoner.facts())
    got = _child([*command, "--spawned", repr(time.time())])
    print(f"restart from Redis (a new process): {_ready(got, want)}")
    with tempfile.TemporaryDirectory(prefix="fluxmat-snapshot-") as tmp:
        snapshots = Snapshots(Path(tmp), namespace)
        if not snapshots.write(store.last_batch(), reasoner):
            raise SystemExit("the local snapshot was not written")
        w = snapshots.last
        print(f"local snapshot written: {w['bytes'] / 2**20:,.1f} MiB in {w['seconds']:.2f} s "
              f"(columns taken in {w['columns_seconds']:.2f} s, file {w['seconds'] - w['columns_seconds']:.2f} s)")
        fast = _child([*command, "--snapshot", str(snapshots.path), "--spawned", repr(time.time())])
    print(f"restart from the local snapshot (a new process): {_ready(fast, want)}")
    text = sum(len(line.encode("utf-8")) + 1 for line in _ntriples_like(reasoner.facts()))
    used = store.memory_bytes()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"memory: Redis used_memory {used / 2**20:,.0f} MiB = {used / max(text, 1):.2f}x the materialisation "
          f"as N-Triples-like text ({text / 2**20:,.0f} MiB: `C(x)` as x rdf:type C, `p(x, y)` as x p y); "
          f"peak RSS of this process {rss / 2**20:,.0f} MiB; load average {_loadavg()}")


def _child(command: list[str]) -> dict:
    import subprocess

    child = subprocess.run(command, capture_output=True, text=True)
    if child.returncode:
        raise SystemExit(f"the restarted process failed:\n{child.stderr}")
    return json.loads(child.stdout.strip().splitlines()[-1])


PHASES = ("imports", "numba", "program", "read", "kernels", "restore")


def _phases(got: dict) -> str:
    return f"closure modules {got['closures'][0]:.2f} s, plans and indexes {got['prepare'][0]:.2f} s"


def _ready(got: dict, want: str) -> str:
    """The restarted process's time until ready, wall (CPU), and where it went."""
    parts = ", ".join(f"{k} {got[k][0]:.2f} s ({got[k][1]:.2f})" for k in PHASES)
    facts = got["facts"]
    return (f"ready after {got['ready'][0]:.2f} s (CPU {got['ready'][1]:.2f} s): {parts}; "
            f"{facts:,} facts, {got['log']:,} log entries; same facts: {got['digest'] == want}; "
            f"peak RSS {got['rss'] / 2**20:,.0f} MiB = {got['rss'] / facts:,.0f} bytes a fact, "
            f"the engine's arrays {got['bytes'] / 1e6:,.0f} MB = {got['bytes'] / facts:,.0f} bytes a fact; "
            f"other restore phases: {_phases(got)}; {_rss(got)}")  # fmt: skip


def _rss(got: dict) -> str:
    """The restarted process's RSS after each phase, and its peak by then (MiB)."""
    mib = lambda b: f"{b / 2**20:,.0f}"  # noqa: E731
    parts = ", ".join(f"{k} {mib(now)} (peak {mib(peak)})" for k, (now, peak) in got.get("rss_phases", {}).items())
    return f"RSS MiB after each phase: {parts}"


if __name__ == "__main__":
    sys.exit(main())
