"""The `fluxmat` command under tracemalloc, with a heap snapshot every N seconds; and their comparison.

    python tests/benchmarks/heap_job.py run DIR SECONDS <fluxmat arguments...>
    python tests/benchmarks/heap_job.py diff A.snap B.snap [--top N]

`run` is what the soak starts instead of `fluxmat` with `--heap DIR`: once
the soak signals (SIGUSR1) that the job is warm, it traces allocations (10
frames) and dumps `DIR/heap-NNN.snap` and `DIR/types-NNN.json` (live objects
by type) every SECONDS (so only what is allocated after the warm-up is seen).
`diff` prints the allocation sites whose live memory grew most from A to B,
grouped by their innermost line and by their whole traceback. Run as a script
(not `-m`), so only the standard library and the installed fluxmat are imported.
"""

from __future__ import annotations

import collections
import gc
import json
import signal
import sys
import threading
import time
import tracemalloc
from pathlib import Path

FRAMES = 10


def dump_every(out: Path, seconds: float, go: threading.Event) -> None:
    """Once `go` is set (SIGUSR1: the soak's warm-up is through), trace and dump every `seconds`.

    Each dump: `heap-NNN.snap` (tracemalloc) and `types-NNN.json` (live objects by type, from the gc).
    """
    go.wait()
    tracemalloc.start(FRAMES)
    n = 0
    while True:
        time.sleep(seconds)
        tracemalloc.take_snapshot().dump(str(out / f"heap-{n:03d}.snap"))
        counts = collections.Counter(type(o).__qualname__ for o in gc.get_objects())
        (out / f"types-{n:03d}.json").write_text(json.dumps(counts.most_common(200)))
        n += 1


def run(out: Path, seconds: float, args: list[str]) -> int:
    out.mkdir(parents=True, exist_ok=True)
    go = threading.Event()
    signal.signal(signal.SIGUSR1, lambda *_: go.set())
    threading.Thread(target=dump_every, args=(out, seconds, go), daemon=True, name="heap-snapshots").start()
    from fluxmat.ops.cli import main

    return main(args)


def diff(a: Path, b: Path, top: int = 20) -> None:
    skip = [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<frozen importlib._bootstrap>")]
    old = tracemalloc.Snapshot.load(str(a)).filter_traces(skip)
    new = tracemalloc.Snapshot.load(str(b)).filter_traces(skip)
    total = lambda s: sum(t.size for t in s.traces) / 2**20  # noqa: E731
    print(f"traced: {total(old):.1f} MiB -> {total(new):.1f} MiB")
    for key in ("lineno", "traceback"):
        print(f"\n-- top {top} by {key} (growth)")
        for st in new.compare_to(old, key)[:top]:
            print(f"{st.size_diff / 2**20:+8.2f} MiB {st.count_diff:+8d} blocks  now {st.size / 2**20:7.2f} MiB")
            frames = st.traceback.format() if key == "traceback" else [str(st.traceback[0])]
            print("    " + "\n    ".join(frames[-2 * FRAMES :]))


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "run":
        raise SystemExit(run(Path(sys.argv[2]), float(sys.argv[3]), sys.argv[4:]))
    if cmd == "diff":
        n = int(sys.argv[sys.argv.index("--top") + 1]) if "--top" in sys.argv else 20
        diff(Path(sys.argv[2]), Path(sys.argv[3]), n)
        raise SystemExit(0)
    raise SystemExit(__doc__)
