"""Which checkpoints the job writes with its local checkpoint settings (stream.job).

The settings (Hadoop's FileSystem API and raw local file system, no `.crc`
files) are for a local checkpoint only: on HDFS the FileContext rename that
Spark uses by default is atomic and the FileSystem one is not. The job's own
run with a local checkpoint (no `.crc` files) is checked in test_pipeline.py.
"""

from __future__ import annotations

import pytest

from fluxmat.stream.job import LOCAL_CHECKPOINT_SETTINGS, local_checkpoint


@pytest.mark.parametrize("where", ["/var/lib/fluxmat/checkpoint", "checkpoint", "file:///tmp/c", "file:/tmp/c"])
def test_local_checkpoints_get_the_settings(where):
    assert local_checkpoint(where)


@pytest.mark.parametrize("where", ["hdfs://namenode:8020/fluxmat/c", "s3a://bucket/c", "abfss://x@y/c"])
def test_other_file_systems_keep_sparks_defaults(where):
    assert not local_checkpoint(where)


def test_the_settings_change_how_files_are_written_not_which():
    assert set(LOCAL_CHECKPOINT_SETTINGS) == {
        "spark.sql.streaming.checkpointFileManagerClass", "spark.hadoop.fs.file.impl"}  # fmt: skip
    assert "async" not in " ".join(LOCAL_CHECKPOINT_SETTINGS).lower()  # never asynchronous progress
