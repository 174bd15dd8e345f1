"""A linear transitive closure of a lower relation, evaluated by per-source reachability.

A recursive component of the arrays core that is one binary relation p whose
only recursive rule is `p(X, Z) :- p(X, Y), e(Y, Z)` (right-linear) or
`p(X, Z) :- e(X, Y), p(Y, Z)` (left-linear), e a lower relation
(engine.compact.plans.linear_closure), may have any non-recursive rules.

When every present fact of p is a seed of DRed^c's insertion fixpoint
(engine.compact.dred) -- a load, a `remat` update, a recomputation
(engine.compact.recompute) -- the fixpoint's result is S;E* (right-linear)
or E*;S (left-linear) for the seeds S and the present facts E of e. It is
computed per source x (per target z when left-linear) by a breadth-first
search from x's seeds over the edges as a CSR adjacency, each node reached
marked in a per-node stamp array (`Rel.seen`): a candidate fact costs one
read of that small array where the semi-naive rounds cost a probe of the
full-key hash table, and each derived fact is found once. When no row of p
holds any other fact (no dead rows), the new facts are appended without a
lookup (`Rel.add_new`).

The result and everything DRed^c keeps are those of the semi-naive rounds:
counters count explicit and non-recursive derivations only (they are not
touched here), and the rule instances reported are the same, one per fact
and edge out of its last node. Limits are checked after each chunk of
`CHUNK` facts, as after each semi-naive round. Any other insertion (seeds
that are not all of p: an incremental update) runs the semi-naive rounds.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from fluxmat.engine.compact import cache  # noqa: F401  (a writable cache folder before compiling)
from fluxmat.engine.compact import kernels as K

CHUNK = 1 << 20  # facts derived per kernel call; limits are checked between calls
STAMP_MAX = 2**31 - 1  # `Rel.seen` holds int32 stamps


def fixpoint(core, comp, seeds: dict[str, np.ndarray]) -> dict[str, np.ndarray] | None:
    """The insertion fixpoint of `comp` from `seeds` (every row reached, per predicate), or None.

    None when the component is not a linear closure or its present facts are not all seeds.
    """
    if comp.reach is None:
        return None
    p = comp.preds[0]
    rel, rows = core.rels[p], seeds.get(p)
    if rows is None or not len(rows) or len(rows) != rel.size():
        return None
    rule, e, left = comp.reach
    keys, other, off, adj = _inputs(rel, core.rels[e], rows, left)
    fresh = rel.n == len(rows)  # every row is a seed: no row holds a fact derived here
    out, i = [rows], 0
    while i < len(keys):
        if rel.node_stamp + len(keys) >= STAMP_MAX:
            rel.seen[:], rel.node_stamp = 0, 0
        pairs, work, i, rel.node_stamp = reach(keys, other, i, off, adj, rel.seen, rel.node_stamp,
                                               CHUNK)  # fmt: skip
        if left:
            pairs = np.ascontiguousarray(pairs[:, ::-1])
        if fresh:
            new = rel.add_new(pairs)
            rel.alive[new] = 1
        else:
            new = K.revive(rel.insert(pairs), rel.alive)
        out.append(new)
        core.on_work(rule, work)
        core.after_component()
    return {p: np.concatenate(out)}


def _inputs(rel, erel, rows: np.ndarray, left: bool) -> tuple[np.ndarray, ...]:
    """The seeds as (key, other) sorted by key, the present edges as a CSR adjacency (offsets, targets).

    Right-linear: keys are sources and edges go forward; left-linear: keys are
    targets and edges go backward.
    """
    a, b = (1, 0) if left else (0, 1)
    live = np.flatnonzero(erel.alive[: erel.n])
    src, dst = erel.cols[live, a], erel.cols[live, b]
    order = np.argsort(rel.cols[rows, a], kind="stable")
    keys, other = rel.cols[rows[order], a], rel.cols[rows[order], b]
    nodes = 1 + max(int(keys.max()), int(other.max()), int(src.max(initial=0)), int(dst.max(initial=0)))  # fmt: skip
    off = np.zeros(nodes + 1, np.int64)
    np.cumsum(np.bincount(src, minlength=nodes), out=off[1:])
    rel.ensure_nodes(nodes)
    return keys, other, off, dst[np.argsort(src, kind="stable")]


@njit(cache=True)
def reach(keys, other, i, off, adj, seen, stamp, budget):
    """Per key from seed i on (seeds sorted by key): the nodes reached from its seeds' other ends.

    Returns the (key, node) pairs of nodes reached that are not seeds, at least
    `budget` of them unless the seeds run out first; the edges followed (rule
    instances); the next seed to start from; the last stamp used in `seen`.
    """
    n = keys.shape[0]
    out = np.empty((16, 2), np.int64)
    queue = np.empty(seen.shape[0], np.int64)
    o, work = 0, 0
    while i < n and o < budget:
        x = keys[i]
        stamp += 1
        tail = 0
        while i < n and keys[i] == x:
            y = other[i]
            if seen[y] != stamp:
                seen[y] = stamp
                queue[tail] = y
                tail += 1
            i += 1
        head = 0
        while head < tail:
            y = queue[head]
            head += 1
            for k in range(off[y], off[y + 1]):
                z = adj[k]
                work += 1
                if seen[z] != stamp:
                    seen[z] = stamp
                    queue[tail] = z
                    tail += 1
                    if o == out.shape[0]:
                        grown = np.empty((2 * o, 2), np.int64)
                        for t in range(o):  # (a loop: a slice copy compiles numba's error message)
                            grown[t, 0], grown[t, 1] = out[t, 0], out[t, 1]
                        out = grown
                    out[o, 0] = x
                    out[o, 1] = z
                    o += 1
    return out[:o], work, i, stamp
