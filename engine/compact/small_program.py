"""The arrays core's program as flat integer arrays, for the small-update interpreter (engine.compact.small_run).

`encode(core)` turns the components and plans of an `ArraysCore`
(engine.compact.core, engine.compact.plans) into a tuple of flat int64 numpy
arrays that a numba-compiled interpreter reads without any Python object.
Relations are numbered in the order of `core.rels`; every table has a fixed
stride, its fields named by the constants of this module.

* `steps` (stride `SF`): one row per atom of a plan. `S_REL` the atom's
  relation, `S_POS` its body position (-1 for the head), `S_HOW` how it is
  answered (plans.FULL, INDEX, SCAN, ANTI: kernels.join_step's `how`), `S_K`
  the index's number in its relation (0 when none), `S_COFF` where its columns
  start in the column arrays, `S_NEG` 1 when the atom is negated. A plan's
  start atom is followed by its join steps in order.
* column arrays (one entry per atom column, at `S_COFF + j`): `csrc`, `cval`,
  `cout` as kernels.join_step's `src`, `cval`, `outslot`; `cmask` (bool) the
  bound columns.
* `plans` (stride `PF`): `P_START` its start step, `P_NSTEPS` the join steps
  after it, `P_NSLOTS` binding slots, `P_HEAD` the head relation, `P_HOFF`
  where its head columns start in `hsrc` / `hval` (kernels.project's `src`,
  `cval`), `P_HLEN` the head's arity.
* `comps` (stride `CF`), in dependency order: `C_KIND` (`COUNTED`, `DRED`,
  `CLOSURE`), then (offset, length) pairs into `lists` (concatenated int64
  lists): `C_PREDS` its relations, `C_INPUTS` the body relations of its
  rules, `C_REC` plans starting at a position inside it, `C_LOWER` recursive
  rules' plans starting at a lower position, `C_HEADP` plans from the head.
* `rels` (stride `RF`): `R_COMP` its component, `R_COUNTED` (offset, length
  in `lists`) the plans of the non-recursive rules whose head it is.

The order of plans inside every list is the order ArraysCore uses, so both
paths do the same work in the same order. `rules` (a plain list beside the
tuple) maps a plan number to its rule id (work reports).
"""

from __future__ import annotations

import numpy as np

from fluxmat.engine.compact.plans import HEAD, Plan

SF, S_REL, S_POS, S_HOW, S_K, S_COFF, S_NEG = 6, 0, 1, 2, 3, 4, 5
PF, P_START, P_NSTEPS, P_NSLOTS, P_HEAD, P_HOFF, P_HLEN = 6, 0, 1, 2, 3, 4, 5
CF, C_KIND, C_PREDS, C_INPUTS, C_REC, C_LOWER, C_HEADP = 11, 0, 1, 3, 5, 7, 9
RF, R_COMP, R_COUNTED = 3, 0, 1
COUNTED, DRED, CLOSURE = 0, 1, 2
STEPS, CSRC, CVAL, COUT, CMASK, PLANS, HSRC, HVAL, COMPS, RELS, LISTS = range(11)


class _Builder:
    def __init__(self, rel_ids: dict[str, int]):
        self.rel_ids = rel_ids
        self.steps: list[int] = []
        self.cols: list[list[int]] = [[], [], [], []]  # csrc, cval, cout, cmask
        self.plans: list[int] = []
        self.hcols: list[list[int]] = [[], []]
        self.plan_ids: dict[int, int] = {}
        self.rules: list[int] = []
        self.lists: list[int] = []

    def step(self, s) -> None:
        self.steps += [self.rel_ids[s.pred], s.position, s.how, max(s.k, 0), len(self.cols[0])]
        self.steps.append(int(bool(s.negated)))
        bound = [j in s.mask for j in range(len(s.src))]
        for out, vals in zip(self.cols, (s.src, s.cval, s.outslot, bound), strict=True):
            out.extend(int(v) for v in vals)

    def plan(self, pl: Plan) -> int:
        got = self.plan_ids.get(id(pl))
        if got is not None:
            return got
        start = len(self.steps) // SF
        self.step(pl.start)
        for s in pl.steps:
            self.step(s)
        hoff = len(self.hcols[0])
        self.plans += [start, len(pl.steps), pl.nslots, self.rel_ids[pl.head_pred], hoff]
        self.plans.append(len(pl.head_src))
        self.hcols[0].extend(int(v) for v in pl.head_src)
        self.hcols[1].extend(int(v) for v in pl.head_cval)
        self.plan_ids[id(pl)] = len(self.rules)
        self.rules.append(pl.rule)
        return self.plan_ids[id(pl)]

    def add_list(self, items: list[int]) -> list[int]:
        off = len(self.lists)
        self.lists.extend(items)
        return [off, len(items)]


def _kind(comp) -> int:
    return CLOSURE if comp.stc else (DRED if comp.recursive else COUNTED)


def encode(core) -> tuple[tuple, list[int]]:
    """The interpreter's program for `core` (an ArraysCore) and each plan's rule id (module docstring)."""
    rel_ids = {p: i for i, p in enumerate(core.rels)}
    b = _Builder(rel_ids)
    comps: list[int] = []
    rels = [0] * (RF * len(rel_ids))
    for ci, comp in enumerate(core.comps):
        for p in comp.preds:
            counted = [b.plan(pl) for plans in comp.counted.get(p, {}).values() for pl in plans]
            i = rel_ids[p]
            rels[RF * i + R_COMP] = ci
            rels[RF * i + R_COUNTED : RF * i + R_COUNTED + 2] = b.add_list(counted)
        row = [_kind(comp)]
        row += b.add_list([rel_ids[p] for p in comp.preds])
        row += b.add_list(sorted(rel_ids[p] for p in comp.inputs))
        for plans in (comp.rec_starts, comp.lower_starts, comp.head_plans):
            row += b.add_list([b.plan(pl) for pl in plans])
        comps += row
    assert HEAD == -1
    i64 = lambda xs: np.asarray(xs, np.int64)  # noqa: E731
    program = (i64(b.steps), i64(b.cols[0]), i64(b.cols[1]), i64(b.cols[2]),
               np.asarray(b.cols[3], np.bool_), i64(b.plans), i64(b.hcols[0]), i64(b.hcols[1]),
               i64(comps), i64(rels), i64(b.lists))  # fmt: skip
    return program, b.rules
