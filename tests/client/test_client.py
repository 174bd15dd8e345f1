"""The client library without a broker: wire decoding, the folding rules, the schemas, the SQLite store.

The folding rules are the consumer's side of the delta format (client/fold.py):
a batch is applied only when all its parts arrived, each exactly once; a
replayed batch is skipped; a message that is not a version-1 delta is refused
and nothing of its batch is applied.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fluxmat.client import (
    Folder,
    Iri,
    Literal,
    MemoryView,
    MessageError,
    arities_of,
    open_store,
    schema,
    wire,
)
from fluxmat.connectors.rdf import ntriples_lines
from fluxmat.engine import parse_program
from fluxmat.engine import syntax as es
from fluxmat.engine.wire import fact_json, value_from_json
from tests.support.gen import examples
from tests.support.messages import VALIDATORS, check_message

ROOT = Path(__file__).resolve().parent.parent.parent
XSD = "http://www.w3.org/2001/XMLSchema#"


# ------------------------------------------------------------------ import alone


def test_client_imports_without_spark_or_the_engine():
    code = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("engine", "connectors", "stream", "ops", "pyspark", "redis"):
            raise ImportError(f"blocked: {name}")
sys.meta_path.insert(0, Block())
from fluxmat import client
from fluxmat.client import Folder, MemoryView, DeltaFollower, UpdateProducer, open_store, schema
f = Folder()
b = f.offer(b'{"v":1,"batch":-1,"through":null,"part":0,"parts":1,"added":[["p","<http://x/a>",5]],"removed":[]}')
assert b.added == [("p", client.Iri("http://x/a"), 5)], b
assert schema("delta")["$id"].endswith("/delta/v2")
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


# ------------------------------------------------------------------ wire: the client decodes what the engine writes

IRIS = st.sampled_from(["http://x/a", "http://x/é", "urn:fluxmat:bnode:b1", "x", ""])
TEXT = st.text(max_size=6) | st.sampled_from(["<x>", "<http://x/a>", "<a b>", "<", ""])
ENGINE_VALUES = st.one_of(
    st.integers(-(2**70), 2**70), TEXT, IRIS.map(es.Iri),
    st.builds(lambda lex, dt: es.literal(lex, dt), st.sampled_from(["05", "5", "x", "-0"]),
              st.sampled_from([XSD + "int", XSD + "integer", XSD + "string", XSD + "date"])),
    st.builds(lambda lex, lang: es.literal(lex, lang=lang), TEXT, st.sampled_from(["fr", "en-GB"])),
)  # fmt: skip


def _as_client(value):
    if isinstance(value, es.Iri):
        return Iri(value.value)
    if isinstance(value, es.RdfLiteral):
        return Literal(value.lexical, value.datatype, value.lang)
    return value


@settings(max_examples=examples(400), deadline=None)
@given(st.sampled_from(["p", "ex:p", "http://x/p"]), st.lists(ENGINE_VALUES, max_size=4))
def test_client_decodes_and_encodes_facts_as_the_engine(pred, args):
    fact = (pred, *args)
    sent = json.loads(json.dumps(fact_json(fact)))  # through JSON, as on the topic
    decoded = wire.decode_fact(sent)
    assert decoded == (pred, *map(_as_client, args))
    assert [_as_client(value_from_json(a)) for a in sent[1:]] == list(decoded[1:])
    assert wire.encode_fact(decoded) == fact_json(fact)


def test_client_reads_ntriples_as_the_job_writes_them():
    ex = "http://example.org/"
    facts = [(f"{ex}knows", es.Iri(f"{ex}a"), es.Iri(f"{ex}b")), (f"{ex}Person", es.Iri(f"{ex}a")),
             (f"{ex}age", es.Iri(f"{ex}a"), 42), (f"{ex}name", es.Iri(f"{ex}a"), es.literal("Zoë \"z\"\n", lang="fr")),
             (f"{ex}d", es.Iri("urn:fluxmat:bnode:x1"), es.literal("05", XSD + "int")),
             (f"{ex}s", es.Iri(f"{ex}a"), "plain")]  # fmt: skip
    lines, others = ntriples_lines(facts)
    assert not others
    got = wire.ntriples_facts("".join(line + "\n" for line in lines))
    assert got == [(f[0], *map(_as_client, f[1:])) for f in facts]


# ------------------------------------------------------------------ the schemas and the client's checks agree

GOOD = {"v": 1, "batch": 3, "through": "u1", "part": 0, "parts": 2,
        "added": [["p", 1, "<http://x/a>", {"@value": "05", "@type": XSD + "int"}, {"@value": "c", "@language": "fr"}]],
        "removed": [["q"]]}  # fmt: skip
MUTATIONS = [
    ("v", None), ("v", 0), ("v", 2), ("v", "1"), ("batch", None), ("batch", -2), ("batch", 1.5), ("part", 2),
    ("parts", 0), ("part", True), ("through", None), ("added", "text"), ("added", [[]]), ("added", [[1, 2]]),
    ("added", [["p", 1.5]]), ("added", [["p", None]]), ("added", [["p", True]]), ("added", [["p", {"@value": 1}]]),
    ("added", [["p", {"@value": "x", "@type": ""}]]), ("removed", [["p", {"@value": "x", "@type": "t", "@language": "f"}]]),
    ("removed", [["", 1]]), ("key", 5), ("key", "tenant"), ("format", "turtle"), ("extra", 1), ("not_triples", {}),
]  # fmt: skip


def _mutate(name, value):
    msg = json.loads(json.dumps(GOOD))
    if value is None and name != "through":
        msg.pop(name)
    else:
        msg[name] = value
    return msg


def _client_accepts(msg) -> bool:
    try:
        Folder().offer(json.dumps(msg).encode())
    except MessageError:
        return False
    return True


def _schema_accepts(msg, kind="delta") -> bool:
    """Both validators' answer: fastjsonschema on the draft-7 form, jsonschema on the 2020-12 schema."""
    try:
        check_message(msg, kind)
        fast = True
    except AssertionError:
        fast = False
    full = jsonschema.Draft202012Validator(schema(kind)).is_valid(msg)
    assert fast == full, (kind, msg)
    return full


@pytest.mark.parametrize("name,value", MUTATIONS, ids=[f"{n}={v!r}" for n, v in MUTATIONS])
def test_the_client_refuses_exactly_what_the_delta_schema_refuses(name, value):
    msg = _mutate(name, value)
    in_range = not (isinstance(msg.get("part"), int) and isinstance(msg.get("parts"), int)
                    and msg["part"] >= msg["parts"])  # the one rule JSON Schema cannot state
    assert _client_accepts(msg) == (_schema_accepts(msg) and in_range)


def test_ntriples_deltas_and_dead_letters_validate():
    nt = {"v": 1, "key": "k", "batch": 0, "through": None, "part": 0, "parts": 1, "format": "ntriples",
          "added": "<http://x/a> <http://x/p> <http://x/b> .\n", "removed": "",
          "not_triples": {"added": [["edge", "a", "b"]], "removed": []}}  # fmt: skip
    assert _schema_accepts(nt) and _client_accepts(nt)
    assert not _schema_accepts({**nt, "added": []}) and not _client_accepts({**nt, "added": []})
    dead = {"v": 1, "reason": "invalid JSON", "source": {"topic": "u", "partition": 0, "offset": 3}, "raw": "{"}
    assert _schema_accepts(dead, "dead-letter")
    assert not _schema_accepts({k: v for k, v in dead.items() if k != "v"}, "dead-letter")


def test_update_schema():
    ok = [{"add": [["edge", "a", "b"]], "del": [], "id": "u1"}, {"format": "nquads", "add": "", "id": 3}, {}]
    bad = [{"add": "x"}, {"add": [["edge", 1.5]]}, {"format": "turtle", "add": ""}, {"ad": []},
           {"format": "ntriples", "add": [["edge", "a"]]}]  # fmt: skip
    assert all(_schema_accepts(m, "update") for m in ok)
    assert not any(_schema_accepts(m, "update") for m in bad)
    assert set(VALIDATORS) == {"update", "delta", "dead-letter"}


# ------------------------------------------------------------------ folding


def delta(batch, part=0, parts=1, added=(), removed=(), key=None, through="t"):
    msg = {"v": 1, "batch": batch, "through": through, "part": part, "parts": parts,
           "added": [list(f) for f in added], "removed": [list(f) for f in removed]}  # fmt: skip
    if key is not None:
        msg["key"] = key
    return json.dumps(msg).encode()


def test_a_batch_is_applied_once_all_its_parts_arrived_and_a_resent_part_counts_once():
    f = Folder()
    assert f.offer(delta(-1, 0, 3, [("e", "a", "b")]), 0, 10) is None
    assert f.offer(delta(-1, 1, 3, [("e", "b", "c")]), 0, 11) is None
    assert f.offer(delta(-1, 1, 3, [("e", "b", "c")]), 0, 12) is None  # resent after an ambiguous failure
    assert f.resume() == {0: 10}  # a restart must read the batch's first part again
    b = f.offer(delta(-1, 2, 3, [], [("e", "x", "y")]), 0, 13)
    assert (b.batch, b.first, b.added, b.removed) == (-1, True, [("e", "a", "b"), ("e", "b", "c")], [("e", "x", "y")])
    assert f.resume() == {0: 14}


def test_a_replayed_batch_is_skipped_and_a_newer_one_applied():
    f = Folder()
    f.offer(delta(-1, added=[("e", "a", "b")]), 0, 0)
    f.offer(delta(0, added=[("e", "b", "c")]), 0, 1)
    assert f.offer(delta(0, added=[("e", "b", "c")]), 0, 2) is None  # the job replayed batch 0
    assert f.offer(delta(-1, added=[("e", "a", "b")]), 0, 3) is None
    b = f.offer(delta(1, removed=[("e", "a", "b")]), 0, 4)
    assert (b.batch, b.first) == (1, False)


def test_a_replay_split_differently_replaces_the_parts_assembled_so_far():
    f = Folder()
    f.offer(delta(2, 0, 3, [("e", "a", "b")]), 0, 0)
    assert f.offer(delta(2, 0, 2, [("e", "a", "b")]), 0, 1) is None
    b = f.offer(delta(2, 1, 2, [("e", "c", "d")]), 0, 2)
    assert b.added == [("e", "a", "b"), ("e", "c", "d")]


def test_keys_fold_independently_and_one_key_can_be_followed_alone():
    every, one = Folder(), Folder(key="k2")
    msgs = [delta(0, 0, 2, [("e", 1)], key="k1"), delta(0, 0, 1, [("e", 2)], key="k2"),
            delta(0, 1, 2, [("e", 3)], key="k1"), delta(0, 0, 1, [("e", 2)], key="k2")]  # fmt: skip
    got = [b for i, m in enumerate(msgs) if (b := every.offer(m, 0, i)) is not None]
    assert [(b.key, b.added) for b in got] == [("k2", [("e", 2)]), ("k1", [("e", 1), ("e", 3)])]
    mine = [b for i, m in enumerate(msgs) if (b := one.offer(m, 0, i)) is not None]
    assert [(b.key, b.added) for b in mine] == [("k2", [("e", 2)])]


def test_a_batch_that_begins_before_the_previous_is_complete_is_refused():
    f = Folder()
    f.offer(delta(4, 0, 2, [("e", 1)]), 0, 0)
    with pytest.raises(MessageError, match="batch 5 .* began before batch 4 was complete"):
        f.offer(delta(5, 0, 1, [("e", 2)]), 0, 1)


@pytest.mark.parametrize("bad,why", [
    (b'{"batch": 0, "through": null, "part": 0, "parts": 1, "added": [], "removed": []}', "older than format version 1"),
    (b'{"v": 3, "batch": 0, "through": null, "part": 0, "parts": 1, "added": [], "removed": []}', "format version 3"),
    (delta(0, 1, 2, [("e", "b")])[:-17], "not JSON"),  # a truncated part
    (delta(0, 1, 2, [("e", 1.5)]), "expected an integer, a string or a literal"),
])  # fmt: skip
def test_a_bad_part_is_refused_and_nothing_of_its_batch_is_applied(tmp_path, bad, why):
    store = open_store(f"sqlite:///{tmp_path / 'view.db'}")
    f = Folder(store.load("t").batches)
    store.apply(f.offer(delta(-1, added=[("e", "a")]), 0, 0), "t", f.resume())
    assert f.offer(delta(0, 0, 2, [("e", "b")]), 0, 1) is None
    with pytest.raises(MessageError, match=why) as info:
        f.offer(bad, 0, 2)
    assert "partition 0 offset 2" in str(info.value)
    store.close()
    store = open_store(f"sqlite:///{tmp_path / 'view.db'}")
    progress = store.load("t")
    assert store.facts() == {("e", "a")} and progress.batches == {None: -1} and progress.offsets == {0: 1}


# ------------------------------------------------------------------ the SQLite store

ODD = [("p", 7, 2**80, -(2**63)), ("p", "x", "<not an iri>", ""), ("q", Iri("http://x/é")),
       ("r", Literal("05", XSD + "int"), Literal("chat", "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString", "fr")),
       ("http://x/onto#Person", Iri("http://x/a")), ("z",), ("fluxmat_progress", 1)]  # fmt: skip


def test_sqlite_keeps_every_kind_of_constant_and_restarts_where_it_was(tmp_path):
    url = f"sqlite:///{tmp_path / 'v.db'}"
    store = open_store(url)
    f = Folder(store.load("t").batches)
    for i, m in enumerate([delta(-1, 0, 2, [wire.encode_fact(x) for x in ODD[:3]], key="k"),
                           delta(-1, 1, 2, [wire.encode_fact(x) for x in ODD[3:]], key="k"),
                           delta(0, removed=[wire.encode_fact(ODD[0])], key="k", through={"p": [1, 2]})]):  # fmt: skip
        b = f.offer(m, 0, i)
        if b is not None:
            store.apply(b, "t", f.resume())
    store.close()
    store = open_store(url)
    progress = store.load("t")
    assert store.facts("k") == set(ODD[1:]) and store.facts() == set()
    assert progress.batches == {"k": 0} and progress.through == {"k": {"p": [1, 2]}} and progress.offsets == {0: 3}
    tables = dict(store.conn.execute("SELECT table_name, predicate FROM fluxmat_predicates").fetchall())
    assert tables["Person_1"] == "http://x/onto#Person" and tables["p_3"] == "p"
    assert store.conn.execute("SELECT a1, a1_type, a1_int, a2_int FROM p_3").fetchall() == [("x", "string", None, None)]
    store.close()


def test_memory_view_tells_each_change_with_its_batch():
    seen = []
    view = MemoryView(on_change=seen.append)
    f = Folder()
    for i, m in enumerate([delta(-1, added=[("e", 1), ("e", 2)], through=None), delta(0, added=[("e", 3)], removed=[("e", 1)])]):
        b = f.offer(m, 0, i)
        view.apply(b, "t", f.resume())
    assert view.facts() == {("e", 2), ("e", 3)}
    assert [(c.fact, c.added, c.batch) for c in seen[2:]] == [(("e", 1), False, 0), (("e", 3), True, 0)]


# ------------------------------------------------------------------ arities of a program


@pytest.mark.parametrize("path", sorted((ROOT / "tests" / "golden").rglob("*.dl"))[:60], ids=lambda p: p.name)
def test_arities_of_agrees_with_the_parser(path):
    text = path.read_text(encoding="utf-8")
    try:
        program = parse_program(text, str(path))
    except Exception:
        pytest.skip("not a valid program")
    expected: dict[str, set[int]] = {}
    atoms = [a for r in program.rules for a in (r.head, *r.body)] + list(program.facts)
    for atom in atoms:
        atom = getattr(atom, "atom", atom)  # a negated atom
        if isinstance(atom, es.Atom):
            expected.setdefault(atom.pred, set()).add(len(atom.args))
    got = arities_of(text)
    assert {p: got.get(p) for p in expected} == expected


def test_a_refused_message_does_not_move_the_resume_offset():
    f = Folder()
    f.offer(delta(-1, added=[("e", "a")]), 0, 0)
    with pytest.raises(MessageError):
        f.offer(delta(0, added=[("e", 1.5)]), 1, 5)  # a bad fact on another partition
    assert f.resume() == {0: 1}  # partition 1 is read again from where it was


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(ENGINE_VALUES, max_size=4))
def test_a_facts_key_is_the_same_with_or_without_orjson(args):
    fact = wire.decode_fact(json.loads(json.dumps(fact_json(("p", *args)))))
    plain = json.dumps(fact_json(("p", *args))[1:], ensure_ascii=False, separators=(",", ":"))
    assert wire.fact_key(fact) == plain
