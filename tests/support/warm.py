"""Fill numba's on-disk cache once, before parallel test workers start: `python -m tests.support.warm`.

The arrays core's kernels (engine.compact) are compiled on first use and cached
next to their source (`engine/compact/__pycache__`). In a fresh clone that cache
is empty, and every pytest-xdist worker and every `fluxmat` subprocess would
compile the same kernels at the same time: numba writes its cache files
atomically (a temporary file, then a rename) and takes no lock, so nothing is
corrupted, but the work is repeated -- the small-update interpreter alone costs
about 100 s of CPU cold. `make test` and `make test-fast` run this module first,
so the workers load the kernels from the cache. It does nothing when the
interpreter is in the cache already, compiled from today's sources
(engine.compact.small_cache.cached; `--force` warms anyway).

What it runs: the small-update interpreter (engine.compact.small.prepare), a
load, a large (set-at-a-time) and a small update under each algorithm of the
arrays core (bf's compiled search included), and the job's scan of a batch's
plain messages (connectors.json_scan).
"""

from __future__ import annotations

import sys

ARRAYS_ALGORITHMS = ("counting", "dred", "dredc", "remat", "bf")


def cached() -> bool:
    """Whether the interpreter is in numba's cache, compiled from today's sources."""
    from fluxmat.engine.compact import small_cache, small_run

    return small_cache.cached(small_run.cascade.py_func)


def warm() -> None:
    from fluxmat.engine import EngineOptions, Reasoner
    from fluxmat.engine.compact import small

    small.prepare(wait=True)
    edges = [("e", i, (i + 1) % 300) for i in range(300)]
    for algorithm in ARRAYS_ALGORITHMS:
        r = Reasoner.from_text(small.WARM_PROGRAM, options=EngineOptions(algorithm, core="arrays"))
        r.load(edges[:20])
        r.update(add=edges[20:], delete=edges[:5])  # more than THRESHOLD changes: set-at-a-time
        r.update(add=edges[:2], delete=edges[30:32])  # one compiled call
    _warm_scan()


def _warm_scan() -> None:
    import numpy as np

    from fluxmat.connectors.json_scan import json_array, same_bytes, scan

    sc = scan(['{"id": "u1", "add": [["e", "a", 1]], "del": [["e", "b", -2]]}'], np.ones(1, np.bool_))
    group = np.arange(len(sc.str_start))
    json_array(sc, group)
    same_bytes(sc, group, group)


if __name__ == "__main__":
    if "--force" in sys.argv or not cached():
        warm()
