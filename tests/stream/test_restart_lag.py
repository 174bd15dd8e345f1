"""The consumer lag is right from the first sample after a restart (offsets from the checkpoint)."""

from fluxmat.stream.job import checkpoint_offsets

META = '{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}'


def _write(root, sub, batch, text="v1"):
    (root / sub).mkdir(parents=True, exist_ok=True)
    (root / sub / str(batch)).write_text(text, encoding="utf-8")


def test_the_last_committed_batch_gives_the_consumed_offsets(tmp_path):
    assert checkpoint_offsets(str(tmp_path)) == {}  # a new checkpoint
    _write(tmp_path, "offsets", 3, f'v1\n{META}\n{{"0": 7, "1": 5}}\n')
    _write(tmp_path, "commits", 3)
    _write(tmp_path, "offsets", 4, f'v1\n{META}\n{{"0": 9, "1": 8}}\n')  # planned, never committed
    assert checkpoint_offsets(f"file://{tmp_path}") == {"0": 7, "1": 5}
    _write(tmp_path, "commits", 4)
    assert checkpoint_offsets(str(tmp_path)) == {"0": 9, "1": 8}
    _write(tmp_path, "offsets", 5, "v1\nnot json")
    _write(tmp_path, "commits", 5)
    assert checkpoint_offsets(str(tmp_path)) == {}  # unreadable: Spark's progress takes over
