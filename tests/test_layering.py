"""DESIGN.md section 2: engine/ imports no Spark, Kafka or Redis (and nothing above it)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = ("pyspark", "kafka", "redis", "connectors", "stream", "ops")


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
    return out


ENGINE_FILES = sorted((ROOT / "engine").rglob("*.py"))


def test_engine_has_files():
    assert len(ENGINE_FILES) >= 5


@pytest.mark.parametrize("path", ENGINE_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_engine_imports_no_infrastructure(path):
    bad = [m for m in _imports(path) if m.split(".")[0] in FORBIDDEN]
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def test_detector_catches_a_forbidden_import(tmp_path):
    f = tmp_path / "x.py"
    f.write_text("import redis\nfrom pyspark.sql import SparkSession\n")
    assert [m for m in _imports(f) if m.split(".")[0] in FORBIDDEN] == ["redis", "pyspark.sql"]
