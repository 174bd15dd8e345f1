"""Small updates on LUBM: the objects core against the arrays core's one-call and set-at-a-time paths.

    python -m tests.benchmarks.small_updates [--universities 1] [--sizes 1,5,50,128,500] [--repeat 31] [--alternate]

The bake-off workload (tests/benchmarks/bakeoff/workload.py: `lubm.dlog` over
LUBM-N, updates from its `UpdateMaker`). Three reasoners load the same facts:
`objects` (the objects core, fd-counting, as the bake-off's `current`),
`one call` and `set` (the arrays core through `Reasoner`, as the bake-off's
`door`, with the small-update threshold above or below every update). Then,
per size k, the same `--repeat` updates of k additions and k deletions go to
each reasoner in turn (all of them to one, then to the next, so each runs
with its own caches warm; with `--alternate` each update to every reasoner
before the next, so a change in the machine's load hits all alike); each is
timed in CPU seconds (time.process_time) and the median per size and
reasoner is printed, with the load average.
After each size the three must hold the same facts (checked by digest).
`--held-out` facts are kept out of the initial data (they are what updates
add; at least 2 x k + the repeats are needed for large k).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from fluxmat.engine.compact import small
from tests.benchmarks.bakeoff.current import CurrentCore
from tests.benchmarks.bakeoff.door import DoorCore
from tests.benchmarks.bakeoff.run import digest
from tests.benchmarks.bakeoff.workload import lubm


def _cores(w) -> dict:
    cores = {"objects": CurrentCore(w.rules, w.arities)}
    for name, threshold in (("one call", 10**9), ("set", -1)):
        core = cores[name] = DoorCore(w.rules, w.arities)
        core.reasoner.maintainer.small.threshold = threshold
    initial = w.encode(w.initial)
    for name, core in cores.items():
        t = time.process_time()
        core.load(initial)
        print(f"load {name}: {time.process_time() - t:.2f} s CPU", flush=True)
    return cores


def run(universities: int, sizes: list[int], repeat: int, held_out: int | None,
        alternate: bool = False) -> None:  # fmt: skip
    t = time.process_time()
    DoorCore.warm()
    small.prepare(wait=True)
    print(
        f"warm-up (kernels and interpreter from numba's cache): {time.process_time() - t:.2f} s CPU"
    )
    w = lubm(universities, held_out=held_out)
    cores = _cores(w)
    print(
        "| changes (k adds + k deletes) | "
        + " | ".join(f"{n} ms CPU" for n in cores)
        + " | load avg |"
    )
    print("|---|" + "---|" * (len(cores) + 1))
    for k in sizes:
        batch = [w.maker.make(k, k) for _ in range(max(5, repeat // max(1, k // 25)))]
        batch = [(w.encode(add), w.encode(dele)) for add, dele in batch]
        times: dict[str, list[float]] = {name: [] for name in cores}
        # one reasoner at a time (its own caches stay warm), or each update to every reasoner in turn
        order = ([(a, d, n) for a, d in batch for n in cores] if alternate else
                 [(a, d, n) for n in cores for a, d in batch])  # fmt: skip
        for a, d, name in order:
            t = time.process_time()
            cores[name].update(a, d)
            times[name].append(time.process_time() - t)
        digests = {digest(w.dictionary, core.facts()) for core in cores.values()}
        assert len(digests) == 1, f"the reasoners differ after updates of {k} + {k}"
        cells = " | ".join(f"{1000 * statistics.median(ts):.2f}" for ts in times.values())
        load = "/".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"| {2 * k} | {cells} | {load} |", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--universities", type=int, default=1)
    ap.add_argument("--sizes", default="1,5,50,128,500", help="k per update (k adds + k deletes)")
    ap.add_argument(
        "--repeat", type=int, default=31, help="updates per size (fewer for large sizes)"
    )
    ap.add_argument(
        "--held-out", type=int, default=None, help="generated facts held out (default 300)"
    )
    ap.add_argument(
        "--alternate", action="store_true", help="each update to every reasoner in turn"
    )
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]
    run(args.universities, sizes, args.repeat, args.held_out, args.alternate)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
