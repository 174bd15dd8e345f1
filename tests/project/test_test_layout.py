"""The tests' own layout: test modules live in a layer's folder and share helpers only through tests/support."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
TESTS = ROOT / "tests"
LAYERS = ("engine", "connectors", "stream", "ops", "client", "project")


def all_test_modules() -> list[Path]:
    return sorted(
        p for p in TESTS.rglob("test_*.py") if "benchmarks" not in p.relative_to(TESTS).parts
    )


def imported_test_modules(path: Path) -> list[str]:
    """The test modules (`tests.<...>.test_*`) a file imports, at any depth."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += [
        n.module
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and n.module and n.level == 0
    ]
    return [m for m in names if m.startswith("tests.") and m.rpartition(".")[2].startswith("test_")]


def test_every_test_module_is_in_a_layer_folder():
    misplaced = [
        str(p.relative_to(ROOT)) for p in all_test_modules() if p.parent.name not in LAYERS
    ]
    assert misplaced == [], f"move these into tests/<layer>/ ({', '.join(LAYERS)}): {misplaced}"


def test_no_test_module_imports_another():
    files = all_test_modules() + sorted((TESTS / "support").glob("*.py")) + [TESTS / "conftest.py"]
    found = {str(p.relative_to(ROOT)): imported_test_modules(p) for p in files}
    assert {f: m for f, m in found.items() if m} == {}, "put what they share into tests/support"


def test_the_import_check_sees_an_import_of_a_test_module(tmp_path):
    sample = tmp_path / "test_sample.py"
    sample.write_text(
        "import os\nfrom tests.engine.test_corpus import CORPUS\nfrom tests.support import gen\n"
    )
    assert imported_test_modules(sample) == ["tests.engine.test_corpus"]
