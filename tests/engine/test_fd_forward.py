"""engine.fd.forward: the instances a fact takes part in, through cached views, equal `derive`'s.

The fully dynamic engine asks, after almost every operation, for the rule
instances that use one fact F (Hu, Motik & Horrocks 2018's operator
Pi<Ip, In |> P, N> with F as the delta). `Forward` answers from views built once
per plan; this checks it against `Evaluator.derive` with views built for the
call, on random programs (self-joins, stratified negation, arithmetic) and
every fact of a random materialisation:

* an inserted F: Pi<I, I |> {F}> (F in I);
* a deleted F, asked for before it leaves I (`gone=True`): Pi<I u {F}, I |> {F}>
  over the I without F -- what the engine asked before with a `_with` view;
* a fact used under negation, just inserted: Pi<I, I \\ {F} |> N = {F}>, and
  just deleted: Pi<I, I |> N = {F}> (F absent).
"""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, settings
from hypothesis import given as hgiven

from fluxmat.engine import analyse, create, parse_program
from fluxmat.engine.storage import Relation
from tests.support.gen import examples, scenarios


def multiset(found) -> Counter:
    """(rule id, head pred, head, positives, negated) of `forward`'s or `derive`'s result."""
    out: Counter = Counter()
    for rid, hp, triples in found:
        for h, pf, nf in triples:
            out[(rid, hp, h, pf, nf)] += 1
    return out


def derived(m, rules, Ip, In, P, N) -> Counter:
    return multiset((r.id, r.head.pred, t) for r, t in m.ev.derive(rules, Ip, In, P, N, instances=True))


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@hgiven(case=scenarios())
def test_forward_equals_derive(case):
    gp, initial, _updates = case
    m = create("fd-counting", analyse(parse_program(gp.text)))
    m.load(sorted(initial, key=repr))
    for pred in sorted(m.I):
        rel = m.rel(pred)
        for f in sorted(rel.facts):
            pos, neg = m.pos_rules.get(pred, []), m.neg_rules.get(pred, [])
            # inserted: F in I
            assert multiset(m.forward(pred, (f,))) == derived(m, pos, m.OLD, m.OLD, {pred: {f}}, None)
            assert multiset(m.forward(pred, (f,), True)) == derived(
                m, neg, m.OLD, lambda p, f=f, pred=pred: [(m.rel(p), {f} if p == pred else None)],
                None, {pred: {f}},
            )  # fmt: skip
            # deleted: asked before F leaves I, compared with the I it leaves plus F
            before = multiset(m.forward(pred, (f,), gone=True))
            rel.discard(f)
            extra = Relation((f,))

            def with_f(p, f=f, pred=pred, extra=extra):
                return [(m.rel(p), None), (extra, m.rel(p).facts)] if p == pred else [(m.rel(p), None)]

            try:
                assert before == derived(m, pos, with_f, m.OLD, {pred: {f}}, None)
                assert multiset(m.forward(pred, (f,), True)) == derived(m, neg, m.OLD, m.OLD, None, {pred: {f}})
            finally:
                rel.add(f)
