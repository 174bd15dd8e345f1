"""`remat` on the arrays core: every update evaluates the program from scratch (the reference).

The new explicit facts (E without the update's deletions, with its
additions) are loaded into a fresh core of the same program and dictionary;
the report's added and removed facts are the present facts of each relation
that the old or the new core lacks, found by hash lookups of one core's
present facts in the other's tables. A program change is not a `remat`
update: it runs through the core's own pass (engine.compact.program).

Not here: the incremental maintenance (engine.compact.core), the maintainer (engine.compact.maintainer).
"""

from __future__ import annotations

import numpy as np

Arrays = dict[str, np.ndarray]


def explicit_after(core, add: Arrays, delete: Arrays) -> Arrays:
    """E after the update: each relation's explicit facts less `delete`, with `add` (int64 rows)."""
    out = {}
    for p, rel in core.rels.items():
        keep = rel.expl[: rel.n] != 0
        if p in delete:
            rows = rel.lookup(delete[p])
            keep[rows[rows >= 0]] = False
        parts = [rel.cols[: rel.n][keep]] + ([add[p]] if p in add else [])
        if sum(map(len, parts)):
            out[p] = np.concatenate(parts)
    return out


def _absent_in(rel, keys: np.ndarray) -> np.ndarray:
    """The rows of `keys` that `rel` (None: no such relation) does not hold as present."""
    if rel is None or not len(keys):
        return keys
    rows = rel.lookup(keys)
    held = np.zeros(len(keys), np.bool_)
    held[rows >= 0] = rel.alive[rows[rows >= 0]] != 0
    return keys[~held]


def differences(old, new) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per relation, (present now and not before, present before and not now) as int64 rows."""
    out = {}
    for p in old.rels.keys() | new.rels.keys():
        o, n = old.rels.get(p), new.rels.get(p)
        came = _absent_in(o, n.present()) if n is not None else np.empty((0, o.arity), np.int64)
        gone = _absent_in(n, o.present()) if o is not None else np.empty((0, n.arity), np.int64)
        if len(came) or len(gone):
            out[p] = (came, gone)
    return out
