"""JsonFacts (engine.wire): JSON facts read with their predicates and constants kept -- exactly fact_from_json."""

import json

import pytest
from hypothesis import given, settings

from fluxmat.connectors.files import decode_json, parse_update
from fluxmat.engine import Iri, JsonFacts, ParseError, atom_to_fact
from fluxmat.engine.printer import FactPrinter
from fluxmat.engine.syntax import MAX_INT_DIGITS
from fluxmat.engine.wire import fact_from_json, fact_json
from tests.support.gen import FACTS, examples

PREFIXES = {"ex": "http://example.org/", "p": "http://p/"}
PRINTER = FactPrinter(PREFIXES.items())


def _slow(item, prefixes=PREFIXES, where=""):
    return atom_to_fact(fact_from_json(item, prefixes, where))


@settings(max_examples=examples(300), deadline=None)
@given(FACTS)
def test_a_fact_reads_as_fact_from_json_reads_it_first_and_from_the_kept_terms(fact):
    item = decode_json(json.dumps(fact_json(fact, PRINTER), ensure_ascii=False))
    reader = JsonFacts(PREFIXES)
    assert reader.fact(item) == _slow(item) == fact
    assert reader.fact(item) == fact  # again, from the kept predicate and constants


BAD = [
    ["p", 10 ** (MAX_INT_DIGITS + 1)],  # too many digits
    ["p", True],
    ["p", 1.5],
    ["p", ["a"]],
    ["p", {"@value": 1}],
    ["p", None],
    ["", "a"],
    [],
    "p",
    [3, "a"],
]


@pytest.mark.parametrize("item", BAD, ids=range(len(BAD)))
def test_a_bad_fact_gets_fact_from_json_s_error(item):
    with pytest.raises(ParseError) as want:
        _slow(item, where="m: add[0]")
    reader = JsonFacts(PREFIXES)
    reader.fact(["p", "a", 1])  # kept terms do not let a bad part through
    with pytest.raises(ParseError) as got:
        reader.fact(item, "m: add[0]")
    assert str(got.value) == str(want.value)


def test_literals_iris_and_prefixed_names_read_as_fact_from_json_reads_them():
    items = [["ex:r", "<http://a/>", "<not an iri", "ex:b", 7], ["<ex:r>", {"@value": "<x>"}],
             ["p", {"@value": "05", "@type": "http://www.w3.org/2001/XMLSchema#int"}]]  # fmt: skip
    reader = JsonFacts(PREFIXES)
    for _ in range(2):
        assert [reader.fact(i) for i in items] == [_slow(i) for i in items]
    assert reader.fact(items[0])[:2] == ("http://example.org/r", Iri("http://a/"))


def test_other_prefixes_get_a_reader_of_their_own():
    reader = JsonFacts({"ex": "http://one/"})
    assert reader.fact(["ex:r", "a"]) == ("http://one/r", "a")
    other = reader.of({"ex": "http://two/"})
    assert other.fact(["ex:r", "a"]) == ("http://two/r", "a")
    assert reader.of(reader.prefixes) is reader


def test_kept_terms_are_bounded():
    reader = JsonFacts(PREFIXES, limit=3)
    for i in range(10):
        assert reader.fact(["p", f"a{i}", f"<http://x/{i}>"]) == ("p", f"a{i}", Iri(f"http://x/{i}"))
        assert len(reader.args) <= 3 and len(reader.preds) <= 3


def test_an_update_s_bad_fact_is_named_by_its_place():
    reader = JsonFacts(PREFIXES)
    item = {"add": [["p", "a"], ["p", 1.5]], "del": []}
    with pytest.raises(ParseError, match=r"^partition 0 offset 3: add\[1\]: expected an integer or a string"):
        parse_update(item, PREFIXES, "partition 0 offset 3", reader)
    assert parse_update({"del": [["ex:q", "b"]]}, PREFIXES, "w", reader).delete == (
        ("http://example.org/q", "b"),
    )
