"""Equality (owl:sameAs) programs and the axiomatised oracle the rewriting is checked against."""

from __future__ import annotations

from hypothesis import strategies as st

from fluxmat.engine import Reasoner, parse_program
from fluxmat.engine.equality import SAME_AS, axiomatise

OWL = "@prefix owl: <http://www.w3.org/2002/07/owl#> .\n"


# Motik, Horrocks & Kim 2015, section 3.1 "Main Difficulty", over predicate r
# (our predicates are not constants, so the paper's R ~ R and ~ ~ ~ do not arise).
PAPER = OWL + "\n".join([
    "owl:sameAs(Y1, Y2) :- r(Y1, X), r(Y2, X).",
    "owl:sameAs(Y1, Y2) :- r(X, Y1), r(X, Y2).",
    "r(a, b). r(c, d). r(a, d).",
])  # fmt: skip


def oracle(text: str, explicit) -> set[tuple]:
    """mat(P u P_sameAs, E) with sameAs an ordinary predicate (the axiomatisation)."""
    explicit = list(explicit)
    program = axiomatise(parse_program(text), explicit)
    r = Reasoner(program, "remat")
    r.maintainer.load(explicit)
    return r.facts()


# ---------------------------------------------------------------- random programs with sameAs

CONSTS = ("a", "b", "c", "d")
PREDS = {"e": 2, "f": 1, "p": 2, "q": 1, "owl:sameAs": 2}
HEADS = ("p", "q", "owl:sameAs")


@st.composite
def rules(draw):
    body = []
    for _ in range(draw(st.integers(1, 2))):
        pred = draw(st.sampled_from(sorted(PREDS)))
        args = [
            draw(st.sampled_from(("X", "Y", "Z", "X", "Y", *CONSTS[:2])))
            for _ in range(PREDS[pred])
        ]
        body.append(f"{pred}({', '.join(args)})")
    bound = sorted({a for atom in body for a in atom[atom.index("(") + 1 : -1].split(", ")})
    head = draw(st.sampled_from(HEADS))
    args = [draw(st.sampled_from(bound + ["a"])) for _ in range(PREDS[head])]
    return f"{head}({', '.join(args)}) :- {', '.join(body)}."


def facts_of(pred_names):
    def one(pred):
        name = SAME_AS if pred == "owl:sameAs" else pred
        return st.tuples(st.just(name), *[st.sampled_from(CONSTS)] * PREDS[pred])

    return st.sets(st.one_of(*(one(p) for p in pred_names)), max_size=6)


@st.composite
def scenarios(draw):
    text = OWL + "\n".join(draw(st.lists(rules(), min_size=1, max_size=4)))
    initial = draw(facts_of(sorted(PREDS)))
    updates = []
    current = set(initial)
    for _ in range(draw(st.integers(1, 5))):
        delete = draw(st.sets(st.sampled_from(sorted(current)), max_size=3)) if current else set()
        add = draw(facts_of(sorted(PREDS))) - delete
        updates.append((add, delete))
        current = (current - delete) | add
    return text, initial, updates
