"""A Spark Python worker that starts too slowly does not end the job (stream.job, Job._await_query).

Spark gives a Python worker it starts 10 s to connect back. On a busy machine
the source's worker (python_streaming_source_runner) sometimes needs longer,
and the query fails before its first batch. Here the worker is made late on
purpose: the job's Python is a wrapper that sleeps 15 s before the first start
of that worker, then runs the real Python.
"""

from __future__ import annotations

import sys

from tests.test_pipeline import encode, make_setup, produce, start_job, wait_for_through

RUNNER = "pyspark.sql.streaming.python_streaming_source_runner"


def _late_python(directory) -> str:
    """A Python for Spark's workers whose first source worker starts 15 s late."""
    wrapper = directory / "late-python"
    wrapper.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do\n'
        f'  if [ "$a" = {RUNNER} ] && mkdir "{directory}/late-once" 2>/dev/null; then sleep 15; fi\n'
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
