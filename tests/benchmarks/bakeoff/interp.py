"""The one-call path of the arrays candidate: a small update's whole cascade in one compiled call.

`cascade` is a numba-compiled interpreter of the program encoded by
encode.py. Given an update's explicit changes, it runs every component the
update reaches, in dependency order, with the same maintenance as
arrays.py (counting for non-recursive predicates, DRed with non-recursive
counters for recursive components, the symmetric-transitive closure module),
fact-at-a-time: each plan is a depth-first nested loop over its steps, one
binding at a time, instead of a numba call per step over all bindings. A
1 + 1 update is one dispatch instead of ~40 and no numpy glue.

The relations reach it as a `Store`: one numba typed list per kind of
per-relation array (`cols`, `cnt`, `alive`, ... as rel.py names them), the
same numpy buffers the `Rel` objects hold (no copy), and int64 arrays
`ns`, `caps`, `maxids`, `nstamps` (each relation's rows, capacity, 1 + its
largest term id, its closure search stamp) and `dirty`. A relation that runs
out of room is grown inside the call (the tables rebuilt as `Rel._alloc`
does); afterwards `Store.sync_back` hands the changed counts and any new
buffers back to the `Rel` objects (the `dirty` flags say which: `N_CHANGED`,
`GROWN`, `SEEN_GROWN`). After an update on the set-at-a-time path the store
is marked stale and re-reads the relations before its next use.

Explicit changes travel packed: `xrel` (the relation of each changed fact),
`xsign` (-1 delete, +1 add; deletions first), `xoff` (where each fact's
values start in `xvals`, with a final end offset).

Inside a call, growable int64 buffers live in one typed list (`_push`): the
rows that flipped presence, per relation one contiguous range
(`fstart`/`flen`), the explicit rows and signs, touched rows, plan heads and
the DRed sets. Which path an update takes is decided by `OneCall.fits`
(the threshold on the number of explicit changes; docs/_incoming/hybrid.md).
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.typed import List

from tests.benchmarks.bakeoff import kernels as K
from tests.benchmarks.bakeoff.encode import (C_HEADP, C_INPUTS, C_KIND, C_LOWER, C_PREDS, C_REC, CF, CLOSURE,
                                             COUNTED, P_HEAD, P_HOFF, P_NSLOTS, P_NSTEPS, P_START, PF,
                                             R_COUNTED, RF, S_COFF, S_HOW, S_K, S_POS, S_REL, SF, encode)  # fmt: skip

THRESHOLD = 256  # explicit changes up to which an update takes the one-call path (measured: hybrid.md)
N_CHANGED, GROWN, SEEN_GROWN = 1, 2, 4
_KINDS = ("cols", "cnt", "alive", "flip", "stamp", "dmark", "expl", "base", "slots", "islots", "inext")
# buffers of one call (`_push`)
FROWS, EREL, EROW, ESIGN, TREL, TROW, HB, HW, DREL, DROW, IREL, IROW, AUX = range(13)
NBUF = 13


# ---------------------------------------------------------------- buffers and relations
@njit(cache=True)
def _push(bufs, sizes, b, v):
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
def _widen(a, n, cap):
    b = np.zeros(cap, a.dtype)
    b[:n] = a[:n]
    return b


@njit(cache=True)
def _room(st, i, m):
    """Room for m more rows in relation i: grown (tables rebuilt) when full."""
    cols_l, cnt_l, alive_l, flip_l, stamp_l, dmark_l = st[0], st[1], st[2], st[3], st[4], st[5]
    expl_l, base_l, slots_l, islots_l, inext_l = st[6], st[7], st[8], st[9], st[10]
    imask_l, full_l, ns, caps, dirty = st[11], st[12], st[14], st[15], st[18]
    n = ns[i]
    if n + m <= caps[i]:
        return
    cap = max(2 * caps[i], n + m)
    old = cols_l[i]
    cols = np.zeros((cap, old.shape[1]), np.int64)
    cols[:n] = old[:n]
    cols_l[i] = cols
    cnt_l[i], flip_l[i] = _widen(cnt_l[i], n, cap), _widen(flip_l[i], n, cap)
    stamp_l[i], dmark_l[i] = _widen(stamp_l[i], n, cap), _widen(dmark_l[i], n, cap)
    alive_l[i], expl_l[i], base_l[i] = _widen(alive_l[i], n, cap), _widen(expl_l[i], n, cap), _widen(base_l[i], n, cap)
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
def _lookup(st, i, key):
    cols, slots = st[0][i], st[8][i]
    return np.int64(slots[K.find(cols, slots, key, st[12][i])])


@njit(cache=True)
def _insert(st, i, key):
    """The row of `key` in relation i; a new (dead, uncounted) row when it has none."""
    _room(st, i, 1)
    cols, slots, full = st[0][i], st[8][i], st[12][i]
    ns, maxids, dirty = st[14], st[16], st[18]
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
    imask, islots, inext = st[11][i], st[9][i], st[10][i]
    for k in range(imask.shape[0]):
        t = K.find(cols, islots[k], cols[r], imask[k])
        inext[k, r] = islots[k, t]
        islots[k, t] = r
    dirty[i] |= N_CHANGED
    return r


@njit(cache=True)
def _count(st, i, r, w, epoch, bufs, sizes):
    """cnt += w; a row touched for the first time this epoch is pushed to the touched buffers."""
    st[1][i][r] += w
    stamp = st[4][i]
    if stamp[r] != epoch:
        stamp[r] = epoch
        _push(bufs, sizes, TREL, i)
        _push(bufs, sizes, TROW, r)


# ---------------------------------------------------------------- one plan, depth first
@njit(cache=True)
def _mode(pg, kind, plpos, s, comp):
    """0 reads the new state, 1 the old: counting by position, 1 = all new, 2 = over-deletion."""
    steps, rels = pg[0], pg[9]
    if kind == 0:
        return 0 if steps[s * SF + S_POS] < plpos else 1
    if kind == 1:
        return 0
    return 0 if rels[steps[s * SF + S_REL] * RF] == comp else 1


@njit(cache=True)
def _first(st, pg, s, vals):
    steps, cmask = pg[0], pg[4]
    i, how, off = steps[s * SF + S_REL], steps[s * SF + S_HOW], steps[s * SF + S_COFF]
    cols = st[0][i]
    a = cols.shape[1]
    mask, vals = cmask[off : off + a], vals[:a]
    if how == 0:
        slots = st[8][i]
        return np.int64(slots[K.find(cols, slots, vals, mask)])
    if how == 1:
        islot = st[9][i][steps[s * SF + S_K]]
        return np.int64(islot[K.find(cols, islot, vals, mask)])
    return np.int64(0) if st[14][i] > 0 else np.int64(-1)


@njit(cache=True)
def _next(st, pg, s, r):
    steps = pg[0]
    i, how = steps[s * SF + S_REL], steps[s * SF + S_HOW]
    if how == 0:
        return np.int64(-1)
    if how == 1:
        return np.int64(st[10][i][steps[s * SF + S_K], r])
    return r + 1 if r + 1 < st[14][i] else np.int64(-1)


@njit(cache=True)
def _ok(st, pg, s, r, vals, mode, epoch):
    """Row r of step s's relation is present (in the mode's state) and agrees with the bound values."""
    steps, csrc = pg[0], pg[1]
    i, off = steps[s * SF + S_REL], steps[s * SF + S_COFF]
    if not K.present(st[2][i], st[3][i], r, epoch, mode):
        return False
    if steps[s * SF + S_HOW] == 0:
        return True
    cols = st[0][i]
    for j in range(cols.shape[1]):
        src = csrc[off + j]
        if src >= -1:
            if cols[r, j] != vals[j]:
                return False
        elif src <= -3 and cols[r, j] != cols[r, -3 - src]:
            return False
    return True


@njit(cache=True)
def _values(st, pg, s, B, vals):
    steps, csrc, cval = pg[0], pg[1], pg[2]
    i, off = steps[s * SF + S_REL], steps[s * SF + S_COFF]
    for j in range(st[0][i].shape[1]):
        src = csrc[off + j]
        if src >= 0:
            vals[j] = B[src]
        elif src == -1:
            vals[j] = cval[off + j]


@njit(cache=True)
def _bind(st, pg, s, r, B):
    steps, cout = pg[0], pg[3]
    i, off = steps[s * SF + S_REL], steps[s * SF + S_COFF]
    cols = st[0][i]
    for j in range(cols.shape[1]):
        if cout[off + j] >= 0:
            B[cout[off + j]] = cols[r, j]


@njit(cache=True)
def _start_ok(st, pg, s, r):
    steps, csrc, cval = pg[0], pg[1], pg[2]
    i, off = steps[s * SF + S_REL], steps[s * SF + S_COFF]
    cols = st[0][i]
    for j in range(cols.shape[1]):
        src = csrc[off + j]
        if src == -1 and cols[r, j] != cval[off + j]:
            return False
        if src <= -3 and cols[r, j] != cols[r, -3 - src]:
            return False
    return True


@njit(cache=True)
def _emit(pg, pl, B, w, bufs, sizes):
    plans, hsrc, hval = pg[5], pg[6], pg[7]
    hoff = plans[pl * PF + P_HOFF]
    ha = _head_arity(pg, pl)
    for j in range(ha):
        src = hsrc[hoff + j]
        _push(bufs, sizes, HB, B[src] if src >= 0 else hval[hoff + j])
    _push(bufs, sizes, HW, w)


@njit(cache=True)
def _head_arity(pg, pl):
    plans = pg[5]
    nxt = plans[(pl + 1) * PF + P_HOFF] if (pl + 1) * PF < plans.shape[0] else pg[6].shape[0]
    return nxt - plans[pl * PF + P_HOFF]


@njit(cache=True)
def _run_one(st, pg, pl, row, w, kind, comp, epoch, bufs, sizes):
    """The plan's instances starting at `row` of its start relation: head facts and weights pushed to HB / HW."""
    plans, steps = pg[5], pg[0]
    s0, nst = plans[pl * PF + P_START], plans[pl * PF + P_NSTEPS]
    if not _start_ok(st, pg, s0, row):
        return
    B = np.zeros(max(plans[pl * PF + P_NSLOTS], 1), np.int64)
    _bind(st, pg, s0, row, B)
    if nst == 0:
        _emit(pg, pl, B, w, bufs, sizes)
        return
    plpos = steps[s0 * SF + S_POS]
    cur = np.empty(nst, np.int64)
    width = 1
    for s in range(s0 + 1, s0 + 1 + nst):
        width = max(width, st[0][steps[s * SF + S_REL]].shape[1])
    vals = np.zeros((nst, width), np.int64)
    _values(st, pg, s0 + 1, B, vals[0])
    cur[0] = _first(st, pg, s0 + 1, vals[0])
    lvl = 0
    while lvl >= 0:
        s = s0 + 1 + lvl
        r = cur[lvl]
        if r < 0:
            lvl -= 1
            if lvl >= 0:
                cur[lvl] = _next(st, pg, s - 1, cur[lvl])
            continue
        if not _ok(st, pg, s, r, vals[lvl], _mode(pg, kind, plpos, s, comp), epoch):
            cur[lvl] = _next(st, pg, s, r)
            continue
        _bind(st, pg, s, r, B)
        if lvl == nst - 1:
            _emit(pg, pl, B, w, bufs, sizes)
            cur[lvl] = _next(st, pg, s, r)
        else:
            lvl += 1
            _values(st, pg, s + 1, B, vals[lvl])
            cur[lvl] = _first(st, pg, s + 1, vals[lvl])


@njit(cache=True)
def _run_rows(st, pg, pl, rel_b, row_b, a, b, want, kind, comp, epoch, bufs, sizes):
    """The plan from the rows of bag entries a..b of its start relation (want: 1 only present, 0 only dead,
    2 all, 3 all with weight +1 if present else -1). Heads in HB / HW (emptied first)."""
    sizes[HB] = 0
    sizes[HW] = 0
    i = pg[0][pg[5][pl * PF + P_START] * SF + S_REL]
    alive = st[2][i]
    for e in range(a, b):
        if rel_b >= 0 and bufs[rel_b][e] != i:
            continue
        r = bufs[row_b][e]
        here = alive[r] != 0
        if (want == 1 and not here) or (want == 0 and here):
            continue
        w = (1 if here else -1) if want == 3 else 1
        _run_one(st, pg, pl, r, w, kind, comp, epoch, bufs, sizes)


@njit(cache=True)
def _list(pg, off):
    lists = pg[10]
    return lists[off[0] : off[0] + off[1]]


# ---------------------------------------------------------------- maintenance
@njit(cache=True)
def _count_into(st, pg, p, epoch, fs, bufs, sizes):
    """Explicit and counted derivation changes of relation p into its counters (touched rows pushed)."""
    fstart, flen = fs[0], fs[1]
    for e in range(sizes[EREL]):
        if bufs[EREL][e] == p:
            _count(st, p, bufs[EROW][e], bufs[ESIGN][e], epoch, bufs, sizes)
    rels, plans, steps = pg[9], pg[5], pg[0]
    for pl in _list(pg, rels[p * RF + R_COUNTED : p * RF + R_COUNTED + 2]):
        q = steps[plans[pl * PF + P_START] * SF + S_REL]
        if flen[q] == 0:
            continue
        _run_rows(st, pg, pl, -1, FROWS, fstart[q], fstart[q] + flen[q], 3, 0, -1, epoch, bufs, sizes)
        ha = _head_arity(pg, pl)
        for h in range(sizes[HW]):
            r = _insert(st, p, bufs[HB][h * ha : (h + 1) * ha])
            _count(st, p, r, bufs[HW][h], epoch, bufs, sizes)


@njit(cache=True)
def _flip(st, i, r, epoch, bufs, sizes):
    st[3][i][r] = epoch
    _push(bufs, sizes, FROWS, r)


@njit(cache=True)
def _counted(st, pg, p, epoch, fs, bufs, sizes):
    sizes[TREL] = 0
    sizes[TROW] = 0
    _count_into(st, pg, p, epoch, fs, bufs, sizes)
    cnt, alive = st[1][p], st[2][p]
    fs[0][p] = sizes[FROWS]
    for t in range(sizes[TROW]):
        r = bufs[TROW][t]
        now = cnt[r] > 0
        if now != (alive[r] != 0):
            alive[r] = 1 if now else 0
            _flip(st, p, r, epoch, bufs, sizes)
    fs[1][p] = sizes[FROWS] - fs[0][p]


@njit(cache=True)
def _heads(st, pg, pl, mode, epoch, rel_b, row_b, bufs, sizes):
    """The heads in HB: over-deletion candidates (mode 0, pushed to rel_b/row_b once, dmark set), present
    ones revived (mode 1: looked up; mode 2: inserted) and pushed."""
    h_rel = pg[5][pl * PF + P_HEAD]
    ha = _head_arity(pg, pl)
    for h in range(sizes[HW]):
        key = bufs[HB][h * ha : (h + 1) * ha]
        r = _insert(st, h_rel, key) if mode == 2 else _lookup(st, h_rel, key)
        if r < 0:
            continue
        alive, cnt, dmark = st[2][h_rel], st[1][h_rel], st[5][h_rel]  # after _insert (it may grow them)
        if mode == 0:
            if alive[r] != 0 and cnt[r] == 0 and dmark[r] != epoch:
                dmark[r] = epoch
                _push(bufs, sizes, rel_b, h_rel)
                _push(bufs, sizes, row_b, r)
        elif alive[r] == 0:
            alive[r] = 1
            _push(bufs, sizes, rel_b, h_rel)
            _push(bufs, sizes, row_b, r)


@njit(cache=True)
def _fixpoint(st, pg, comp_row, c, mode, epoch, rel_b, row_b, bufs, sizes):
    """Semi-naive rounds of the component's recursive plans over the bag rel_b/row_b (grown in place)."""
    kind = 2 if mode == 0 else 1
    a, b = 0, sizes[row_b]
    while a < b:
        for pl in _list(pg, comp_row[C_REC : C_REC + 2]):
            _run_rows(st, pg, pl, rel_b, row_b, a, b, 2, kind, c, epoch, bufs, sizes)
            _heads(st, pg, pl, mode, epoch, rel_b, row_b, bufs, sizes)
        a, b = b, sizes[row_b]


@njit(cache=True)
def _dred(st, pg, c, epoch, fs, bufs, sizes):
    """DRed^c for recursive component c (arrays._DRed, the same steps)."""
    comp_row = pg[8][c * CF : (c + 1) * CF]
    preds = _list(pg, comp_row[C_PREDS : C_PREDS + 2])
    fstart, flen = fs[0], fs[1]
    for b in (TREL, TROW, DREL, DROW, IREL, IROW):
        sizes[b] = 0
    for p in preds:
        _count_into(st, pg, p, epoch, fs, bufs, sizes)
    for t in range(sizes[TROW]):  # lost: present, uncounted now
        i, r = bufs[TREL][t], bufs[TROW][t]
        if st[2][i][r] != 0 and st[1][i][r] == 0 and st[5][i][r] != epoch:
            st[5][i][r] = epoch
            _push(bufs, sizes, DREL, i)
            _push(bufs, sizes, DROW, r)
    lower = _list(pg, comp_row[C_LOWER : C_LOWER + 2])
    for pl in lower:  # a lower fact deleted: its instances lose a derivation
        q = pg[0][pg[5][pl * PF + P_START] * SF + S_REL]
        _run_rows(st, pg, pl, -1, FROWS, fstart[q], fstart[q] + flen[q], 0, 2, c, epoch, bufs, sizes)
        _heads(st, pg, pl, 0, epoch, DREL, DROW, bufs, sizes)
    _fixpoint(st, pg, comp_row, c, 0, epoch, DREL, DROW, bufs, sizes)
    for e in range(sizes[DROW]):
        st[2][bufs[DREL][e]][bufs[DROW][e]] = 0
    for t in range(sizes[TROW]):  # counted now: present
        i, r = bufs[TREL][t], bufs[TROW][t]
        if st[1][i][r] > 0 and st[2][i][r] == 0:
            st[2][i][r] = 1
            _push(bufs, sizes, IREL, i)
            _push(bufs, sizes, IROW, r)
    for pl in _list(pg, comp_row[C_HEADP : C_HEADP + 2]):  # over-deleted, still derivable: back
        _run_rows(st, pg, pl, DREL, DROW, 0, sizes[DROW], 2, 1, c, epoch, bufs, sizes)
        _heads(st, pg, pl, 1, epoch, IREL, IROW, bufs, sizes)
    for pl in lower:
        q = pg[0][pg[5][pl * PF + P_START] * SF + S_REL]
        _run_rows(st, pg, pl, -1, FROWS, fstart[q], fstart[q] + flen[q], 1, 1, c, epoch, bufs, sizes)
        _heads(st, pg, pl, 2, epoch, IREL, IROW, bufs, sizes)
    _fixpoint(st, pg, comp_row, c, 2, epoch, IREL, IROW, bufs, sizes)
    for p in preds:  # flips: over-deleted and not back, or newly present
        fstart[p] = sizes[FROWS]
        for e in range(sizes[DROW]):
            if bufs[DREL][e] == p and st[2][p][bufs[DROW][e]] == 0:
                _flip(st, p, bufs[DROW][e], epoch, bufs, sizes)
        for e in range(sizes[IROW]):
            if bufs[IREL][e] == p and st[5][p][bufs[IROW][e]] != epoch:
                _flip(st, p, bufs[IROW][e], epoch, bufs, sizes)
        flen[p] = sizes[FROWS] - fstart[p]


# ---------------------------------------------------------------- the closure module
@njit(cache=True)
def _ends(st, p, bufs, sizes):
    """Touched rows whose base status (cnt > 0) changed (base updated): their endpoints into AUX; whether any
    may change a component (kernels.base_changes)."""
    cnt, base, alive, cols = st[1][p], st[7][p], st[2][p], st[0][p]
    sizes[AUX] = 0
    matters = False
    for t in range(sizes[TROW]):
        r = bufs[TROW][t]
        now = 1 if cnt[r] > 0 else 0
        if now != base[r]:
            base[r] = now
            _push(bufs, sizes, AUX, cols[r, 0])
            _push(bufs, sizes, AUX, cols[r, 1])
            if now == 0 or alive[r] == 0:
                matters = True
    return matters


@njit(cache=True)
def _second(cols, rows):
    out = np.empty(rows.shape[0], np.int64)
    for t in range(rows.shape[0]):
        out[t] = cols[rows[t], 1]
    return out


@njit(cache=True)
def _seen(st, p):
    seen_l, maxids = st[13], st[16]
    if seen_l[p].shape[0] < maxids[p]:
        seen_l[p] = _widen(seen_l[p], seen_l[p].shape[0], max(maxids[p], 2 * seen_l[p].shape[0]))
        st[18][p] |= SEEN_GROWN
    st[17][p] += 1
    st[18][p] |= N_CHANGED
    return seen_l[p], st[17][p]


@njit(cache=True)
def _least(U, nodes, labels):
    """Per node of U the least node of its new component (-1: in none)."""
    big = np.iinfo(np.int64).max
    least = np.full(labels.max() + 1 if labels.shape[0] else 0, big, np.int64)
    for t in range(nodes.shape[0]):
        least[labels[t]] = min(least[labels[t]], nodes[t])
    newmin = np.full(U.shape[0], -1, np.int64)
    for t in range(nodes.shape[0]):
        newmin[np.searchsorted(U, nodes[t])] = least[labels[t]]
    return newmin


@njit(cache=True)
def _closure(st, pg, c, epoch, fs, bufs, sizes):
    """The symmetric-transitive closure module for component c (arrays.ArraysCore._closure, the same steps)."""
    p = _list(pg, pg[8][c * CF + C_PREDS : c * CF + C_PREDS + 2])[0]
    sizes[TREL] = 0
    sizes[TROW] = 0
    fs[0][p] = sizes[FROWS]
    fs[1][p] = 0
    _count_into(st, pg, p, epoch, fs, bufs, sizes)
    if not _ends(st, p, bufs, sizes):
        return
    cols, alive, islots, inext = st[0][p], st[2][p], st[9][p], st[10][p]
    ends = np.unique(bufs[AUX][: sizes[AUX]])
    old = K.rows_from(ends, cols, islots[0], inext[0], alive)
    region = np.unique(np.concatenate((ends, _second(cols, old))))
    seen, stamp = _seen(st, p)
    nodes, labels = K.components_from(region, cols, islots[0], inext[0], islots[1], inext[1], st[1][p], seen,
                                      stamp)  # fmt: skip
    U = np.unique(np.concatenate((region, nodes)))
    old = K.rows_from(U, cols, islots[0], inext[0], alive)
    ix, iy = np.empty(old.shape[0], np.int64), np.empty(old.shape[0], np.int64)
    oldmin = np.full(U.shape[0], np.iinfo(np.int64).max, np.int64)
    for t in range(old.shape[0]):
        ix[t], iy[t] = np.searchsorted(U, cols[old[t], 0]), np.searchsorted(U, cols[old[t], 1])
        oldmin[ix[t]] = min(oldmin[ix[t]], cols[old[t], 1])
    for u in range(U.shape[0]):
        if oldmin[u] == np.iinfo(np.int64).max:
            oldmin[u] = -1
    newmin = _least(U, nodes, labels)
    for t in range(old.shape[0]):  # pairs whose ends now lie in different components (or none): gone
        x, y = ix[t], iy[t]
        if oldmin[x] != newmin[x] or oldmin[y] != newmin[y]:
            if newmin[x] < 0 or newmin[x] != newmin[y]:
                alive[old[t]] = 0
                _flip(st, p, old[t], epoch, bufs, sizes)
    for u in range(U.shape[0]):  # each moved node with every member of its new component, both ways
        if oldmin[u] != newmin[u] and newmin[u] >= 0:
            _pairs(st, p, U[u], nodes, labels, epoch, bufs, sizes)
    fs[1][p] = sizes[FROWS] - fs[0][p]


@njit(cache=True)
def _pairs(st, p, x, nodes, labels, epoch, bufs, sizes):
    lab = -1
    for t in range(nodes.shape[0]):
        if nodes[t] == x:
            lab = labels[t]
    key = np.empty(2, np.int64)
    for t in range(nodes.shape[0]):
        if labels[t] != lab:
            continue
        for a, b in ((x, nodes[t]), (nodes[t], x)):
            key[0], key[1] = a, b
            r = _insert(st, p, key)
            if st[2][p][r] == 0:
                st[2][p][r] = 1
                _flip(st, p, r, epoch, bufs, sizes)


# ---------------------------------------------------------------- the call
@njit(cache=True)
def _explicit(st, xrel, xsign, xoff, xvals, hasx, bufs, sizes):
    """Explicit changes that change E: rows and signs pushed to EREL / EROW / ESIGN, `expl` set."""
    for e in range(xrel.shape[0]):
        i = xrel[e]
        key = xvals[xoff[e] : xoff[e + 1]]
        expl = st[6][i]
        if xsign[e] < 0:
            r = _lookup(st, i, key)
            if r < 0 or expl[r] == 0:
                continue
            expl[r] = 0
        else:
            r = _insert(st, i, key)
            expl = st[6][i]
            if expl[r] != 0:
                continue
            expl[r] = 1
        _push(bufs, sizes, EREL, i)
        _push(bufs, sizes, EROW, r)
        _push(bufs, sizes, ESIGN, xsign[e])
        hasx[i] = 1


@njit(cache=True)
def _active(pg, c, hasx, flen):
    row = pg[8][c * CF : (c + 1) * CF]
    for p in _list(pg, row[C_PREDS : C_PREDS + 2]):
        if hasx[p]:
            return True
    for q in _list(pg, row[C_INPUTS : C_INPUTS + 2]):
        if flen[q] > 0:
            return True
    return False


@njit(cache=True)
def cascade(st, pg, xrel, xsign, xoff, xvals, epoch):
    """One update, every component it reaches, in one call: (facts added, facts removed)."""
    nrel = st[14].shape[0]
    bufs = List()
    for _ in range(NBUF):
        bufs.append(np.empty(16, np.int64))
    sizes = np.zeros(NBUF, np.int64)
    fs = (np.zeros(nrel, np.int64), np.zeros(nrel, np.int64))
    hasx = np.zeros(nrel, np.uint8)
    _explicit(st, xrel, xsign, xoff, xvals, hasx, bufs, sizes)
    comps = pg[8]
    for c in range(comps.shape[0] // CF):
        if not _active(pg, c, hasx, fs[1]):
            continue
        kind = comps[c * CF + C_KIND]
        if kind == COUNTED:
            _counted(st, pg, _list(pg, comps[c * CF + C_PREDS : c * CF + C_PREDS + 2])[0], epoch, fs, bufs,
                     sizes)  # fmt: skip
        elif kind == CLOSURE:
            _closure(st, pg, c, epoch, fs, bufs, sizes)
        else:
            _dred(st, pg, c, epoch, fs, bufs, sizes)
    added = removed = 0
    for i in range(nrel):
        alive = st[2][i]
        for t in range(fs[0][i], fs[0][i] + fs[1][i]):
            if alive[bufs[FROWS][t]] != 0:
                added += 1
            else:
                removed += 1
    return added, removed


# ---------------------------------------------------------------- the Python side
class Store:
    """The relations as the interpreter reads them: typed lists of the `Rel` objects' own buffers."""

    def __init__(self, rels: list) -> None:
        self.rels = rels
        self.lists = {name: List() for name in (*_KINDS, "imask", "full", "seen")}
        for rel in rels:
            for name, lst in self.lists.items():
                lst.append(getattr(rel, name))
        self.ns = np.array([r.n for r in rels], np.int64)
        self.caps = np.array([r.cap for r in rels], np.int64)
        self.maxids = np.array([r.maxid for r in rels], np.int64)
        self.nstamps = np.array([r.node_stamp for r in rels], np.int64)
        self.dirty = np.zeros(len(rels), np.int64)
        self.seencap = [len(r.seen) for r in rels]
        self.st = (*self.lists.values(), self.ns, self.caps, self.maxids, self.nstamps, self.dirty)

    def refresh(self) -> None:
        """Re-read the relations after the set-at-a-time path changed them."""
        for i, rel in enumerate(self.rels):
            if rel.cap != self.caps[i]:
                for name in _KINDS:
                    self.lists[name][i] = getattr(rel, name)
            if len(rel.seen) != self.seencap[i]:
                self.lists["seen"][i] = rel.seen
                self.seencap[i] = len(rel.seen)
        self.ns[:] = [r.n for r in self.rels]
        self.caps[:] = [r.cap for r in self.rels]
        self.maxids[:] = [r.maxid for r in self.rels]
        self.nstamps[:] = [r.node_stamp for r in self.rels]

    def sync_back(self) -> None:
        """Hand what the call changed (row counts, grown buffers) back to the `Rel` objects."""
        for i in np.flatnonzero(self.dirty).tolist():
            rel, flags = self.rels[i], int(self.dirty[i])
            rel.n, rel.maxid, rel.node_stamp = int(self.ns[i]), int(self.maxids[i]), int(self.nstamps[i])
            if flags & GROWN:
                rel.cap = int(self.caps[i])
                for name in _KINDS:
                    setattr(rel, name, self.lists[name][i])
            if flags & SEEN_GROWN:
                rel.seen = self.lists["seen"][i]
                self.seencap[i] = len(rel.seen)
        self.dirty[:] = 0


class OneCall:
    """The one-call path of an ArraysCore: `fits` decides, `update` runs the cascade in one compiled call."""

    def __init__(self, core, threshold: int = THRESHOLD) -> None:
        self.core, self.threshold = core, threshold
        self.program = encode(core)
        self.ids = {p: i for i, p in enumerate(core.rels)}
        self.store: Store | None = None
        self.entry = None  # the compiled cascade for these argument types (see `_call`)

    def fits(self, add: dict, delete: dict) -> bool:
        return sum(map(len, add.values())) + sum(map(len, delete.values())) <= self.threshold

    def stale(self) -> None:
        """The relations changed outside the interpreter (set-at-a-time path): re-read before the next call."""
        if self.store is not None:
            self.store.refresh()

    def update(self, add: dict, delete: dict) -> tuple[int, int]:
        if self.store is None:
            self.store = Store(list(self.core.rels.values()))
        added, removed = self._call(self.store.st, self.program, *self._pack(add, delete), self.core.epoch)
        self.store.sync_back()
        return added, removed

    def _call(self, *args) -> tuple[int, int]:
        """`cascade(*args)`, after the first call through its compiled entry point directly.

        The dispatcher types every argument on every call, and typing the store's
        typed lists takes it ~200 us (the Python fallback of `typeof`); the
        argument types never change, so the overload is looked up once.
        """
        if self.entry is None:
            out = cascade(*args)
            self.entry = cascade.overloads[tuple(cascade.typeof_pyval(a) for a in args)].entry_point
            return out
        return self.entry(*args)

    def _pack(self, add: dict, delete: dict) -> tuple:
        """The explicit changes as (xrel, xsign, xoff, xvals), deletions first (see the module docstring)."""
        rel, sign, lens, vals = [], [], [], []
        for s, facts in ((-1, delete), (1, add)):
            for p, keys in facts.items():
                n = len(keys)
                if n:
                    rel += [self.ids[p]] * n
                    sign += [s] * n
                    lens += [self.core.rels[p].arity] * n
                    vals.append(np.ascontiguousarray(keys, np.int64).ravel())
        xoff = np.zeros(len(rel) + 1, np.int64)
        np.cumsum(lens, out=xoff[1:])
        xvals = np.concatenate(vals) if vals else np.empty(0, np.int64)
        return np.asarray(rel, np.int64), np.asarray(sign, np.int64), xoff, xvals
