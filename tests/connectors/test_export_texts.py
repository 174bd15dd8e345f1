"""The stored state (term ids and texts, kept across exports) decodes to exactly the engine's state."""

import random

import pytest

from fluxmat.connectors.state import MemoryStateStore
from fluxmat.engine.fd import snapshot
from fluxmat.engine.fd.snapshot import export_changes
from tests.support.state import POOL, decoded, maintainer_for


def _expected(fd) -> dict[str, dict]:
    """The engine's whole state as Python facts."""
    fact = lambda key: (key[0], *(fd.dictionary.values[i] for i in key[1]))  # noqa: E731 - the relation itself
    log = {}
    for lk, head in fd.log_entries():
        rid, h, pos, neg = fd.instance(lk, head)
        log[rid, tuple(fact(g)[1:] for g in pos)] = (fact(h), tuple(fact(g)[1:] for g in neg))
    return {
        "explicit": {fact((p, f)): True for p, fs in fd.E.items() for f in fs},
        "facts": {fact(k): born for k, born in fd.born.items()},
        "log": log,
    }


@pytest.mark.parametrize("bound", [snapshot.TEXT_CACHE, 5])
def test_kept_texts_fold_into_the_texts_of_the_whole_state(monkeypatch, bound):
    monkeypatch.setattr(snapshot, "TEXT_CACHE", bound)  # 5: the caches start over again and again
    rnd = random.Random(11)
    fd = maintainer_for("fd-counting")
    fd.load(rnd.sample(POOL, 6))
    store = MemoryStateStore()
    store.commit(-1, export_changes(fd), {})
    for batch in range(60):
        add = set(rnd.sample(POOL, 3))
        fd.submit(add, set(rnd.sample(POOL, 3)) - add)  # facts come and go, and come back
        fd.run()
        store.commit(batch, export_changes(fd), {})
        assert decoded(store.tables) == _expected(fd), f"batch {batch}"
    kept = fd.state_texts
    assert 0 < len(kept) <= bound and 0 < len(kept.entries) <= bound
