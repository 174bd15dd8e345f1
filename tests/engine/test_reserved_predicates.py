"""Facts of the engine's internal relations (`__...`) are refused from outside, on every path in.

A projected negation `not r(X, Y)` is kept in an internal relation `__neg0`, a
rule without a positive body atom reads `__unit()` on the arrays core. A fact
of such a relation given in an update, a load, a checked update or a fed
update would change what the engine derives (a given `__neg0(a)` hides `p(a)`);
each path refuses it with an error that names the predicate, and the
materialisation stays as it was.
"""

from __future__ import annotations

import pytest

from fluxmat.engine import EngineOptions, Fed, Reasoner, UpdateError

PROGRAM = "p(X) :- q(X), not r(X, Y).\ns(1) :- not r(1, 1).\n"
CASES = [("objects", "counting"), ("objects", "dredc"), ("arrays", "counting"), ("arrays", "dredc")]
FD_CASES = [("objects", "fd-counting"), ("arrays", "fd-counting"), ("arrays", "fd-dred")]
RESERVED = [("__neg0", "a"), ("__unit",), ("__const0", "a")]


def _reasoner(core: str, algorithm: str) -> Reasoner:
    r = Reasoner.from_text(PROGRAM, options=EngineOptions(algorithm=algorithm, core=core))
    r.load([("q", "a"), ("q", "b")])
    return r


@pytest.mark.parametrize("core,algorithm", CASES)
@pytest.mark.parametrize("fact", RESERVED)
def test_an_update_with_a_reserved_predicate_is_refused(core, algorithm, fact):
    r = _reasoner(core, algorithm)
    before = sorted(r.facts())
    assert ("p", "a") in before
    for add, delete in (([fact], []), ([("q", "c")], [fact])):
        with pytest.raises(UpdateError, match=f"predicate '{fact[0]}' is reserved"):
            r.check_update(add, delete)
        with pytest.raises(UpdateError, match=f"predicate '{fact[0]}' is reserved"):
            r.update(add=add, delete=delete)
    assert sorted(r.facts()) == before


@pytest.mark.parametrize("core,algorithm", CASES)
def test_a_load_with_a_reserved_predicate_is_refused(core, algorithm):
    r = Reasoner.from_text(PROGRAM, options=EngineOptions(algorithm=algorithm, core=core))
    with pytest.raises(UpdateError, match="predicate '__neg0' is reserved"):
        r.load([("q", "a"), ("__neg0", "a")])


@pytest.mark.parametrize("core,algorithm", FD_CASES)
def test_a_fed_update_with_a_reserved_predicate_is_rejected_alone(core, algorithm):
    r = _reasoner(core, algorithm)
    refused = []
    r.feed(
        [Fed("u1", add=[("__neg0", "a")]), Fed("u2", add=[("q", "c")])],
        rejected=lambda key, exc: refused.append((key, str(exc))),
    )
    r.poll()
    assert [k for k, _ in refused] == ["u1"]
    assert "'__neg0' is reserved" in refused[0][1]
    assert {("p", "a"), ("p", "b"), ("p", "c")} <= set(r.facts())
