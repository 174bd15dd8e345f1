"""numba functions for tests/engine/test_compact_link_only.py (a file of their own: numba caches by file).

`outer` (an entry point, cached) and `outer_uncached` call `middle` calls `inner` (both without an
entry point: link-only, engine.compact.link_only). `inner` raises for a
negative value, so an exception from inside the linked code is covered.
`overload_like` has a `cfunc.` wrapper but no CPython wrapper (as numba's own
`@overload` implementations): link-only too. `as_cfunc` is a `@cfunc`, whose
address is asked for before its library is finalized.
"""

from __future__ import annotations

import numpy as np
from numba import cfunc, njit

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


@njit(no_cpython_wrapper=True)
def overload_like(n):
    return np.zeros(n, np.int64).sum() + n


@njit
def outer_overload_like(n):
    return overload_like(n) + 1


@cfunc("int64(int64)")
def as_cfunc(n):
    return middle(np.arange(n, dtype=np.int64)) + overload_like(n)
