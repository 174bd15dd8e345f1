"""Small updates in one compiled call: the arrays core's maintenance, fact-at-a-time (engine.compact.small).

`cascade` interprets the program encoded by engine.compact.small_program.
Given an update's explicit changes, it runs every component the update
reaches, in dependency order, with the same maintenance as the set-at-a-time
path (engine.compact.core: counting for non-recursive predicates; DRed^c,
engine.compact.dred, for recursive components; the symmetric-transitive
closure module, engine.compact.closure), step for step, so both paths leave
the same state. Each plan runs fact-at-a-time and depth first
(engine.compact.small_plan) instead of one numba call per atom over all
bindings: a 1 + 1 update is one dispatch instead of ~40, with no numpy glue.

Inside a call, growable buffers (engine.compact.small_rel) hold the rows that
flipped presence (per relation one contiguous range, `fs` = (start, length)
per relation), the explicit rows and signs, touched rows, plan heads and the
DRed sets (over-deleted, inserted), each as (relation, row) pairs.

Not here: the store, the threshold, the Python side (engine.compact.small).
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.typed import List

from fluxmat.engine.compact import kernels as K
from fluxmat.engine.compact.small_plan import (
    ABSENT,
    ALL,
    ALL_NEW,
    ANY_REL,
    COUNTING,
    NO_COMP,
    OVER,
    PRESENT,
    SIGNED,
    entries,
    run_rows,
)  # fmt: skip
from fluxmat.engine.compact.small_program import (
    C_HEADP,
    C_INPUTS,
    C_KIND,
    C_LOWER,
    C_PREDS,
    C_REC,
    CF,
    CLOSURE,
    COMPS,
    COUNTED,
    P_HEAD,
    P_HLEN,
    P_START,
    PF,
    PLANS,
    R_COUNTED,
    RELS,
    RF,
    S_REL,
    SF,
    STEPS,
)  # fmt: skip
from fluxmat.engine.compact.small_rel import (
    ALIVE,
    AUX,
    BASE,
    CNT,
    DIRTY,
    DMARK,
    DREL,
    DROW,
    EREL,
    EROW,
    ESIGN,
    EXPL,
    FAST,
    FROWS,
    HB,
    HW,
    I32,
    IREL,
    IROW,
    MAXIDS,
    N_CHANGED,
    NBUF,
    NS,
    NSTAMPS,
    SEEN,
    SEEN_GROWN,
    TREL,
    TROW,
    WORK,
    at,
    cols,
    count,
    flip,
    i32,
    inext,
    insert,
    islots,
    lookup,
    push,
    u8,
    widen,
)  # fmt: skip


@njit(**FAST)
def _count_into(st, pg, p, epoch, fs, bufs, sizes):
    """Explicit and counted derivation changes of relation p into its counters (touched rows pushed)."""
    fstart, flen = fs[0], fs[1]
    for e in range(sizes[EREL]):
        if bufs[EREL][e] == p:
            count(st, p, bufs[EROW][e], bufs[ESIGN][e], epoch, bufs, sizes)
    rels, plans, steps = pg[RELS], pg[PLANS], pg[STEPS]
    for pl in entries(pg, rels[p * RF + R_COUNTED : p * RF + R_COUNTED + 2]):
        q = steps[plans[pl * PF + P_START] * SF + S_REL]
        if flen[q] == 0:
            continue
        run_rows(
            st,
            pg,
            pl,
            ANY_REL,
            FROWS,
            fstart[q],
            fstart[q] + flen[q],
            SIGNED,
            COUNTING,
            NO_COMP,
            epoch,
            bufs,
            sizes,
        )
        ha = plans[pl * PF + P_HLEN]
        for h in range(sizes[HW]):
            r = insert(st, p, bufs[HB][h * ha : (h + 1) * ha])
            count(st, p, r, bufs[HW][h], epoch, bufs, sizes)


@njit(**FAST)
def _counted(st, pg, p, epoch, fs, bufs, sizes):
    sizes[TREL] = 0
    sizes[TROW] = 0
    _count_into(st, pg, p, epoch, fs, bufs, sizes)
    cnt, alive = i32(st, CNT, p), u8(st, ALIVE, p)
    fs[0][p] = sizes[FROWS]
    for t in range(sizes[TROW]):
        r = bufs[TROW][t]
        now = cnt[r] > 0
        if now != (alive[r] != 0):
            alive[r] = 1 if now else 0
            flip(st, p, r, epoch, bufs, sizes)
    fs[1][p] = sizes[FROWS] - fs[0][p]


# `_heads` modes: over-deletion candidates, looked up (rederived), inserted; FIRST: a buffer's start
LOST, BACK, NEW, FIRST = map(np.int64, (0, 1, 2, 0))


@njit(**FAST)
def _heads(st, pg, pl, mode, epoch, rel_b, row_b, bufs, sizes):
    """The heads in HB into the bag rel_b / row_b.

    Mode 0: over-deletion candidates (present, uncounted, pushed once: dmark set);
    mode 1 (looked up) and 2 (inserted): dead ones revived and pushed.
    """
    h_rel = pg[PLANS][pl * PF + P_HEAD]
    ha = pg[PLANS][pl * PF + P_HLEN]
    for h in range(sizes[HW]):
        key = bufs[HB][h * ha : (h + 1) * ha]
        r = insert(st, h_rel, key) if mode == NEW else lookup(st, h_rel, key)
        if r < 0:
            continue
        # after insert (it may grow them)
        alive, cnt, dmark = u8(st, ALIVE, h_rel), i32(st, CNT, h_rel), i32(st, DMARK, h_rel)
        if mode == LOST:
            if alive[r] != 0 and cnt[r] == 0 and dmark[r] != epoch:
                dmark[r] = epoch
                push(bufs, sizes, rel_b, h_rel)
                push(bufs, sizes, row_b, r)
        elif alive[r] == 0:
            alive[r] = 1
            push(bufs, sizes, rel_b, h_rel)
            push(bufs, sizes, row_b, r)


@njit(**FAST)
def _fixpoint(st, pg, comp_row, c, mode, epoch, rel_b, row_b, bufs, sizes):
    """Semi-naive rounds of the component's recursive plans over the bag rel_b/row_b (grown in place)."""
    kind = OVER if mode == LOST else ALL_NEW
    a, b = FIRST, sizes[row_b]
    while a < b:
        for pl in entries(pg, comp_row[C_REC : C_REC + 2]):
            run_rows(st, pg, pl, rel_b, row_b, a, b, ALL, kind, c, epoch, bufs, sizes)
            _heads(st, pg, pl, mode, epoch, rel_b, row_b, bufs, sizes)
        a, b = b, sizes[row_b]


@njit(**FAST)
def _dred(st, pg, c, epoch, fs, bufs, sizes):
    """DRed^c for recursive component c (arrays._DRed, the same steps)."""
    comp_row = pg[COMPS][c * CF : (c + 1) * CF]
    preds = entries(pg, comp_row[C_PREDS : C_PREDS + 2])
    fstart, flen = fs[0], fs[1]
    for b in (TREL, TROW, DREL, DROW, IREL, IROW):
        sizes[b] = 0
    for p in preds:
        _count_into(st, pg, p, epoch, fs, bufs, sizes)
    for t in range(sizes[TROW]):  # lost: present, uncounted now
        i, r = bufs[TREL][t], bufs[TROW][t]
        if u8(st, ALIVE, i)[r] != 0 and i32(st, CNT, i)[r] == 0 and i32(st, DMARK, i)[r] != epoch:
            i32(st, DMARK, i)[r] = epoch
            push(bufs, sizes, DREL, i)
            push(bufs, sizes, DROW, r)
    lower = entries(pg, comp_row[C_LOWER : C_LOWER + 2])
    for pl in lower:  # a lower fact deleted: its instances lose a derivation
        q = pg[STEPS][pg[PLANS][pl * PF + P_START] * SF + S_REL]
        run_rows(
            st,
            pg,
            pl,
            ANY_REL,
            FROWS,
            fstart[q],
            fstart[q] + flen[q],
            ABSENT,
            OVER,
            c,
            epoch,
            bufs,
            sizes,
        )
        _heads(st, pg, pl, LOST, epoch, DREL, DROW, bufs, sizes)
    _fixpoint(st, pg, comp_row, c, LOST, epoch, DREL, DROW, bufs, sizes)
    for e in range(sizes[DROW]):
        u8(st, ALIVE, bufs[DREL][e])[bufs[DROW][e]] = 0
    for t in range(sizes[TROW]):  # counted now: present
        i, r = bufs[TREL][t], bufs[TROW][t]
        if i32(st, CNT, i)[r] > 0 and u8(st, ALIVE, i)[r] == 0:
            u8(st, ALIVE, i)[r] = 1
            push(bufs, sizes, IREL, i)
            push(bufs, sizes, IROW, r)
    for pl in entries(pg, comp_row[C_HEADP : C_HEADP + 2]):  # over-deleted, still derivable: back
        run_rows(st, pg, pl, DREL, DROW, FIRST, sizes[DROW], ALL, ALL_NEW, c, epoch, bufs, sizes)
        _heads(st, pg, pl, BACK, epoch, IREL, IROW, bufs, sizes)
    for pl in lower:
        q = pg[STEPS][pg[PLANS][pl * PF + P_START] * SF + S_REL]
        run_rows(
            st,
            pg,
            pl,
            ANY_REL,
            FROWS,
            fstart[q],
            fstart[q] + flen[q],
            PRESENT,
            ALL_NEW,
            c,
            epoch,
            bufs,
            sizes,
        )
        _heads(st, pg, pl, NEW, epoch, IREL, IROW, bufs, sizes)
    _fixpoint(st, pg, comp_row, c, NEW, epoch, IREL, IROW, bufs, sizes)
    for p in preds:  # flips: over-deleted and not back, or newly present
        fstart[p] = sizes[FROWS]
        for e in range(sizes[DROW]):
            if bufs[DREL][e] == p and u8(st, ALIVE, p)[bufs[DROW][e]] == 0:
                flip(st, p, bufs[DROW][e], epoch, bufs, sizes)
        for e in range(sizes[IROW]):
            if bufs[IREL][e] == p and i32(st, DMARK, p)[bufs[IROW][e]] != epoch:
                flip(st, p, bufs[IROW][e], epoch, bufs, sizes)
        flen[p] = sizes[FROWS] - fstart[p]


# ---------------------------------------------------------------- the closure module
@njit(**FAST)
def _ends(st, p, bufs, sizes):
    """Whether a touched row's base status (cnt > 0) change may change a component (kernels.base_changes).

    `base` is updated; the changed rows' endpoints go to AUX.
    """
    cnt, base, alive, c = i32(st, CNT, p), u8(st, BASE, p), u8(st, ALIVE, p), cols(st, p)
    sizes[AUX] = 0
    matters = False
    for t in range(sizes[TROW]):
        r = bufs[TROW][t]
        now = 1 if cnt[r] > 0 else 0
        if now != base[r]:
            base[r] = now
            push(bufs, sizes, AUX, c[r, 0])
            push(bufs, sizes, AUX, c[r, 1])
            if now == 0 or alive[r] == 0:
                matters = True
    return matters


@njit(**FAST)
def _union(a, b):
    """The sorted distinct values of a and b: np.unique(np.concatenate((a, b))), heapsorted.

    numba's np.unique and sort cost seconds to compile; a region is a few nodes.
    """
    n = a.shape[0] + b.shape[0]
    v = np.empty(n, np.int64)
    for t in range(a.shape[0]):  # (loops: a slice copy compiles numba's shape-mismatch message)
        v[t] = a[t]
    for t in range(b.shape[0]):
        v[a.shape[0] + t] = b[t]
    # j >= n: heapify from j - n; then move the largest to j and sift
    for j in range(2 * n - 1, 0, -1):
        root, end = j - n, n
        if j < n:
            root, end = 0, j
            v[0], v[end] = v[end], v[0]
        while 2 * root + 1 < end:
            child = 2 * root + 1
            if child + 1 < end and v[child] < v[child + 1]:
                child += 1
            if v[root] >= v[child]:
                break
            v[root], v[child] = v[child], v[root]
            root = child
    m = 0
    for t in range(n):
        if m == 0 or v[t] != v[m - 1]:
            v[m] = v[t]
            m += 1
    return v[:m].copy()


@njit(**FAST)
def _second(cols, rows):
    out = np.empty(rows.shape[0], np.int64)
    for t in range(rows.shape[0]):
        out[t] = cols[rows[t], 1]
    return out


@njit(**FAST)
def _seen(st, p):
    seen, maxids = i32(st, SEEN, p), st[MAXIDS]
    if seen.shape[0] < maxids[p]:
        seen = widen(seen, seen.shape[0], max(maxids[p], 2 * seen.shape[0]))
        st[I32][at(st, SEEN, p)] = seen
        st[DIRTY][p] |= SEEN_GROWN
    st[NSTAMPS][p] += 1
    st[DIRTY][p] |= N_CHANGED
    return seen, st[NSTAMPS][p]


@njit(**FAST)
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


@njit(**FAST)
def _closure(st, pg, c, epoch, fs, bufs, sizes):
    """The symmetric-transitive closure module for component c (arrays.ArraysCore._closure, the same steps)."""
    p = entries(pg, pg[COMPS][c * CF + C_PREDS : c * CF + C_PREDS + 2])[0]
    sizes[TREL] = 0
    sizes[TROW] = 0
    fs[0][p] = sizes[FROWS]
    fs[1][p] = 0
    _count_into(st, pg, p, epoch, fs, bufs, sizes)
    if not _ends(st, p, bufs, sizes):
        return
    c, alive, isl, inx = cols(st, p), u8(st, ALIVE, p), islots(st, p), inext(st, p)
    aux = bufs[AUX][: sizes[AUX]]
    ends = _union(aux, aux[:0])
    old = K.rows_from(ends, c, isl[0], inx[0], alive)
    region = _union(ends, _second(c, old))
    seen, stamp = _seen(st, p)
    nodes, labels = K.components_from(
        region, c, isl[0], inx[0], isl[1], inx[1], i32(st, CNT, p), seen, stamp
    )
    U = _union(region, nodes)
    old = K.rows_from(U, c, isl[0], inx[0], alive)
    ix, iy = np.empty(old.shape[0], np.int64), np.empty(old.shape[0], np.int64)
    oldmin = np.full(U.shape[0], np.iinfo(np.int64).max, np.int64)
    for t in range(old.shape[0]):
        ix[t], iy[t] = np.searchsorted(U, c[old[t], 0]), np.searchsorted(U, c[old[t], 1])
        oldmin[ix[t]] = min(oldmin[ix[t]], c[old[t], 1])
    for u in range(U.shape[0]):
        if oldmin[u] == np.iinfo(np.int64).max:
            oldmin[u] = -1
    newmin = _least(U, nodes, labels)
    for t in range(
        old.shape[0]
    ):  # pairs whose ends now lie in different components (or none): gone
        x, y = ix[t], iy[t]
        if oldmin[x] != newmin[x] or oldmin[y] != newmin[y]:
            if newmin[x] < 0 or newmin[x] != newmin[y]:
                alive[old[t]] = 0
                flip(st, p, old[t], epoch, bufs, sizes)
    for u in range(U.shape[0]):  # each moved node with every member of its new component, both ways
        if oldmin[u] != newmin[u] and newmin[u] >= 0:
            _pairs(st, p, U[u], nodes, labels, epoch, bufs, sizes)
    fs[1][p] = sizes[FROWS] - fs[0][p]


@njit(**FAST)
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
            r = insert(st, p, key)
            if u8(st, ALIVE, p)[r] == 0:
                u8(st, ALIVE, p)[r] = 1
                flip(st, p, r, epoch, bufs, sizes)


# ---------------------------------------------------------------- the call
@njit(**FAST)
def _explicit(st, xrel, xsign, xoff, xvals, hasx, bufs, sizes):
    """Explicit changes that change E: rows and signs pushed to EREL / EROW / ESIGN, `expl` set."""
    for e in range(xrel.shape[0]):
        i = xrel[e]
        key = xvals[xoff[e] : xoff[e + 1]]
        expl = u8(st, EXPL, i)
        if xsign[e] < 0:
            r = lookup(st, i, key)
            if r < 0 or expl[r] == 0:
                continue
            expl[r] = 0
        else:
            r = insert(st, i, key)
            expl = u8(st, EXPL, i)
            if expl[r] != 0:
                continue
            expl[r] = 1
        push(bufs, sizes, EREL, i)
        push(bufs, sizes, EROW, r)
        push(bufs, sizes, ESIGN, xsign[e])
        hasx[i] = 1


@njit(**FAST)
def _active(pg, c, hasx, flen):
    row = pg[COMPS][c * CF : (c + 1) * CF]
    for p in entries(pg, row[C_PREDS : C_PREDS + 2]):
        if hasx[p]:
            return True
    for q in entries(pg, row[C_INPUTS : C_INPUTS + 2]):
        if flen[q] > 0:
            return True
    return False


@njit(cache=True)
def cascade(st, pg, xrel, xsign, xoff, xvals, epoch):
    """One update, every component it reaches, in one call.

    Returns the rows that flipped presence, where each relation's range of
    them starts and how long it is, and the head instances per plan.
    """
    nrel = st[NS].shape[0]
    bufs = List()
    for _ in range(NBUF):
        bufs.append(np.empty(16, np.int64))
    bufs[WORK] = np.zeros(max(pg[PLANS].shape[0] // PF, 1), np.int64)
    sizes = np.zeros(NBUF, np.int64)
    fs = (np.zeros(nrel, np.int64), np.zeros(nrel, np.int64))
    hasx = np.zeros(nrel, np.uint8)
    _explicit(st, xrel, xsign, xoff, xvals, hasx, bufs, sizes)
    comps = pg[COMPS]
    for c in range(comps.shape[0] // CF):  # (not a function of its own: one level less to compile)
        if not _active(pg, c, hasx, fs[1]):
            continue
        kind = comps[c * CF + C_KIND]
        if kind == COUNTED:
            _counted(st, pg, entries(pg, comps[c * CF + C_PREDS : c * CF + C_PREDS + 2])[0],
                     epoch, fs, bufs, sizes)  # fmt: skip
        elif kind == CLOSURE:
            _closure(st, pg, c, epoch, fs, bufs, sizes)
        else:
            _dred(st, pg, c, epoch, fs, bufs, sizes)
    return bufs[FROWS][: sizes[FROWS]].copy(), fs[0], fs[1], bufs[WORK]
