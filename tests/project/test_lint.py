"""One docstring convention (Google), enforced by ruff, on all packages; modules stay small."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
FOLDERS = [f for f in ("engine", "connectors", "stream", "ops", "client") if (ROOT / f).is_dir()]


def test_ruff_passes():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is a test dependency (pip install -e '.[test]')"
    proc = subprocess.run(
        [ruff, "check", "fluxmat", "setup.py", *FOLDERS],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_modules_stay_small():
    """Modules under ~600 lines."""
    big = [
        (str(p.relative_to(ROOT)), n)
        for pkg in FOLDERS
        for p in (ROOT / pkg).rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > 650
    ]
    assert not big, big
