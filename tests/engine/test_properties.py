"""Oracle property tests: every maintenance algorithm against plain rematerialisation.

As in differential dataflow's `tests/bfs.rs`: after the
initial load and after EVERY update of a random sequence, the incremental
materialisation must equal mat(P, E_n) computed from scratch by a fresh `remat`
maintainer over the current explicit facts E_n (never by the incremental remat
itself). The `Report` of each update must describe exactly the change of the
materialisation (internal `__` predicates excluded) and count the no-ops of the
update semantics in engine.maintainer. Programs and updates come from
tests/support/gen.py; on failure hypothesis prints the program text and the updates.

The algorithms with tc/stc modules (Hu, Motik & Horrocks 2019) run with modules
(mode `<algorithm>`) and without (`<algorithm>/generic`); the oracle is generic
remat. A further test draws only programs with a tc or stc module (mixed with
generic recursive rules and negation) and also checks DRed^c-MOD's counters.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, note, settings
from hypothesis import given as hgiven

from fluxmat.engine import ALGORITHMS, AlgorithmError, analyse, create, parse_program
from fluxmat.engine.algorithms import Maintainer, Report
from fluxmat.engine.fd import FullyDynamic
from tests.support.gen import GenProgram, apply_update, examples, scenarios

SETTINGS = settings(
    max_examples=examples(60),
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)


def visible(facts) -> set[tuple]:
    return {f for f in facts if not f[0].startswith("__")}


MODES = [(a, True) for a in sorted(ALGORITHMS)] + [
    (a, False) for a in sorted(ALGORITHMS) if ALGORITHMS[a].supports_modules
]


def _mode_id(mode: tuple[str, bool]) -> str:
    return mode[0] if mode[1] else f"{mode[0]}/generic"


def materialise(algorithm: str, text: str, explicit, modules: bool = False) -> set[tuple]:
    """mat(P, E) from scratch with a fresh maintainer (generic unless `modules`)."""
    m = create(algorithm, analyse(parse_program(text)), modules=modules)
    m.load(sorted(explicit, key=repr))
    return visible(m.facts())


def decoded(m: Maintainer, changes: dict) -> set[tuple]:
    return {m.decode(p, f) for p, fs in changes.items() for f in fs}


def start(algorithm: str, gp: GenProgram, modules: bool = True) -> Maintainer | None:
    """The maintainer for `algorithm`, or None when it rightly refuses the program."""
    analysis = analyse(parse_program(gp.text))
    if algorithm == "counting" and analysis.is_recursive:
        with pytest.raises(AlgorithmError, match="recursive"):
            create(algorithm, analysis)
        return None
    return create(algorithm, analysis, modules=modules)


def explain(gp: GenProgram, initial, updates) -> None:
    note(f"program:\n{gp.text}")
    note(f"initial facts: {sorted(initial, key=repr)}")
    for i, (add, delete) in enumerate(updates, 1):
        note(f"update {i}: add={add} delete={delete}")


def check_report(m: Maintainer, report: Report, before: set, after: set, where: str) -> None:
    added, removed = decoded(m, report.added_facts), decoded(m, report.removed_facts)
    assert not any(p.startswith("__") for p in [*report.added_facts, *report.removed_facts]), where
    assert added == after - before, f"{where}: Report.added_facts"
    assert removed == before - after, f"{where}: Report.removed_facts"
    assert report.added == len(after - before), f"{where}: Report.added"
    assert report.removed == len(before - after), f"{where}: Report.removed"


@pytest.mark.parametrize("mode", MODES, ids=_mode_id)
@SETTINGS
@hgiven(case=scenarios())
def test_incremental_equals_fresh_remat_after_every_update(mode, case):
    algorithm, modules = mode
    gp, initial, updates = case
    explain(gp, initial, updates)
    m = start(algorithm, gp, modules)
    if m is None:
        return
    report = m.load(sorted(initial, key=repr))
    got = visible(m.facts())
    assert got == materialise("remat", gp.text, initial), "after load"
    assert report.added == len(got), "load Report.added"

    explicit = frozenset(initial)
    for i, (add, delete) in enumerate(updates, 1):
        before = got
        report = m.update(add, delete)
        noop_adds = len(set(add) & explicit)
        noop_deletes = len(set(delete) - explicit)
        explicit = apply_update(explicit, add, delete)
        got = visible(m.facts())
        expected = materialise("remat", gp.text, explicit)
        note(f"after update {i}: missing={sorted(expected - got, key=repr)} "
             f"unexpected={sorted(got - expected, key=repr)}")  # fmt: skip
        assert got == expected, f"update {i}: materialisation differs from remat of E_{i}"
        assert set(m.explicit()) == explicit, f"update {i}: explicit facts"
        check_report(m, report, before, got, f"update {i}")
        assert (report.noop_adds, report.noop_deletes) == (noop_adds, noop_deletes), (
            f"update {i}: no-op counts"
        )


@pytest.mark.parametrize("mode", MODES, ids=_mode_id)
@SETTINGS
@hgiven(case=scenarios())
def test_update_equals_from_scratch_load_with_same_algorithm(mode, case):
    algorithm, modules = mode
    gp, initial, updates = case
    explain(gp, initial, updates)
    m = start(algorithm, gp, modules)
    if m is None:
        return
    m.load(sorted(initial, key=repr))
    explicit = frozenset(initial)
    for i, (add, delete) in enumerate(updates, 1):
        m.update(add, delete)
        explicit = apply_update(explicit, add, delete)
        got = visible(m.facts())
        assert got == materialise(algorithm, gp.text, explicit, modules), (
            f"update {i}: {algorithm} incremental differs from {algorithm} load of E_{i}"
        )


@SETTINGS
@hgiven(case=scenarios(recursion=False))
def test_counting_runs_on_nonrecursive_programs(case):
    """The generator's recursion=False programs really are non-recursive (counting applies)."""
    gp, _, _ = case
    assert not analyse(parse_program(gp.text)).is_recursive


def counters(m: Maintainer) -> dict[tuple, tuple[int, int]]:
    return {f: m.counters(f) for f in m.facts(include_internal=True)}


@pytest.mark.parametrize(
    "algorithm",
    [
        a for a, cls in sorted(ALGORITHMS.items())
        if cls.supports_modules and not issubclass(cls, FullyDynamic)
    ],
)  # the fully dynamic algorithms' tc/stc modules (R's stratum R alone): tests/engine/test_fd_properties.py
@SETTINGS
@hgiven(case=scenarios(closure=True))
def test_modules_equal_generic_evaluation(algorithm, case):
    """Theorems 4 and 8 (Hu, Motik & Horrocks 2019): MAT-MOD and DRed^c-MOD compute
    mat(P, E_i) after every update, and the counters (C_nr; C_r of the generic
    recursive rules) equal those of a fresh load with modules."""
    gp, initial, updates = case
    explain(gp, initial, updates)
    analysis = analyse(parse_program(gp.text))
    assert analysis.modules, "closure=True programs have a tc or stc module"
    m = create(algorithm, analysis)
    assert m.uses_modules
    m.load(sorted(initial, key=repr))
    assert visible(m.facts()) == materialise("remat", gp.text, initial), "after load"
    explicit = frozenset(initial)
    for i, (add, delete) in enumerate(updates, 1):
        m.update(add, delete)
        explicit = apply_update(explicit, add, delete)
        assert visible(m.facts()) == materialise("remat", gp.text, explicit), f"update {i}"
        fresh = create(algorithm, analysis)
        fresh.load(sorted(explicit, key=repr))
        assert counters(m) == counters(fresh), f"update {i}: counters differ from a fresh load"
