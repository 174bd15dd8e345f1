"""A Spark Python worker that starts too slowly does not end the job (stream.job, Job._await_query).

Spark gives a Python worker it starts 10 s to connect back. On a busy machine
the source's worker (python_streaming_source_runner) sometimes needs longer,
and the query fails before its first batch. Here the worker is made late on
purpose: the job's Python is a wrapper that sleeps 15 s before the first start
of that worker, then runs the real Python.
"""

from __future__ import annotations

import sys

from tests.support.pipeline import encode, make_setup, produce, start_job, wait_for_through

RUNNER = "pyspark.sql.streaming.python_streaming_source_runner"


def _late_python(directory, always: bool = False) -> str:
    """A Python for Spark's workers whose first (or every) source worker starts 15 s late."""
    wrapper = directory / "late-python"
    once = "" if always else f' && mkdir "{directory}/late-once" 2>/dev/null'
    wrapper.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do\n'
        f'  if [ "$a" = {RUNNER} ]{once}; then sleep 15; fi\n'
        "done\n"
        f'exec {sys.executable} "$@"\n',
        encoding="utf-8",
    )
    wrapper.chmod(0o755)
    return str(wrapper)


def test_a_late_python_worker_restarts_the_query(broker, redis_server, tmp_path):
    s = make_setup(broker, redis_server, tmp_path / "job")
    produce(s.bootstrap, s.updates, [(0, encode({"add": [["edge", "d", "e"]], "id": "one"}))])
    job = start_job(s, "late-worker", {"PYSPARK_PYTHON": _late_python(tmp_path)})
    try:
        wait_for_through(s, job, "one")
        assert job.terminate() == 0, job.tail()
    finally:
        job.cleanup()
    assert (tmp_path / "late-once").is_dir(), "the source's worker was not made late"
    assert "did not connect back in time" in job.stderr(), job.tail()


def test_a_worker_late_every_time_ends_the_job_with_one_error_line(broker, redis_server, tmp_path):
    s = make_setup(broker, redis_server, tmp_path / "job")
    job = start_job(s, "always-late", {"PYSPARK_PYTHON": _late_python(tmp_path, always=True)})
    try:
        assert job.wait(900) == 1, job.tail()
    finally:
        job.cleanup()
    err = job.stderr()
    assert err.count("starting the query again") == 3, job.tail()
    assert "fluxmat: error: the streaming query stopped: Python worker failed to connect back" in err, job.tail()
    assert "stream/job.py" not in err, "a traceback of the job instead of one error line" + job.tail()
