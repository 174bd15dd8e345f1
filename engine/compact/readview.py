"""A read-only view of the arrays core shaped like the objects core's state, for `why`.

`engine.why.Explainer` reads a maintainer's `I` and `E` as relations of int
tuples and evaluates rules backwards with the objects core's evaluator
(`ev.backward` over the views `OLD`). `FactsView` gives it exactly that over
an arrays core (engine.compact.maintainer): a relation's present and explicit
rows become Python sets the first time a proof needs them, and only those
relations. Term ids are the maintainer's own, so comparisons and arithmetic
in rule bodies are evaluated by the same plans as in the objects core.

Cost: one Python tuple per row of each relation a proof reaches (what the
objects core holds all the time); the view is built per question and dropped
after it, so the arrays core itself keeps no Python object per fact. It must
not outlive a change of the state (the caller holds the reasoner's lock).

Not here: the proof search (engine.why), the arrays (engine.compact.relation).
"""

from __future__ import annotations

from fluxmat.engine.evaluate import Evaluator
from fluxmat.engine.storage import Relation

EMPTY = Relation()


class FactsView:
    """`I`, `E`, `ev` and `OLD` of an arrays-core maintainer, built lazily per relation."""

    def __init__(self, maintainer) -> None:
        self.maintainer = maintainer
        self.analysis = maintainer.analysis
        self.dictionary = maintainer.dictionary
        self.arity = maintainer.arity
        self.I = _Lazy(self._present)
        self.E = _Lazy(self._explicit)
        self.ev = Evaluator(self.analysis, self.dictionary, self._size)

    def decode(self, pred: str, fact: tuple):
        return self.maintainer.decode(pred, fact)

    def show_fact(self, fact) -> str:
        return self.maintainer.show_fact(fact)

    def OLD(self, pred: str) -> list:
        """The present facts of `pred`, as the evaluator's view of the state."""
        return [(self.I.get(pred) or EMPTY, None)]

    def _rel(self, pred: str):
        return self.maintainer.core.rels.get(pred)

    def _size(self, pred: str) -> int:
        rel = self._rel(pred)
        return 0 if rel is None else rel.size()

    def _present(self, pred: str) -> Relation | None:
        rel = self._rel(pred)
        return None if rel is None else Relation(map(tuple, rel.present().tolist()))

    def _explicit(self, pred: str) -> set | None:
        rel = self._rel(pred)
        return None if rel is None else set(map(tuple, rel.explicit().tolist()))


class _Lazy:
    """A mapping whose values `build(key)` makes on first use (None: no such relation)."""

    def __init__(self, build) -> None:
        self._build, self._made = build, {}

    def get(self, key, default=None):
        if key not in self._made:
            self._made[key] = self._build(key)
        made = self._made[key]
        return default if made is None else made
