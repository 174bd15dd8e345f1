"""Issue 16: an engine keeps its facts' and log entries' texts across exports, byte for byte the same."""

import json
import random

import pytest

from connectors.state import MemoryStateStore
from engine.fd import snapshot
from engine.fd.snapshot import export_changes
from engine.wire import fact_json
from tests.test_state_store import POOL, _engine


def _text(fd, key) -> str:
    return json.dumps(fact_json(fd.decode(*key)), ensure_ascii=False)


def _expected(fd) -> dict[str, dict]:
    """The whole state as texts, written with json.dumps as the export always wrote it."""
    log = {}
    for lk, head in fd.log_entries():
        rid, h, pos, neg = fd.instance(lk, head)
        body = [_text(fd, g) for g in pos]
        log[json.dumps([rid, body], ensure_ascii=False)] = json.dumps(
            [rid, _text(fd, h), body, [_text(fd, g) for g in neg]], ensure_ascii=False)
    return {
        "explicit": {_text(fd, (p, f)): True for p, fs in fd.E.items() for f in fs},
        "facts": {_text(fd, k): born for k, born in fd.born.items()},
        "log": log,
    }


@pytest.mark.parametrize("bound", [snapshot.TEXT_CACHE, 5])
def test_kept_texts_fold_into_the_texts_of_the_whole_state(monkeypatch, bound):
    monkeypatch.setattr(snapshot, "TEXT_CACHE", bound)  # 5: the caches start over again and again
    rnd = random.Random(11)
    fd = _engine("fd-counting")
    fd.load(rnd.sample(POOL, 6))
    store = MemoryStateStore()
    store.commit(-1, export_changes(fd), {})
    for batch in range(60):
        add = set(rnd.sample(POOL, 3))
        fd.submit(add, set(rnd.sample(POOL, 3)) - add)  # facts come and go, and come back
        fd.run()
        store.commit(batch, export_changes(fd), {})
        assert store.tables == _expected(fd), f"batch {batch}"
    kept = fd.state_texts
    assert 0 < len(kept) <= bound and 0 < len(kept.entries) <= bound
