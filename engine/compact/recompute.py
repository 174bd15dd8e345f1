"""Recomputing one recursive component of the arrays core from its inputs (DRed^c's fallback).

When DRed^c's over-deletion in a component grows past `RECOMPUTE_FRACTION`
of the component's present facts (engine.compact.dred), deleting and
rederiving would cost more than evaluating the component afresh: every
over-deleted fact is joined forward once to over-delete, once from the head
to rederive, and the rederived ones forward again, where a recomputation
joins each fact forward once. So the component is emptied and evaluated
semi-naively from the facts it counts (explicit facts and non-recursive
derivations from lower components, counter > 0, kept exact by counting in
the same pass) over the lower components' new state, exactly as a load
evaluates it. The rows whose presence differs from before are its delta for
the components above, as after DRed^c.

Not here: the choice (engine.compact.dred), counting (engine.compact.core).
"""

from __future__ import annotations

import numpy as np

# over-deleted facts, as a share of the component's present facts, past which the
# component is recomputed instead (see the module docstring; docs: deletions on the arrays core)
RECOMPUTE_FRACTION = 0.25
# rows of a recursive component past which a deletion reaching it runs set-at-a-time (`reaches_large`)
LARGE_COMPONENT = 10_000


class DeletionChoice:
    """The threshold and how often each way was taken (per core; tests read and set them)."""

    def __init__(self, fraction: float = RECOMPUTE_FRACTION) -> None:
        self.fraction = fraction
        self.taken = {"dred": 0, "recompute": 0}  # recursive components maintained each way

    def budget(self, core, preds: list[str]) -> float:
        """How many over-deleted facts the component may reach before it is recomputed."""
        if self.fraction == float("inf"):
            return self.fraction
        return self.fraction * sum(core.rels[p].size() for p in preds)


def large_reach(comps: list) -> dict[str, list[list[str]]]:
    """Per predicate, the recursive components (not closures) a deletion of its facts reaches (their preds).

    The components are in dependency order (a component's inputs are its own or
    lower components' predicates), so one walk down from the top finds, per
    component, the recursive ones above it: its own and those of the components
    that read it. What a deletion of several predicates reaches is the union of
    theirs. Linear in the program for a program with few recursive components
    (5,000 strata in a chain); computed once per program (engine.compact.small).
    """
    readers: dict[str, list[int]] = {}
    for i, comp in enumerate(comps):
        for q in comp.inputs:
            readers.setdefault(q, []).append(i)
    above: list[frozenset[int]] = [frozenset()] * len(comps)
    for i in range(len(comps) - 1, -1, -1):
        above[i] = _above(i, comps[i], readers, above)
    out: dict[str, list[list[str]]] = {}
    for i, comp in enumerate(comps):
        for p in comp.preds:
            out[p] = [comps[j].preds for j in sorted(above[i])]
    for p, users in readers.items():
        if p not in out:  # read but in no component: what its readers reach
            out[p] = [comps[j].preds for j in sorted(frozenset().union(*(above[j] for j in users)))]
    return out


def _above(i: int, comp, readers: dict[str, list[int]], above: list[frozenset]) -> frozenset[int]:
    """The recursive components a deletion in component `i` reaches (`above` is known past `i`)."""
    parts = [above[j] for p in comp.preds for j in readers.get(p, ()) if j > i and above[j]]
    own = frozenset((i,)) if comp.recursive and not comp.stc else frozenset()
    if not parts:
        return own
    if len(parts) == 1 and not own:
        return parts[0]  # shared, not copied: a chain of components costs no more than its length
    return own.union(*parts)


def reaches_large(core, delete: dict, reach: dict[str, list[list[str]]] | None = None) -> bool:
    """Whether deleting facts of these predicates reaches a recursive component of many rows.

    The one-call path for small updates (engine.compact.small) runs DRed^c
    fact-at-a-time without this fallback; on DAG-R (440,000 paths) it takes
    four times as long as the set-at-a-time path for the same deletions, so
    such a deletion goes set-at-a-time, where the choice above is made.
    A component's rows (live or not) stand for its size: no count per update.
    `reach` is `large_reach(core.comps)`, when the caller keeps it.
    """
    reach = large_reach(core.comps) if reach is None else reach
    for p, keys in delete.items():
        for preds in reach.get(p, ()) if len(keys) else ():
            if sum(core.rels[q].n for q in preds) > LARGE_COMPONENT:
                return True
    return False


def recompute(dred) -> dict[str, np.ndarray]:
    """Empty `dred`'s component and evaluate it afresh (see the module docstring); its flipped rows.

    `dred` is the component's engine.compact.dred.DRed, counters already
    counted for this update; its seeds and fixpoint are the insertion ones.
    """
    core, preds = dred.core, dred.comp.preds
    before, seeds = {}, {}
    for p in preds:
        rel = core.rels[p]
        before[p] = rel.alive[: rel.n].copy()
        rel.alive[: rel.n] = 0
        seeds[p] = dred.revive(p, np.flatnonzero(rel.cnt[: rel.n] > 0))
    dred.insert_added(seeds)
    dred.fixpoint_new(seeds)
    flipped = {}
    for p in preds:
        rel, was = core.rels[p], before[p]
        now = rel.alive[: rel.n]
        rows = np.concatenate([np.flatnonzero(now[: len(was)] != was),
                               len(was) + np.flatnonzero(now[len(was):])]).astype(np.int64)  # fmt: skip
        rel.flip[rows] = core.epoch
        if len(rows):
            flipped[p] = rows
    return flipped
