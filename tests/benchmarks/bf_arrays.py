"""Backward/Forward on the arrays core against DRed^c on it and B/F on the objects core: CPU seconds.

    python -m tests.benchmarks.bf_arrays [--scale F] [--cap SECONDS] [--systems arrays/bf,...]

DAG-R (tests/benchmarks/workloads.py `dag`: transitive closure of a random
DAG, 2,000 nodes and 10,000 edges at scale 1) and the suite's task sequence
(tests/benchmarks/tasks.py `plan`). Each system runs in its own child process
(isolate.py), the systems one after the other; per task the child's CPU
seconds (`time.process_time`) and the rule instances the report counts, and
a check that the materialisation equals `remat` (arrays core) from scratch
(the suite's digests). A task past `--cap` wall seconds ends that system's
run ("capped").
"""

from __future__ import annotations

import argparse
import os
import time

from tests.benchmarks import tasks as T
from tests.benchmarks.isolate import Capped, cap, isolated
from tests.benchmarks.workloads import dag

SYSTEMS = {  # label -> (algorithm, core)
    "arrays/dredc": ("dredc", "arrays"),
    "arrays/bf": ("bf", "arrays"),
    "objects/bf": ("bf", "objects"),
}


def _run(arg: tuple) -> dict:
    """One system's task sequence in this (child) process."""
    from fluxmat.engine import EngineOptions, Reasoner

    label, scale, seconds = arg
    algorithm, core = SYSTEMS[label]
    w = dag(scale=scale)
    tasks, states = T.plan(w)
    want = {}
    r = Reasoner(w.program, options=EngineOptions(algorithm, core=core))
    if core == "arrays":
        from fluxmat.engine.compact.small import prepare

        prepare()  # the one-call interpreter compiled before the clock starts
    out: dict = {"rows": []}
    for t in tasks:
        if t.state not in want:
            oracle = Reasoner(w.program, options=EngineOptions("remat", core="arrays"))
            oracle.load(states[t.state])
            want[t.state] = T.digest(oracle.facts())
        start = time.process_time()
        try:
            with cap(seconds):
                rep = r.load(t.add) if t.name == T.INITIAL else r.update(t.add, t.delete)
        except Capped:
            out["rows"].append((t.name, "capped", 0, False))
            break
        cpu = time.process_time() - start
        ok = T.digest(r.facts()) == want[t.state]
        out["rows"].append((t.name, round(cpu, 2), rep.total_applications, ok))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--cap", type=float, default=600.0, help="wall seconds per task")
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    args = ap.parse_args()
    print(f"load average {os.getloadavg()}")
    for label in args.systems.split(","):
        res = isolated(_run, (label, args.scale, args.cap), args.cap * 8)
        print(f"## {label} (peak RSS {res.get('peak_rss_mb', '?')} MiB)")
        if "error" in res:
            print(res["error"])
            continue
        for task, cpu, instances, ok in res["rows"]:
            print(
                f"{task:24} {cpu!s:>8} CPU s  {instances:>12,} rule instances  {'ok' if ok else 'WRONG'}"
            )
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
