"""Many updates as columns: what a micro-batch hands the engine instead of one Python tuple per fact.

`UpdateColumns` holds n updates in submission order: each one's caller key and
id, the batch's distinct term values (`values`, each once), and the facts
grouped by (predicate, arity) as `FactColumns`: per fact, its update (0..n-1),
whether it is added (else deleted), its position in the batch (increasing in
the order the updates list their facts: an update's additions, then its
deletions) and its terms as codes into `values`.

`feed_columns` submits them as `engine.feed.feed` submits the same updates one
by one with overlap -- the same validation, rejections, sequence numbers and
keys -- and works to quiescence. The arrays core takes the columns (its
`submit_columns`: engine.compact.fed_columns); any other engine is fed one
`Fed` per update (`UpdateColumns.feds`).

Not here: reading messages into columns (stream.batch_decode).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from fluxmat.engine.feed import Fed, FeedResult, feed
from fluxmat.engine.limits import LimitExceeded
from fluxmat.engine.storage import paused_gc


@dataclass
class FactColumns:
    """The facts of one (predicate, arity) in an `UpdateColumns` (module docstring)."""

    update: np.ndarray  # (k,) int64: the update of each fact
    add: np.ndarray  # (k,) bool: added, else deleted
    pos: np.ndarray  # (k,) int64: its place in the batch
    codes: np.ndarray  # (k, arity) int64: its terms, as indexes into UpdateColumns.values


@dataclass
class UpdateColumns:
    """n updates as columns (module docstring)."""

    keys: list  # the caller's key of each update
    ids: list  # each update's id (None: none)
    values: list = field(default_factory=list)  # the distinct term values
    facts: dict[tuple[str, int], FactColumns] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.keys)

    def facts_of(self, wanted: np.ndarray) -> dict[int, tuple[list, list]]:
        """The Python facts `(pred, *values)` of the updates where `wanted` (bool per update) holds.

        As `{update: (added, deleted)}`, each list in the order of the batch.
        """
        found = []
        values = self.values
        for (pred, _arity), fc in self.facts.items():
            pick = np.flatnonzero(wanted[fc.update])
            for u, a, p, codes in zip(fc.update[pick].tolist(), fc.add[pick].tolist(), fc.pos[pick].tolist(),
                                      fc.codes[pick].tolist(), strict=True):  # fmt: skip
                found.append((p, u, a, (pred, *(values[c] for c in codes))))
        out: dict[int, tuple[list, list]] = {int(u): ([], []) for u in np.flatnonzero(wanted)}
        for _p, u, a, fact in sorted(found, key=lambda item: item[0]):
            out[u][0 if a else 1].append(fact)
        return out

    def feds(self, adapt: Callable[[Fed], Fed] | None = None) -> Iterator[Fed]:
        """One `Fed` per update, in order (an engine that takes no columns)."""
        facts = self.facts_of(np.ones(len(self), np.bool_))
        for i, (key, uid) in enumerate(zip(self.keys, self.ids, strict=True)):
            add, delete = facts[i]
            fed = Fed(key, tuple(add), tuple(delete), uid)
            yield fed if adapt is None else adapt(fed)


def feed_columns(fd, cols: UpdateColumns, budget: int, rejected: Callable[[object, Exception], None] | None,
                 adapt: Callable[[Fed], Fed] | None = None) -> FeedResult:  # fmt: skip
    """Submit `cols` with overlap and work until quiescent (module docstring; engine.feed's contract).

    `adapt` rewrites each update before an engine without columns takes it (the door's triples).
    """
    submit = getattr(fd, "submit_columns", None)
    if submit is None or adapt is not None:
        return feed(fd, cols.feds(adapt), budget, True, rejected)
    result = FeedResult()
    with paused_gc():
        try:
            submit(cols, rejected, result)
            fd.run()
        except LimitExceeded as exc:
            exc.key = result.keys.get(exc.update) if exc.update is not None else None
            raise
    return result
