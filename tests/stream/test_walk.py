"""The walk of one update, from the job's batch function to its delta message: fewer hops, each with a reason.

One update (`{"add": [["e", "b", "c"]]}`) through a whole-stream job's
micro-batch (tests/support/walk.py: `Job._one_batch` over the job's
`WholeStream`, a real redis-server, no Spark), every fluxmat function entered
recorded. The bounds are the walk as it stands: a change that adds a hop on
the way to the delta message makes this fail; lower a bound when a hop goes,
raise one only for a hop with a reason (docs say which). Run with `-s` to see
the functions on the walk.
"""

from __future__ import annotations

from tests.support.walk import walk_one_update

# 51 / 21 / 7 when the walk was shortened; raised by two hops with a reason (docs/walk.md): the
# check whether the engine is behind the committed program (live program changes: keyed jobs
# catch up lazily), and the state store's choice between the per-field and bulk layouts
# lowered when the batch went to the engine as columns (docs/walk.md): the door 15 -> 13, the
# layer crossings 23 -> 18, stream -> engine 8 -> 6, engine -> stream 2 -> 0 (no per-update callbacks)
# raised by two hops with a reason (docs/walk.md): the batch's planned Kafka ranges read on the
# driver (stream/collect.py: DriverCollect, planned) instead of a Spark job per micro-batch
# raised with a reason (docs/walk.md): a batch's plain messages scanned at once (connectors/json_scan.py)
# and its delta taken as rows (Reasoner.poll_rows): 56 -> 69 functions, the door 13 -> 14
TO_THE_DELTA = {"functions": 69, "engine's door": 14, "layer crossings": 22, "stream -> engine": 7,
                "engine -> stream": 0}  # fmt: skip


def test_the_walk_to_the_delta_message_takes_no_more_hops_than_it_did(redis_server):
    to_delta, whole = walk_one_update(redis_server.url)
    print(
        "to the delta message:", to_delta.text(), "the whole micro-batch:", whole.text(), sep="\n"
    )
    counts = to_delta.counts()
    assert all(counts[k] <= n for k, n in TO_THE_DELTA.items()), (counts, TO_THE_DELTA)
    assert (
        "stream/micro.py:WholeStream.base" not in to_delta.functions
    )  # a number fixed before the first batch
    assert not any(
        f.startswith("stream/verify.py") for f in whole.functions
    )  # no --verify-every: no call
