"""A batch's output as the store keeps it (connectors.output_pack): it reads back as the same JSON values.

The facts are written by orjson (json where orjson refuses), the other fields by
json: whatever the values -- unicode and escapes, a lone surrogate, integers
beyond 64 bits, an update id that is NaN or a JSON object with an `added` key --
`unpack_output(pack_output(output))` is the output, plain JSON when small,
lz4 when large, sliced or not.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fluxmat.connectors import output_pack
from fluxmat.engine.wire import json_value
from tests.support.gen import FACTS, examples

IDS = st.one_of(st.none(), st.integers(), st.text(max_size=6), st.just(float("nan")), st.just(float("inf")),
                st.fixed_dictionaries({"added": st.just([]), "k": st.integers(0, 3)}))  # fmt: skip
WIRE = FACTS.map(lambda f: [f[0], *map(json_value, f[1:])])
ODD = ["\ud800", 2**64, -(2**63) - 1, 10**30, 'é\n"\\', {"@value": "x", "@language": "en"}]


def _same(a: dict, b: dict) -> bool:
    """Equal as JSON (NaN is not equal to itself as a float)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@settings(max_examples=examples(100), deadline=None)
@given(through=IDS, added=st.lists(WIRE, max_size=8), removed=st.lists(WIRE, max_size=4),
       odd=st.lists(st.sampled_from(ODD), max_size=2), slice_=st.sampled_from([1, 3, 50_000]),
       over=st.sampled_from([0, 65_536]), causes=st.lists(IDS, max_size=2))  # fmt: skip
def test_an_output_reads_back_as_it_was(through, added, removed, odd, slice_, over, causes):
    if odd:
        added = [*added, ["p", *odd]]
    out = {
        "through": through,
        "added": added,
        "removed": removed,
        "dead": [["why é", 0, 1, None, False]],
    }
    if causes:
        out["causes"] = [[c, 0, 1] for c in causes]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(output_pack, "PACK_SLICE", slice_)
        mp.setattr(output_pack, "PACK_OVER", over)
        packed = output_pack.pack_output(out)
    back = output_pack.unpack_output(packed)
    assert _same(back, out) and list(back) == list(
        out
    )  # the same values, the fields in their order
    if over == 0 or len(added) + len(removed) > slice_:
        assert packed.startswith("lz4:")
    elif len(json.dumps(out)) < over:
        assert _same(json.loads(packed), out)  # small: plain JSON


def test_a_small_output_is_plain_json_and_a_large_one_lz4():
    small = {"through": 0, "added": [["x", "é"]], "removed": [], "dead": []}
    assert json.loads(output_pack.pack_output(small)) == small  # readable as it is
    big = {
        "through": None,
        "added": [["e", f"<n{i}>", i] for i in range(20_000)],
        "removed": [],
        "dead": [],
    }
    packed = output_pack.pack_output(big)
    assert packed.startswith("lz4:") and output_pack.unpack_output(packed) == big
