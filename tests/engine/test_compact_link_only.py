"""numba functions without an entry point are link-only (engine.compact.link_only).

Such a function is optimised and compiled to machine code only inside the
entry points that call it: its own library stays linked but not compiled,
the entry point's result is right, an exception raised deep inside still
reaches Python, and an entry point written to numba's cache loads and runs
in a fresh process (its cache entry holds the inner functions' code).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fluxmat.engine.compact import link_only
from tests.support import link_only_funcs as F

ROOT = Path(__file__).resolve().parents[2]


def _library(dispatcher):
    (cres,) = dispatcher.overloads.values()
    return cres.library


def test_inner_functions_are_not_compiled_on_their_own():
    assert link_only.install()
    assert F.outer_uncached(4) == 2 * (1 + 2 + 3 + 4)
    assert link_only.is_deferred(_library(F.inner))
    assert link_only.is_deferred(_library(F.middle))
    assert not link_only.is_deferred(_library(F.outer_uncached))


def test_a_cfunc_wrapper_alone_is_no_entry_point():
    assert link_only.install()
    assert F.outer_overload_like(3) == 4
    assert link_only.is_deferred(_library(F.overload_like))
    assert not link_only.is_deferred(_library(F.outer_overload_like))


def test_a_cfunc_runs_its_own_machine_code():
    assert link_only.install()
    assert F.as_cfunc.address != 0
    assert F.as_cfunc.ctypes(4) == 2 * (0 + 1 + 2 + 3) + 4


def test_an_exception_from_linked_code_reaches_python():
    with pytest.raises(ValueError, match="negative value"):
        F.outer_neg(3)


def _run(code: str, cache: Path, **env) -> str:
    full = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT), **env}
    out = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True,
                         cwd=ROOT, check=True)  # fmt: skip
    return out.stdout.split()


def test_a_cached_entry_point_runs_in_a_fresh_process(tmp_path):
    code = ("from tests.support.link_only_funcs import outer; "
            "print(outer(6), outer.stats.cache_hits.most_common(1)[0][1] if outer.stats.cache_hits "
            "else 0)")  # fmt: skip
    assert _run(code, tmp_path) == ["30", "0"]  # compiled and written to the cache
    assert _run(code, tmp_path) == ["30", "1"]  # loaded from it


def test_turned_off_by_the_environment(tmp_path):
    code = "from fluxmat.engine.compact import link_only; print(link_only.install())"
    assert _run(code, tmp_path, FLUXMAT_NUMBA_LINK_ONLY="0") == ["False"]
