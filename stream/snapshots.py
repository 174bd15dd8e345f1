"""Local snapshots of the engine's state: a faster restart, never the record of truth.

The job (whole-stream mode) writes the engine's state as a local file
(connectors.snapshot_file) after a committed batch every `every_batches`
batches or `every_seconds` seconds, whichever comes first, and when it stops
cleanly. On start, `restore` uses the file only when it is the state Redis
holds:

* its layout version is `snapshot_file.VERSION`,
* it was written for this program and algorithm (the fingerprint),
* its batch id is the batch Redis last committed, and its clock, sequence
  number and sizes are those Redis's metadata records for that batch,
* it is intact (length and CRC-32C),

otherwise ONE log line says why and the state is read from Redis as before.
Deleting the file at any time is safe. Written only after a batch's commit (and
publish): a crash while writing leaves the old file (the rename is atomic),
which the next start then rejects as behind Redis.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from fluxmat.connectors import snapshot_file
from fluxmat.engine import FluxmatError, Reasoner, StateMismatch

DEFAULT_EVERY_SECONDS = 300.0
DEFAULT_EVERY_BATCHES = 0  # 0: by time only
SUBDIR = "fluxmat-snapshot"  # under a local checkpoint (the default directory)
_AGREE = (
    "clock",
    "seq",
    "facts",
    "explicit",
    "log",
)  # meta fields the snapshot and Redis must share


def default_dir(checkpoint: str) -> Path | None:
    """`<checkpoint>/fluxmat-snapshot` for a local checkpoint; None for a remote one (hdfs://, s3a://)."""
    if checkpoint.startswith("file:"):
        checkpoint = checkpoint[len("file:") :].removeprefix("//")
    elif "://" in checkpoint:
        return None
    return Path(checkpoint) / SUBDIR


class Snapshots:
    """Writes and reads one namespace's local snapshot in `directory` (see the module docstring)."""

    def __init__(self, directory: Path, namespace: str, every_batches: int = DEFAULT_EVERY_BATCHES,
                 every_seconds: float = DEFAULT_EVERY_SECONDS, log: Callable[[str], None] = print):  # fmt: skip
        self.path = Path(directory) / snapshot_file.file_name(namespace)
        self.namespace = namespace
        self.every_batches = every_batches
        self.every_seconds = every_seconds
        self.log = log
        self.batch: int | None = None  # the batch of the state the file holds (written or restored)
        self.since = 0  # batches committed since then
        self.at = time.monotonic()
        self.last: dict[str, float] = {}  # the last write: seconds, bytes

    # ------------------------------------------------------------ start
    def restore(self, store, reasoner: Reasoner) -> dict | None:
        """Restore `reasoner` from the snapshot if it is Redis's state; Redis's metadata then, else None.

        A rejection is logged in one line and changes nothing (the engine is
        untouched unless the file's own decoding fails half-way, in which case
        the caller restores from Redis anyway).
        """
        try:
            return self._restore(store, reasoner)
        except snapshot_file.SnapshotUnusable as exc:
            self.log(f"local snapshot not used: {exc}; restoring from the state store")
        except (StateMismatch, FluxmatError) as exc:
            self.log(f"local snapshot not used: {self.path}: {exc}; restoring from the state store")
        return None

    def _restore(self, store, reasoner: Reasoner) -> dict | None:
        stored = store.state_meta()
        if not self.path.exists():
            if stored:
                raise snapshot_file.SnapshotUnusable(f"there is none at {self.path}")
            return None  # nothing to say: a new state
        header = snapshot_file.read_header(self.path)
        why = self._mismatch(header, stored, reasoner.state_meta()["fingerprint"])
        if why:
            raise snapshot_file.SnapshotUnusable(f"{self.path} {why}")
        cols = snapshot_file.read(self.path, header)
        reasoner.restore_columns(cols)
        self.batch, self.since, self.at = int(header["batch"]), 0, time.monotonic()
        return stored

    def _mismatch(self, header: dict, stored: dict, fingerprint: str) -> str | None:
        """Why the snapshot is not Redis's state (None when it is)."""
        if header.get("version") != snapshot_file.VERSION:
            return f"has layout version {header.get('version')}, this fluxmat reads {snapshot_file.VERSION}"
        if header.get("fingerprint") != fingerprint:
            return (f"was written for another program or algorithm (fingerprint {header.get('fingerprint')}, "
                    f"this job {fingerprint})")  # fmt: skip
        if header.get("namespace") != self.namespace:
            return f"belongs to namespace {header.get('namespace')!r}, not {self.namespace!r}"
        if not stored:
            return "exists but the state store is empty"
        if stored.get("batch") != header.get("batch"):
            return f"holds batch {header.get('batch')}, the state store batch {stored.get('batch')}"
        mine = header.get("meta", {})
        differ = [k for k in _AGREE if k in stored and mine.get(k) != stored.get(k)]
        if stored.get("fingerprint") != fingerprint or differ:
            return (f"holds batch {header.get('batch')} but not the state store's state of that batch "
                    f"({', '.join(differ) or 'fingerprint'} differ)")  # fmt: skip
        return None

    # ------------------------------------------------------------ while running
    def after_batch(self, batch: int, reasoner: Reasoner, stopping: bool = False) -> bool:
        """After `batch` was committed (and published): write the snapshot if due (always when `stopping`)."""
        if batch != self.batch:
            self.since += 1
        due = (self.every_batches > 0 and self.since >= self.every_batches) or (
            self.every_seconds > 0 and time.monotonic() - self.at >= self.every_seconds)  # fmt: skip
        if not (due or stopping) or batch == self.batch:
            return False
        return self.write(batch, reasoner)

    def write(self, batch: int, reasoner: Reasoner) -> bool:
        """Write the engine's state (committed as `batch`) now; a failure is logged, never raised."""
        started = time.perf_counter()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            cols = reasoner.state_columns()
            taken = time.perf_counter() - started
            size = snapshot_file.write(self.path, cols, batch, self.namespace)
        except (OSError, FluxmatError) as exc:
            self.log(f"local snapshot of batch {batch} not written: {exc}")
            return False
        self.batch, self.since, self.at = batch, 0, time.monotonic()
        self.last = {
            "seconds": time.perf_counter() - started,
            "columns_seconds": taken,
            "bytes": size,
        }
        return True
