"""Where a follower keeps what it folded: the store interface and the in-memory view.

A store applies one complete batch at a time, atomically, together with the
follower's progress: the last applied batch and `through` per key, and the
offset of each partition of the delta topic to read from after a restart
(client.fold.Folder.resume). `load` returns that progress, so a follower that
restarts on the same store continues exactly where the last applied batch
left it. client.database keeps it in SQLite or PostgreSQL; `MemoryView` in
this process only (a restart folds the topic again from its beginning).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from fluxmat.client.fold import Batch

__all__ = ["Change", "MemoryView", "Progress", "changes"]


@dataclass
class Progress:
    """What a store has applied: last batch and `through` per key, next offset per partition."""

    batches: dict = field(default_factory=dict)  # key (None: unkeyed) -> last applied batch id
    through: dict = field(default_factory=dict)  # key -> through of that batch
    offsets: dict[int, int] = field(default_factory=dict)  # partition -> offset to read from


@dataclass(frozen=True)
class Change:
    """One fact that entered (`added`) or left the view of `key`, with the batch that changed it.

    `cause` is the id of the update whose work changed the fact (the update's
    `id`, else `partition:offset` of its message), when exactly one update of
    the batch did; None when several did, in a key's first batch (its whole
    materialisation), and in deltas of format version 1.
    """

    key: str | None
    fact: tuple
    added: bool
    batch: int
    through: object
    cause: object = None


def changes(batch: Batch):
    """A batch's `Change`s: its removed facts, then its added ones, each with its cause."""
    for facts, by, added in ((batch.removed, batch.removed_by, False), (batch.added, batch.added_by, True)):
        causes = by if len(by) == len(facts) else [None] * len(facts)
        for fact, cause in zip(facts, causes, strict=True):
            yield Change(batch.key, fact, added, batch.batch, batch.through, cause)


class MemoryView:
    """The current view per key as in-memory sets; optionally a callback per change.

    Args:
        on_change: called with a `Change` per added or removed fact, after the
            batch is applied to the sets (removals first, then additions).
    """

    def __init__(self, on_change: Callable[[Change], None] | None = None) -> None:
        self.sets: dict[str | None, set[tuple]] = {}
        self.progress = Progress()
        self.on_change = on_change

    def load(self, topic: str) -> Progress:
        return self.progress

    def apply(self, batch: Batch, topic: str, offsets: dict[int, int]) -> None:
        facts = self.sets.setdefault(batch.key, set())
        facts.difference_update(batch.removed)
        facts.update(batch.added)
        self.progress.batches[batch.key] = batch.batch
        self.progress.through[batch.key] = batch.through
        self.progress.offsets = dict(offsets)
        if self.on_change is not None:
            for change in changes(batch):
                self.on_change(change)

    def facts(self, key: str | None = None) -> set[tuple]:
        """The facts of `key`'s materialisation (None: the unkeyed stream)."""
        return self.sets.get(key, set())

    def close(self) -> None:
        pass
