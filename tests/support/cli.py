"""The `fluxmat` command line as the tests run it: a subprocess (or in this process), its output, files to give it."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def _environment(env: dict | None) -> dict:
    """This process's environment without its FLUXMAT_ variables, plus `env`."""
    full_env = {**os.environ, **(env or {})}
    for key in [k for k in full_env if k.startswith("FLUXMAT_") and k not in (env or {})]:
        del full_env[key]
    return full_env


def fluxmat(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`python -m fluxmat.ops.cli ARGS` as a subprocess, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "fluxmat.ops.cli", *map(str, args)],
        cwd=ROOT, capture_output=True, text=True, env=_environment(env), timeout=120,
    )  # fmt: skip


def fluxmat_here(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """The same command through `fluxmat.ops.cli.main` in this process: same exit code and output.

    No Python start and imports to pay (about a second of CPU per subprocess). For commands
    that only read files and print; an exception that `main` lets escape fails the test here
    (a subprocess would print a traceback, which `ok` and `user_error` refuse too). Each
    command keeps at least one test that runs it as a real subprocess (`fluxmat`).
    """
    from fluxmat.ops.cli import main

    saved_env, saved_cwd, out, err = dict(os.environ), os.getcwd(), io.StringIO(), io.StringIO()
    os.environ.clear()
    os.environ.update(_environment(env))
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(a) for a in args])
            except SystemExit as exc:  # argparse's usage errors
                code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def follow(url: str, bootstrap: str, deltas: str, *extra: str) -> subprocess.Popen:
    """`fluxmat follow` from the topic `deltas` into `url`, started as a subprocess (output piped).

    Start it under a `Reaper` (the `reap` fixture), so that it is stopped when the test fails.
    """
    return subprocess.Popen([sys.executable, "-m", "fluxmat.ops.cli", "follow", "--deltas-topic", deltas,
                             "--bootstrap-servers", bootstrap, "--to", url, *extra],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


class Reaper:
    """The subprocesses a test starts: each one still running at the end is SIGKILLed and waited for.

    `with Reaper() as reap: proc = reap(subprocess.Popen(...))`, or the `reap` fixture
    (tests/conftest.py): whatever fails in the test -- an assertion, a `communicate`
    timeout, a job that did not start -- no process outlives it.
    """

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def __call__(self, proc: subprocess.Popen) -> subprocess.Popen:
        self.procs.append(proc)
        return proc

    def __enter__(self) -> Reaper:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.communicate(timeout=30)  # waits, closes its pipes
        self.procs.clear()


def fluxmat_sampled(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`fluxmat` as a subprocess in `make test`, in this process (`fluxmat_here`) in `make test-fast`.

    For the parametrised variants of a command whose plain case keeps its own
    subprocess test in both profiles (FLUXMAT_TEST_PROFILE, tests/support/profile.py).
    """
    from tests.support import profile

    return profile.pick(ci=fluxmat, fast=fluxmat_here)(*args, env=env)


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
