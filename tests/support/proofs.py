"""The independent proof verifier of the `why` tests (engine.why): it knows only the program's AST.

`verify(proof, reasoner, fact)` checks that the root is the fact asked for,
explicit leaves are explicit facts, every derived node is a real instance of
its rule (head and positive body unify with one substitution, its comparisons
hold and its negated atoms are absent), and no fact is its own ancestor.
"""

from __future__ import annotations

import operator
import random

from fluxmat.engine import Reasoner
from fluxmat.engine.syntax import Atom, BinOp, Comparison, Const, Negation, Var
from fluxmat.engine.why import Proof, depth_first


def _div(a: int, b: int):
    """The engine's `/`: truncated toward zero (README); undefined (None) by zero."""
    if b == 0:
        return None
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _mod(a: int, b: int):
    """The engine's `%`: the remainder of `_div`, with the dividend's sign."""
    q = _div(a, b)
    return None if q is None else a - b * q


ARITH = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": _div, "%": _mod}
COMPARE = {"=": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
           ">": operator.gt, ">=": operator.ge}  # fmt: skip


class Unknown(Exception):
    """A term the verifier cannot evaluate (left unchecked)."""


def _value(term, env):
    if isinstance(term, Const):
        return term.value
    if isinstance(term, Var):
        if term.name not in env:
            raise Unknown(term.name)
        return env[term.name]
    if isinstance(term, BinOp):
        left, right = _value(term.left, env), _value(term.right, env)
        if not (isinstance(left, int) and isinstance(right, int)):
            raise Unknown(str(term))
        value = ARITH[term.op](left, right)
        assert value is not None, f"{term} is undefined (division by zero) under {env}"
        return value
    raise Unknown(str(term))


def _unify(atom: Atom, fact: tuple, env: dict, relation) -> bool:
    if relation(fact[0], len(fact) - 1) != atom.pred or len(atom.args) != len(fact) - 1:
        return False
    for term, v in zip(atom.args, fact[1:], strict=True):
        if isinstance(term, Var):
            if env.setdefault(term.name, v) != v:
                return False
        elif isinstance(term, Const) and term.value != v:
            return False
    return True


def verify(proof: Proof, reasoner: Reasoner, want: tuple) -> None:
    """Raise AssertionError unless `proof` is a well-founded proof of `want`."""
    m = reasoner.maintainer
    present = set(reasoner.facts())
    explicit = set(m.explicit())
    relation = m.analysis.relation
    assert proof.fact == want
    shown: set[tuple] = set()
    for node, above in depth_first(proof):
        assert node.fact in present or node.fact[0].startswith("__"), f"{node.fact} not in mat"
        assert node.fact not in above, f"{node.fact} is its own ancestor"
        if node.explicit:
            assert node.fact in explicit, f"{node.fact} shown as explicit but is not"
            continue
        if node.repeated:
            assert node.fact in shown or any(n.fact == node.fact and n.rule for n, _ in depth_first(proof))
            continue
        shown.add(node.fact)
        rule = node.rule.rule
        env: dict = {}
        positives = [lit for lit in rule.body if isinstance(lit, Atom)]
        assert len(positives) == len(node.body), f"{node.fact}: body size"
        head_ok = all(not isinstance(t, BinOp) for t in rule.head.args)
        if head_ok:
            assert _unify(rule.head, node.fact, env, relation), f"{node.fact} is not the head of {rule}"
        for atom, child in zip(positives, node.body, strict=True):
            assert _unify(atom, child.fact, env, relation), f"{child.fact} does not match {atom} in {rule}"
        if not head_ok:
            for term, v in zip(rule.head.args, node.fact[1:], strict=True):
                try:
                    assert _value(term, env) == v, f"{node.fact}: head {term} != {v}"
                except Unknown:
                    pass
        for lit in rule.body:
            try:
                if isinstance(lit, Comparison):
                    left, right = _value(lit.left, env), _value(lit.right, env)
                    assert COMPARE[lit.op](left, right), f"{node.fact}: {lit} fails under {env}"
                elif isinstance(lit, Negation):
                    ground = (lit.atom.pred, *(_value(t, env) for t in lit.atom.args))
                    assert not reasoner.maintainer.contains(ground), f"{node.fact}: {lit} is present"
            except Unknown:
                pass


def reach_through_updates(reasoner: Reasoner, facts: list, seed: int = 7) -> None:
    """Load about half of `facts`, add the rest three at a time, delete a third of the first half
    and add it back: the state of `facts` reached through updates (logs hold update-time instances)."""
    rng = random.Random(seed)
    start = [f for f in facts if rng.random() < 0.5]
    reasoner.maintainer.load(start)  # the door would add the program's own facts too
    rest = [f for f in facts if f not in start]
    for i in range(0, len(rest), 3):
        reasoner.update(add=rest[i : i + 3])
    gone = rng.sample(start, len(start) // 3)
    reasoner.update(delete=gone)
    reasoner.update(add=gone)
