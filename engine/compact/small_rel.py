"""Relations and buffers inside the small-update interpreter (engine.compact.small_run): numba functions.

A store (`st`, built by engine.compact.small.Store) is a tuple: typed lists,
one entry per relation, of the arrays engine.compact.relation keeps (indexes
`COLS` .. `SEEN` below: `cols`, `cnt`, `alive`, `flip`, `stamp`, `dmark`,
`expl`, `base`, `slots`, `islots`, `inext`, `imask`, `full`, `seen`), then
int64 arrays `ns` (rows), `caps` (capacity), `maxids` (1 + the largest term
id), `nstamps` (closure search stamps) and `dirty` (flags: `N_CHANGED`,
`GROWN`, `SEEN_GROWN`), so the Python side knows which `Rel` objects to
update after a call. A relation that runs out of room is grown here, its
tables rebuilt as `Rel._alloc` does.

A call's growable int64 buffers are one typed list `bufs` with fill counts
`sizes`, named by the constants `FROWS` .. `AUX` (`push` appends); `WORK`
(one counter per plan: head instances, the work report) is indexed directly.

Not here: plans and maintenance (engine.compact.small_plan, small_run).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from fluxmat.engine.compact import kernels as K

COLS, CNT, ALIVE, FLIP, STAMP, DMARK, EXPL, BASE, SLOTS, ISLOTS, INEXT, IMASK, FULL, SEEN = range(
    14
)
NS, CAPS, MAXIDS, NSTAMPS, DIRTY = range(14, 19)
N_CHANGED, GROWN, SEEN_GROWN = 1, 2, 4
KINDS = (
    "cols",
    "cnt",
    "alive",
    "flip",
    "stamp",
    "dmark",
    "expl",
    "base",
    "slots",
    "islots",
    "inext",
)
# buffers of one call (`push`)
FROWS, EREL, EROW, ESIGN, TREL, TROW, HB, HW, DREL, DROW, IREL, IROW, AUX, WORK = range(14)
NBUF = 14


# ---------------------------------------------------------------- buffers and relations
@njit(cache=True)
def push(bufs, sizes, b, v):
    n = sizes[b]
    a = bufs[b]
    if n >= a.shape[0]:
        c = np.empty(2 * a.shape[0], np.int64)
        c[:n] = a[:n]
        bufs[b] = c
        a = c
    a[n] = v
    sizes[b] = n + 1


@njit(cache=True)
def _pow2(n):
    bits, m = 0, n - 1
    while m > 0:
        bits += 1
        m >>= 1
    return 1 << max(4, bits)


@njit(cache=True)
def widen(a, n, cap):
    b = np.zeros(cap, a.dtype)
    b[:n] = a[:n]
    return b


@njit(cache=True)
def _room(st, i, m):
    """Room for m more rows in relation i: grown (tables rebuilt) when full."""
    cols_l, cnt_l, alive_l, flip_l, stamp_l, dmark_l = (
        st[COLS],
        st[CNT],
        st[ALIVE],
        st[FLIP],
        st[STAMP],
        st[DMARK],
    )
    expl_l, base_l, slots_l, islots_l, inext_l = (
        st[EXPL],
        st[BASE],
        st[SLOTS],
        st[ISLOTS],
        st[INEXT],
    )
    imask_l, full_l, ns, caps, dirty = st[IMASK], st[FULL], st[NS], st[CAPS], st[DIRTY]
    n = ns[i]
    if n + m <= caps[i]:
        return
    cap = max(2 * caps[i], n + m)
    old = cols_l[i]
    cols = np.zeros((cap, old.shape[1]), np.int64)
    cols[:n] = old[:n]
    cols_l[i] = cols
    cnt_l[i], flip_l[i] = widen(cnt_l[i], n, cap), widen(flip_l[i], n, cap)
    stamp_l[i], dmark_l[i] = widen(stamp_l[i], n, cap), widen(dmark_l[i], n, cap)
    alive_l[i], expl_l[i], base_l[i] = (
        widen(alive_l[i], n, cap),
        widen(expl_l[i], n, cap),
        widen(base_l[i], n, cap),
    )
    k = imask_l[i].shape[0]
    tcap = _pow2(2 * cap)
    slots = np.full(tcap, -1, np.int32)
    islots = np.full((max(k, 1), tcap if k else 1), -1, np.int32)
    inext = np.full((max(k, 1), cap if k else 1), -1, np.int32)
    K.rebuild(cols, n, slots, islots[:k], inext[:k], imask_l[i], full_l[i])
    slots_l[i], islots_l[i], inext_l[i] = slots, islots, inext
    caps[i] = cap
    dirty[i] |= GROWN


@njit(cache=True)
def lookup(st, i, key):
    cols, slots = st[COLS][i], st[SLOTS][i]
    return np.int64(slots[K.find(cols, slots, key, st[FULL][i])])


@njit(cache=True)
def insert(st, i, key):
    """The row of `key` in relation i; a new (dead, uncounted) row when it has none."""
    _room(st, i, 1)
    cols, slots, full = st[COLS][i], st[SLOTS][i], st[FULL][i]
    ns, maxids, dirty = st[NS], st[MAXIDS], st[DIRTY]
    s = K.find(cols, slots, key, full)
    r = np.int64(slots[s])
    if r >= 0:
        return r
    r = ns[i]
    ns[i] = r + 1
    for j in range(key.shape[0]):
        cols[r, j] = key[j]
        if key[j] + 1 > maxids[i]:
            maxids[i] = key[j] + 1
    slots[s] = r
    imask, islots, inext = st[IMASK][i], st[ISLOTS][i], st[INEXT][i]
    for k in range(imask.shape[0]):
        t = K.find(cols, islots[k], cols[r], imask[k])
        inext[k, r] = islots[k, t]
        islots[k, t] = r
    dirty[i] |= N_CHANGED
    return r


@njit(cache=True)
def count(st, i, r, w, epoch, bufs, sizes):
    """Cnt += w; a row touched for the first time this epoch is pushed to the touched buffers."""
    st[CNT][i][r] += w
    stamp = st[STAMP][i]
    if stamp[r] != epoch:
        stamp[r] = epoch
        push(bufs, sizes, TREL, i)
        push(bufs, sizes, TROW, r)


@njit(cache=True)
def flip(st, i, r, epoch, bufs, sizes):
    st[FLIP][i][r] = epoch
    push(bufs, sizes, FROWS, r)
