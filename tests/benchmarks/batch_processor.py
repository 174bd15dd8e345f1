"""The per-batch processor alone (issue 16): fact operations per second and where a batch's time goes.

    python -m tests.benchmarks.batch_processor [--batches 3] [--updates 500] [--algorithm fd-counting]
                                               [--core objects|arrays]
                                               [--redis] [--universities N]

No Spark or Kafka: `stream.batch.BatchProcessor.process` over an in-memory
state store (with `--redis`: a RedisStateStore on a local redis-server with AOF,
`appendfsync always`, as tests/support/servers.py starts it) and a publisher that keeps
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

from fluxmat.connectors import snapshot_file
from fluxmat.connectors.state import MemoryStateStore, RedisStateStore
from fluxmat.engine import EngineOptions, Reasoner, atom_to_fact
from fluxmat.engine.wire import fact_from_json
from fluxmat.stream import batch as batch_module
from fluxmat.stream.batch import BatchProcessor
from fluxmat.stream.batch_outcome import Clock
from fluxmat.stream.snapshots import Snapshots
from tests.benchmarks.lubm_gen import generate
from tests.benchmarks.pipeline import HELD_OUT, PROGRAM, UpdateMaker
from tests.benchmarks.workloads import corpus_dir


class _CpuClock(Clock):
    """A batch's phases in CPU seconds of this process (the machine is shared: wall time is mostly waiting)."""

    def __init__(self):
        self.phases: dict[str, float] = {}
        self.last = time.process_time()

    def lap(self, phase: str) -> None:
        now = time.process_time()
        self.phases[phase] = self.phases.get(phase, 0.0) + now - self.last
        self.last = now


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
    ap.add_argument("--algorithm", default="fd-counting")
    ap.add_argument("--core", default="objects", choices=["objects", "arrays"], help="the engine's core")
    ap.add_argument("--redis", action="store_true", help="commit to a local redis-server (AOF, fsync always)")
    ap.add_argument("--universities", type=int, default=None,
                    help="LUBM-N data instead of LUBM-1 with two departments (e.g. 5)")
    ap.add_argument("--no-check", action="store_true",
                    help="skip folding the deltas against remat (at LUBM-5 it costs minutes and GBs)")
    ap.add_argument("--restore-from", metavar="URL", help=argparse.SUPPRESS)  # restart's child process
    ap.add_argument("--namespace", help=argparse.SUPPRESS)
    ap.add_argument("--snapshot", help=argparse.SUPPRESS)  # restart's child: restore from this local snapshot
    ap.add_argument("--program", help=argparse.SUPPRESS)
    ap.add_argument("--spawned", type=float, help=argparse.SUPPRESS)  # restart's child: the parent's time.time()
    args = ap.parse_args(argv)
    if args.restore_from:
        return restore_from(args.restore_from, args.namespace, Path(args.program), args.algorithm, args.snapshot,
                            args.core, args.spawned)  # fmt: skip
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
    maker = UpdateMaker(data, HELD_OUT)
    pub = _Collect()
    proc = BatchProcessor(reasoner, store, pub)
    times: dict[str, list[float]] = {}
    _timed(reasoner, "load", times)
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
        rows = update_rows(maker, args.updates, offset)
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
        print(f"batch {b}: {outcome.updates} updates, {n} fact ops in {outcome.seconds:.3f} s "
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


def update_rows(maker, n: int, offset: int) -> list[tuple]:
    """`n` update messages of 1 addition + 1 deletion as the Kafka source's rows, from `offset` on."""
    rows = []
    for i in range(n):
        add, dele = maker.make(1, 1)
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
    command = [sys.executable, "-m", "tests.benchmarks.batch_processor", "--restore-from", store.url,
               "--namespace", namespace, "--program", str(program), "--algorithm", algorithm,
               "--core", reasoner.core]  # fmt: skip
    digest = _digest(reasoner.facts())
    got = _child([*command, "--spawned", repr(time.time())])
    print(f"restart from Redis (a new process): {_ready(got, digest)}")
    with tempfile.TemporaryDirectory(prefix="fluxmat-snapshot-") as tmp:
        snapshots = Snapshots(Path(tmp), namespace)
        if not snapshots.write(store.last_batch(), reasoner):
            raise SystemExit("the local snapshot was not written")
        w = snapshots.last
        print(f"local snapshot written: {w['bytes'] / 2**20:,.1f} MiB in {w['seconds']:.2f} s "
              f"(columns taken in {w['columns_seconds']:.2f} s, file {w['seconds'] - w['columns_seconds']:.2f} s)")
        fast = _child([*command, "--snapshot", str(snapshots.path), "--spawned", repr(time.time())])
    print(f"restart from the local snapshot (a new process): {_ready(fast, digest)}")
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


def _ready(got: dict, digest: str) -> str:
    """The restarted process's time until ready, wall (CPU), and where it went."""
    parts = ", ".join(f"{k} {got[k][0]:.2f} s ({got[k][1]:.2f})" for k in PHASES)
    facts = got["facts"]
    return (f"ready after {got['ready'][0]:.2f} s (CPU {got['ready'][1]:.2f} s): {parts}; "
            f"{facts:,} facts, {got['log']:,} log entries; same facts: {got['digest'] == digest}; "
            f"peak RSS {got['rss'] / 2**20:,.0f} MiB = {got['rss'] / facts:,.0f} bytes a fact, "
            f"the engine's arrays {got['bytes'] / 1e6:,.0f} MB = {got['bytes'] / facts:,.0f} bytes a fact; "
            f"other restore phases: {_phases(got)}")  # fmt: skip


def _digest(facts) -> str:
    import hashlib

    return hashlib.sha256("\n".join(sorted(map(repr, facts))).encode("utf-8")).hexdigest()


def _vm_hwm() -> int:
    """This process's peak RSS in bytes (VmHWM: unlike ru_maxrss, not inherited from the parent over exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def _phases(got: dict) -> str:
    return f"closure modules {got['closures'][0]:.2f} s, plans and indexes {got['prepare'][0]:.2f} s"


def _timed(obj, name: str, times: dict, key: str | None = None) -> None:
    """Time each call of the method `name` of `obj` into `times[key or name]` = [wall, CPU] seconds."""
    method = getattr(obj, name)
    spent = times.setdefault(key or name, [0.0, 0.0])

    def timed(*args, **kw):
        t, c = time.perf_counter(), time.process_time()
        try:
            return method(*args, **kw)
        finally:
            spent[0] += time.perf_counter() - t
            spent[1] += time.process_time() - c

    setattr(obj, name, timed)


class _Phases:
    """Wall and CPU seconds of a process's phases, one after the other (`lap`)."""

    def __init__(self, spawned: float):
        self.times: dict[str, list[float]] = {}
        self.spawned = spawned
        self.wall, self.cpu = time.time(), time.process_time()
        self.times["imports"] = [self.wall - spawned, self.cpu]  # interpreter start and this module's imports

    def lap(self, name: str, less: list[float] | None = None) -> None:
        """The time since the last lap is `name`'s, minus `less` (a part timed apart)."""
        wall, cpu = time.time(), time.process_time()
        less = less or [0.0, 0.0]
        self.times[name] = [wall - self.wall - less[0], cpu - self.cpu - less[1]]
        self.wall, self.cpu = wall, cpu

    def ready(self) -> None:
        self.times["ready"] = [time.time() - self.spawned, time.process_time()]


def _time_numba_loads(times: dict) -> None:
    """Time every kernel numba compiles or loads from its on-disk cache into `times["kernels"]`."""
    from numba.core.dispatcher import Dispatcher

    _timed(Dispatcher, "compile", times, "kernels")


def restore_from(url: str, namespace: str, program: Path, algorithm: str, snapshot: str | None = None,
                 core: str = "objects", spawned: float | None = None) -> int:  # fmt: skip
    """The child of `restart`: prints one JSON line (seconds to read and restore, sizes, a digest of the facts).

    From Redis, or with `snapshot` from that local snapshot file (checked as a restarting job checks it).
    Each phase as [wall, CPU] seconds; wall from `spawned` (the parent's time.time() at the start).
    """
    clock = _Phases(time.time() if spawned is None else spawned)
    times: dict[str, list[float]] = {"kernels": [0.0, 0.0]}
    if core == "arrays":
        from fluxmat.engine.compact import kernels  # noqa: F401  (numba and the kernels' module)

        _time_numba_loads(times)
    clock.lap("numba")
    store = RedisStateStore(url, namespace)
    fresh = Reasoner.from_file(program, options=EngineOptions(algorithm, schedule="interleaved", core=core))
    for name in ("rebuild_closures", "prepare"):
        times[name] = [0.0, 0.0]
        if hasattr(fresh.maintainer, name):  # the objects engine's phases (the arrays core has neither)
            _timed(fresh.maintainer, name, times)
    clock.lap("program", times["kernels"])
    if snapshot:
        header = snapshot_file.read_header(Path(snapshot))
        cols = snapshot_file.read(Path(snapshot), header)
    else:
        snap = store.load()
    clock.lap("read")
    loaded = list(times["kernels"])
    if snapshot:
        fresh.restore_columns(cols)
    else:
        fresh.restore(snap)
    clock.lap("restore", [times["kernels"][0] - loaded[0], times["kernels"][1] - loaded[1]])
    clock.ready()
    clock.times["kernels"] = times["kernels"]
    sizes = fresh.sizes()
    print(json.dumps({**clock.times, "facts": sizes["facts"], "closures": times["rebuild_closures"],
                      "prepare": times["prepare"], "log": sizes["log"], "bytes": sizes.get("bytes", 0),
                      "rss": _vm_hwm(), "digest": _digest(fresh.facts())}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
