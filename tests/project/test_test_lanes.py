"""The test lanes' own machinery: which modules a unit lane leaves unimported, and no stray subprocesses."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import conftest
from tests.support.cli import Reaper

TESTS = Path(__file__).resolve().parent.parent


def _config(markexpr: str) -> SimpleNamespace:
    return SimpleNamespace(option=SimpleNamespace(markexpr=markexpr))


@pytest.mark.parametrize(
    ("markexpr", "imports"),
    [("not integration and not heavy", False), ("not integration", False),
     ("integration and not alone", True), ("integration and alone", True), ("", True),
     ("slow or not slow", True), ("heavy", True), ("not heavy", True)],
)  # fmt: skip
def test_a_unit_lane_does_not_import_the_integration_modules(markexpr, imports):
    path = TESTS / "stream" / "test_pipeline.py"
    ignored = conftest.pytest_ignore_collect(path, _config(markexpr))
    assert ignored is (None if imports else True)
    assert conftest.pytest_ignore_collect(TESTS / "engine" / "test_golden.py", _config(markexpr)) is None


def test_every_integration_module_exists():
    """A name in INTEGRATION_MODULES that matches no file would mark nothing (a typo)."""
    stems = {p.stem for p in TESTS.rglob("test_*.py")}
    assert conftest.INTEGRATION_MODULES <= stems, sorted(conftest.INTEGRATION_MODULES - stems)


def test_the_reaper_kills_what_a_failed_test_left_running():
    with pytest.raises(subprocess.TimeoutExpired), Reaper() as reap:
        proc = reap(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE))  # fmt: skip
        proc.communicate(timeout=0.5)  # as a test whose process never finishes
    assert proc.returncode is not None, "still running after the test"
    assert proc.stdout.closed and proc.stderr.closed


def test_property_tests_scale_their_example_counts_with_the_profile():
    """A bare number as max_examples would run as many examples in `make test-fast`: `examples(n)` scales it."""
    bare = [
        f"{p.relative_to(TESTS)}:{n}"
        for p in TESTS.rglob("test_*.py")
        if "benchmarks" not in p.parts
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"max_examples=\d", line)
    ]
    assert not bare, bare
