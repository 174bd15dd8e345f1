"""`remat`, `dred`, `dredc` with `equality="rewrite"`: the recomputing wrapper.

Contract (see engine.equality for the semantics). `facts()` returns the
*expanded* materialisation J -- what P plus the equality axioms entail, so
`owl:sameAs(a, b)` for all a, b of a class and every fact for every choice of
class members -- which is what `fluxmat materialise` prints. The compact form
(pi, I) is kept alongside: `rewritten()` gives I (normal facts only) and
`classes` gives pi (`classes.find(c)` is c's representative, the smallest
member of its class by engine.equality.order_key).

Computation (Motik et al. 2015b, by rounds): start with the classes of E's
sameAs facts; evaluate pi(P) plus the reflexivity rules over pi(E) with the
chosen algorithm (a fresh maintainer per round); merge the classes of every non-trivial sameAs fact
derived and repeat until a round derives none. The last round's result is I.

Maintenance. An update that cannot change the classes is maintained
incrementally: the last round's maintainer (the chosen algorithm, run on pi(P)
plus the reflexivity rules) receives the update rewritten by pi (a normal fact
is added when its first explicit preimage arrives and deleted with its last),
and the expansion of its delta is applied to J. That holds when the update
adds and deletes no sameAs fact, introduces no new predicate, deletes nothing
if some rule derives sameAs, and derives no new non-trivial sameAs fact. Any
other update -- in particular deleting an equality, which can split a class and
restore rewritten facts (Motik et al. 2015, section 3.1) -- recomputes the
r-materialisation from scratch over the updated E: correct, but not
incremental. `Report.details["equality_recomputed"]` says which path an update
took. The wrapper reports itself as `remat~`, `dred~` or `dredc~` (Remat~ in
the paper's notation): it runs that algorithm, it is not it. `bf` does not
come here: engine.equality.bfeq (B/F~) maintains every update incrementally,
equality changes included.
"""

from __future__ import annotations

from fluxmat.engine.analysis import Analysis, analyse
from fluxmat.engine.equality.classes import Classes, PyFact, expand, sorted_facts
from fluxmat.engine.equality.program import SAME_AS, check, rewrite_rules, signatures
from fluxmat.engine.maintainer import Maintainer, Report, Update
from fluxmat.engine.storage import Dictionary


class Rewriting(Maintainer):
    """What the maintainers of rewrite mode share: the views of (pi, I).

    Subclasses keep `classes` (pi over values) and `compact` (I as Python facts),
    or properties giving them.
    """

    classes: Classes
    compact: set[PyFact]

    def __init__(self, analysis: Analysis, dictionary: Dictionary | None):
        super().__init__(analysis, dictionary)
        self.arity.setdefault(SAME_AS, 2)

    def rewritten(self) -> list[PyFact]:
        """The compact materialisation I = pi(J): normal facts only, sorted."""
        return sorted_facts(self.compact)

    def representative(self, value) -> object:
        """pi(value): the representative of `value`'s class."""
        return self.classes.find(value)


class Rewrite(Rewriting):
    """`remat`, `dred` or `dredc` with owl:sameAs as equality, stored by rewriting."""

    def __init__(
        self,
        analysis: Analysis,
        inner: type[Maintainer],
        dictionary: Dictionary | None = None,
        modules: bool = True,
        hypertree: bool = True,
        levels: bool = True,
    ):
        """Equality over `inner`, the algorithm (remat, dred, dredc) run on pi(P) each round."""
        check(analysis)
        super().__init__(analysis, dictionary)
        self._modules, self._hypertree, self._levels = modules, hypertree, levels
        self.name = f"{inner.name}~"
        self._inner_cls = inner
        self.inner: Maintainer | None = None  # the last round's maintainer over pi(P)
        self.preimages: dict[PyFact, int] = {}  # normal fact -> explicit facts rewritten to it
        self.sigs: set[tuple[str, int]] = set()
        self.derives_equality = any(r.head.pred == SAME_AS for r in analysis.program.rules)
        self.classes = Classes()
        self.compact = set()

    def set_limits(self, limits) -> None:
        """Limits apply to the maintainer over pi(P) (engine.limits)."""
        super().set_limits(limits)
        if self.inner is not None:
            self.inner.set_limits(limits)

    # ------------------------------------------------------------ evaluation
    def _rematerialise(self) -> int:
        """Recompute (classes, compact) from E and set I to its expansion; return the rounds."""
        facts = list(self.explicit())
        classes = Classes()
        for f in facts:
            if f[0] == SAME_AS:
                classes.union(f[1], f[2])
        sigs = signatures(self.analysis.program, facts)
        rounds = 0
        while True:
            rounds += 1
            program = rewrite_rules(self.analysis.program, classes, sigs)
            inner = self._inner_cls(
                analyse(program), modules=self._modules, hypertree=self._hypertree,
                levels=self._levels,
            )
            inner.set_limits(self.limits)
            inner.load({classes.normal(f) for f in facts})
            compact = set(inner.facts())
            merges = [(f[1], f[2]) for f in compact if f[0] == SAME_AS and f[1] != f[2]]
            for a, b in merges:
                classes.union(a, b)
            if not merges:
                break
        self.classes, self.compact, self.inner, self.sigs = classes, compact, inner, sigs
        self.preimages = {}
        for f in facts:
            g = classes.normal(f)
            self.preimages[g] = self.preimages.get(g, 0) + 1
        self.I = {}
        for fact in expand(compact, classes):
            pred, f = self.encode(fact)
            self.rel(pred).add(f)
        return rounds

    def materialise(self, report: Report) -> None:
        rounds = self._rematerialise()
        report.added = sum(len(r) for r in self.I.values())
        report.details = {"equality_rounds": rounds, "compact_facts": len(self.compact)}

    def maintain(self, update: Update, report: Report) -> None:
        update.apply(self.E)
        plus, minus = update.plus, update.minus
        old = {p: set(r.facts) for p, r in self.I.items()}
        recomputed = 0
        if (plus or minus) and not self._incremental(plus, minus):
            self._rematerialise()
            recomputed = 1
        report.details = {"equality_recomputed": recomputed, "compact_facts": len(self.compact)}
        self.record_diff(report, old)

    def _incremental(self, plus: dict, minus: dict) -> bool:
        """Maintain a class-preserving update through `inner`; False if it must be recomputed.

        On False nothing but E has changed yet (the caller recomputes from E), or
        `inner` is discarded by that recomputation.
        """
        if SAME_AS in plus or SAME_AS in minus or (minus and self.derives_equality):
            return False
        if any((p, len(next(iter(fs)))) not in self.sigs for p, fs in plus.items()):
            return False
        add, delete = set(), set()
        counts, normal = self.preimages, self.classes.normal
        for pred, fs in minus.items():
            for f in fs:
                g = normal(self.decode(pred, f))
                counts[g] -= 1
                if not counts[g]:
                    del counts[g]
                    delete.add(g)
        for pred, fs in plus.items():
            for f in fs:
                g = normal(self.decode(pred, f))
                counts[g] = counts.get(g, 0) + 1
                if counts[g] == 1:
                    add.add(g)
        inner = self.inner
        assert inner is not None
        report = inner.update(add - delete, delete - add)
        gone = {inner.decode(p, f) for p, fs in report.removed_facts.items() for f in fs}
        new = {inner.decode(p, f) for p, fs in report.added_facts.items() for f in fs}
        if any(f[0] == SAME_AS and f[1] != f[2] for f in new):
            return False  # classes merge: recompute
        self.compact -= gone
        self.compact |= new
        for fact in expand(gone, self.classes):
            pred, f = self.encode(fact)
            self.rel(pred).discard(f)
        for fact in expand(new, self.classes):
            pred, f = self.encode(fact)
            self.rel(pred).add(f)
        return True
