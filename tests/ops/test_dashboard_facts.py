"""Facts on the page paste into "why", and every answer names the update it reflects."""

import json

from fluxmat.connectors.state import MemoryStateStore
from fluxmat.engine import Iri, Reasoner
from fluxmat.ops.inspect import StateView
from fluxmat.ops.metrics import delta_entry, fact_text
from fluxmat.stream.batch import BatchProcessor

PROGRAM = '@prefix ex: <http://example.org/> .\nreach(X, Y) :- link(X, Y).\nreach(X, Z) :- reach(X, Y), link(Y, Z).'


class Publisher:
    def __init__(self):
        self.deltas = []

    def publish_delta(self, batch, through, added, removed, causes=None):
        self.deltas.append({"batch": batch, "through": through, "added": added, "removed": removed})

    def publish_dead_letter(self, *args, **kw):
        pass


def test_published_facts_are_shown_as_text_that_why_answers():
    pub = Publisher()
    p = BatchProcessor(Reasoner.from_text(PROGRAM, "fd-counting"), MemoryStateStore(), pub)
    p.start([])
    facts = [("link", "a b", Iri("http://example.org/c")), ("link", Iri("http://example.org/c"), '"q"'),
             ("link", '"q"', "<not an iri>")]  # fmt: skip
    msg = json.dumps({"add": [p.codec.encode(f) for f in facts], "id": "u1"})
    p.process(0, [(0, 0, None, msg, None, True, len(msg))])
    entry = delta_entry(0, pub.deltas[-1], None, fact_text(p.reasoner))
    assert entry["n_added"] == 9 and len(entry["added_text"]) == 8
    assert entry["added"] == pub.deltas[-1]["added"][:8]  # as published, for API users
    assert 'link("a b", ex:c)' in entry["added_text"]  # prefixes compacted, strings quoted
    view = StateView(p.reasoner)
    for text in entry["added_text"]:
        answer = view.why(text)
        assert answer["found"], text  # every shown fact pastes into "why"
        assert answer["through"] == "u1"
    assert view.query("reach(?X, ?Y)")["through"] == "u1"


def test_without_a_reasoner_the_published_form_is_kept():
    out = {"through": 3, "added": [["p", "a"]], "removed": ["<http://x> <http://y> <http://z> ."]}
    entry = delta_entry(5, out, None)
    assert entry["added"] == [["p", "a"]] and entry["removed"] == out["removed"] and "added_text" not in entry


def test_answers_from_files_reflect_no_update():
    r = Reasoner.from_text(PROGRAM, "remat")
    r.load([("link", "a", "b")])
    assert "through" not in StateView(r).query("reach(?X, ?Y)")
