"""The symmetric-transitive closure module of the arrays core (Hu, Motik, Horrocks 2019).

A component that is one binary relation closed by exactly a symmetric and a
transitive rule (engine.compact.plans.closure_strata): present = every pair
of nodes in one connected component of the undirected graph of its counted
(base) edges: explicit facts and non-recursive derivations, counter > 0. A
component is named by its least node. The touched rows' endpoints and their
old components are searched again over the base edges; only nodes whose
component's name changed gain or lose pairs, so an edge inside a component,
or one whose loss does not split it, costs a search and nothing more.
"""

from __future__ import annotations

import numpy as np

from fluxmat.engine.compact import kernels as K


def closure(core, comp, explicit, flipped) -> None:
    """Maintain the closure relation of `comp` in `core` for the current update (see the module docstring)."""
    p = comp.preds[0]
    rel = core.rels[p]
    touched = core.count_into(p, comp, explicit, flipped)
    if not len(touched):
        return
    touched, matters = K.base_changes(touched, rel.cnt, rel.base, rel.alive)
    if not matters:
        return
    U, oldmin, newmin, nodes, labels, old = _relabel(rel, touched)
    changed = oldmin != newmin
    if not changed.any():
        return
    xs, ys = rel.cols[old, 0], rel.cols[old, 1]
    ix, iy = np.searchsorted(U, xs), np.searchsorted(U, ys)
    cand = changed[ix] | changed[iy]
    nx, ny = newmin[ix[cand]], newmin[iy[cand]]
    gone = old[cand][(nx < 0) | (nx != ny)]
    rel.alive[gone] = 0
    came = np.empty(0, np.int64)
    moved = U[changed & (newmin >= 0)]
    if len(moved):  # each moved node with every member of its new component, both ways
        came = K.revive(rel.insert(_component_pairs(moved, nodes, labels)), rel.alive)
    rows = np.concatenate([came, gone])
    rel.flip[rows] = core.epoch
    if len(rows):
        flipped[p] = rows


def _relabel(rel, touched: np.ndarray) -> tuple:
    """The searched nodes U, their old and new component names, the components found, U's present rows."""
    ends = np.unique(rel.cols[touched].ravel())
    old = K.rows_from(ends, rel.cols, rel.islots[0], rel.inext[0], rel.alive)
    region = np.unique(np.concatenate([ends, rel.cols[old, 1]]))
    rel.ensure_nodes(rel.maxid)
    rel.node_stamp += 1
    nodes, labels = K.components_from(region, rel.cols, rel.islots[0], rel.inext[0], rel.islots[1],
                                      rel.inext[1], rel.cnt, rel.seen, rel.node_stamp)  # fmt: skip
    U = np.unique(np.concatenate([region, nodes]))
    old = K.rows_from(U, rel.cols, rel.islots[0], rel.inext[0], rel.alive)
    oldmin = _group_min(len(U), np.searchsorted(U, rel.cols[old, 0]), rel.cols[old, 1])
    newmin = np.full(len(U), -1, np.int64)
    if len(nodes):
        starts = np.concatenate([[0], np.flatnonzero(np.diff(labels)) + 1])
        least = np.minimum.reduceat(nodes, starts)
        newmin[np.searchsorted(U, nodes)] = least[labels]
    return U, oldmin, newmin, nodes, labels, old


def _component_pairs(moved: np.ndarray, nodes: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """(x, m) and (m, x) for each moved node x and each member m of its component (nodes grouped by label)."""
    starts = np.concatenate([[0], np.flatnonzero(np.diff(labels)) + 1])
    sizes = np.diff(np.concatenate([starts, [len(nodes)]]))
    order = np.argsort(nodes)
    lab = labels[order][np.searchsorted(nodes[order], moved)]
    counts = sizes[lab]
    offs = np.repeat(starts[lab] - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
    xs, ms = np.repeat(moved, counts), nodes[offs]
    return np.ascontiguousarray(np.concatenate([np.stack([xs, ms], 1), np.stack([ms, xs], 1)]))


def _group_min(n: int, idx: np.ndarray, vals: np.ndarray) -> np.ndarray:
    """Per group 0..n-1 the least of its `vals` (-1 for a group without any)."""
    out = np.full(n, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(out, idx, vals)
    out[out == np.iinfo(np.int64).max] = -1
    return out
