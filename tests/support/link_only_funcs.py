"""numba functions for tests/engine/test_compact_link_only.py (a file of their own: numba caches by file).

`outer` (an entry point, cached) and `outer_uncached` call `middle` calls `inner` (both without an
entry point: link-only, engine.compact.link_only). `inner` raises for a
negative value, so an exception from inside the linked code is covered.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from fluxmat.engine.compact import link_only  # noqa: F401  (installed before anything compiles)

INNER = {"no_cpython_wrapper": True, "no_cfunc_wrapper": True}


@njit(**INNER)
def inner(a, i):
    if a[i] < 0:
        raise ValueError("negative value")
    return a[i] * 2


@njit(**INNER)
def middle(a):
    s = 0
    for i in range(a.shape[0]):
        s += inner(a, i)
    return s


@njit(cache=True)
def outer(n):
    return middle(np.arange(n, dtype=np.int64))


@njit
def outer_uncached(n):  # compiled in every process (the other one may come from the cache)
    return middle(np.arange(n, dtype=np.int64) + np.int64(1))


@njit(cache=True)
def outer_neg(n):
    return middle(np.arange(n, dtype=np.int64) - np.int64(1))
