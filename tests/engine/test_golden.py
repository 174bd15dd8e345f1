"""Golden corpus: every program in tests/golden/<group>/<name>.dl, in every mode.

Adding a case adds files, not code (as in Nemo's and Soufflé's test corpora):

* `<group>/<name>.dl` is a program with its explicit facts inline and
  `<name>.out` the expected materialisation exactly as `fluxmat materialise`
  prints it (one fact per line, sorted). Each `.out` was worked out by hand.
* `errors/<kind>_<name>.dl` with `<kind>_<name>.err` holds the exact message
  (`str(exc)`) of the `ParseError` (kind `parse`) or `AnalysisError` (kind
  `analysis`) raised when the file is loaded under the source name `<name>.dl`.
* A program containing the comment `% golden: no-noise` is maintained only
  over its own facts; otherwise the incremental runs also add and delete random
  "noise" facts (argument values recombined from the program's facts of the
  same predicate) that are gone again at the end.

Every non-error case runs under every algorithm (a) from scratch and (b)
incrementally: from a seeded random subset of its facts through random batches
of additions and deletions (with deletions of facts that are re-added later and
no-op additions/deletions) to exactly the program's facts. After each batch the
result is compared with a fresh `remat` load of the current explicit facts (the
oracle, as differential dataflow's tests/bfs.rs does); at the end it must equal
`.out`. Algorithms that keep counters must end each batch with the counters a
fresh load would compute (Hu et al. 2018, Theorem 1). The objects core's
counting is not applicable to recursive programs and must refuse them. Every
case runs on the arrays core (the default) and on the objects core (the
reference; `make test-fast` runs the arrays core only). `make test` runs two
seeded update sequences of 15 batches per case and mode, `make test-fast` the
first 5 batches of the first of them (FLUXMAT_TEST_PROFILE=fast,
tests/support/profile.py).

The algorithms with tc/stc modules (Hu, Motik & Horrocks 2019) -- remat and
dredc -- run twice: with modules (the default, mode `<algorithm>`) and with
generic evaluation only (mode `<algorithm>/generic`). The oracle is always
generic remat; counters are compared with a fresh load in the same mode.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from fluxmat.engine import (
    ALGORITHMS,
    AlgorithmError,
    AnalysisError,
    EngineOptions,
    ParseError,
    Reasoner,
)
from tests.support import profile

GOLDEN = Path(__file__).parent.parent / "golden"
ERRORS = GOLDEN / "errors"
NO_NOISE = "% golden: no-noise"
BATCHES = profile.pick(ci=15, fast=5)  # random update batches before the final one
SEEDS = profile.pick(ci=(0, 1), fast=(0,))  # random update sequences per case and mode
ERROR_KINDS = {"parse": ParseError, "analysis": AnalysisError}
CORES = profile.pick(ci=("arrays", "objects"), fast=("arrays",))  # the default core; the reference core too


def _cases() -> list[Path]:
    return sorted(p for p in GOLDEN.glob("*/*.dl") if p.parent != ERRORS)


def _error_cases() -> list[Path]:
    return sorted(ERRORS.glob("*.err"))


def _case_id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


def _expected(path: Path) -> list[str]:
    return path.with_suffix(".out").read_text(encoding="utf-8").splitlines()


MODES = [(a, True) for a in sorted(ALGORITHMS)] + [
    (a, False) for a in sorted(ALGORITHMS) if ALGORITHMS[a].supports_modules
]


def _mode_id(mode: tuple[str, bool]) -> str:
    return mode[0] if mode[1] else f"{mode[0]}/generic"


def _reasoner(path: Path, algorithm: str, modules: bool = True, core: str = "objects") -> Reasoner:
    return Reasoner.from_text(
        path.read_text(encoding="utf-8"), algorithm, source=path.name, modules=modules,
        options=EngineOptions(core=core),
    )


def _is_recursive(path: Path) -> bool:
    return _reasoner(path, "remat").analysis.is_recursive


def _key(fact: tuple) -> str:
    return repr(fact)


def _noise(rng: random.Random, target: list[tuple], count: int) -> list[tuple]:
    """Facts not in `target`, each recombining argument values of one predicate."""
    by_pred: dict[str, list[tuple]] = {}
    for f in target:
        by_pred.setdefault(f[0], []).append(f)
    preds = sorted(p for p, fs in by_pred.items() if len(fs[0]) > 1)
    have = set(target)
    out: list[tuple] = []
    for _ in range(count * 10):
        if not preds or len(out) >= count:
            break
        facts = by_pred[rng.choice(preds)]
        fact = (facts[0][0], *(rng.choice(facts)[i] for i in range(1, len(facts[0]))))
        if fact not in have:
            have.add(fact)
            out.append(fact)
    return out


def _oracle_lines(reasoner: Reasoner, explicit: set[tuple]) -> list[str]:
    oracle = Reasoner(reasoner.program, "remat", modules=False, options=EngineOptions(core="objects"))
    oracle.maintainer.load(sorted(explicit, key=_key))
    return oracle.lines()


def _counters(reasoner: Reasoner) -> dict[tuple, tuple[int, int]]:
    m = reasoner.maintainer
    return {f: m.counters(f) for f in m.facts(include_internal=True)}


def _check_counters(reasoner: Reasoner, explicit: set[tuple], where: str) -> None:
    """Counters stay compatible with P and E (Hu et al. 2018, Theorem 1): equal to a fresh load's."""
    m = reasoner.maintainer
    if reasoner.core != "objects" or not (m.counts_nonrecursive or m.counts_recursive):
        return  # the arrays core's counters are checked by tests/engine/test_compact_*.py
    fresh = Reasoner(reasoner.program, m.name, modules=m.uses_modules, options=reasoner.options)
    fresh.maintainer.load(sorted(explicit, key=_key))
    assert _counters(reasoner) == _counters(fresh), where


def _random_batch(rng, current: set[tuple], universe: list[tuple], force_delete: bool):
    present = sorted(current, key=_key)
    absent = [f for f in universe if f not in current]
    add = rng.sample(absent, min(len(absent), rng.randint(0, 3)))
    delete = rng.sample(present, min(len(present), rng.randint(1 if force_delete else 0, 3)))
    noop_add = [f for f in present if f not in delete]
    noop_del = [f for f in absent if f not in add]
    extra_add = [rng.choice(noop_add)] if noop_add and rng.random() < 0.3 else []
    extra_del = [rng.choice(noop_del)] if noop_del and rng.random() < 0.3 else []
    return add + extra_add, delete + extra_del, len(extra_add), len(extra_del)


# --------------------------------------------------------------------------- the corpus


def test_corpus_is_complete():
    cases = _cases()
    assert len(cases) >= 20
    groups = {p.parent.name for p in cases}
    assert {"basics", "recursion", "negation", "builtins", "rdfox"} <= groups
    for dl in cases:
        assert dl.with_suffix(".out").is_file(), f"{dl} has no .out"
    for out in GOLDEN.glob("*/*.out"):
        assert out.with_suffix(".dl").is_file(), f"{out} has no .dl"
    for err in _error_cases():
        assert err.with_suffix(".dl").is_file(), f"{err} has no .dl"
        assert err.stem.split("_")[0] in ERROR_KINDS, f"{err}: unknown error kind"
    kinds = {e.stem.split("_")[0] for e in _error_cases()}
    assert kinds == set(ERROR_KINDS)


@pytest.mark.parametrize("core", CORES)
@pytest.mark.parametrize("mode", MODES, ids=_mode_id)
@pytest.mark.parametrize("case", _cases(), ids=_case_id)
def test_from_scratch(case: Path, mode: tuple[str, bool], core: str):
    """mat(P, E) computed by `load` equals the hand-written `.out`."""
    algorithm, modules = mode
    if algorithm == "counting" and core == "objects" and _is_recursive(case):
        with pytest.raises(AlgorithmError, match="recursive"):
            _reasoner(case, algorithm)
        return  # (the arrays core's counting runs DRed^c for recursive components)
    reasoner = _reasoner(case, algorithm, modules, core)
    reasoner.load()
    assert reasoner.lines() == _expected(case)


@pytest.mark.parametrize("core", CORES)
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("mode", MODES, ids=_mode_id)
@pytest.mark.parametrize("case", _cases(), ids=_case_id)
def test_incremental(case: Path, mode: tuple[str, bool], seed: int, core: str):
    """Random update batches, checked against remat after each; ends at `.out`."""
    algorithm, modules = mode
    if algorithm == "counting" and core == "objects" and _is_recursive(case):
        pytest.skip("counting refuses recursive programs (checked in test_from_scratch)")
    text = case.read_text(encoding="utf-8")
    rng = random.Random(f"{_case_id(case)}:{algorithm}:{seed}")
    reasoner = _reasoner(case, algorithm, modules, core)
    target = sorted(set(reasoner.program_facts()), key=_key)
    noise = [] if NO_NOISE in text else _noise(rng, target, max(2, len(target) // 2))
    universe = target + noise

    current = set(rng.sample(target, rng.randint(0, len(target))))
    current |= set(rng.sample(noise, min(len(noise), 2)))
    reasoner.maintainer.load(sorted(current, key=_key))  # bypasses the program's own facts
    assert reasoner.lines() == _oracle_lines(reasoner, current), "initial load"

    history = []
    for step in range(BATCHES):
        add, delete, noop_adds, noop_dels = _random_batch(rng, current, universe, step == 0)
        history.append((add, delete))
        report = reasoner.update(add, delete)
        current = (current - set(delete)) | set(add)
        where = f"after batch {step + 1}: {history}"
        assert (report.noop_adds, report.noop_deletes) == (noop_adds, noop_dels), where
        assert set(reasoner.maintainer.explicit()) == current, where
        assert reasoner.lines() == _oracle_lines(reasoner, current), where
        _check_counters(reasoner, current, where)

    add = sorted(set(target) - current, key=_key)
    delete = sorted(current - set(target), key=_key)
    reasoner.update(add, delete)
    history.append((add, delete))
    assert set(reasoner.maintainer.explicit()) == set(target)
    assert reasoner.lines() == _expected(case), f"final, after {history}"
    _check_counters(reasoner, set(target), "final")


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("err", _error_cases(), ids=lambda p: p.stem)
def test_error_message(err: Path):
    """The exact `file:line:col: message` text, raised before anything runs."""
    dl = err.with_suffix(".dl")
    kind = ERROR_KINDS[err.stem.split("_")[0]]
    with pytest.raises(kind) as info:
        Reasoner.from_text(dl.read_text(encoding="utf-8"), "remat", source=dl.name)
    assert str(info.value).rstrip() == err.read_text(encoding="utf-8").rstrip()
    assert str(info.value).startswith(f"{dl.name}:")
