"""Tests of the streaming job: the per-batch processor, the Spark job, keyed state."""
