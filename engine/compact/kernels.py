"""numba kernels of the arrays core: open-addressing hash tables and join steps over numpy arrays.

A relation (engine.compact.relation) is `cols` (rows x arity, int64
term ids) with per-row `alive`, `flip` (the epoch in which presence last
flipped: the old presence is `alive ^ (flip == epoch)`) and `cnt`. Its tables,
all int32 slots holding a row id or -1:

* `slots`: the full-key table (a row per distinct fact);
* `islots[k]`, `inext[k]`: index k on the columns `imask[k]`; a slot holds the
  newest row of a key, `inext[k][row]` the next row with the same key (-1 ends).

Rows are never removed (a deleted fact keeps its row, dead, and is revived if
re-derived), so the chains never need unlinking. Every kernel is compiled once
and cached on disk (`cache=True`; engine.compact.cache chooses a writable
cache directory before this module is imported).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from fluxmat.engine.compact import (
    cache,  # noqa: F401  (a writable cache folder before compiling)
    link_only,  # noqa: F401  (inner functions compiled once)
)

MULT = np.uint64(0x9E3779B97F4A7C15)


@njit(cache=True, inline="always")
def _mix(h, v):
    h = (h ^ np.uint64(v)) * MULT
    return h ^ (h >> np.uint64(29))


@njit(cache=True)
def hash_row(vals, mask):
    h = np.uint64(0x12345)
    for j in range(vals.shape[0]):
        if mask[j]:
            h = _mix(h, vals[j])
    return h


@njit(cache=True)
def _same(cols, r, vals, mask):
    for j in range(vals.shape[0]):
        if mask[j] and cols[r, j] != vals[j]:
            return False
    return True


@njit(cache=True)
def find(cols, slots, vals, mask):
    """The slot of `vals` (on the columns of `mask`) in `slots`: its row there, or an empty slot (-1)."""
    cap = slots.shape[0] - 1
    i = np.int64(hash_row(vals, mask) & np.uint64(cap))
    while True:
        r = slots[i]
        if r < 0 or _same(cols, r, vals, mask):
            return i
        i = (i + 1) & cap


@njit(cache=True)
def _index_row(cols, r, islots, inext, imask):
    for k in range(islots.shape[0]):
        s = find(cols, islots[k], cols[r], imask[k])
        inext[k, r] = islots[k, s]
        islots[k, s] = r


@njit(cache=True)
def lookup_or_insert(keys, cols, n, slots, islots, inext, imask, full):
    """Each key's row; a key without one gets a new row (capacity is the caller's). Returns (rows, n)."""
    m = keys.shape[0]
    rows = np.empty(m, np.int64)
    for i in range(m):
        s = find(cols, slots, keys[i], full)
        r = slots[s]
        if r < 0:
            r = n
            n += 1
            for j in range(cols.shape[1]):  # (a loop, as in `_grow`)
                cols[r, j] = keys[i, j]
            slots[s] = r
            _index_row(cols, r, islots, inext, imask)
        rows[i] = r
    return rows, n


@njit(cache=True)
def append_new(keys, cols, n, slots, islots, inext, imask, full):
    """Rows n, n+1, ... for keys no row holds (distinct; capacity is the caller's): no key is compared.

    The full-key table is filled by home slot (`_by_home`). Returns the new row count.
    """
    m = keys.shape[0]
    for i in range(m):  # (a loop, as in `_grow`)
        for j in range(cols.shape[1]):
            cols[n + i, j] = keys[i, j]
    cap = slots.shape[0] - 1
    order, hashes = _by_home(cols, n, n + m, full, cap)
    for r in order:
        s = np.int64(hashes[r - n] & np.uint64(cap))
        while slots[s] >= 0:
            s = (s + 1) & cap
        slots[s] = r
    for r in range(n, n + m):
        _index_row(cols, r, islots, inext, imask)
    return n + m


@njit(cache=True)
def lookup(keys, cols, slots, full):
    """Each key's row, -1 when it has none."""
    rows = np.empty(keys.shape[0], np.int64)
    for i in range(keys.shape[0]):
        rows[i] = slots[find(cols, slots, keys[i], full)]
    return rows


@njit(cache=True)
def rebuild(cols, n, slots, islots, inext, imask, full):
    """Fill emptied tables with rows 0..n-1 (after growing, or on restore); the rows are distinct.

    Returns the first row whose key repeats an earlier row's (-1: none; the tables are then incomplete).
    """
    dup = fill_distinct(cols, n, slots, full)
    if dup < 0:
        fill_indexes(cols, n, islots, inext, imask)
    return dup


BUCKET_BITS = 12  # `_by_home` groups rows by the top 12 bits of their home slot


@njit(cache=True)
def _by_home(cols, lo, hi, mask, cap):
    """Rows lo..hi-1 ordered by the top `BUCKET_BITS` bits of their home slot (stable); each row's hash.

    A table of cap + 1 slots filled in this order is walked nearly front to
    back, each stretch of slots in cache while it is written, where filling
    in row order writes one random slot per row (a cache miss each on a large
    table). Rows of one key keep their order, so index chains come out as
    when filled in row order.
    """
    m = hi - lo
    bits = 0
    while (np.int64(1) << bits) <= cap:
        bits += 1
    shift = np.uint64(max(0, bits - BUCKET_BITS))
    ucap = np.uint64(cap)
    starts = np.zeros((cap >> np.int64(shift)) + 2, np.int64)
    hashes = np.empty(m, np.uint64)
    for i in range(m):
        h = hash_row(cols[lo + i], mask)
        hashes[i] = h
        starts[np.int64((h & ucap) >> shift) + 1] += 1
    for b in range(starts.shape[0] - 1):
        starts[b + 1] += starts[b]
    order = np.empty(m, np.int64)
    for i in range(m):
        b = np.int64((hashes[i] & ucap) >> shift)
        order[starts[b]] = lo + i
        starts[b] += 1
    return order, hashes


@njit(cache=True)
def fill_distinct(cols, n, slots, full):
    """The full-key table of rows 0..n-1, filled in one pass; a row whose key repeats another's (-1: none).

    Rows go in by home slot (`_by_home`). Each row's 64-bit hash is kept per
    slot while filling, so a row is compared with another row's columns only
    when their hashes are equal (a probe that reads only the table, not the
    rows, in almost every step).
    """
    cap = slots.shape[0] - 1
    tags = np.empty(slots.shape[0], np.uint64)
    order, hashes = _by_home(cols, 0, n, full, cap)
    for r in order:
        h = hashes[r]
        i = np.int64(h & np.uint64(cap))
        while slots[i] >= 0:
            if tags[i] == h and _same(cols, slots[i], cols[r], full):
                return r
            i = (i + 1) & cap
        slots[i] = r
        tags[i] = h
    return -1


@njit(cache=True)
def fill_indexes(cols, n, islots, inext, imask):
    """Index k of rows 0..n-1 on the columns imask[k], filled in one pass (the tables empty: -1).

    As `fill_distinct`, with the key's hash kept per slot, but in row order:
    rows of one key are chained newest first, as `lookup_or_insert` chains
    them, and `inext` is written front to back (by home slot, it measured slower).
    """
    for k in range(islots.shape[0]):
        islot, mask = islots[k], imask[k]
        cap = islot.shape[0] - 1
        tags = np.empty(islot.shape[0], np.uint64)
        for r in range(n):
            h = hash_row(cols[r], mask)
            i = np.int64(h & np.uint64(cap))
            while True:
                s = islot[i]
                if s < 0:
                    tags[i] = h
                    break
                if tags[i] == h and _same(cols, s, cols[r], mask):
                    break
                i = (i + 1) & cap
            inext[k, r] = islot[i]
            islot[i] = r


@njit(cache=True, inline="always")
def present(alive, flip, r, epoch, mode):
    """Whether row r counts: present now (mode 0), before this epoch (1), both (2), either (3)."""
    a = alive[r] != 0
    if flip[r] == epoch and mode != 0:
        a = mode == 3 or (mode == 1 and not a)
    return a


@njit(cache=True)
def _grow(B, W, cap):
    B2 = np.empty((cap, B.shape[1]), np.int64)
    W2 = np.empty(cap, np.int64)
    for i in range(B.shape[0]):  # (loops: a slice copy compiles numba's shape-mismatch message)
        for j in range(B.shape[1]):
            B2[i, j] = B[i, j]
    for i in range(W.shape[0]):
        W2[i] = W[i]
    return B2, W2


@njit(cache=True)
def _emit(B, W, o, src_row, weight, cols, r, outslot, OB, OW):
    if o >= OB.shape[0]:
        OB, OW = _grow(OB, OW, 2 * OB.shape[0] + 16)
    for j in range(B.shape[1]):  # (a loop, as in `_grow`)
        OB[o, j] = B[src_row, j]
    OW[o] = weight
    for j in range(cols.shape[1]):
        if outslot[j] >= 0:
            OB[o, outslot[j]] = cols[r, j]
    return OB, OW


@njit(cache=True)
def matches(cols, r, vals, src):
    """Row r agrees with the bound values (src >= -1) and repeated free variables (src <= -3 - col)."""
    for j in range(vals.shape[0]):
        s = src[j]
        if s >= -1:
            if cols[r, j] != vals[j]:
                return False
        elif s <= -3 and cols[r, j] != cols[r, -3 - s]:
            return False
    return True


@njit(cache=True)
def join_step(
    B, W, src, cval, outslot, cols, n, alive, flip, epoch, mode, slots, islot, inext, how
):
    """Extend each binding of B (weights W) by the rows of one atom.

    Per atom column j: `src[j]` >= 0 takes the value from binding slot src[j],
    -1 is the constant cval[j], -2 a free variable written to slot outslot[j],
    <= -3 a free variable repeating column -3 - src[j]. `how`: 0 probes the
    full-key table `slots`, 1 the index `islot`/`inext` on the bound columns,
    2 scans all n rows, 3 is an anti-probe (a negated atom, every column bound:
    the binding is kept, unextended, when its fact is absent). Rows count when
    present (`present`'s modes: now, before this epoch, both, either).
    """
    a = cols.shape[1]
    mask = np.empty(a, np.bool_)
    for j in range(a):
        mask[j] = src[j] >= -1
    vals = np.zeros(a, np.int64)
    OB = np.empty((max(16, B.shape[0]), B.shape[1]), np.int64)
    OW = np.empty(OB.shape[0], np.int64)
    o = np.int64(0)  # (int64 everywhere: a literal or int32 argument compiles `_emit` once more)
    for b in range(B.shape[0]):
        for j in range(a):
            if src[j] >= 0:
                vals[j] = B[b, src[j]]
            elif src[j] == -1:
                vals[j] = cval[j]
        if how == 0:
            r = np.int64(slots[find(cols, slots, vals, mask)])
            if r >= 0 and present(alive, flip, r, epoch, mode):
                OB, OW = _emit(B, W, o, b, W[b], cols, r, outslot, OB, OW)
                o += 1
        elif how == 3:
            r = np.int64(slots[find(cols, slots, vals, mask)])
            if r < 0 or not present(alive, flip, r, epoch, mode):
                OB, OW = _emit(B, W, o, b, W[b], cols, np.int64(0), outslot, OB, OW)
                o += 1
        elif how == 1:
            r = np.int64(islot[find(cols, islot, vals, mask)])
            while r >= 0:
                if present(alive, flip, r, epoch, mode) and matches(cols, r, vals, src):
                    OB, OW = _emit(B, W, o, b, W[b], cols, r, outslot, OB, OW)
                    o += 1
                r = np.int64(inext[r])
        else:
            for r in range(n):
                if present(alive, flip, r, epoch, mode) and matches(cols, r, vals, src):
                    OB, OW = _emit(B, W, o, b, W[b], cols, r, outslot, OB, OW)
                    o += 1
    return OB[:o], OW[:o]


@njit(cache=True)
def bind_rows(rows, weights, cols, src, cval, outslot, nslots):
    """Bindings from given rows of an atom's relation (a delta): rows not matching the atom are dropped."""
    a = cols.shape[1]
    OB = np.full((rows.shape[0], nslots), -1, np.int64)
    OW = np.empty(rows.shape[0], np.int64)
    o = 0
    for i in range(rows.shape[0]):
        r = rows[i]
        ok = True
        for j in range(a):
            s = src[j]
            if s == -1 and cols[r, j] != cval[j]:
                ok = False
            elif s <= -3 and cols[r, j] != cols[r, -3 - s]:
                ok = False
        if ok:
            for j in range(a):
                if outslot[j] >= 0:
                    OB[o, outslot[j]] = cols[r, j]
            OW[o] = weights[i]
            o += 1
    return OB[:o], OW[:o]


@njit(cache=True)
def project(B, src, cval):
    """Head facts of the bindings: column j from slot src[j] (or the constant when src[j] == -1)."""
    out = np.empty((B.shape[0], src.shape[0]), np.int64)
    for i in range(B.shape[0]):
        for j in range(src.shape[0]):
            out[i, j] = B[i, src[j]] if src[j] >= 0 else cval[j]
    return out


@njit(cache=True)
def add_counts(rows, w, cnt, touched, stamp, epoch):
    """cnt[row] += w; rows touched for the first time this epoch are appended to `touched` (returns how many)."""
    t = 0
    for i in range(rows.shape[0]):
        r = rows[i]
        cnt[r] += w[i]
        if stamp[r] != epoch:
            stamp[r] = epoch
            touched[t] = r
            t += 1
    return t


@njit(cache=True)
def settle_counted(touched, cnt, alive, flip, epoch):
    """Presence = cnt > 0 for the touched rows of a counted relation; returns the rows that flipped."""
    out = np.empty(touched.shape[0], np.int64)
    o = 0
    for r in touched:
        now = cnt[r] > 0
        if now != (alive[r] != 0):
            alive[r] = 1 if now else 0
            flip[r] = epoch
            out[o] = r
            o += 1
    return out[:o]


@njit(cache=True)
def new_in(rows, want_alive, alive, cnt, only_uncounted, stamp, epoch):
    """Distinct rows whose presence is `want_alive` (and, with only_uncounted, cnt == 0) not stamped yet; stamps them."""
    out = np.empty(rows.shape[0], np.int64)
    o = 0
    for r in rows:
        if r >= 0 and (alive[r] != 0) == want_alive and stamp[r] != epoch:
            if only_uncounted and cnt[r] != 0:
                continue
            stamp[r] = epoch
            out[o] = r
            o += 1
    return out[:o]


@njit(cache=True)
def revive(rows, alive):
    """The distinct dead rows among `rows` (-1 ignored), made present."""
    out = np.empty(rows.shape[0], np.int64)
    o = 0
    for r in rows:
        if r >= 0 and alive[r] == 0:
            alive[r] = 1
            out[o] = r
            o += 1
    return out[:o]


@njit(cache=True)
def _room(a, n):
    """`a` (int64, 1-d) with room for index n: itself, or a copy twice as long."""
    if n < a.shape[0]:
        return a
    b = np.empty(2 * a.shape[0], np.int64)
    for j in range(n):  # (a loop: a slice copy compiles numba's shape-mismatch message)
        b[j] = a[j]
    return b


@njit(cache=True)
def _chain(cols, islot, x, col):
    vals = np.zeros(cols.shape[1], np.int64)
    mask = np.zeros(cols.shape[1], np.bool_)
    vals[col] = x
    mask[col] = True
    return islot[find(cols, islot, vals, mask)]


@njit(cache=True)
def components_from(starts, cols, islot0, inext0, islot1, inext1, cnt, seen, stamp):
    """Connected components over the base edges (rows with cnt > 0, either direction) reached from `starts`.

    `seen` (one slot per term id) marks visited nodes with `stamp`. Returns
    (nodes, labels): every reached node with an incident base edge and its
    component number, grouped by component.
    """
    nodes = np.empty(16, np.int64)
    labels = np.empty(16, np.int64)
    n = np.int64(0)  # (int64, not a literal 0: `_room` compiled once)
    queue = np.empty(16, np.int64)
    comp = 0
    for s in starts:
        if seen[s] == stamp:
            continue
        head, tail = np.int64(0), np.int64(0)
        queue[tail] = s
        tail += 1
        seen[s] = stamp
        found = False
        while head < tail:
            x = queue[head]
            head += 1
            for col in range(2):
                r = _chain(cols, islot0 if col == 0 else islot1, x, col)
                while r >= 0:
                    if cnt[r] > 0:
                        found = True
                        y = cols[r, 1 - col]
                        if seen[y] != stamp:
                            seen[y] = stamp
                            queue = _room(queue, tail)
                            queue[tail] = y
                            tail += 1
                    r = inext0[r] if col == 0 else inext1[r]
        if not found:  # an isolated start: no base edge, in no component
            continue
        for i in range(tail):
            nodes, labels = _room(nodes, n), _room(labels, n)
            nodes[n] = queue[i]
            labels[n] = comp
            n += 1
        comp += 1
    return nodes[:n], labels[:n]


@njit(cache=True)
def base_changes(touched, cnt, base, alive):
    """Touched rows whose base status (cnt > 0) changed, updating `base`; and whether any may change a component.

    A new base edge whose pair is already present joins nodes already in one component: it changes nothing.
    """
    out = np.empty(touched.shape[0], np.int64)
    o = 0
    matters = False
    for r in touched:
        now = 1 if cnt[r] > 0 else 0
        if now != base[r]:
            base[r] = now
            out[o] = r
            o += 1
            if now == 0 or alive[r] == 0:
                matters = True
    return out[:o], matters


@njit(cache=True)
def rows_from(nodes, cols, islot0, inext0, alive):
    """The present rows whose first column is one of `nodes`."""
    out = np.empty(16, np.int64)
    o = np.int64(0)  # (int64, not a literal 0: `_room` and `_chain` compiled once)
    for x in nodes:
        r = _chain(cols, islot0, x, np.int64(0))
        while r >= 0:
            if alive[r] != 0:
                out = _room(out, o)
                out[o] = r
                o += 1
            r = inext0[r]
    return out[:o]
