"""The shared corpus and papers, found relative to the repository: `<repo>/../shared`.

Worktrees and the main checkout are siblings of `shared/`, so no test names an
absolute path. When the corpus is missing, the tests that need it skip on a
development machine and fail under CI (environment variable `CI` set): a CI run
that silently skipped them would claim coverage it does not have.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2] / "shared"
PROGRAMS = SHARED / "corpus" / "illich-glimm" / "programs"


def corpus_files(directory: Path, pattern: str) -> list:
    """The files of `directory` matching `pattern`, as test parameters.

    When there are none, one parameter `None`: the test then calls `need` on it.
    """
    files = sorted(directory.glob(pattern))
    return files or [None]


def need(path: Path | None, what: Path = PROGRAMS) -> Path:
    """`path`, or a failure under CI / a skip elsewhere when the corpus is missing."""
    if path is not None and path.exists():
        return path
    message = f"the shared corpus is missing: expected {what} (<repo>/../shared)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def metric(metrics, name: str) -> float:
    """The value of an unlabelled series of a job's metrics (`ops.metrics.JobMetrics`), as scraped."""
    from prometheus_client import generate_latest

    for line in generate_latest(metrics.registry).decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise KeyError(name)


def series(text: str) -> dict[str, float]:
    """A scrape of `/metrics` as `{series: value}`, each series written without the job's `namespace`
    label (every series carries it: `fluxmat_x{namespace="ns",result="hit"}` -> `fluxmat_x{result="hit"}`)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and " " in line:
            name, value = line.rsplit(" ", 1)
            name = re.sub(r'namespace="[^"]*",?', "", name).replace(",}", "}").replace("{}", "")
            out[name] = float(value)
    return out


class NullPublisher:
    """A publisher that drops deltas and dead letters (for tests of the batch processor)."""

    def publish_delta(self, *args):
        pass

    def publish_dead_letter(self, *args, **kw):
        pass


def scratch_copy(tmp_path: Path, packages, edited: str, extra: str) -> Path:
    """A copy of the repository's `packages` under `tmp_path/repo`, with `extra` appended to `edited`.

    For tests of the structure checks: the check must find what the edit adds.
    """
    import shutil

    root = Path(__file__).resolve().parent.parent
    copy = tmp_path / "repo"
    for pkg in packages:
        shutil.copytree(root / pkg, copy / pkg)
    target = copy / edited
    target.write_text(target.read_text(encoding="utf-8") + extra, encoding="utf-8")
    return copy
