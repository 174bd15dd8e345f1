"""Compile (or load from numba's cache) the small-update interpreter: `python -m fluxmat.engine.compact.small_warm`.

engine.compact.small starts this module as a separate process the first time
a small update needs the interpreter; its exit status tells whether numba's
on-disk cache was written (0), or the interpreter compiled but could not be
cached (`NOT_CACHED`: the process that started it would compile it again
itself, so it keeps the set-at-a-time path). What it runs:
engine.compact.small.warm.

Not here: the interpreter (engine.compact.small_run), when it runs (engine.compact.small).
"""

from __future__ import annotations

import sys

from fluxmat.engine.compact import small_cache
from fluxmat.engine.compact.small import NOT_CACHED, warm
from fluxmat.engine.compact.small_run import cascade


def main() -> int:
    warm()
    py_func = getattr(cascade, "py_func", None)  # None: NUMBA_DISABLE_JIT=1, nothing to cache
    if py_func is not None and not small_cache.cached(py_func):
        print("fluxmat: the small-update interpreter compiled, but numba's cache could not be "
              "written; small updates run set-at-a-time", file=sys.stderr)  # fmt: skip
        return NOT_CACHED
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
