"""Helpers shared by the tests: the test data under tests/data, metrics scrapes, null publishers.

The data the tests read lives in the repository, under `tests/data/` (with its licence and
attribution): the part of the Illich & Glimm update-stream corpus the default run uses
(`illich-glimm/`) and the LUBM ontology (`ontologies/univ-bench.owl`). Nothing outside the
repository is read by default; the opt-in full-corpus run (FLUXMAT_FULL_CORPUS=1) reads the
whole corpus from the directory named by FLUXMAT_CORPUS when it is set.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from fluxmat.connectors.kafka_sink import dead_letter_line

DATA = Path(__file__).resolve().parent.parent / "data"
CORPUS = DATA / "illich-glimm"
PROGRAMS = CORPUS / "programs"
UNIV_BENCH = DATA / "ontologies" / "univ-bench.owl"


def corpus_dir(full: bool = False) -> Path:
    """The Illich & Glimm corpus: the subset under tests/data, or with `full` the directory named
    by FLUXMAT_CORPUS when that is set (a named directory without `streams/` is an error)."""
    env = os.environ.get("FLUXMAT_CORPUS")
    if not (full and env):
        return CORPUS
    if not (Path(env) / "streams").is_dir() or not (Path(env) / "programs").is_dir():
        raise FileNotFoundError(f"FLUXMAT_CORPUS={env!r}: not a corpus directory "
                                "(expected programs/ and streams/ in it)")  # fmt: skip
    return Path(env)


def corpus_files(directory: Path, pattern: str) -> list:
    """The files of `directory` matching `pattern`, as test parameters.

    When there are none, one parameter `None`: the test then calls `need` on it.
    """
    files = sorted(directory.glob(pattern))
    return files or [None]


def need(path: Path | None, what: Path = PROGRAMS) -> Path:
    """`path`, or a failure naming what is missing from tests/data (it belongs to the repository)."""
    if path is not None and path.exists():
        return path
    pytest.fail(f"test data missing: expected {what} (tests/data is part of the repository)")


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

    def publish_delta(self, *args, **kw):
        pass

    def publish_dead_letter(self, *args, **kw):
        pass


class DeadLetters(NullPublisher):
    """A publisher that drops deltas and keeps each dead letter as `(reason, offset)` in `dead`."""

    def __init__(self):
        self.dead: list[tuple[str, int]] = []

    def publish_delta(self, *args, **kw):
        return 1

    def publish_dead_letter(self, reason, partition, offset, raw, truncated=False):
        self.dead.append((reason, offset))


class TextRecorder:
    """A publisher that keeps every delta and dead letter as the JSON text of its arguments, in `sent`.

    What a sink is given decides what it sends: equal texts, equal messages.
    """

    def __init__(self):
        self.sent: list[str] = []

    def publish_delta(self, batch, through, added, removed, **kw):
        self.sent.append(json.dumps(["delta", batch, through, added, removed, kw]))

    def publish_dead_letter(self, reason, partition, offset, raw, truncated=False):
        self.sent.append(json.dumps(["dead", reason, partition, offset, raw, truncated]))


def scratch_copy(tmp_path: Path, packages, edited: str, extra: str) -> Path:
    """A copy of the repository's `packages` under `tmp_path/repo`, with `extra` appended to `edited`.

    For tests of the structure checks: the check must find what the edit adds.
    """
    import shutil

    root = Path(__file__).resolve().parent.parent.parent
    copy = tmp_path / "repo"
    for pkg in packages:
        shutil.copytree(root / pkg, copy / pkg)
    target = copy / edited
    target.write_text(target.read_text(encoding="utf-8") + extra, encoding="utf-8")
    return copy


def in_repo(module: str) -> str:
    """A module's name as its folder in the repository: `fluxmat.engine.x` is `engine.x`."""
    return module.removeprefix("fluxmat.")


class Recorder:
    """A publisher without a dead-letter topic: records what it would publish or log."""

    def __init__(self):
        self.deltas, self.dead, self.lines = [], [], []

    def publish_delta(self, batch, through, added, removed, causes=None):
        self.deltas.append({"batch": batch, "through": through, "added": added, "removed": removed})
        return 1

    def publish_dead_letter(self, reason, partition, offset, raw, truncated=False):
        self.dead.append((reason, partition, offset, raw, truncated))
        self.lines.append(dead_letter_line(reason, partition, offset, raw, truncated))
