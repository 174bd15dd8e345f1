"""Compile (or load from numba's cache) the small-update interpreter: `python -m fluxmat.engine.compact.small_warm`.

engine.compact.small starts this module as a separate process the first time
a small update needs the interpreter; its exit status tells whether numba's
on-disk cache was written. What it runs: engine.compact.small.warm.

Not here: the interpreter (engine.compact.small_run), when it runs (engine.compact.small).
"""

from __future__ import annotations

from fluxmat.engine.compact.small import warm

if __name__ == "__main__":
    warm()
