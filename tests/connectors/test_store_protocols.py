"""The state store's narrow protocols: the batch path needs the state alone (connectors/state.py).

`StateStore` is what a batch reads and writes; `StoreMonitor` (sizes, memory,
the cluster's health) and `StoreAdmin` (fsync) are for operations. A store that
offers nothing but `StateStore`'s methods carries a job's batches from start to
replay, and the two kinds of method do not mix.
"""

import json

from fluxmat.connectors.state import MemoryStateStore, StateStore, StoreAdmin, StoreMonitor
from fluxmat.engine import Reasoner
from fluxmat.stream.batch import BatchProcessor
from tests.support.shared import DeadLetters


def _methods(protocol) -> set[str]:
    return {n for n, v in vars(protocol).items() if callable(v) and not n.startswith("_")}


class StateOnly:
    """A store with `StateStore`'s methods and nothing else (over an in-memory store)."""

    def __init__(self):
        inner = MemoryStateStore()
        for name in _methods(StateStore):
            setattr(self, name, getattr(inner, name))


def test_the_protocols_do_not_overlap():
    state, monitor, admin = _methods(StateStore), _methods(StoreMonitor), _methods(StoreAdmin)
    assert {"commit", "last_batch", "output", "load"} <= state
    assert not state & monitor and not state & admin and not monitor & admin


def test_a_batch_needs_only_the_state_protocol():
    store = StateOnly()
    p = BatchProcessor(Reasoner.from_text("p(X) :- q(X).", "fd-counting"), store, DeadLetters(), 2)
    p.start([("q", "a")])
    rows = [(0, 0, None, json.dumps({"add": [["q", "b"]]}), 1_000), (0, 1, None, "not json", 1_001)]
    first = p.process(0, rows)
    assert first.updates == 1 and first.dead == 1 and p.facts() >= {("p", "b")}
    again = p.process(0, rows)  # Spark's replay of the batch: recognised from the stored state
    assert again.replayed
