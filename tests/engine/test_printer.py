"""Printing a fact yields text that reads back as the same fact (engine.printer).

`fluxmat materialise` output can be given back as a facts file, and every fact
the dashboard or `why` shows can be pasted into a question: for arbitrary
predicate names and constants (spaces, quotes, backslashes, unicode, lone
surrogates, strings that look like IRIs, prefixed names or numbers, big and
negative integers, IRIs) the printed fact parses to the fact that was printed.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fluxmat.engine import Iri, atom_to_fact, parse_facts
from fluxmat.engine.printer import FactPrinter
from fluxmat.engine.syntax import MAX_INT_DIGITS
from tests.support.gen import examples

PREFIXES = (("ex", "http://example.org/"), ("p", "http://p.org/ns#"), ("", "http://empty/"))

# Characters that make printing hard: quotes, backslashes, brackets, whitespace of
# every kind, `%` and `//` (comments), `:` and `.` (prefixed names), a lone surrogate.
TRICKY = st.sampled_from(list(' "\\<>()[],.:%/?_-\t\n\r\x00\x1f\x7f\u00e9\u2028\u00a0\U0001f600\ud800'))
# (st.text drops surrogates from any alphabet: join a list instead)
TEXT = st.lists(st.one_of(TRICKY, st.characters(codec="utf-8")), max_size=12).map("".join)
LOOKALIKES = st.sampled_from([
    "a", "not", "NOT", "PREFIX", "@prefix", "X", "_", "_1", "?x", "5", "-5", "007", "1.5", "",
    "ed ge", "<http://example.org/a>", "http://example.org/a", "ex:a", "p:x", "zz:x", ":a",
    "a:b:c", "a.b", "a-b", '"q"', "<>", "<a b>", "x%y", "x//y", "e\u0301",
])  # fmt: skip
IRI_TEXT = st.text(st.characters(codec="ascii", exclude_characters=' <>"\t\n\r\x0b\x0c\x1c\x1d\x1e\x1f'),
                   max_size=12)  # fmt: skip
NAMES = st.one_of(LOOKALIKES, TEXT, IRI_TEXT.map(lambda s: "http://example.org/" + s))
BIG = 10**MAX_INT_DIGITS - 1
VALUES = st.one_of(
    NAMES,
    st.integers(-(10**30), 10**30),
    st.sampled_from([0, -1, BIG, -BIG, 2**63, -(2**63) - 1]),
    IRI_TEXT.map(Iri),
    st.sampled_from(["http://example.org/", "http://p.org/ns#x", "http://empty/y"]).map(Iri),
)
FACTS = st.tuples(NAMES, st.lists(VALUES, max_size=4)).map(lambda t: (t[0], *t[1]))


def reads_back(fact: tuple, prefixes=PREFIXES) -> None:
    text = FactPrinter(prefixes).fact(fact)
    text.encode("utf-8")  # printable to a UTF-8 file or terminal
    atoms = parse_facts(text, "<printed>", dict(prefixes))
    assert [atom_to_fact(a) for a in atoms] == [fact], text


@settings(max_examples=examples(1500), deadline=None)
@given(FACTS, st.booleans())
def test_every_printed_fact_reads_back_as_itself(fact, with_prefixes):
    reads_back(fact, PREFIXES if with_prefixes else ())


def test_examples_that_did_not_read_back():
    """Found by hand before the property existed (issue 14)."""
    for fact in [("ed ge", "a"), ("p:x", "a"), ("not",), ('a"b', "\\"), ("x", "\ud800"),
                 ("x", "5", 5, -5), ("http://p.org/ns#q", Iri("http://example.org/a"))]:  # fmt: skip
        reads_back(fact)
    assert FactPrinter(PREFIXES).fact(("ed ge", "a")) == '"ed ge"(a).'
    assert FactPrinter(PREFIXES).fact(("p:x", "a")) == "<p:x>(a)."  # not p:x, which reads as an IRI
    assert FactPrinter(()).fact(("p:x", "a")) == "p:x(a)."
