r"""The rule instances that use a set of facts of one predicate, through cached plans and views.

The fully dynamic engine evaluates the rules forward with a few facts as the
delta after almost every operation it executes: an inserted fact (the instances
it completes), a deleted one (the instances it took part in), and a fact used
under negation. `Forward` answers these with the compiled delta plans of
engine.plans and views built once per plan, instead of building the views (and
the relations behind a changed view) on every call.

One operator, called like a function, over the current I (both for positive
literals and for the sources of negated ones):

  * ``forward(pred, D)`` -- Pi<I, I |> P = {pred: D}>: the instances that use a
    fact of D positively, each once (literals before the delta literal avoid D);
    with ``gone=True``, Pi<I, I \ D |> {pred: D}> (negated literals see D absent);
  * ``forward(pred, D, negated=True)`` -- Pi<I, I \ D |> N = {pred: D}>: the
    instances that use a fact of D under negation, each once, seen as if D were
    absent.

And ``forward.backward(rule, heads)``: `Evaluator.backward` over I (FD-DRed's
rederivation), with the backward plan's views built once too.

A deleted fact's instances are found with ``gone=True`` *before* it leaves I:
that is Pi<I u {F}, I |> {F}> over the I it leaves, the state it was used in.
An inserted fact's are found after it entered I, a deleted one's negated
instances after it left. Results are `(rule id, head predicate,
items)` with the plan's items: heads, or with `instances` `(head, positive
facts, negated facts)` triples. The work is counted as `Evaluator.derive`
counts it (applications per rule and `work`, engine.limits).

The cached views hold I's relations and their indexes, which live as long as
the relations: `clear` after I is rebuilt (a load or a restore). They are a
cache, not state: the operator is a pure function of I.
"""

from __future__ import annotations

from fluxmat.engine.evaluate import EMPTY


class Forward:
    """Delta plans of the given rules with views built once (see the module docstring)."""

    def __init__(self, ev, view, rule_ids) -> None:
        """Plans of `ev` for the rules `rule_ids`, over `view` (pred -> [(relation, None)])."""
        self.ev = ev
        self.view = view
        self.rules = set(rule_ids)
        self.cache: dict[tuple, object] = {}

    def clear(self) -> None:
        """Forget every view (I's relations were replaced)."""
        self.cache.clear()

    def _entries(self, pred: str, positive: bool, instances: bool) -> list:
        """(rule id, head pred, run, views, literals that avoid D, negated literals that see D)."""
        key = (pred, positive, instances)
        entries = self.cache.get(key)
        if entries is not None:
            return entries
        ev, view = self.ev, self.view
        rules = ev.analysis.rules
        entries = []
        for rid, lit in ev.by_literal.get(pred, ()):
            rule = rules[rid]
            npos = len(rule.positives)
            if rid not in self.rules or (lit < npos) != positive:
                continue
            plan = ev.plan(rule, "delta", lit, instances)
            views = ev._views(plan, view, view, None, None, 0, live=True)
            if views is None:  # a positive literal without a source: no instance
                continue
            same = [j for j, p in enumerate(plan.literal_preds) if p == pred and j != lit]
            avoid = tuple(j for j in same if j < lit) if positive else ()  # positive, before the delta
            seen = tuple(j for j in same if j >= npos)  # negated literals of pred
            entries.append((rid, rule.head.pred, plan.run, views, avoid, seen, lit))
        self.cache[key] = entries
        return entries

    def backward(self, rule, heads, first: bool = True) -> list:
        """`Evaluator.backward(rule, heads, I, I, first)` with the views built once."""
        key = ("backward", rule.id)
        entry = self.cache.get(key)
        if entry is None:
            plan = self.ev.plan(rule, "backward")
            entry = self.cache[key] = (plan, self.ev._views(plan, self.view, self.view, None, None, 0, live=True))
        return self.ev._backward(entry[0], entry[1], heads, first)

    def __call__(self, pred: str, D, negated: bool = False, instances: bool = True, gone: bool = False) -> list:
        """The instances using D (module docstring) as (rule id, head pred, items)."""
        positive = not negated
        gone = gone or negated
        ev = self.ev
        counts = ev.counts
        apps = counts.applications
        values, intern = ev.dictionary.values, ev.dictionary.intern
        result = []
        for rid, hp, run, views, avoid, seen, lit in self._entries(pred, positive, instances):
            if avoid or (seen and gone):
                views = list(views)
                for j in avoid:
                    views[j] = [(c, D) for c, _ in views[j]]
                for j in seen if gone else ():  # D absent; before a negated delta literal: present
                    views[j] = ([(c, D) for c, _ in views[j][0]], D if (not positive and j < lit) else EMPTY)
            out: list = []
            run(D, views, out, values, intern)
            if out:
                n = len(out)
                apps[rid] += n
                counts.work += n
                result.append((rid, hp, out))
        return result
