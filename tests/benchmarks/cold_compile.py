"""The arrays core's cold compile, in CPU seconds: `python -m tests.benchmarks.cold_compile [--runs N]`.

Each run is a fresh process with an empty `NUMBA_CACHE_DIR`: it imports
engine.compact.small, runs `small.prepare(wait=True)` (the small-update
interpreter compiled, then two updates of a small program), then a load and a
large (set-at-a-time) update of the same program through `Reasoner` (the
kernels a first update compiles). It reports CPU seconds
(`time.process_time`) per part, the process's user + sys, and how many
(function, signature) pairs numba compiled (its `numba:compile` events: every
dispatcher, numba's own implementations of numpy functions and typed lists
included). `--table` prints the compiles per function of the last run;
`--tree DIR` (repeatable) runs fluxmat from the checkout DIR too (another
commit's files, e.g. from `git archive`), alternating with the installed one.

docs/performance/cold-compile.md has the numbers.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

EDGES = [("e", i, (i + 1) % 300) for i in range(300)]


def _use_tree(tree: str) -> None:
    """Import fluxmat from the checkout `tree` (another commit's sources) instead of the installed one."""
    for finder in sys.meta_path:
        mapping = getattr(sys.modules.get(getattr(finder, "__module__", "")), "MAPPING", None)
        if isinstance(mapping, dict) and "fluxmat" in mapping:
            root = os.path.dirname(mapping["fluxmat"])
            for name, path in mapping.items():
                mapping[name] = os.path.join(tree, os.path.relpath(path, root))


def _child() -> None:
    if os.environ.get("FLUXMAT_COLD_TREE"):
        _use_tree(os.environ["FLUXMAT_COLD_TREE"])
    from numba.core import event

    compiles: collections.Counter = collections.Counter()
    # CPU seconds per function, its callees' compiles not included
    own: collections.Counter = collections.Counter()
    stack: list = []

    class Count(event.Listener):
        def on_start(self, ev) -> None:
            d = ev.data["dispatcher"]
            fn = getattr(d, "py_func", None)
            name = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', d)}"
            compiles[name] += 1
            stack.append([name, time.process_time(), 0.0])

        def on_end(self, ev) -> None:
            name, start, inner = stack.pop()
            took = time.process_time() - start
            own[name] += took - inner
            if stack:
                stack[-1][2] += took

    event.register("numba:compile", Count())
    t0 = time.process_time()
    from fluxmat.engine.compact import small

    t1 = time.process_time()
    small.prepare(wait=True)
    t2 = time.process_time()
    interp, interp_own = dict(compiles), dict(own)
    from fluxmat.engine import EngineOptions, Reasoner

    r = Reasoner.from_text(small.WARM_PROGRAM, options=EngineOptions(core="arrays"))
    r.load(EDGES[:20])
    r.update(add=EDGES[20:], delete=EDGES[:5])
    t3 = time.process_time()
    print(json.dumps({"import": t1 - t0, "interpreter": t2 - t1, "kernels": t3 - t2,
                      "compiles_interp": interp, "compiles": dict(compiles), "own": dict(own), "own_interp": interp_own}))  # fmt: skip


def run_once(tree: str | None = None) -> dict:
    """One cold process (fluxmat from the checkout `tree`, else the installed one); its numbers."""
    with tempfile.TemporaryDirectory(prefix="fluxmat-cold-") as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        if tree:
            env["FLUXMAT_COLD_TREE"] = os.path.abspath(tree)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = subprocess.run([sys.executable, "-m", "tests.benchmarks.cold_compile", "--child"],
                             env=env, capture_output=True, text=True, check=True)  # fmt: skip
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["process"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--table", action="store_true")
    ap.add_argument(
        "--tree",
        action="append",
        default=[],
        help="also run fluxmat from this checkout (another commit's files), alternating",
    )
    args = ap.parse_args()
    if args.child:
        _child()
        return
    for _ in range(args.runs):
        for tree in [None, *args.tree]:
            res = run_once(tree)
            _line(res, tree or "installed")
    if args.table:
        print("compiles (all, interpreter), CPU s without callees' compiles, function")
        for name, n in sorted(res["compiles"].items(), key=lambda kv: (-kv[1], kv[0])):
            print(
                f"{n:4d} {res['compiles_interp'].get(name, 0):4d} {res['own'][name]:6.2f}  {name}"
            )


def _line(res: dict, label: str) -> None:
    n_int, n_all = sum(res["compiles_interp"].values()), sum(res["compiles"].values())
    print(f"{label}: load {os.getloadavg()[0]:.1f}  process {res['process']:.1f} s  import "
          f"{res['import']:.1f}  interpreter {res['interpreter']:.1f}  kernels "
          f"{res['kernels']:.1f}  compiles {n_int} + {n_all - n_int}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
