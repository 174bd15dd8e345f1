"""The arrays core's state with equality in a real Redis (what `fluxmat run --core arrays --equality rewrite` keeps).

Motik, Horrocks & Kim 2015 rewriting, fully dynamic: batches with merges of
classes and a split (which rebuilds the rewritten materialisation and writes
the whole state again) are committed to a real redis-server; after each
batch a NEW reasoner restored from Redis equals the one that wrote it
(classes, compact materialisation, E) and the materialisation from scratch
(the axiomatised oracle), and it goes on maintaining from there.
"""

from __future__ import annotations

from fluxmat.connectors.state import RedisStateStore
from fluxmat.engine import EngineOptions, Fed, Reasoner
from tests.support.equality import PAPER, oracle

TEXT = PAPER.replace("r(a, b). r(c, d). r(a, d).", "q(X) :- r(X, X).")
BATCHES = [
    ([("r", "b", "x")], []),  # a ~ b
    ([("r", "c", "x"), ("r", "c", "y")], []),  # c joins; x ~ y
    ([("r", "d", "d")], []),
    ([], [("r", "b", "x")]),  # a deletion with sameAs rules: a rebuild
    ([("r", "e", "y")], [("r", "d", "d")]),
]


def _eq() -> Reasoner:
    options = EngineOptions(core="arrays")
    return Reasoner.from_text(TEXT, "fd-counting", equality="rewrite", options=options)


def _classes(r: Reasoner) -> set[frozenset]:
    values = r.maintainer.dictionary.values
    return {frozenset(values[m] for m in ms) for ms in r.maintainer.pi.members.values()}


def test_restarts_from_redis_exactly(redis_server):
    store = RedisStateStore(redis_server.url, "eq-state", retry_seconds=0)
    store.clear()
    r = _eq()
    explicit = {("r", "a", "x")}
    r.load(sorted(explicit))
    store.commit(0, r.export_changes(), {})
    for n, (add, delete) in enumerate(BATCHES, start=1):
        r.feed([Fed(n, add, delete)])
        explicit = (explicit - set(delete)) | set(add)
        store.commit(n, r.export_changes(), {})
        back = _eq()
        back.restore(store.load())
        assert back.facts() == r.facts() == oracle(TEXT, explicit), n
        assert back.explicit() == r.explicit() == explicit, n
        assert _classes(back) == _classes(r), n
        assert back.maintainer.rewritten() == r.maintainer.rewritten(), n
        r = back  # the restored engine takes the next batch
    store.close()
