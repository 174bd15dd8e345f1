"""Relations and buffers inside the small-update interpreter (engine.compact.small_run): numba functions.

A store (`st`, built by engine.compact.small.Store) is a tuple of four typed
lists, one per element type, holding every relation's arrays as flat (1-d)
views of the `Rel` objects' own buffers (engine.compact.relation), then int64
arrays with one entry per relation:

* `st[I64]`: `cols` (rows x arity, flattened), at `i`;
* `st[I32]`: `cnt`, `flip`, `stamp`, `dmark`, `slots`, `islots`, `inext`,
  `seen`, at `kind * R + i` (R relations; `kind` one of `CNT` .. `SEEN`);
* `st[U8]`: `alive`, `expl`, `base` (`ALIVE` .. `BASE`);
* `st[BOOL]`: `imask`, `full` (`IMASK`, `FULL`);
* `NS` (rows), `CAPS` (capacity), `MAXIDS` (1 + the largest term id),
  `NSTAMPS` (closure search stamps), `DIRTY` (flags: `N_CHANGED`, `GROWN`,
  `SEEN_GROWN`, so the Python side knows which `Rel` objects to update after
  a call), `ARITY` and `NIDX` (indexes per relation).

Four list types instead of one per array kind, and 2-d arrays as flat views
read as 2-d by `view2` (`cols`, `islots`, `inext`, `imask`), keep numba's work
small: every list type compiles its own list methods, every function its own
copy of its callees. A relation that runs out of room is grown here, its
tables rebuilt as `Rel._alloc` does.

A call's growable int64 buffers are one typed list `bufs` (the type of
`st[I64]`) with fill counts `sizes`, named by the constants `FROWS` .. `AUX`
(`push` appends); `WORK` (one counter per plan: head instances, the work
report) is indexed directly.

Not here: plans and maintenance (engine.compact.small_plan, small_run).
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.core.imputils import impl_ret_borrowed
from numba.extending import intrinsic
from numba.np.arrayobj import make_array, populate_array

from fluxmat.engine.compact import kernels as K
from fluxmat.engine.compact import small_cache  # noqa: F401  (cache stamps before any function)

I64, I32, U8, BOOL, NS, CAPS, MAXIDS, NSTAMPS, DIRTY, ARITY, NIDX = range(11)
# which Rel attribute sits in which list, in kind order (`st[list][kind * R + i]`)
LISTS = {
    I64: ("cols",),
    I32: ("cnt", "flip", "stamp", "dmark", "slots", "islots", "inext", "seen"),
    U8: ("alive", "expl", "base"),
    BOOL: ("imask", "full"),
}
# (numpy ints: a Python int argument is a literal, and numba compiles a callee once per literal value)
CNT, FLIP, STAMP, DMARK, SLOTS, ISLOTS, INEXT, SEEN = map(np.int64, range(8))
ALIVE, EXPL, BASE = map(np.int64, range(3))
IMASK, FULL = map(np.int64, range(2))
N_CHANGED, GROWN, SEEN_GROWN = 1, 2, 4
# the arrays a relation grows (all but `seen`, `imask`, `full`)
GROWN_KINDS = tuple((lst, k) for lst, names in LISTS.items() for k, name in enumerate(names)
                    if name not in ("seen", "imask", "full"))  # fmt: skip
# buffers of one call (`push`)
# (numpy ints: a Python int argument is a literal, and numba compiles a callee once per literal value)
FROWS, EREL, EROW, ESIGN, TREL, TROW, HB, HW, DREL, DROW, IREL, IROW, AUX, WORK = map(
    np.int64, range(14)
)
NBUF = 14
# called from numba only. Not cached: no entry point, so compiled only inside the entry point
# `cascade` (engine.compact.link_only), whose cache entry holds their machine code; a cache write
# would compile each of them on its own again.
FAST = {"cache": False, "no_cpython_wrapper": True, "no_cfunc_wrapper": True}


# ---------------------------------------------------------------- the arrays of relation i
@intrinsic
def _view2(typingctx, a, rows, width):
    """The 1-d C-contiguous array `a` as a (rows, width) C array: a view, no checks (see `view2`).

    numba's `reshape` calls a C helper and normalises the shape on every
    call; the interpreter takes 2-d views of flat buffers in its innermost
    loops, so this builds the view's header directly.
    """
    if not (isinstance(a, types.Array) and a.ndim == 1 and a.layout == "C"):
        return None
    ret = a.copy(ndim=2, layout="C")

    def codegen(context, builder, sig, args):
        ary = make_array(a)(context, builder, args[0])
        r, w = (context.cast(builder, v, t, types.intp)
                for v, t in zip(args[1:], sig.args[1:], strict=True))  # fmt: skip
        out = make_array(ret)(context, builder)
        populate_array(out, data=ary.data, shape=[r, w],
                       strides=[builder.mul(w, ary.itemsize), ary.itemsize],
                       itemsize=ary.itemsize, meminfo=ary.meminfo, parent=ary.parent)  # fmt: skip
        return impl_ret_borrowed(context, builder, ret, out._getvalue())

    return ret(a, rows, width), codegen


@njit(**FAST)
def view2(a, rows, width):
    """`a.reshape((rows, width))` for a flat buffer of at least rows x width items (fewer rows if not)."""
    if width > 0 and rows * width > a.shape[0]:
        rows = a.shape[0] // width
    return _view2(a, rows, width)


@njit(**FAST)
def at(st, kind, i):
    """Where relation i's array of `kind` sits in its list."""
    return kind * st[NS].shape[0] + i


@njit(**FAST)
def i32(st, kind, i):
    return st[I32][kind * st[NS].shape[0] + i]


@njit(**FAST)
def u8(st, kind, i):
    return st[U8][kind * st[NS].shape[0] + i]


@njit(**FAST)
def cols(st, i):
    return view2(st[I64][i], st[CAPS][i], st[ARITY][i])


@njit(**FAST)
def _rows2(a, k):
    """A flat per-index table as (indexes, slots): max(k, 1) rows (Rel._alloc's shape)."""
    rows = max(k, 1)
    return view2(a, rows, a.shape[0] // rows)


@njit(**FAST)
def islots(st, i):
    return _rows2(i32(st, ISLOTS, i), st[NIDX][i])


@njit(**FAST)
def inext(st, i):
    return _rows2(i32(st, INEXT, i), st[NIDX][i])


@njit(**FAST)
def imask(st, i):
    return view2(st[BOOL][at(st, IMASK, i)], st[NIDX][i], st[ARITY][i])


@njit(**FAST)
def full(st, i):
    return st[BOOL][at(st, FULL, i)]


# ---------------------------------------------------------------- buffers and relations
@njit(**FAST)
def push(bufs, sizes, b, v):
    n = sizes[b]
    a = bufs[b]
    if n >= a.shape[0]:
        c = np.empty(2 * a.shape[0], np.int64)
        for j in range(n):  # (a loop: a slice copy compiles numba's shape-mismatch message)
            c[j] = a[j]
        bufs[b] = c
        a = c
    a[n] = v
    sizes[b] = n + 1


@njit(**FAST)
def _pow2(n):
    bits, m = 0, n - 1
    while m > 0:
        bits += 1
        m >>= 1
    return 1 << max(4, bits)


@njit(**FAST)
def widen(a, n, cap):
    b = np.zeros(cap, a.dtype)
    for j in range(n):  # (a loop, as in `push`)
        b[j] = a[j]
    return b


@njit(**FAST)
def _room(st, i, m):
    """Room for m more rows in relation i: grown (tables rebuilt) when full."""
    ns, caps = st[NS], st[CAPS]
    n, a = ns[i], st[ARITY][i]
    if n + m <= caps[i]:
        return
    cap = max(2 * caps[i], n + m)
    st[I64][i] = widen(st[I64][i], n * a, cap * a)
    for kind in (CNT, FLIP, STAMP, DMARK):
        st[I32][at(st, kind, i)] = widen(i32(st, kind, i), n, cap)
    for kind in (ALIVE, EXPL, BASE):
        st[U8][at(st, kind, i)] = widen(u8(st, kind, i), n, cap)
    k = st[NIDX][i]
    tcap = _pow2(2 * cap)
    st[I32][at(st, SLOTS, i)] = np.full(tcap, -1, np.int32)
    st[I32][at(st, ISLOTS, i)] = np.full(max(k, 1) * (tcap if k else 1), -1, np.int32)
    st[I32][at(st, INEXT, i)] = np.full(max(k, 1) * (cap if k else 1), -1, np.int32)
    caps[i] = cap
    c, isl, inx = cols(st, i), islots(st, i), inext(st, i)
    K.rebuild(c, n, i32(st, SLOTS, i), isl[:k], inx[:k], imask(st, i), full(st, i))
    st[DIRTY][i] |= GROWN


@njit(**FAST)
def lookup(st, i, key):
    slots = i32(st, SLOTS, i)
    return np.int64(slots[K.find(cols(st, i), slots, key, full(st, i))])


@njit(**FAST)
def insert(st, i, key):
    """The row of `key` in relation i; a new (dead, uncounted) row when it has none."""
    _room(st, i, 1)
    c, slots, ns, maxids = cols(st, i), i32(st, SLOTS, i), st[NS], st[MAXIDS]
    s = K.find(c, slots, key, full(st, i))
    r = np.int64(slots[s])
    if r >= 0:
        return r
    r = ns[i]
    ns[i] = r + 1
    for j in range(key.shape[0]):
        c[r, j] = key[j]
        if key[j] + 1 > maxids[i]:
            maxids[i] = key[j] + 1
    slots[s] = r
    im, isl, inx = imask(st, i), islots(st, i), inext(st, i)
    for k in range(im.shape[0]):
        t = K.find(c, isl[k], c[r], im[k])
        inx[k, r] = isl[k, t]
        isl[k, t] = r
    st[DIRTY][i] |= N_CHANGED
    return r


@njit(**FAST)
def count(st, i, r, w, epoch, bufs, sizes):
    """Cnt += w; a row touched for the first time this epoch is pushed to the touched buffers."""
    i32(st, CNT, i)[r] += w
    stamp = i32(st, STAMP, i)
    if stamp[r] != epoch:
        stamp[r] = epoch
        push(bufs, sizes, TREL, i)
        push(bufs, sizes, TROW, r)


@njit(**FAST)
def flip(st, i, r, epoch, bufs, sizes):
    i32(st, FLIP, i)[r] = epoch
    push(bufs, sizes, FROWS, r)
