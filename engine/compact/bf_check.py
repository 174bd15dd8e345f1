r"""CHECK and SATURATE of Backward/Forward (engine.compact.bf) compiled: one numba call per 1,024 checks.

`check_rows` runs CHECK on each given row of one relation of the component,
in order, exactly as engine.compact.bf's Python version does (the same
facts checked in the same order, so the same facts proved and the same rule
instances counted), with the recursion on an explicit stack of frames held
in arrays. It stops after `budget` checks and goes on from where it stopped
when called again, so the caller can report work and check limits between
calls.

The program (engine.compact.bf_program's encoding) is a few int64 tables:
plans (`PT`, one row per plan), steps (`ST`, one row per atom, a plan's
start then its join steps) and the columns' sources (`CSRC`, `CVAL`,
`COUT`, `CMASK`, as kernels.join_step's `src`, `cval`, `outslot` and the
bound columns) and the heads' (`HSRC`, `HVAL`). Relations are numba typed
lists indexed by number, the component's own first; an own relation's rows
count when its flag in the view (survivors for CHECK, proved for SATURATE)
is set, a lower relation's when present both before and after the update
(a negated lower atom: absent in both).

Not here: the encoding, the rounds of the deletion (engine.compact.bf).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from fluxmat.engine.compact import kernels as K
from fluxmat.engine.compact.plans import ANTI, FULL, INDEX

# plan table columns
P_START, P_NST, P_NSLOTS, P_HREL, P_HOFF, P_HLEN, P_NOWN, P_OWNOFF, PF = range(9)
# step table columns: relation, how, index number, offset into the column tables, arity, own, mode
S_REL, S_HOW, S_K, S_OFF, S_AR, S_OWN, S_MODE, SF = range(8)
# `check_rows`'s control array: next row, stack depth, body buffer top, lost rows, checks
C_POS, C_SP, C_TOP, C_LOST, C_CHECKS, CTL = range(6)
# a frame: fact relation, row, state, plan number, body offset, bindings, binding, body atom
F_REL, F_ROW, F_STATE, F_PLAN, F_OFF, F_NB, F_I, F_J, FF = range(9)
ENTER, NEXT_PLAN, BINDINGS = range(3)  # a frame's states


@njit(cache=True)
def _grow(a, n):
    """`a` with room for n more entries past its length (doubled)."""
    out = np.empty(max(2 * a.shape[0], a.shape[0] + n, 16), a.dtype)
    out[: a.shape[0]] = a
    return out


@njit(cache=True)
def _counts(db, view, st, rel, r, epoch):
    """Row r of the step's relation counts: set in the view (own) or present before and after (lower)."""
    if st[S_OWN]:
        return view[rel][r] != 0
    return K.present(db[1][rel], db[2][rel], r, epoch, st[S_MODE])


@njit(cache=True)
def _first(pr, db, view, s, vals, epoch):
    """The first candidate row of step s for the bound values (-1: none; an anti-probe's match: 0)."""
    ST, CMASK = pr[1], pr[5]
    st = ST[s]
    rel, how, off, a = st[S_REL], st[S_HOW], st[S_OFF], st[S_AR]
    cols, mask, vals = db[0][rel], CMASK[off : off + a], vals[:a]
    if how == FULL or how == ANTI:
        slots = db[3][rel]
        r = np.int64(slots[K.find(cols, slots, vals, mask)])
        if how == FULL:
            return r
        return np.int64(-1) if r >= 0 and _counts(db, view, st, rel, r, epoch) else np.int64(0)
    if how == INDEX:
        islot = db[4][rel][st[S_K]]
        return np.int64(islot[K.find(cols, islot, vals, mask)])
    return np.int64(0) if db[6][rel] > 0 else np.int64(-1)


@njit(cache=True)
def _next(pr, db, s, r):
    st = pr[1][s]
    rel, how = st[S_REL], st[S_HOW]
    if how == INDEX:
        return np.int64(db[5][rel][st[S_K], r])
    if how == FULL or how == ANTI:
        return np.int64(-1)
    return r + 1 if r + 1 < db[6][rel] else np.int64(-1)


@njit(cache=True)
def _ok(pr, db, view, s, r, vals, epoch):
    """Row r of step s counts and agrees with the bound values (an anti-probe's match always does)."""
    st = pr[1][s]
    rel, how, off = st[S_REL], st[S_HOW], st[S_OFF]
    if how == ANTI:
        return True
    if not _counts(db, view, st, rel, r, epoch):
        return False
    if how == FULL:
        return True
    a = st[S_AR]
    return K.matches(db[0][rel], r, vals[:a], pr[2][off : off + a])


@njit(cache=True)
def _values(pr, s, B, vals):
    """Step s's bound values from the binding B (slots and constants)."""
    st, CSRC, CVAL = pr[1][s], pr[2], pr[3]
    off = st[S_OFF]
    for j in range(st[S_AR]):
        src = CSRC[off + j]
        if src >= 0:
            vals[j] = B[src]
        elif src == -1:
            vals[j] = CVAL[off + j]


@njit(cache=True)
def _bind(pr, db, s, r, B):
    """Write row r's free columns into their slots (nothing for an anti-probe)."""
    st, COUT = pr[1][s], pr[4]
    if st[S_HOW] == ANTI:
        return
    cols, off = db[0][st[S_REL]], st[S_OFF]
    for j in range(st[S_AR]):
        if COUT[off + j] >= 0:
            B[COUT[off + j]] = cols[r, j]


@njit(cache=True)
def _start(pr, db, s, r, B):
    """Bind the start atom from row r; False when the row does not match its constants or repeats."""
    st, CSRC, CVAL = pr[1][s], pr[2], pr[3]
    cols, off = db[0][st[S_REL]], st[S_OFF]
    for j in range(st[S_AR]):
        src = CSRC[off + j]
        if src == -1 and cols[r, j] != CVAL[off + j]:
            return False
        if src <= -3 and cols[r, j] != cols[r, -3 - src]:
            return False
    _bind(pr, db, s, r, B)
    return True


@njit(cache=True)
def _emit(pr, db, pl, B, rows, fwd, out, o):
    """One instance: its head's row (forward, -1 when absent) or its own body atoms' rows (backward)."""
    PT, ST = pr[0], pr[1]
    s0, nst = PT[pl, P_START], PT[pl, P_NST]
    if fwd:
        hrel, hoff, hlen = PT[pl, P_HREL], PT[pl, P_HOFF], PT[pl, P_HLEN]
        key = np.empty(hlen, np.int64)
        for j in range(hlen):
            src = pr[6][hoff + j]
            key[j] = B[src] if src >= 0 else pr[7][hoff + j]
        slots = db[3][hrel]
        full = np.ones(hlen, np.bool_)
        if o + 1 > out.shape[0]:
            out = _grow(out, 1)
        out[o] = slots[K.find(db[0][hrel], slots, key, full)]
        return out, o + 1
    if o + nst > out.shape[0]:
        out = _grow(out, nst)
    for lvl in range(nst):
        if ST[s0 + 1 + lvl, S_OWN]:
            out[o] = rows[lvl]
            o += 1
    return out, o


@njit(cache=True)
def join(pr, db, view, pl, row, fwd, epoch, out, o):
    """The plan's instances from `row` of its start relation, emitted into out[o:] (`_emit`); (out, o, count)."""
    PT = pr[0]
    s0, nst = PT[pl, P_START], PT[pl, P_NST]
    B = np.full(max(PT[pl, P_NSLOTS], 1), -1, np.int64)
    if not _start(pr, db, s0, row, B):
        return out, o, 0
    cur, rows = np.empty(max(nst, 1), np.int64), np.empty(max(nst, 1), np.int64)
    vals = np.zeros((max(nst, 1), pr[8]), np.int64)
    if nst == 0:
        out, o = _emit(pr, db, pl, B, rows, fwd, out, o)
        return out, o, 1
    n = 0
    _values(pr, s0 + 1, B, vals[0])
    cur[0] = _first(pr, db, view, s0 + 1, vals[0], epoch)
    lvl = 0
    while lvl >= 0:
        s = s0 + 1 + lvl
        r = cur[lvl]
        if r < 0:
            lvl -= 1
            if lvl >= 0:
                cur[lvl] = _next(pr, db, s - 1, cur[lvl])
            continue
        if not _ok(pr, db, view, s, r, vals[lvl], epoch):
            cur[lvl] = _next(pr, db, s, r)
            continue
        _bind(pr, db, s, r, B)
        rows[lvl] = r
        if lvl == nst - 1:
            out, o = _emit(pr, db, pl, B, rows, fwd, out, o)
            n += 1
            cur[lvl] = _next(pr, db, s, r)
        else:
            lvl += 1
            _values(pr, s + 1, B, vals[lvl])
            cur[lvl] = _first(pr, db, view, s + 1, vals[lvl], epoch)
    return out, o, n


@njit(cache=True)
def _forward(pr, db, fl, epoch, d_rel, d_row, nd, work):
    """One round of the recursive plans from the delta over the proved facts: the heads' (relations, rows)."""
    PT, ST, REC = pr[0], pr[1], pr[11]
    out, rel = np.empty(16, np.int64), np.empty(16, np.int64)
    o = 0
    for pl in REC:
        start, hrel = ST[PT[pl, P_START], S_REL], PT[pl, P_HREL]
        for e in range(nd):
            if d_rel[e] == start:
                o0 = o
                out, o, n = join(pr, db, fl[1], pl, d_row[e], True, epoch, out, o)
                work[pl] += n
                if rel.shape[0] < out.shape[0]:
                    rel = _grow(rel, out.shape[0] - rel.shape[0])
                rel[o0:o] = hrel
    return rel, out, o


@njit(cache=True)
def _saturate(pr, db, fl, epoch, p, r, work):
    """SATURATE(F): F is checked; proved, with forward chaining over the proved facts, if delayed or counted.

    A derived fact is proved when it has been checked, else delayed (bf.py's `_prove`).
    """
    checked, proved, delayed, cnt = fl[0], fl[1], fl[2], fl[4]
    checked[p][r] = 1
    if not delayed[p][r] and cnt[p][r] <= 0:
        return False
    proved[p][r] = 1
    d_rel, d_row, nd = np.full(1, p, np.int64), np.full(1, r, np.int64), 1
    while nd > 0:
        f_rel, f_row, nf = _forward(pr, db, fl, epoch, d_rel, d_row, nd, work)
        d_rel, d_row, nd = np.empty(max(nf, 1), np.int64), np.empty(max(nf, 1), np.int64), 0
        for e in range(nf):
            q, x = f_rel[e], f_row[e]
            if x < 0:
                continue
            if not checked[q][x]:
                delayed[q][x] = 1
            elif not proved[q][x]:
                proved[q][x] = 1
                d_rel[nd], d_row[nd] = q, x
                nd += 1
    return True


@njit(cache=True)
def _push(frames, sp, rel, row):
    if sp >= frames.shape[0]:
        grown = np.empty((2 * frames.shape[0] + 16, FF), np.int64)
        grown[:sp] = frames[:sp]
        frames = grown
    frames[sp, F_REL], frames[sp, F_ROW], frames[sp, F_STATE] = rel, row, ENTER
    return frames


@njit(cache=True)
def _enter(pr, db, fl, epoch, fr, ctl, work):
    """A frame's first step: False when F needs no search (checked before, or SATURATE proved it)."""
    q, x = fr[F_REL], fr[F_ROW]
    if fl[0][q][x] or _saturate(pr, db, fl, epoch, q, x, work):
        return False
    ctl[C_CHECKS] += 1
    fr[F_PLAN], fr[F_STATE] = pr[9][q], NEXT_PLAN
    return True


@njit(cache=True)
def _bindings(pr, db, fl, epoch, fr, ctl, work, body):
    """A frame's next plan from the head: its instances' own body rows onto the body buffer; False when none is left."""
    if fr[F_PLAN] >= pr[9][fr[F_REL] + 1]:
        return False, body
    pl, off = pr[10][fr[F_PLAN]], ctl[C_TOP]
    body, ctl[C_TOP], n = join(pr, db, fl[3], pl, fr[F_ROW], False, epoch, body, off)
    work[pl] += n
    fr[F_OFF], fr[F_NB], fr[F_I], fr[F_J], fr[F_STATE] = off, n, 0, 0, BINDINGS
    return True, body


@njit(cache=True)
def _step(pr, db, fl, epoch, frames, ctl, work, body):
    """Run the top frame one step: (pop it, the fact to check next or -1 as (relation, row), body)."""
    fr = frames[ctl[C_SP] - 1]
    if fr[F_STATE] == ENTER:
        return not _enter(pr, db, fl, epoch, fr, ctl, work), -1, -1, body
    if fr[F_STATE] == NEXT_PLAN:
        more, body = _bindings(pr, db, fl, epoch, fr, ctl, work, body)
        return not more, -1, -1, body
    pl = pr[10][fr[F_PLAN]]
    nown = pr[0][pl, P_NOWN]
    if fr[F_I] >= fr[F_NB]:  # every instance of this plan done: the next plan
        ctl[C_TOP], fr[F_PLAN], fr[F_STATE] = fr[F_OFF], fr[F_PLAN] + 1, NEXT_PLAN
        return False, -1, -1, body
    if fr[F_J] < nown:  # CHECK the instance's next body fact first
        j = fr[F_J]
        fr[F_J] += 1
        rel = pr[12][pr[0][pl, P_OWNOFF] + j]
        return False, rel, body[fr[F_OFF] + fr[F_I] * nown + j], body
    if fl[1][fr[F_REL]][fr[F_ROW]]:  # proved: done
        ctl[C_TOP] = fr[F_OFF]
        return True, -1, -1, body
    fr[F_I], fr[F_J] = fr[F_I] + 1, 0
    return False, -1, -1, body


@njit(cache=True)
def check_rows(pr, db, fl, epoch, p, rows, ctl, frames, body, work, lost, budget):
    """CHECK rows[ctl[C_POS]:] of relation p in order; an unproved one is no survivor and goes to `lost`.

    Returns (done, frames, body): not done after `budget` checks (call again to go on).
    """
    checks = ctl[C_CHECKS]
    while True:
        if ctl[C_CHECKS] - checks >= budget:
            return False, frames, body
        if ctl[C_SP] == 0:
            if ctl[C_POS] >= rows.shape[0]:
                return True, frames, body
            frames = _push(frames, 0, p, rows[ctl[C_POS]])
            ctl[C_SP] = 1
        pop, rel, row, body = _step(pr, db, fl, epoch, frames, ctl, work, body)
        if rel >= 0:
            frames = _push(frames, ctl[C_SP], rel, row)
            ctl[C_SP] += 1
        elif pop:
            ctl[C_SP] -= 1
            if ctl[C_SP] == 0:  # a fact of `rows` checked
                r = rows[ctl[C_POS]]
                if not fl[1][p][r]:
                    fl[3][p][r] = 0
                    lost[ctl[C_LOST]] = r
                    ctl[C_LOST] += 1
                ctl[C_POS] += 1
