"""The per-batch processor benchmark's restarted process (tests/benchmarks/restart_child.py) runs and reports.

It is what the LUBM-5 restart figures come from: a state the streaming job's
processor committed to Redis (the arrays core's bulk layout) is restored, and
each phase until the engine is ready is reported as wall and CPU seconds.
"""

import json
import time

from fluxmat.connectors.state import RedisStateStore
from fluxmat.engine import EngineOptions, Reasoner
from fluxmat.stream.batch import BatchProcessor
from tests.benchmarks import restart_child
from tests.benchmarks.batch_processor import PHASES

PROGRAM = "reach(X, Y) :- link(X, Y).\nreach(X, Z) :- reach(X, Y), link(Y, Z).\n"


class _Quiet:
    def publish_delta(self, batch, through, added, removed, causes=None):
        return 1


def test_the_restarted_process_restores_the_bulk_state_and_times_each_phase(redis_server, tmp_path, capsys):
    program = tmp_path / "reach.dl"
    program.write_text(PROGRAM)
    reasoner = Reasoner.from_file(program, options=EngineOptions("fd-counting", core="arrays"))
    store = RedisStateStore(redis_server.url, "restart-bench")
    BatchProcessor(reasoner, store, _Quiet()).start([("link", "a", "b"), ("link", "b", "c"), ("link", "c", "a")])
    assert json.loads(store.client.hget(store.prefix + "meta", "layout")) == "bulk"
    argv = ["--restore-from", redis_server.url, "--namespace", "restart-bench", "--program", str(program),
            "--core", "arrays", "--spawned", repr(time.time())]  # fmt: skip
    assert restart_child.main(argv) == 0
    got = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert got["digest"] == restart_child.digest(reasoner.facts()) and got["facts"] == 12
    assert all(len(got[p]) == 2 and min(got[p]) >= 0 for p in (*PHASES, "ready"))
    assert got["bytes"] > 0 and got["rss"] > 0
    rss = got["rss_phases"]  # [now, peak] after each phase: peaks never fall, the last is the process's
    assert list(rss) == ["imports", *PHASES[1:4], "restore", "dropped"] and all(0 < now <= peak for now, peak in rss.values())
    assert [p for _, p in rss.values()] == sorted(p for _, p in rss.values()) and rss["restore"][1] <= got["rss"]
