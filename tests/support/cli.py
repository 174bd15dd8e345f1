"""The `fluxmat` command line as the tests run it: a subprocess, its output, files to give it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def fluxmat(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    for key in [k for k in full_env if k.startswith("FLUXMAT_") and k not in (env or {})]:
        del full_env[key]
    return subprocess.run(
        [sys.executable, "-m", "fluxmat.ops.cli", *map(str, args)],
        cwd=ROOT, capture_output=True, text=True, env=full_env, timeout=120,
    )  # fmt: skip


def ok(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    return proc.stdout


def user_error(proc: subprocess.CompletedProcess, *fragments: str) -> str:
    """Assert the error contract; return the single error line."""
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    assert proc.returncode != 0
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("fluxmat: error: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0]
    return lines[0]


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# a program and its next version (tests of `fluxmat program` and program lines in replay files)
OLD = "path(X, Y) :- edge(X, Y).\nfar(X) :- path(a, X), not edge(a, X).\n"
NEW = "path(X, Y) :- edge(X, Y).\npath(X, Z) :- path(X, Y), edge(Y, Z).\nfar(X) :- path(a, X), not edge(a, X).\n"
