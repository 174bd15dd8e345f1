"""`orjson` where it gives exactly what json gives -- decoded values and errors, encoded bytes."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fluxmat.connectors.files import MAX_JSON_DEPTH, _integer, _object, _too_deep, decode_json
from fluxmat.connectors.kafka_sink import _encode
from fluxmat.engine import Iri
from fluxmat.engine.errors import ParseError
from fluxmat.engine.printer import FactPrinter
from fluxmat.engine.syntax import literal
from fluxmat.engine.wire import fact_json
from tests.support.gen import FACTS, examples

PRINTER = FactPrinter({"ex": "http://example.org/"}.items())


def strict(text: str):
    """The decoder before orjson: json with hooks after the depth scan (value, or the error text)."""
    if _too_deep(text):
        return ("error", f"invalid JSON: nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        return ("value", json.loads(text, object_pairs_hook=_object, parse_int=_integer))
    except json.JSONDecodeError as exc:
        return ("error", f"invalid JSON: {exc}")
    except ValueError as exc:  # _Rejected
        return ("error", f"invalid JSON: {exc}")


def fast(text: str):
    try:
        return ("value", decode_json(text))
    except ParseError as exc:
        return ("error", str(exc))


def same(a, b) -> bool:
    """Equal values of equal types all the way down (1 and 1.0 differ; nan equals nan)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, float) and a != a:
        return b != b
    return a == b


TRICKY = [
    '{"add": [], "add": []}',  # duplicate keys
    '{"add": [["p", {"@value": "x", "@value": "y"}]]}',  # ... in a literal
    '{"a" : 1, "a" : 2}',  # ... with space before the colon
    '{"a":"\\":", "a": 1}',  # ... with a string holding `":`
    '{"a":"\\":","b": 1}',  # no duplicate, but `":` in a string
    '{"a": {"b": 1}, "b": 2}', '{"id": "x", "add": [["p", "a"]], "del": []}',
    '[18446744073709551615]', '[18446744073709551616]', '[-9223372036854775809]',  # past 64 bits
    "[" + "9" * 4000 + "]", "[" + "9" * 4001 + "]",  # MAX_JSON_DIGITS
    "[1.0]", "[1E400]", "[NaN]", "[-Infinity]", "1.5", '"\\ud800"', "\ufeff{}", "[1,]", "nul", "",
    "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH, "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1),
    '{"a":' * MAX_JSON_DEPTH + "1" + "}" * MAX_JSON_DEPTH, "[" * 2000 + "]" * 2000, "[" * 2000,
    '{"a": [1, 2}', '{"\\u0061": 1, "a": 2}', '{"a":1}\n', "  [1]  ", "{}", "[]", '{"": 1, "": 2}',
]  # fmt: skip


@pytest.mark.parametrize("text", TRICKY)
def test_tricky_texts_decode_as_the_strict_decoder_does(text):
    a, b = fast(text), strict(text)
    assert a[0] == b[0] and (a[1] == b[1] if a[0] == "error" else same(a[1], b[1]))


def test_a_message_with_duplicate_keys_is_still_refused():
    for text in ('{"add": [], "add": []}', '{"a" : 1, "a" : 2}', '{"a":"\\":", "a": 1}',
                 '{"add": [["p", {"@value": "x", "@value": "y"}]]}'):  # fmt: skip
        with pytest.raises(ParseError, match="duplicate key"):
            decode_json(text)


# JSON texts with duplicate keys, odd spacing, floats, huge integers and deep nesting
SCALARS = st.one_of(st.integers(-(2**70), 2**70), st.floats(allow_nan=False), st.text(max_size=6),
                    st.sampled_from(['":', '\\"', "@value", "{", "["]), st.booleans(), st.none())  # fmt: skip
KEYS = st.sampled_from(["a", "b", "add", "del", "@value", '":', ""])


def _render(tree, draw_sep) -> str:
    if isinstance(tree, list):
        return "[" + draw_sep(",").join(_render(x, draw_sep) for x in tree) + "]"
    if isinstance(tree, tuple):  # an object as pairs, duplicates allowed
        return "{" + draw_sep(",").join(json.dumps(k) + draw_sep(":") + _render(v, draw_sep)
                                        for k, v in tree) + "}"  # fmt: skip
    return json.dumps(tree, ensure_ascii=False)


TREES = st.recursive(SCALARS, lambda kids: st.one_of(
    st.lists(kids, max_size=4), st.lists(st.tuples(KEYS, kids), max_size=4).map(tuple)), max_leaves=20)  # fmt: skip


@settings(max_examples=examples(400), deadline=None)
@given(TREES, st.sampled_from(["", " ", "\n  "]), st.integers(0, 3))
def test_json_texts_decode_as_the_strict_decoder_does(tree, space, where):
    sep = (lambda s: s + space) if where & 1 else (lambda s: s)
    text = _render(tree, (lambda s: space + s + space) if where & 2 else sep)
    a, b = fast(text), strict(text)
    assert a[0] == b[0] and (a[1] == b[1] if a[0] == "error" else same(a[1], b[1]))


# -- encoding ----------------------------------------------------------------------------------

def _json_bytes(message) -> bytes:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(FACTS, max_size=5), st.lists(FACTS, max_size=5),
       st.one_of(st.none(), st.text(max_size=8), st.integers(-(2**70), 2**70), st.floats(allow_nan=False),
                 st.lists(st.floats(allow_nan=False), max_size=2)))  # fmt: skip
def test_delta_messages_are_byte_equal_to_json_dumps(added, removed, through):
    message = {"batch": 3, "through": through, "part": 0, "parts": 1,
               "added": [fact_json(f, PRINTER) for f in added],
               "removed": [fact_json(f, PRINTER) for f in removed]}  # fmt: skip
    assert _encode(message) == _json_bytes(message)


def test_special_values_are_byte_equal_to_json_dumps():
    every = "".join(map(chr, range(0x80))) + "é\u2028\u2029\U0001f600\ufeff\x7f\x9f"
    facts = [("p", every, Iri("http://example.org/é")), ("q", literal("05", "http://www.w3.org/2001/XMLSchema#int")),
             ("r", literal("chat", lang="fr"), 10**3999, -(2**63), 2**64 - 1), ("s", "<x>")]  # fmt: skip
    for through in (None, "u1", "0:17", 7, 1.5, 1e16, 1e-7, 2**64, {"p": [0.5]}):
        for some in (facts, facts[:2]):  # with a huge integer (json writes it) and without
            message = {"batch": -1, "through": through, "added": [fact_json(f, PRINTER) for f in some]}
            assert _encode(message) == _json_bytes(message)
    dead = {"reason": "invalid JSON: ...", "source": {"topic": "u", "partition": 0, "offset": 3}, "raw": every}
    assert _encode(dead) == _json_bytes(dead)
