"""A state's changes as integer columns of term ids: what the arrays core exports for the bulk layout.

The same changes as `StateChanges`' texts (engine.fd.snapshot, format 2),
with the same term ids, before they are written out as texts: per relation
the changed facts' term ids with their absolute values (1 + counter; 0: the
fact is gone) and the facts whose explicit flag changed with the flag now,
plus the terms numbered since the last export. A store that keeps columns
(connectors.bulk_state) writes them as they are; one that keeps texts asks
for `texts`, which gives exactly what the export used to give.

Not here: how columns are framed or stored (connectors.bulk_state).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class ChangeColumns:
    """Changes as columns: `facts[pred]` and `explicit[pred]` are ((n, arity) term ids, (n,) values).

    A fact's value is its stored value (1 + counter), 0 when it is gone; an
    explicit row's value is 1 when the fact is explicit now, 0 when not.
    `preds` is each relation's term id (of every relation named here);
    `terms` the term id -> JSON of the terms new since the last export;
    `next_term` the next term id to give.
    """

    preds: dict[str, int] = field(default_factory=dict)
    terms: dict[int, str] = field(default_factory=dict)
    next_term: int = 0
    facts: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    explicit: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    def rows(self) -> int:
        """How many fact and explicit rows the changes hold."""
        return sum(len(v) for _t, v in (*self.facts.values(), *self.explicit.values()))

    def texts(self) -> tuple[dict[str, bool], dict[str, int | None], dict[str, str]]:
        """The changes as format-2 texts: (explicit text -> flag, fact text -> value or None, terms)."""
        explicit = {t: bool(v) for t, v in self._texts(self.explicit)}
        facts = {t: (v or None) for t, v in self._texts(self.facts)}
        return explicit, facts, {str(t): j for t, j in self.terms.items()}

    def _texts(self, table: dict[str, tuple[np.ndarray, np.ndarray]]):
        for pred, (tids, values) in table.items():
            p = str(self.preds[pred])
            keys = (
                [p] * len(tids)
                if tids.shape[1] == 0
                else [",".join((p, *map(str, r))) for r in tids.tolist()]
            )
            yield from zip(keys, values.tolist(), strict=True)
