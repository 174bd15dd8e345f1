"""One plan, fact-at-a-time and depth first, inside the small-update interpreter (engine.compact.small_run).

`run_one` runs a plan (engine.compact.small_program's encoding) from one row
of its start relation: the start atom binds slots, then a loop keeps one
cursor per join step (`_first` / `_next`: the full-key probe, the index
chain, a scan, or an anti-probe for a negated atom) and emits the head at
the last step into the buffers HB (values) and HW (weights), counting the
instance in WORK. `run_rows` runs it from a range of a buffer of rows.

A step's rows count when present in the state its mode reads (`_mode`: 0 the
new state, 1 the old one, read through `flip` as kernels.present does). An
anti-probe's step has every column bound; it yields one (row-less) match
when its fact is absent, none when present.

Not here: which plans run when (engine.compact.small_run).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from fluxmat.engine.compact import kernels as K
from fluxmat.engine.compact.plans import ANTI, FULL, INDEX
from fluxmat.engine.compact.small_program import (
    CMASK,
    COUT,
    CSRC,
    CVAL,
    HSRC,
    HVAL,
    LISTS,
    P_HLEN,
    P_HOFF,
    P_NSLOTS,
    P_NSTEPS,
    P_START,
    PF,
    PLANS,
    R_COMP,
    RELS,
    RF,
    S_COFF,
    S_HOW,
    S_K,
    S_NEG,
    S_POS,
    S_REL,
    SF,
    STEPS,
)  # fmt: skip
from fluxmat.engine.compact.small_rel import (
    ALIVE,
    ARITY,
    FAST,
    FLIP,
    HB,
    HW,
    NS,
    SLOTS,
    WORK,
    cols,
    i32,
    inext,
    islots,
    push,
    u8,
)

# Arguments of the functions that are compiled on their own (`FAST`) are numpy ints, never Python
# int literals: numba compiles such a function once per distinct literal value it is called with.
COUNTING, ALL_NEW, OVER = map(np.int64, range(3))  # how a plan reads its steps' states (`_mode`)
ABSENT, PRESENT, ALL, SIGNED = map(np.int64, range(4))  # which rows `run_rows` starts from (`want`)
ANY_REL, NO_COMP = np.int64(-1), np.int64(-1)  # `rel_b`: every entry; `comp`: none


@njit(**FAST)
def _mode(pg, kind, plpos, s, comp):
    """0 reads the new state, 1 the old: COUNTING by position, ALL_NEW, OVER (new inside comp only)."""
    steps, rels = pg[STEPS], pg[RELS]
    if kind == COUNTING:
        return 0 if steps[s * SF + S_POS] < plpos else 1
    if kind == ALL_NEW:
        return 0
    return 0 if rels[steps[s * SF + S_REL] * RF + R_COMP] == comp else 1


@njit(**FAST)
def _first(st, pg, s, vals, mode, epoch):
    """The first candidate row of step s for the bound values `vals` (-1: none)."""
    steps, cmask = pg[STEPS], pg[CMASK]
    i, how, off = steps[s * SF + S_REL], steps[s * SF + S_HOW], steps[s * SF + S_COFF]
    c, a = cols(st, i), st[ARITY][i]
    mask, vals = cmask[off : off + a], vals[:a]
    if how == FULL or how == ANTI:
        slots = i32(st, SLOTS, i)
        r = np.int64(slots[K.find(c, slots, vals, mask)])
        if how == FULL:
            return r
        here = r >= 0 and K.present(u8(st, ALIVE, i), i32(st, FLIP, i), r, epoch, mode)
        return np.int64(-1) if here else np.int64(0)
    if how == INDEX:
        islot = islots(st, i)[steps[s * SF + S_K]]
        return np.int64(islot[K.find(c, islot, vals, mask)])
    return np.int64(0) if st[NS][i] > 0 else np.int64(-1)


@njit(**FAST)
def _next(st, pg, s, r):
    steps = pg[STEPS]
    i, how = steps[s * SF + S_REL], steps[s * SF + S_HOW]
    if how == INDEX:
        return np.int64(inext(st, i)[steps[s * SF + S_K], r])
    if how == FULL or how == ANTI:
        return np.int64(-1)
    return r + 1 if r + 1 < st[NS][i] else np.int64(-1)


@njit(**FAST)
def _ok(st, pg, s, r, vals, mode, epoch):
    """Row r of step s's relation is present (in the mode's state) and agrees with the bound values."""
    steps, csrc = pg[STEPS], pg[CSRC]
    i, off, how = steps[s * SF + S_REL], steps[s * SF + S_COFF], steps[s * SF + S_HOW]
    if how == ANTI:
        return True  # `_first` already checked that the fact is absent
    if not K.present(u8(st, ALIVE, i), i32(st, FLIP, i), r, epoch, mode):
        return False
    if how == FULL:
        return True
    a = st[ARITY][i]
    return K.matches(cols(st, i), r, vals[:a], csrc[off : off + a])


@njit(**FAST)
def _values(st, pg, s, B, vals):
    """The bound values of step s's columns from the bindings B (slots and constants)."""
    steps, csrc, cval = pg[STEPS], pg[CSRC], pg[CVAL]
    i, off = steps[s * SF + S_REL], steps[s * SF + S_COFF]
    for j in range(st[ARITY][i]):
        src = csrc[off + j]
        if src >= 0:
            vals[j] = B[src]
        elif src == -1:
            vals[j] = cval[off + j]


@njit(**FAST)
def _bind(st, pg, s, r, B):
    steps, cout = pg[STEPS], pg[COUT]
    i, off = steps[s * SF + S_REL], steps[s * SF + S_COFF]
    if steps[s * SF + S_HOW] == ANTI and steps[s * SF + S_POS] >= 0:
        return
    c = cols(st, i)
    for j in range(st[ARITY][i]):
        if cout[off + j] >= 0:
            B[cout[off + j]] = c[r, j]


@njit(**FAST)
def _start_ok(st, pg, s, r):
    """Row r matches the start atom's constants and repeated variables (kernels.bind_rows)."""
    steps, csrc, cval = pg[STEPS], pg[CSRC], pg[CVAL]
    i, off = steps[s * SF + S_REL], steps[s * SF + S_COFF]
    c = cols(st, i)
    for j in range(st[ARITY][i]):
        src = csrc[off + j]
        if src == -1 and c[r, j] != cval[off + j]:
            return False
        if src <= -3 and c[r, j] != c[r, -3 - src]:
            return False
    return True


@njit(**FAST)
def _emit(pg, pl, B, w, bufs, sizes):
    plans, hsrc, hval = pg[PLANS], pg[HSRC], pg[HVAL]
    hoff = plans[pl * PF + P_HOFF]
    for j in range(plans[pl * PF + P_HLEN]):
        src = hsrc[hoff + j]
        push(bufs, sizes, HB, B[src] if src >= 0 else hval[hoff + j])
    push(bufs, sizes, HW, w)
    bufs[WORK][pl] += 1


@njit(**FAST)
def _vals_for(st, pg, s0, nst):
    """One row of bound values per join step, wide enough for the widest relation."""
    steps, width = pg[STEPS], 1
    for s in range(s0 + 1, s0 + 1 + nst):
        width = max(width, st[ARITY][steps[s * SF + S_REL]])
    return np.zeros((nst, width), np.int64)


@njit(**FAST)
def run_one(st, pg, pl, row, w, kind, comp, epoch, bufs, sizes):
    """The plan's instances starting at `row` of its start relation: heads and weights pushed to HB / HW."""
    plans, steps = pg[PLANS], pg[STEPS]
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
    vals = _vals_for(st, pg, s0, nst)
    _values(st, pg, s0 + 1, B, vals[0])
    cur[0] = _first(st, pg, s0 + 1, vals[0], _mode(pg, kind, plpos, s0 + 1, comp), epoch)
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
            cur[lvl] = _first(st, pg, s + 1, vals[lvl], _mode(pg, kind, plpos, s + 1, comp), epoch)


@njit(**FAST)
def run_rows(st, pg, pl, rel_b, row_b, a, b, want, kind, comp, epoch, bufs, sizes):
    """The plan from the rows of buffer entries a..b of its start relation; heads in HB / HW (emptied first).

    `rel_b` < 0: every entry is of the start relation. `want`: 1 only rows
    present now, 0 only absent ones, 2 all, 3 all with weight +1 if present
    else -1. At a negated start atom 0 and 1 swap and the weights turn (a
    negated fact that appears removes instances).
    """
    sizes[HB] = 0
    sizes[HW] = 0
    s0 = pg[PLANS][pl * PF + P_START]
    i, neg = pg[STEPS][s0 * SF + S_REL], pg[STEPS][s0 * SF + S_NEG]
    if neg and want < 2:
        want = 1 - want
    alive = u8(st, ALIVE, i)
    for e in range(a, b):
        if rel_b >= 0 and bufs[rel_b][e] != i:
            continue
        r = bufs[row_b][e]
        here = alive[r] != 0
        if (want == 1 and not here) or (want == 0 and here):
            continue
        w = 1
        if want == 3:
            w = (1 if here else -1) * (-1 if neg else 1)
        run_one(st, pg, pl, r, w, kind, comp, epoch, bufs, sizes)


@njit(**FAST)
def entries(pg, off):
    """A list of the program (an (offset, length) pair into `lists`)."""
    lists = pg[LISTS]
    return lists[off[0] : off[0] + off[1]]
