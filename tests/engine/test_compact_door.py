"""The arrays core through the door: golden programs, LUBM, refusals, the CLI, numba's cache.

* Golden programs (tests/golden) the arrays core supports: `load` prints the
  hand-written `.out`; random update batches (with re-adds and no-ops) end
  each batch equal to a from-scratch `remat` of the explicit facts.
* LUBM (tests/data/illich-glimm/programs/lubm.dlog over generated data, as the
  bake-off runs it): load and netted update batches equal to `remat`.
* What the arrays core cannot do yet is refused with an `AlgorithmError`
  naming it, and by the CLI with one `fluxmat: error:` line, never a traceback.
* numba's cache: a folder is chosen when no default one is writable; each
  kernel is compiled once per process (one signature each).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from fluxmat.engine import (
    ALGORITHMS,
    AlgorithmError,
    EngineOptions,
    FluxmatError,
    Limits,
    Reasoner,
    WorkLimitExceeded,
)
from fluxmat.engine.algorithms import EQUALITY_ALGORITHMS
from fluxmat.engine.compact.maintainer import unsupported
from fluxmat.engine.limits import FactLimitExceeded
from fluxmat.engine.parser import parse_pattern
from tests.support.cli import fluxmat, ok, write
from tests.support.shared import PROGRAMS

GOLDEN = Path(__file__).parent.parent / "golden"


def _arrays(text: str, algorithm: str = "dredc", source: str = "<test>", **kw) -> Reasoner:
    return Reasoner.from_text(
        text, source=source, options=EngineOptions(algorithm, core="arrays", **kw)
    )


def _remat(program, explicit) -> set[tuple]:
    oracle = Reasoner(program, options=EngineOptions("remat", modules=False, core="objects"))
    oracle.maintainer.load(explicit)  # exactly these explicit facts (not the program's own)
    return oracle.facts()


def _supported(path: Path) -> bool:
    try:
        _arrays(path.read_text(encoding="utf-8"), source=path.name)
    except AlgorithmError:  # what the arrays core refuses (see test_refusals_...)
        return False
    return True


def _golden() -> list[Path]:
    cases = sorted(p for p in GOLDEN.glob("*/*.dl") if p.parent.name != "errors")
    return [p for p in cases if _supported(p)]


@pytest.mark.parametrize("algorithm", ["dredc", "bf"])
@pytest.mark.parametrize("case", _golden(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_golden_from_scratch_and_incremental(case: Path, algorithm: str):
    text = case.read_text(encoding="utf-8")
    r = _arrays(text, algorithm, source=case.name)
    r.load()
    assert r.lines() == case.with_suffix(".out").read_text(encoding="utf-8").splitlines()
    rng = random.Random(case.stem)
    target = sorted(set(r.program_facts()), key=repr)
    current = set(rng.sample(target, len(target) // 2))
    r.maintainer.load(sorted(current, key=repr))
    for step in range(12):
        add = rng.sample(target, min(len(target), rng.randint(0, 3)))
        delete = [
            f for f in rng.sample(target, min(len(target), rng.randint(0, 3))) if f not in add
        ]
        r.update(add, delete)
        current = (current - set(delete)) | set(add)
        assert r.facts() == _remat(r.program, sorted(current, key=repr)), (
            f"{case.name}: batch {step + 1}"
        )
    r.update([f for f in target if f not in current], [f for f in current if f not in target])
    assert r.lines() == case.with_suffix(".out").read_text(encoding="utf-8").splitlines()


def _lubm() -> tuple[str, list[tuple], object]:
    from fluxmat.engine import parse_program
    from tests.benchmarks.lubm_gen import generate
    from tests.benchmarks.pipeline import UpdateMaker

    text = (PROGRAMS / "lubm.dlog").read_text(encoding="utf-8")
    prefixes = dict(parse_program(text, "lubm.dlog").prefixes)
    data = generate(1, 1, prefixes=prefixes)
    maker = UpdateMaker(data, 200)
    return text, list(maker.initial), maker


def test_lubm_load_and_batches_equal_remat():
    """The bake-off's check, through the door: LUBM (one university, one department)."""
    text, initial, maker = _lubm()
    r = _arrays(text, "counting", source="lubm.dlog")
    r.load(initial)
    explicit = set(initial)
    assert r.facts() == _remat(r.program, explicit)
    for _ in range(3):
        adds, dels = {}, {}
        for _ in range(300):  # netted, as the bake-off gives a batch
            add, dele = maker.make(1, 1)
            for f in dele:
                adds.pop(f, None) if f in adds else dels.setdefault(f, None)
            for f in add:
                dels.pop(f, None) if f in dels else adds.setdefault(f, None)
        r.update(list(adds), list(dels))
        explicit = (explicit - set(dels)) | set(adds)
        assert r.explicit() == explicit
        assert r.facts() == _remat(r.program, explicit)


def test_match_and_sizes_through_the_door():
    text = "path(X, Y) :- edge(X, Y).\npath(X, Z) :- path(X, Y), edge(Y, Z).\n"
    facts = [("edge", "a", "b"), ("edge", "b", "a"), ("edge", "b", 3)]
    arrays, objects = _arrays(text), Reasoner.from_text(text, options=EngineOptions(core="objects"))  # the oracle
    for r in (arrays, objects):
        r.load(facts)
    for pattern in ("path(a, X)", "path(X, X)", "path(X, 3)", "path(c, X)", "edge(X, Y)"):
        atom = parse_pattern(pattern)
        assert sorted(arrays.match(atom), key=repr) == sorted(objects.match(atom), key=repr), (
            pattern
        )
    sizes = arrays.sizes()
    assert sizes.pop("bytes") > 0
    assert sizes == objects.sizes() == {"facts": 9, "explicit": 3, "log": 0}


@pytest.mark.parametrize("equality", ["off", "rewrite"])
def test_every_algorithm_of_the_objects_core_runs(equality):
    """Nothing is refused by algorithm any more (`bf` runs engine.compact.bf); `unsupported` names what runs."""
    names = [a for a in ALGORITHMS if equality == "off" or a in EQUALITY_ALGORITHMS]
    for name in names:
        options = EngineOptions(name, core="arrays", equality=equality)
        r = Reasoner.from_text("p(X) :- q(X).", options=options)
        r.load([("q", 1)])
        assert ("p", 1) in r.facts(), name
    missing = unsupported(Reasoner.from_text("p(X) :- q(X).").analysis, "magic", "off")
    assert missing == "algorithm 'magic' (it runs bf, counting, dred, dredc, remat)"


def test_the_state_needs_a_fully_dynamic_algorithm():
    r = _arrays("p(X) :- q(X).")
    r.load([("q", 1)])
    for call in (r.export_changes, r.state_meta):  # fd-counting and fd-dred keep it (engine.compact.state)
        with pytest.raises(FluxmatError, match="needs a fully dynamic algorithm"):
            call()


def test_limits_apply():
    text = "path(X, Y) :- edge(X, Y).\npath(X, Z) :- path(X, Y), edge(Y, Z).\n"
    chain = [("edge", i, i + 1) for i in range(80)]
    r = _arrays(text, limits=Limits.of(facts=1000))
    with pytest.raises(FactLimitExceeded):
        r.load(chain)
    r = _arrays(text, limits=Limits.of(work=50))
    r.load(chain[1:])
    with pytest.raises(WorkLimitExceeded):
        r.update([chain[0]])


# ---------------------------------------------------------------- the CLI


def test_cli_core_flag_replays_like_objects(tmp_path):
    program = write(tmp_path / "p.dl", "path(X, Y) :- edge(X, Y).\npath(X, Z) :- path(X, Y), edge(Y, Z).\n"
                    "cut(X) :- edge(X, Y), not path(Y, X).\nedge(a, b). edge(b, c).\n")  # fmt: skip
    updates = write(tmp_path / "u.jsonl", '{"add": [["edge", "c", "a"]], "del": [["edge", "a", "b"]]}\n'
                    '{"add": [["edge", "a", "b"]]}\n')  # fmt: skip
    for algorithm in ("counting", "dredc", "bf", "fd-counting"):
        arrays = ok(
            fluxmat(
                "replay",
                program,
                "--updates",
                updates,
                "--algorithm",
                algorithm,
                "--core",
                "arrays",
            )
        )
        assert arrays == ok(
            fluxmat("replay", program, "--updates", updates, "--algorithm", "dredc")
        )
    assert ok(fluxmat("materialise", program, env={"FLUXMAT_CORE": "arrays"})) == ok(
        fluxmat("materialise", program)
    )


# ---------------------------------------------------------------- numba's cache


def _chosen_in_a_fresh_process(tmp_path, before: str = "") -> tuple[Path, str]:
    """choose_cache_dir where neither default folder is writable (after `before`); (the folder, stderr).

    The kernel it then compiles must be cached in the folder chosen.
    """
    script = (
        "import os, pathlib, tempfile\n"
        "import fluxmat.engine.compact.cache as c\n"
        f"tempfile.tempdir = {str(tmp_path)!r}\n"
        "c.HERE = pathlib.Path('/dev/null/site-packages')\n"
        f"{before}"
        "chosen = c.choose_cache_dir()\n"
        "import numpy as np\n"
        "from fluxmat.engine.compact import kernels as K\n"
        "K.revive(np.array([0], np.int64), np.zeros(1, np.uint8))\n"
        "print(chosen)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["XDG_CACHE_HOME"] = "/dev/null/cache"  # not creatable: neither default folder is writable
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    chosen = Path(proc.stdout.strip())
    assert chosen.parent == tmp_path and chosen.name.startswith("fluxmat-numba-")
    assert list(chosen.rglob("*.nbi")), "revive was not cached in the chosen folder"
    return chosen, proc.stderr


def test_cache_folder_chosen_when_nothing_default_is_writable(tmp_path):
    """A read-only install run by a user without a writable cache: NUMBA_CACHE_DIR is set, kernels cache there."""
    _chosen_in_a_fresh_process(tmp_path)
    assert not (tmp_path / "numba-cache").exists()


def test_cache_folder_left_alone_when_set(monkeypatch, tmp_path):
    from fluxmat.engine.compact import cache

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cache, "HERE", Path("/dev/null/x"))
    assert cache.choose_cache_dir() is None and os.environ["NUMBA_CACHE_DIR"] == str(tmp_path)


KERNELS_ONCE = """
from numba.core.registry import CPUDispatcher

from fluxmat.engine import EngineOptions, Reasoner
from fluxmat.engine.compact import kernels as K

text = ("s(X, Y) :- s(Y, X).\\ns(X, Z) :- s(X, Y), s(Y, Z).\\ns(X, Y) :- e(X, Y).\\n"
        "t(X, Z) :- t(X, Y), e(Y, Z).\\nt(X, Y) :- e(X, Y).\\nz :- t(X, X).\\n"
        "n(X) :- e(X, Y), not t(Y, X), not z.\\nc(X) :- e(X, 1), e(X, X).\\n")
r = Reasoner.from_text(text, options=EngineOptions("dredc", core="arrays"))
r.load([("e", 1, 2), ("e", 2, 1), ("e", 3, 3), ("e", "a", 1)])
r.update([("e", 2, 3), ("t", 5, 5)], [("e", 1, 2)])
kernels = {n: d for n, d in vars(K).items() if isinstance(d, CPUDispatcher)}
assert len(kernels) > 20, len(kernels)
many = {n: len(d.signatures) for n, d in kernels.items() if len(d.signatures) > 1}
assert many == {}, many
"""


def test_each_kernel_compiled_once():
    """In a fresh process, every kernel has one signature after the core ran every kind of rule (no recompiles).

    A fresh process: the test suite's other tests call the kernels too, and
    what they compiled is not this check's business.
    """
    done = subprocess.run([sys.executable, "-c", KERNELS_ONCE], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


def test_unwritable_cache_folder_set_by_the_user_is_dropped_with_a_warning(tmp_path):
    """NUMBA_CACHE_DIR that cannot be created: one warning line, and the kernels cache in the fallback folder."""
    before = "os.environ['NUMBA_CACHE_DIR'] = '/dev/null/numba'\n"
    chosen, stderr = _chosen_in_a_fresh_process(tmp_path, before)
    assert "NUMBA_CACHE_DIR=/dev/null/numba cannot be written" in stderr
    assert f"cached in {chosen} instead" in stderr
