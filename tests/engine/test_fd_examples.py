"""The fully dynamic algorithms on the examples of Illich & Glimm (2023), section 3.

Programs are propositional in the paper's sense ("the stated atoms or facts all
implicitly share the same variable or constant, and may only differ in their
predicate"): every fact here is `p(x)` for one constant `x`.

Most tests explore EVERY schedule exhaustively. A schedule is a sequence of
choices; at each point the choices are: execute one of the pending items (any
update's queue, any index), or integrate the next update of the sequence (so
update U_{i+1} arrives after every possible amount k of earlier work, from
k = 0 up to and including quiescence). The search is a DFS that replays every
prefix from scratch on a fresh maintainer with a scripted `chooser`; it is
capped, and the tests assert the cap is not reached. Every complete schedule
must terminate within `MAX_UNITS` units and end in mat(P, E_n); every
intermediate quiescent state must equal mat(P, E_i) of the last integrated
update (the paper, section 3.1: "the expected, correctly updated
materialization is defined as M' = mat(P, E_{n+i}), always referring to the
latest update U_{n+i} in the current sequence available so far").
"""

from __future__ import annotations

import dataclasses
import os
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from fluxmat.engine import EngineOptions, Reasoner
from fluxmat.engine.storage import Relation

FD = ("fd-dred", "fd-counting")
MAX_UNITS = 200  # per schedule; the examples need a few dozen at most
CAP = 200_000  # replays per exploration
NO_MEMO = bool(os.environ.get("FLUXMAT_FD_NO_MEMO"))

EX1 = "b(x) :- a(x). c(x) :- b(x). a(x) :- c(x)."
EX2 = EX1 + " a(x) :- d(x)."
EX3 = "b(x) :- a(x). c(x) :- a(x). c(x) :- d(x)."
EX4 = "b(x) :- a(x). c(x) :- a(x)."


def f(pred: str) -> tuple:
    return (pred, "x")


def fs(preds: str) -> set[tuple]:
    return {f(p) for p in preds}


def remat(program: str, explicit) -> set[tuple]:
    r = Reasoner.from_text(program, "remat", options=EngineOptions(core="objects"))  # the reference core
    r.load(sorted(explicit))
    return r.facts()


def fresh(program: str, algorithm: str, initial):
    # the objects core: the paper's schedules are its interleavings (the arrays core integrates runs)
    m = Reasoner.from_text(program, algorithm, options=EngineOptions(core="objects")).maintainer
    m.load(sorted(initial))
    return m


def apply_seq(explicit, updates) -> list[frozenset]:
    """E_0, E_1, ..., E_n: the explicit facts after each update, applied in order."""
    out = [frozenset(explicit)]
    for add, delete in updates:
        out.append(frozenset((out[-1] - set(delete)) | set(add)))
    return out


# ---------------------------------------------------------------- counting invariants
def check_counting(m, program: str, expected_derivations: dict[tuple, int] | None = None) -> None:
    """fd-counting at quiescence: counters agree with E and the materialisation.

    For every fact of the program's predicates over `x`: the explicit flag is 1
    exactly for facts of E; a present non-explicit fact has at least one
    supporting (well-founded) applied derivation; an absent fact has none and no
    logged derivation. `expected_derivations` pins the number of applied
    derivations the log holds (the paper's Examples 3 and 4).
    """
    present = set(m.facts())
    explicit = set(m.explicit())
    for p in sorted(set(re.findall(r"([a-z]+)\(x\)", program))):
        fact = f(p)
        e, sc = m.counters(fact)
        assert e == int(fact in explicit), f"{fact}: explicit counter {e}"
        if fact in present and fact not in explicit:
            assert sc >= 1, f"{fact} present but no supporting derivation: counters {(e, sc)}"
        if fact not in present:
            assert (e, sc) == (0, 0), f"{fact} absent but counters {(e, sc)}"
            assert m.derivations(fact) == 0, f"{fact} absent but {m.derivations(fact)} logged derivations"
    for fact, n in (expected_derivations or {}).items():
        assert m.derivations(fact) == n, (
            f"{fact}: {m.derivations(fact)} applied derivations in the log, expected {n}"
        )


# ---------------------------------------------------------------- exhaustive exploration
SUBMIT = ("submit",)

# Maintainer attributes that never change after construction, or only record
# statistics / the scheduler: left out of the state fingerprint. Every other
# attribute (including ones added later to the engine) is part of it.
STATIC = {
    "analysis", "dictionary", "arity", "ev", "body_preds", "stats", "chooser", "rng",
    "pos_rules", "neg_rules", "by_head", "_noops", "interleaved", "active_rules", "base_rules",
    "counts",
}  # fmt: skip


def canon(x):
    """A hashable, order-insensitive rendering of engine state (for memoisation).

    Sets and dicts are sorted (their iteration order only decides the order in
    which work items are queued, and the exploration tries every queued item
    anyway); lists keep their order, except the work queues (see `fingerprint`).
    """
    if isinstance(x, Relation):
        return ("R", canon(x.facts))
    if isinstance(x, dict):
        return ("D", tuple(sorted(((canon(k), canon(v)) for k, v in x.items()), key=repr)))
    if isinstance(x, set | frozenset):
        return ("S", tuple(sorted((canon(v) for v in x), key=repr)))
    if isinstance(x, list | tuple):
        return tuple(canon(v) for v in x)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return (type(x).__name__, canon(vars(x)))
    if isinstance(x, str | int | float | bool | type(None)):
        return x
    if callable(x):
        return None
    return (type(x).__name__, canon(vars(x)) if hasattr(x, "__dict__") else repr(x))


def fingerprint(m, submitted: int):
    """The state of `m` up to the order of items inside a queue."""
    state = {k: v for k, v in vars(m).items() if k not in STATIC and k != "queues"}
    queues = tuple(
        (u, tuple(sorted((canon(i) for i in q), key=repr))) for u, q in sorted(m.queues.items())
    )
    return (submitted, m.stats.recursion_stops > 0, canon(state), queues)


@dataclass
class Outcome:
    schedules: int = 0  # complete schedules (paths through the state graph)
    states: int = 0  # distinct states visited
    replays: int = 0
    longest: int = 0  # units of work in the longest schedule
    finals: set = field(default_factory=set)
    recursion_stops: int = 0  # complete schedules with at least one recursion stop
    failures: list[str] = field(default_factory=list)


class Explorer:
    """Enumerates every schedule: DFS over choice prefixes, each replayed from scratch.

    Two prefixes that reach the same state (`fingerprint`) have the same
    futures, so a state's result (longest remaining work, number of complete
    schedules, of those with a recursion stop) is computed once and reused; the
    counts are still over all schedules. FLUXMAT_FD_NO_MEMO=1 turns the reuse off
    (plain tree search, much slower).
    """

    def __init__(self, program: str, algorithm: str, initial, updates, check=None, memo=None):
        self.program = program
        self.algorithm = algorithm
        self.initial = frozenset(initial)
        self.updates = list(updates)
        self.E = apply_seq(self.initial, self.updates)
        self.mats = [frozenset(remat(program, e)) for e in self.E]
        self.check = check  # extra check (m) at the end of every complete schedule
        self.memo_on = (not NO_MEMO) if memo is None else memo

    def replay(self, prefix):
        m = fresh(self.program, self.algorithm, self.initial)
        trace = ["submit U1"]
        m.submit(*self.updates[0], id="U1")
        submitted = 1
        for choice in prefix:
            if choice == SUBMIT:
                submitted += 1
                m.submit(*self.updates[submitted - 1], id=f"U{submitted}")
                trace.append(f"submit U{submitted}")
            else:
                upd, i = choice
                trace.append(f"U{upd}: {m.describe(m.queues[upd][i])}")
                m.chooser = lambda queues, c=choice: c
                assert m.step(1) == 1
                m.chooser = None
        return m, submitted, trace

    def options(self, m, submitted):
        opts = [SUBMIT] if submitted < len(self.updates) else []
        for upd in sorted(m.queues):
            opts.extend((upd, i) for i in range(len(m.queues[upd])))
        return opts

    def explore(self) -> Outcome:
        self.out = Outcome()
        self.memo: dict = {}
        longest, paths, stops = self._visit(())
        self.out.longest, self.out.schedules, self.out.recursion_stops = longest, paths, stops
        return self.out

    def _visit(self, prefix) -> tuple[int, int, int]:
        out = self.out
        out.replays += 1
        assert out.replays <= CAP, f"state space larger than the cap {CAP}"
        m, submitted, trace = self.replay(prefix)
        key = fingerprint(m, submitted) if self.memo_on else None
        if key is not None and key in self.memo:
            return self.memo[key]
        out.states += 1
        units = len(prefix) - (submitted - 1)
        result = (0, 0, 0)
        if m.quiescent and set(m.facts()) != self.mats[submitted]:
            out.failures.append(
                f"quiescent after U{submitted} with {sorted(m.facts())}, expected "
                f"{sorted(self.mats[submitted])}; schedule: {trace}"
            )
        elif units > MAX_UNITS:
            out.failures.append(f"no quiescence after {MAX_UNITS} units; schedule: {trace[:40]}")
        else:
            opts = self.options(m, submitted)
            if not opts:
                result = (0, 1, int(m.stats.recursion_stops > 0))
                out.finals.add(frozenset(m.facts()))
                if set(m.explicit()) != set(self.E[-1]):
                    out.failures.append(f"explicit facts {sorted(m.explicit())}; schedule: {trace}")
                if self.check is not None:
                    try:
                        self.check(m)
                    except AssertionError as e:
                        out.failures.append(f"{e}; schedule: {trace}")
            for o in opts:
                sub_longest, sub_paths, sub_stops = self._visit((*prefix, o))
                result = (
                    max(result[0], sub_longest + (o != SUBMIT)),
                    result[1] + sub_paths,
                    result[2] + sub_stops,
                )
        if key is not None:
            self.memo[key] = result
        return result


def assert_all_schedules(out: Outcome, expected: set[tuple]) -> None:
    assert not out.failures, f"{len(out.failures)} failing schedules, e.g.:\n" + "\n".join(
        out.failures[:3]
    )
    assert out.schedules > 0
    assert out.finals == {frozenset(expected)}, f"final states {out.finals}"
    assert out.longest <= MAX_UNITS


# ---------------------------------------------------------------- Example 1
@pytest.mark.parametrize("algorithm", FD)
def test_example1_invalid_addition_every_schedule(algorithm):
    """Example 1 (Invalid addition), every schedule.

    "Consider the following rules A -> B, B -> C, and C -> A. Assume we apply an
    update U1 = ({A}, {}) to an empty dataset. [...] Now, suppose we
    simultaneously introduce another update U2 = ({}, {A}) which deletes the fact
    A. Accordingly, A must not be present in the updated materialization."

    U2 arrives after every amount of U1's work (0 units up to quiescence) and
    every pending item may go next: every schedule terminates within MAX_UNITS
    and ends with the empty materialisation (no invalid addition, no endless
    delete/re-add cycle).
    """
    ex = Explorer(EX1, algorithm, set(), [([f("a")], []), ([], [f("a")])])
    out = ex.explore()
    assert_all_schedules(out, set())


def _run_order(algorithm: str, prefer: Callable, submit_after: int):
    """Example 1 with U2 submitted after `submit_after` units of U1; `prefer` picks items."""
    m = fresh(EX1, algorithm, set())
    m.submit([f("a")], [], id="U1")
    assert m.step(submit_after) == submit_after
    state = {"turn": 0, "trace": []}

    def chooser(queues):
        items = [(u, i, q[i]) for u, q in sorted(queues.items()) for i in range(len(q))]
        u, i, item = prefer(items, state)
        state["trace"].append(m.describe(item))
        return u, i

    m.chooser = chooser
    m.submit([], [f("a")], id="U2")
    m.run(max_units=MAX_UNITS)
    return m, state["trace"]


def _prefer(kinds):
    def pick(items, state):
        for kind in kinds:
            for u, i, item in items:
                if item[0] == kind:
                    return u, i, item
        raise AssertionError("no item")

    return pick


def _alternate(items, state):
    """Alternate between deletions and additions ("no overtaking")."""
    want = ("d", "a") if state["turn"] % 2 == 0 else ("a", "d")
    state["turn"] += 1
    return _prefer((*want, "r"))(items, state)


# U2 "while C is unprocessed": in this engine executing add(C) inserts C and at
# once determines what C implies, so C is derived but unprocessed while add(C)
# is pending: after 2 units (add A, add B). After 3 units C was processed: under
# fd-dred U1 is then already quiescent (add(A) via C -> A is not determined, A is
# present); under fd-counting add(A) via C -> A is still pending (counting logs
# instances whose head exists). Both points are tested.
C_UNPROCESSED = (2, 3)


@pytest.mark.parametrize("algorithm", FD)
@pytest.mark.parametrize("submit_after", C_UNPROCESSED)
def test_example1_deletion_overtakes_addition(algorithm, submit_after):
    """Example 1, order 1) "Deletion overtakes addition".

    "here, the explicit deletion of A directly causes the deletion of B, further
    leading to the deletion of C, thus preventing the invalid addition of A. In
    this case, we obtain the correct materialization where none of the facts are
    present anymore." (chooser: deletions first)
    """
    m, trace = _run_order(algorithm, _prefer(("d", "r", "a")), submit_after)
    assert set(m.facts()) == set(), trace


@pytest.mark.parametrize("algorithm", FD)
@pytest.mark.parametrize("submit_after", C_UNPROCESSED)
def test_example1_addition_overtakes_deletion(algorithm, submit_after):
    """Example 1, order 2) "Addition overtakes deletion".

    "using C to (re)derive a new A before the deletion of A is propagated to B
    cancels the deletion completely. Hence, we end up with a wrong
    materialization where A, B, and C are still present despite the deletion."
    The fully dynamic engine must not: with additions preferred it still ends
    with the empty materialisation.
    """
    m, trace = _run_order(algorithm, _prefer(("a", "r", "d")), submit_after)
    assert set(m.facts()) == set(), trace


@pytest.mark.parametrize("algorithm", FD)
@pytest.mark.parametrize("submit_after", C_UNPROCESSED)
def test_example1_no_overtaking(algorithm, submit_after):
    """Example 1, order 3) "No overtaking".

    "due to the deletion of A, we have to delete the derived B, but processing C
    also allows us to derive another A. [...] hence ending up in an endless cycle
    where we constantly delete and re-add facts without termination." The
    recursion stop ("the addition process has to stop at the latest when the
    start of the recursion [...] is reached") must end the cycle: alternating
    deletions and additions terminates within MAX_UNITS with no facts.
    """
    m, trace = _run_order(algorithm, _alternate, submit_after)
    assert set(m.facts()) == set(), trace


@pytest.mark.parametrize("algorithm", FD)
def test_example1_no_overtaking_hits_the_recursion_stop(algorithm):
    """No overtaking, U2 arriving while add(C) is pending: the schedule is
    del A, add C, del B, add A (via C -> A), del C, rederive... The derived
    add(A) reaches "the fact A that initiated the recursive derivation" while the
    wave deleting A is active, and "we stop the related processing": exactly one
    recursion stop under both algorithms, and the re-added A never appears.
    """
    m, trace = _run_order(algorithm, _alternate, 2)
    assert trace[:4] == ["del a(x)", "add c(x)", "del b(x)", "add a(x)"], trace
    assert m.stats.recursion_stops == 1, (m.stats, trace)
    assert set(m.facts()) == set()


@pytest.mark.parametrize("algorithm", FD)
def test_example1_recursion_stops_occur_in_some_schedules(algorithm):
    """Across all schedules of Example 1 the recursion stop is needed in some
    (observed: 24 of 105 complete schedules under fd-dred, 60 of 219 under
    fd-counting) and never leaves a fact behind."""
    out = Explorer(EX1, algorithm, set(), [([f("a")], []), ([], [f("a")])]).explore()
    assert_all_schedules(out, set())
    assert 0 < out.recursion_stops < out.schedules


# ---------------------------------------------------------------- Example 2
@pytest.mark.parametrize("algorithm", FD)
def test_example2_invalid_deletion_every_schedule(algorithm):
    """Example 2 (Invalid deletion), every schedule.

    "Suppose we extend the rules from Example 1 with a new rule D -> A. Moreover,
    assume that we start with a materialized dataset M = {A, B, C}. Given the
    following update U = ({D}, {A}) [...] due to the rule C -> A, this might
    cause the invalid deletion of the re-added A." Every schedule ends with A,
    B, C, D present.
    """
    check = (lambda m: check_counting(m, EX2)) if algorithm == "fd-counting" else None
    ex = Explorer(EX2, algorithm, {f("a")}, [([f("d")], [f("a")])], check=check)
    out = ex.explore()
    assert_all_schedules(out, fs("abcd"))


@pytest.mark.parametrize("algorithm", FD)
def test_example2_as_two_updates_every_schedule(algorithm):
    """Example 2 with the addition of D and the deletion of A as separate,
    overlapping updates, in both orders of arrival: still {A, B, C, D}."""
    for updates in ([([f("d")], []), ([], [f("a")])], [([], [f("a")]), ([f("d")], [])]):
        out = Explorer(EX2, algorithm, {f("a")}, updates).explore()
        assert_all_schedules(out, fs("abcd"))


# ---------------------------------------------------------------- Example 3
@pytest.mark.parametrize("algorithm", FD)
def test_example3_deletion_without_derivation_every_schedule(algorithm):
    """Example 3 (Deletion without derivation), every schedule.

    "Consider the following rules A -> B, A -> C, and D -> C. Assume we apply an
    update U1 = ({A, D}, {}) to an empty dataset. [...] suppose we simultaneously
    introduce another update U2 = ({}, {A}). [...] A was actually not used to
    derive C. Hence, the deletion of A should not influence C." Every schedule
    (U2 arriving at every point, in particular before A -> C was applied) ends
    with {C, D}; under fd-counting C has exactly one applied derivation (D -> C),
    "the count associated with a fact only represents the number of actually
    computed derivations".
    """
    check = (
        (lambda m: check_counting(m, EX3, {f("c"): 1, f("b"): 0}))
        if algorithm == "fd-counting"
        else None
    )
    ex = Explorer(EX3, algorithm, set(), [([f("a"), f("d")], []), ([], [f("a")])], check=check)
    out = ex.explore()
    assert_all_schedules(out, fs("cd"))
    if algorithm == "fd-counting":
        m = fresh(EX3, algorithm, set())
        m.update([f("a"), f("d")], [])
        m.update([], [f("a")])
        assert m.counters(f("c")) == (0, 1)


# ---------------------------------------------------------------- Example 4
@pytest.mark.parametrize("algorithm", FD)
def test_example4_duplicate_derivation_every_schedule(algorithm):
    """Example 4 (Duplicate derivation), every schedule.

    "Consider the rules A -> B and A -> C. Assume we apply an update U1 = ({},
    {A}) to a materialized dataset M = {A, B, C} [...] suppose we simultaneously
    introduce another update U2 = ({A}, {}). [...] this new A may also be used to
    derive another C, even though C was not removed by the deletion. Accordingly,
    the derivation A -> C would be applied twice here." Every schedule ends with
    {A, B, C}; under fd-counting B and C each have exactly one applied
    derivation: no duplicate, none lost.
    """
    check = (
        (lambda m: check_counting(m, EX4, {f("b"): 1, f("c"): 1}))
        if algorithm == "fd-counting"
        else None
    )
    ex = Explorer(EX4, algorithm, {f("a")}, [([], [f("a")]), ([f("a")], [])], check=check)
    out = ex.explore()
    assert_all_schedules(out, fs("abc"))


# ---------------------------------------------------------------- order of updates
ORDER_CASES = {
    # U1 adds F, U2 deletes F, U3 adds F again
    "explicit-only": ("b(x) :- a(x). c(x) :- b(x).", set(), ["+a", "-a", "+a"]),
    "add-del-add-derived": ("b(x) :- a(x). c(x) :- b(x).", {f("a")}, ["+b", "-b", "+b"]),
    "del-add-del": ("b(x) :- a(x). c(x) :- b(x).", {f("a")}, ["-a", "+a", "-a"]),
    "recursive": (EX1, set(), ["+a", "-a", "+a"]),
    "recursive-derived": (EX1, {f("a")}, ["+b", "-a", "-b"]),
    "recursive-del-add": (EX1, {f("a")}, ["-a", "+a"]),
    "negation": ("b(x) :- a(x). c(x) :- d(x), not b(x).", {f("d")}, ["+a", "-a", "+a"]),
}


def _ops(spec):
    out = []
    for s in spec:
        out.append(([f(s[1])], []) if s[0] == "+" else ([], [f(s[1])]))
    return out


# ~1 minute: only with FLUXMAT_FD_EXHAUSTIVE=1
SLOW_ORDER_CASES = {"recursive-del-add-del": (EX1, {f("a")}, ["-a", "+a", "-a"])}
ORDER_PARAMS = [pytest.param(c, id=c) for c in sorted(ORDER_CASES)] + [
    pytest.param(
        c,
        id=c,
        marks=[
            pytest.mark.slow,
            pytest.mark.skipif(
                not os.environ.get("FLUXMAT_FD_EXHAUSTIVE"), reason="set FLUXMAT_FD_EXHAUSTIVE=1"
            ),
        ],
    )
    for c in sorted(SLOW_ORDER_CASES)
]


@pytest.mark.parametrize("algorithm", FD)
@pytest.mark.parametrize("case", ORDER_PARAMS)
def test_order_of_updates_every_schedule(algorithm, case):
    """The order of updates is respected.

    "the order of the updates in the sequence is still taken into account despite
    the overlapping, which is relevant if E_i^+ n E_j^- != {}" and "a new
    explicitly introduced operation is not canceled by an old, outdated one."
    Three overlapping updates on the same fact, every schedule: the explicit
    facts end as E_3 and the materialisation as sequential application.
    """
    program, initial, spec = {**ORDER_CASES, **SLOW_ORDER_CASES}[case]
    ex = Explorer(program, algorithm, initial, _ops(spec))
    out = ex.explore()
    assert_all_schedules(out, set(ex.mats[-1]))


@pytest.mark.parametrize("algorithm", FD)
def test_order_of_updates_random_interleavings(algorithm):
    """Random interleavings (seeded scheduler, random budgets between submits) of
    alternating add/delete of the same facts: after quiescence E equals E_n and
    the materialisation equals sequential application."""
    program = EX2 + " e(x) :- b(x), not d(x)."
    rng = random.Random(7)
    for trial in range(300):
        initial = {f(p) for p in "ad" if rng.random() < 0.5}
        updates = []
        for _ in range(rng.randint(2, 7)):
            p = rng.choice("abcd")
            updates.append(([f(p)], []) if rng.random() < 0.5 else ([], [f(p)]))
        m = fresh(program, algorithm, initial)
        m.configure(seed=trial)
        for i, (add, delete) in enumerate(updates, 1):
            m.submit(add, delete, id=i)
            m.step(rng.randint(0, 4))
        m.run(max_units=2000)
        E = apply_seq(initial, updates)[-1]
        where = f"trial {trial}: initial {sorted(initial)}, updates {updates}"
        assert set(m.explicit()) == set(E), where
        assert set(m.facts()) == remat(program, E), where


# ---------------------------------------------------------------- consistency points
@pytest.mark.parametrize("algorithm", FD)
def test_consistency_points_scripted(algorithm):
    """A consistency point is "a quiescent state: it equals mat(P, E) after update
    `seq`": poll() is None while work is pending, and after quiescence returns
    exactly the delta since the previous point, `through` naming the last update."""
    m = fresh(EX2, algorithm, set())
    snap = set(m.facts())
    m.submit([f("a")], [], id="u1")
    assert not m.quiescent and m.pending > 0
    assert m.poll() is None
    m.step(1)
    m.submit([], [f("a")], id="u2")
    m.submit([f("d")], [], id="u3")
    assert m.poll() is None
    m.run(max_units=MAX_UNITS)
    point = m.poll()
    now = set(m.facts())
    assert point is not None and point.through == "u3"
    assert set(point.added) == now - snap and set(point.removed) == snap - now
    assert len(point.added) == len(set(point.added)) and len(point.removed) == len(set(point.removed))
    again = m.poll()
    assert again is not None and (again.added, again.removed) == ([], [])
    assert again.through == "u3"
    m.submit([], [f("d")], id="u4")
    m.run(max_units=MAX_UNITS)
    point = m.poll()
    assert point.through == "u4"
    assert set(point.removed) == fs("abcd") and point.added == []
    assert set(m.facts()) == set()


@pytest.mark.parametrize("algorithm", FD)
def test_consistency_points_random(algorithm):
    """Random submits and steps; poll whenever quiescent: each delta is exactly
    the set difference against the previous point, and `through` is the id of the
    last submitted update; while pending, poll() is None."""
    program = EX2 + " e(x) :- b(x), not d(x)."
    rng = random.Random(11)
    for trial in range(200):
        m = fresh(program, algorithm, {f("a")})
        m.configure(seed=trial)
        snap = set(m.facts())
        last = None
        E = {f("a")}
        for i in range(rng.randint(1, 8)):
            p = rng.choice("abcde")
            add, delete = ([f(p)], []) if rng.random() < 0.5 else ([], [f(p)])
            m.submit(add, delete, id=f"t{trial}u{i}")
            E = (E - set(delete)) | set(add)
            last = f"t{trial}u{i}"
            m.step(rng.randint(0, 3))
            point = m.poll()
            if not m.quiescent:
                assert point is None
                continue
            now = set(m.facts())
            assert now == remat(program, E)
            assert point.through == last
            assert set(point.added) == now - snap, (trial, i)
            assert set(point.removed) == snap - now, (trial, i)
            snap = now
        m.run(max_units=MAX_UNITS)
        point = m.poll()
        now = set(m.facts())
        assert point.through == last
        assert set(point.added) == now - snap and set(point.removed) == snap - now
        assert now == remat(program, E)


def test_sequential_schedule_every_example():
    """`configure(interleaved=False)`: an update waits until the previous one is
    processed; the examples' update sequences still end in mat(P, E_n)."""
    cases = [
        (EX1, set(), [([f("a")], []), ([], [f("a")])]),
        (EX2, {f("a")}, [([f("d")], [f("a")])]),
        (EX3, set(), [([f("a"), f("d")], []), ([], [f("a")])]),
        (EX4, {f("a")}, [([], [f("a")]), ([f("a")], [])]),
    ]
    for algorithm in FD:
        for program, initial, updates in cases:
            m = fresh(program, algorithm, initial)
            m.configure(interleaved=False)
            for add, delete in updates:
                m.submit(add, delete)
                assert m.pending >= 0
            m.run(max_units=MAX_UNITS)
            assert set(m.facts()) == remat(program, apply_seq(initial, updates)[-1])


@pytest.mark.parametrize("algorithm", FD)
def test_exploration_memo_is_exact_on_example1(algorithm):
    """Self-check of the explorer: reusing results of equal states gives the same
    schedule count, longest schedule, recursion-stop count and finals as the
    plain tree search that replays every prefix."""
    args = (EX1, algorithm, set(), [([f("a")], []), ([], [f("a")])])
    a, b = Explorer(*args, memo=True).explore(), Explorer(*args, memo=False).explore()
    assert (a.schedules, a.longest, a.recursion_stops, a.finals) == (
        b.schedules, b.longest, b.recursion_stops, b.finals,
    )  # fmt: skip
    assert b.replays == b.states > a.states


@pytest.mark.parametrize("algorithm", FD)
def test_sequential_schedule_respects_update_order(algorithm):
    """Sequential schedule, U2 deletes C and U3 re-adds it while U1 still has
    work: U2 and U3 wait, and must then apply in order ("the result of fully
    dynamic updates has to be the same as for strictly consecutive ones"), so
    C is present at the end. (Found by test_fd_properties.)"""
    m = fresh("b(x) :- a(x).", algorithm, {f("a"), f("c")})
    m.configure(interleaved=False)
    m.submit([], [f("a")], id="U1")
    m.submit([], [f("c")], id="U2")
    m.submit([f("c")], [], id="U3")
    m.run(max_units=MAX_UNITS)
    assert set(m.explicit()) == {f("c")}
    assert set(m.facts()) == {f("c")}
