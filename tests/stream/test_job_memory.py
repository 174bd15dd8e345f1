"""A job that runs for days keeps a bounded record of its batches.

The 30-minute soak (tests/benchmarks/soak.py) found the driver's resident
memory growing steadily (~90 MiB an hour at 400 fact operations a second):
the job kept every batch's outcome, and an outcome holds the batch's whole
delta. It now keeps the last `KEEP_OUTCOMES` and a count.
"""

from __future__ import annotations

from fluxmat.stream.batch import BatchOutcome
from fluxmat.stream.job import KEEP_OUTCOMES, Job, JobConfig


def test_a_long_running_job_keeps_only_its_last_outcomes():
    job = Job(JobConfig(program="p.dl", bootstrap_servers="127.0.0.1:1", updates_topic="u", deltas_topic="d",
                        checkpoint="c", redis="memory://"))  # fmt: skip
    runs = KEEP_OUTCOMES * 3
    for b in range(runs):
        job.record(BatchOutcome(b, output={"added": [["p", f"c{b}"]] * 100, "removed": [], "dead": []}))
    assert job.batches_done == runs
    assert len(job.outcomes) == KEEP_OUTCOMES
    assert [o.batch for o in job.outcomes] == list(range(runs - KEEP_OUTCOMES, runs))  # the newest
