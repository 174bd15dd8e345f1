"""A batch's plain messages read at once (connectors.json_scan) vs each message read on its own.

`Decoder(bulk=True)` scans the batch's bytes and codes the terms per distinct
string; `Decoder(bulk=False)` reads every message as before
(`ColumnsBuilder.plain_text`, else the strict reader). On random messages
written as text -- white space, key orders, duplicate and escaped keys,
unicode and escapes, integers at and past the int64 edges, prefixed names,
literals, wrong shapes, bad JSON -- both give the same `Decoded`: the same
dead letters with the same reasons, ids and fact counts, and the same
`UpdateColumns` (values with their types, groups in order, codes, positions).
"""

from __future__ import annotations

import json

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fluxmat.connectors.json_scan import scan
from fluxmat.connectors.message import Message, Messages
from fluxmat.engine import EngineOptions, Reasoner
from fluxmat.stream.batch_decode import Decoded, Decoder
from tests.support.gen import examples

PROGRAM = "@prefix ex: <http://x.org/>\np(X, Y) :- e(X, Y).\nq(X) :- n(X).\n"
MAX_BYTES = 300

WS = st.sampled_from(
    ["", "", "", " ", "\n", "\t", "\r\n  ", "\u00a0"]
)  # the last is not JSON white space
STRINGS = [
    '"a"', '"b"', '"<http://x.org/d>"', '"ex:a"', '"und:a"', '"\\"q\\"^^xsd:string"', '"caf\u00e9"',
    '"caf\\u00e9"', '"a\\":b"', '"a\\" :b"', '"a\\"\u00e9"', '"\\ud83d\\ude00"', '"\U0001f600"', '"\\ud800"',
    '"\\n\\/\\\\\\b\\f\\r\\t"', '"\\x"', '"tab\there"', '""', '"a":', '"\\u00"', '"x\\u0041"', '"xA"',
]  # fmt: skip
INTS = ["0", "-0", "7", "-1", str(2**63 - 1), str(-(2**63)), str(2**63), str(10**18 - 1), str(-(10**18) + 1),
        str(10**18), "1" + "0" * 30, "01", "-", "1.0", "1e3", "2E1", "--1"]  # fmt: skip
PREDS = ['"e"', '"n"', '"ex:e"', '"<http://x.org/e>"', '"http://x.org/e"', '""', '"und:e"', '"p"', '"e\\u0000"',
         '"__neg0"', '"<e"', "1", "null"]  # fmt: skip
OTHER = [
    '{"@value": "a", "@language": "en"}',
    '{"@value": "a"}',
    "true",
    "false",
    "null",
    "[1]",
    "1.5",
    "{}",
]


def _text(s: str) -> st.SearchStrategy[str]:
    return st.sampled_from([s])


def _joined(items, ws) -> st.SearchStrategy[str]:
    return st.tuples(st.lists(st.tuples(ws, items, ws), max_size=4)).map(
        lambda t: ",".join(a + x + b for a, x, b in t[0])
    )


string = st.one_of(st.sampled_from(STRINGS), st.sampled_from(STRINGS),
                   st.tuples(st.text(max_size=6), st.booleans()).map(lambda t: json.dumps(t[0], ensure_ascii=t[1])))  # fmt: skip
arg = st.one_of(string, string, st.sampled_from(INTS), st.sampled_from(OTHER))
fact = st.one_of(
    st.tuples(WS, st.sampled_from(PREDS), _joined(arg, WS)).map(lambda t: f"[{t[0]}{t[1]}{',' if t[2] else ''}{t[2]}]"),
    st.sampled_from(["[]", '"e"', "[[]]"]),
)  # fmt: skip
facts = st.one_of(_joined(fact, WS).map(lambda s: f"[{s}]"), st.sampled_from(["null", "{}", '"a"']))
ident = st.one_of(string, st.sampled_from(INTS), st.sampled_from(["null", "true", '{"k": [1]}']))
KEYS = ['"add"', '"del"', '"id"', '"bogus"', '"ad\\u0064"', '"add" ', '"program"']
member = st.tuples(st.sampled_from(KEYS), WS, facts, ident).map(
    lambda t: t[0] + ":" + t[1] + (t[3] if t[0] in ('"id"', '"program"') else t[2])
)
plain_member = st.one_of(
    st.tuples(st.sampled_from(['"add"', '"del"']), _joined(fact, WS)).map(
        lambda t: f"{t[0]}: [{t[1]}]"
    ),
    st.tuples(_text('"id"'), ident).map(lambda t: f"{t[0]}: {t[1]}"),
)
message = st.one_of(
    st.tuples(WS, _joined(member, WS), WS).map(lambda t: t[0] + "{" + t[1] + "}" + t[2]),
    st.tuples(_joined(plain_member, WS), st.sampled_from(["", "", "x", "}", " ,"])).map(
        lambda t: "{" + t[0] + "}" + t[1]
    ),
    st.sampled_from(["{", "[]", "null", "", '{"program": "p(X) :- e(X, X)."}']),
)  # fmt: skip
# arguments the scan takes (the int64 edges and 19 digits are in INTS, escaped quotes before ": " in STRINGS)
GOOD = [
    *STRINGS[:8],
    *STRINGS[11:13],
    '"\\n\\/\\\\\\b"',
    "0",
    "-0",
    "7",
    "-1",
    str(10**18 - 1),
    str(-(10**18) + 1),
]
clean_fact = st.tuples(st.sampled_from(PREDS[:5]), st.lists(st.sampled_from(GOOD), max_size=3)).map(
    lambda t: "[" + ", ".join([t[0], *t[1]]) + "]"
)
clean_member = st.tuples(
    st.sampled_from(['"add"', '"del"']), st.lists(clean_fact, max_size=3), WS
).map(lambda t: f"{t[0]}:{t[2]}[{', '.join(t[1])}]")
clean = st.tuples(
    st.lists(clean_member, max_size=2),
    st.sampled_from(["", "", '"id": "u1"', '"id": -5', '"id": null', '"id": "\\u00e9"']),
    st.booleans(),
).map(lambda t: "{" + ", ".join([*t[0], *([t[1]] if t[1] else [])][:: -1 if t[2] else 1]) + "}")
row = st.tuples(
    st.one_of(clean, clean, message), st.sampled_from([True, True, True, True, True, False, None])
)


def _messages(values: list[tuple[str, bool | None]], start: int) -> Messages:
    rows = [Message(0, start + i, None, None if utf8 is None else v, 10 + i, utf8 is not False,
                    None if i % 3 else len(v.encode("utf-8", "surrogatepass"))) for i, (v, utf8) in enumerate(values)]  # fmt: skip
    return Messages.of(rows)


def _same(got: Decoded, want: Decoded) -> None:
    assert got.reasons == want.reasons
    assert got.ids == want.ids
    assert got.adds.tolist() == want.adds.tolist() and got.deletes.tolist() == want.deletes.tolist()
    a, b = got.columns, want.columns
    assert (a is None) == (b is None)
    if a is None:
        return
    assert (a.keys, a.ids) == (b.keys, b.ids)
    assert [(type(v), v) for v in a.values] == [(type(v), v) for v in b.values]
    assert list(a.facts) == list(b.facts)
    for group, fc in a.facts.items():
        for name in ("update", "add", "pos", "codes"):
            x, y = getattr(fc, name), getattr(b.facts[group], name)
            assert (x.dtype, x.shape, x.tolist()) == (y.dtype, y.shape, y.tolist()), (group, name)


REASONER = Reasoner.from_text(PROGRAM, options=EngineOptions("fd-counting", core="arrays"))


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(st.lists(row, max_size=14), min_size=1, max_size=3))
def test_the_bulk_decode_gives_what_the_one_by_one_decode_gives(batches):
    bulk, one = Decoder(MAX_BYTES, None), Decoder(MAX_BYTES, None, bulk=False)
    start = 0
    for values in batches:
        rows = _messages(values, start)
        _same(bulk.batch(REASONER, rows), one.batch(REASONER, rows))
        start += len(values)


def test_the_plain_messages_of_a_batch_are_read_by_the_scan():
    """The shape the scan takes: any key order, white space, escapes, int64 edges; a message of another shape only itself."""
    values = ['{"add": [["e", "a", "b"]], "del": [["n", 1]]}', ' {"del":[],"id":"u\\"1","add":[ ["ex:e", -0 ,"\\u00e9"] ]}\n',
              '{"add": [["e", 9223372036854775807, -999999999999999999]], "id": null}', "{}",
              '{"add": [["e", "a", 1.5]]}', '{"add": [["e", 1000000000000000000]]}']  # fmt: skip
    sc = scan(values, np.ones(len(values), np.bool_))
    assert sc.ok.tolist() == [True, True, False, True, False, False]
    assert sc.adds.tolist() == [1, 1, 0, 0, 0, 0] and sc.dels.tolist() == [1, 0, 0, 0, 0, 0]
    rows = _messages([(v, True) for v in values], 0)
    got = Decoder(MAX_BYTES, None).batch(REASONER, rows)
    _same(got, Decoder(MAX_BYTES, None, bulk=False).batch(REASONER, rows))
    assert got.ids[1] == 'u"1' and got.columns.values[:4] == ["a", "b", 1, 0]
