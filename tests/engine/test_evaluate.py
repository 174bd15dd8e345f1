"""engine.evaluate.Bound: views built once must follow the relations and exclusions they name.

B/F~ (engine.equality.bfeq) evaluates one fact at a time over sources that
change in place between calls (facts enter V, disproved facts join S); a Bound
evaluator must then give exactly what the ordinary operator gives over the
same views built afresh: the same multiset of heads per rule for every delta
(each instance once), and the same backward instances.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fluxmat.engine import analyse, parse_program
from fluxmat.engine.evaluate import Bound, Evaluator
from fluxmat.engine.storage import Dictionary, Relation
from tests.support.gen import examples

PROGRAM = """
p(X, Z) :- e(X, Y), e(Y, Z).
q(X) :- e(X, X), p(X, Y).
c(X, Z) :- e(X, Y), e(Y, Z), e(Z, W), e(W, X).
n(X) :- e(X, Y), not p(Y, X).
"""
NODES = range(4)
edge = st.tuples(st.just("e"), st.sampled_from(NODES), st.sampled_from(NODES))
pair = st.tuples(st.just("p"), st.sampled_from(NODES), st.sampled_from(NODES))
step = st.tuples(st.sampled_from(["add", "exclude"]), st.one_of(edge, pair))


def heads(derived) -> Counter:
    return Counter((rule.id, h) for rule, hs in derived for h in hs)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.lists(step, max_size=4), min_size=1, max_size=6), data=st.data())
def test_bound_views_follow_changes_in_place(steps, data):
    an = analyse(parse_program(PROGRAM))
    dictionary = Dictionary()
    ids = [dictionary.intern(f"n{i}") for i in NODES]
    rels = {p: Relation() for p in ("e", "p", "q", "c", "n")}
    excluded: dict[str, set] = {p: set() for p in rels}  # empty when the views are built

    def view(pred: str) -> list:
        return [(rels[pred], excluded[pred])]

    ev = Evaluator(an, dictionary, lambda p: len(rels[p]))
    bound = Bound(ev, view, view)
    for batch in steps:
        for what, (pred, a, b) in batch:
            f = (ids[a], ids[b])
            rels[pred].add(f) if what == "add" else excluded[pred].add(f)
        live = {p: sorted(r.facts - excluded[p]) for p, r in rels.items()}
        delta = {p: set(data.draw(st.lists(st.sampled_from(fs), max_size=3))) for p, fs in
                 live.items() if fs}  # fmt: skip
        rules = [r.id for r in an.rules]
        assert heads(bound.derive(rules, view, view, delta)) == heads(
            ev.derive(rules, view, view, delta)
        )
        for rule in an.rules:
            goal = sorted({h for _, hs in ev.derive([rule.id], view, view) for h in hs})
            assert sorted(bound.backward(rule, goal, view, view, False)) == sorted(
                ev.backward(rule, goal, view, view, False)
            )
