"""The restarted process of the per-batch processor benchmark (tests/benchmarks/batch_processor.py).

    python -m tests.benchmarks.restart_child --restore-from URL --namespace NS --program FILE
                                             [--algorithm A] [--core C] [--snapshot FILE] [--spawned T]

What a restarted job does before its first batch, minus Spark: read the state
(from Redis, or with `--snapshot` from that local snapshot file), restore an
engine. Prints one JSON line: each phase as [wall, CPU] seconds -- `imports`
(the interpreter and what a restore needs: the engine, the state store, the
snapshot file; wall from `--spawned`, the parent's time.time() when it started
this process), `numba` (numba and the kernels' module), `program` (parsing and
compiling the program), `read`, `kernels` (numba loading the compiled kernels
from its cache, or compiling them), `restore` (without the kernels) and
`ready` (wall since `--spawned`, CPU of the whole process) -- with the peak RSS,
the engine's bytes and a digest of the facts. It imports nothing of the
benchmarks' workloads, so its imports are what a job's restore imports.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

from fluxmat.connectors import snapshot_file
from fluxmat.connectors.state import RedisStateStore
from fluxmat.engine import EngineOptions, Reasoner


def digest(facts) -> str:
    import hashlib

    return hashlib.sha256("\n".join(sorted(map(repr, facts))).encode("utf-8")).hexdigest()


def _vm_hwm(field: str = "VmHWM") -> int:
    """This process's peak RSS in bytes (VmHWM: unlike ru_maxrss, not inherited from the parent over exec).

    `field="VmRSS"`: its RSS now.
    """
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    return 0


def timed_calls(obj, name: str, times: dict, key: str | None = None) -> None:
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
        self.rss: dict[str, list[int]] = {"imports": [_vm_hwm("VmRSS"), _vm_hwm()]}  # [now, peak] after each phase
        self.spawned = spawned
        self.wall, self.cpu = time.time(), time.process_time()
        self.times["imports"] = [self.wall - spawned, self.cpu]  # interpreter start and this module's imports

    def lap(self, name: str, less: list[float] | None = None) -> None:
        """The time since the last lap is `name`'s, minus `less` (a part timed apart)."""
        wall, cpu = time.time(), time.process_time()
        less = less or [0.0, 0.0]
        self.times[name] = [wall - self.wall - less[0], cpu - self.cpu - less[1]]
        self.rss[name] = [_vm_hwm("VmRSS"), _vm_hwm()]
        self.wall, self.cpu = wall, cpu

    def ready(self) -> None:
        self.times["ready"] = [time.time() - self.spawned, time.process_time()]


def _time_numba_loads(times: dict):
    """Time every kernel numba compiles or loads from its on-disk cache into `times["kernels"]`.

    Returns a function that undoes it.
    """
    from numba.core.dispatcher import Dispatcher

    compile_ = Dispatcher.compile
    timed_calls(Dispatcher, "compile", times, "kernels")
    return lambda: setattr(Dispatcher, "compile", compile_)


def restore_from(url: str, namespace: str, program: Path, algorithm: str, snapshot: str | None = None,
                 core: str = "objects", spawned: float | None = None) -> int:  # fmt: skip
    """The child of `restart`: prints one JSON line (seconds to read and restore, sizes, a digest of the facts).

    From Redis, or with `snapshot` from that local snapshot file (checked as a restarting job checks it).
    Each phase as [wall, CPU] seconds; wall from `spawned` (the parent's time.time() at the start).
    """
    clock = _Phases(time.time() if spawned is None else spawned)
    times: dict[str, list[float]] = {"kernels": [0.0, 0.0]}
    undo = lambda: None  # noqa: E731
    if core == "arrays":
        from fluxmat.engine.compact import kernels  # noqa: F401  (numba and the kernels' module)

        undo = _time_numba_loads(times)
    try:
        return _restore(clock, times, url, namespace, program, algorithm, snapshot, core)
    finally:
        undo()


def _restore(clock, times: dict, url: str, namespace: str, program: Path, algorithm: str, snapshot: str | None,
             core: str) -> int:  # fmt: skip
    clock.lap("numba")
    store = RedisStateStore(url, namespace)
    fresh = Reasoner.from_file(program, options=EngineOptions(algorithm, schedule="interleaved", core=core))
    for name in ("rebuild_closures", "prepare"):
        times[name] = [0.0, 0.0]
        if hasattr(fresh.maintainer, name):  # the objects engine's phases (the arrays core has neither)
            timed_calls(fresh.maintainer, name, times)
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
    cols = snap = None  # noqa: F841  (what was read: the RSS once it is dropped, as a running job holds it)
    gc.collect()
    clock.rss["dropped"] = [_vm_hwm("VmRSS"), _vm_hwm()]
    sizes = fresh.sizes()
    print(json.dumps({**clock.times, "facts": sizes["facts"], "closures": times["rebuild_closures"],
                      "prepare": times["prepare"], "log": sizes["log"], "bytes": sizes.get("bytes", 0),
                      "rss": _vm_hwm(), "rss_phases": clock.rss, "digest": digest(fresh.facts())}))  # fmt: skip
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--restore-from", metavar="URL", required=True)
    ap.add_argument("--namespace", required=True)
    ap.add_argument("--program", required=True)
    ap.add_argument("--algorithm", default="fd-counting")
    ap.add_argument("--core", default="objects", choices=["objects", "arrays"])
    ap.add_argument("--snapshot", help="restore from this local snapshot file instead of Redis")
    ap.add_argument("--spawned", type=float, help="the parent's time.time() when it started this process")
    args = ap.parse_args(argv)
    return restore_from(args.restore_from, args.namespace, Path(args.program), args.algorithm, args.snapshot,
                        args.core, args.spawned)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
