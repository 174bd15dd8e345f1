"""The deployment files (docker/, ops/prometheus, ops/grafana) as their checks read them, and the validators they run."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parent.parent.parent
PROM = ROOT / "ops" / "prometheus"


def read_yaml(path: Path):
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def alert_rules(alerts: dict) -> list[dict]:
    return [r for g in alerts["groups"] for r in g["rules"] if "alert" in r]


def promtool() -> str:
    tool = shutil.which("promtool")
    if not tool:
        pytest.skip("promtool not installed (Debian package prometheus)")
    return tool


def run_ok(args: list[str], cwd: Path = ROOT) -> None:
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
