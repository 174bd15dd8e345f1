"""tc(R): the transitive-closure module for `R(x, z) :- R(x, y), R(y, z)`.

Hu, Motik & Horrocks (2019), section 5, Algorithms 4-6. The module keeps X, the
"external" R facts: every R fact given to `add` (explicit, derived by another
rule or module) and every present R fact whose non-recursive counter became
positive. It derives only along linear instances `X(x, y), R(y, z) -> R(x, z)`,
so on a chain of n edges it considers O(n^2) pairs instead of the O(n^3)
instances of the rule (Example 1).

Invariants between calls (I_R the R facts of the materialisation):
  1. X is a subset of I_R, and I_R is the transitive closure of X;
  2. every fact of I_R with a non-zero non-recursive counter is in X;
  3. every fact of I_R has a well-founded justification that is its counter, an
     instance of a generic rule, or a linear instance with its X part in X.

Deletion (Del) follows linear instances whose X part or R part is deleted and
stops at facts with a non-zero non-recursive counter, as DRed^c does; a deleted
fact leaves X at once (so X never holds a deleted fact, unlike the paper's
Algorithm 5, whose X keeps facts that the module itself overdeleted and could
then rederive them from themselves). By (3) everything that survives is still
derivable; by (1) and (2) every survivor lies in the closure of X minus the
deleted facts, so Red -- reachability over X from the sources of the deleted
facts -- finds every deleted fact the survivors derive through R's rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from fluxmat.engine.evaluate import View
from fluxmat.engine.modules.base import PhaseModule, member, successors
from fluxmat.engine.storage import Fact, Relation

BY_SOURCE = (0,)
BY_TARGET = (1,)


class TransitiveClosure(PhaseModule):
    def reset(self) -> None:
        self.X = Relation()
        self.X.index(BY_TARGET)  # the by-source index is built by the first `rederive`
        self.seen: set[Fact] = set()  # facts reached by the current deletion phase

    def external(self, facts: Iterable[Fact]) -> None:
        self.X.update(facts)

    def add(self, Ip: View, delta: set[Fact]) -> set[Fact]:
        """Algorithm 4: semi-naive evaluation of the linear rule X(x, y), R(y, z) -> R(x, z)."""
        src = Ip(self.pred)
        if len(src) == 1 and src[0][1] is None:
            has = src[0][0].facts.__contains__
        else:
            def has(h: Fact) -> bool:
                return member(src, h)

        X = self.X
        preds = X.index(BY_TARGET)
        J: set[Fact] = set()
        queue: list[Fact] = []
        push = queue.append
        # R part new, X part old (X does not hold delta yet)
        n = _extend_left(delta, preds, J, push, has)
        # X part new, R part anywhere in Ip (delta included)
        for u, v in delta:
            for _, w in successors(src, v):
                n += 1
                h = (u, w)
                if h not in J and not has(h):
                    J.add(h)
                    push(h)
        X.update(delta)
        # R part derived here, X part anywhere
        n += _extend_left(_drain(queue), preds, J, push, has)
        self.count(n)
        return J

    def start_deletion(self) -> None:
        self.seen = set()

    def delete(self, Ip: View, delta: set[Fact], cnr: Mapping[Fact, int]) -> set[Fact]:
        """Algorithm 5 (corrected as in the module docstring): overdeletion along X."""
        src = Ip(self.pred)
        X = self.X
        preds = X.index(BY_TARGET)
        seen = self.seen
        seen.update(delta)
        J: set[Fact] = set()
        queue: list[Fact] = []
        n = 0

        def reach(h: Fact) -> None:
            if h in seen or not member(src, h):
                return  # handled already, or deleted in an earlier round
            seen.add(h)
            if not cnr.get(h, 0):
                J.add(h)
                queue.append(h)

        gone_x = [f for f in delta if f in X.facts]
        # R part deleted, X part surviving
        for v, w in delta:
            for x in preds.get(v, ()):
                if x not in delta:
                    n += 1
                    reach((x[0], w))
        # X part deleted, R part anywhere in Ip
        for u, v in gone_x:
            for _, w in successors(src, v):
                n += 1
                reach((u, w))
        X.difference_update(gone_x)
        # facts overdeleted here, as R part and (when in X) as X part
        while queue:
            r = queue.pop()
            v, w = r
            if r in X.facts:
                X.discard(r)
                for _, z in successors(src, w):
                    n += 1
                    reach((v, z))
            for u, _ in preds.get(v, ()):
                n += 1
                reach((u, w))
        self.count(n)
        return J

    def rederive(self, deleted: set[Fact]) -> set[Fact]:
        """Algorithm 6: the deleted R(u, w) with w reachable from u over X."""
        self.seen = set()
        targets: dict[int, set[int]] = {}
        for u, w in deleted:
            targets.setdefault(u, set()).add(w)
        succ = self.X.index(BY_SOURCE)
        out: set[Fact] = set()
        n = 0
        for u, wanted in targets.items():
            visited: set[int] = set()
            stack = [u]
            left = len(wanted)
            while stack and left:
                for _, w in succ.get(stack.pop(), ()):
                    n += 1
                    if w in visited:
                        continue
                    visited.add(w)
                    stack.append(w)
                    if w in wanted:
                        out.add((u, w))
                        left -= 1
        self.count(n)
        return out


def _extend_left(pairs: Iterable[Fact], preds: dict, J: set[Fact], push, has) -> int:
    """Linear instances X(u, v), R(v, w) -> R(u, w) for each R(v, w) of `pairs`.

    New heads go into J and onto the queue (`push`); returns the X facts read.
    """
    n = 0
    for v, w in pairs:
        bucket = preds.get(v)
        if bucket:
            n += len(bucket)
            for u, _ in bucket:
                h = (u, w)
                if h not in J and not has(h):
                    J.add(h)
                    push(h)
    return n


def _drain(queue: list[Fact]) -> Iterator[Fact]:
    """Pop the queue until it is empty, including what is pushed meanwhile."""
    while queue:
        yield queue.pop()
