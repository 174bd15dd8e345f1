"""`fluxmat export`: the job's stored facts out of the dictionary-encoded state, as the `--facts` JSON Lines."""

import json

import pytest

from fluxmat.connectors.files import read_facts
from fluxmat.connectors.state import RedisStateStore
from fluxmat.engine import EngineOptions, Reasoner
from fluxmat.ops import inspect
from fluxmat.ops.cli import main
from fluxmat.stream.batch import BatchProcessor
from tests.support.shared import Recorder

PROGRAM = """@prefix ex: <http://example.org/> .
ex:reach(X, Y) :- ex:edge(X, Y).
ex:reach(X, Z) :- ex:reach(X, Y), ex:edge(Y, Z).
tag(X, L) :- label(X, L).
"""
FACTS = [("http://example.org/edge", "<http://example.org/a>", "<http://example.org/b>"),
         ("http://example.org/edge", "<http://example.org/b>", 7),
         ("label", "<http://example.org/a>", "<not an IRI>"), ("label", 7, "é, \"quoted\"; x")]  # fmt: skip


@pytest.fixture(params=["objects", "arrays"])
def state(redis_server, tmp_path, request):
    """A job's state after its first batch: per-field (objects core) or bulk (arrays core, connectors.bulk_state)."""
    from fluxmat.engine.wire import value_from_json

    program = tmp_path / "p.dl"
    program.write_text(PROGRAM, encoding="utf-8")
    reasoner = Reasoner.from_file(program, options=EngineOptions("fd-counting", core=request.param))
    store = RedisStateStore(redis_server.url, "export")
    store.clear()
    facts = [(f[0], *(value_from_json(a) for a in f[1:])) for f in FACTS]
    proc = BatchProcessor(reasoner, store, Recorder())
    proc.start(facts[:3])
    update = json.dumps({"add": [["label", 7, "é, \"quoted\"; x"], ["ex:edge", "<http://example.org/b>", "<http://example.org/c>"]],
                         "del": [["ex:edge", "<http://example.org/b>", 7]]})  # fmt: skip
    proc.process(0, [(0, 0, None, update, None, True, len(update))])
    assert (store.meta().get("layout") == "bulk") == (request.param == "arrays")
    yield program, store, reasoner
    store.clear()
    store.close()


def test_export_prints_the_explicit_facts_that_read_back_the_same(state, capsys, tmp_path, redis_server):
    program, _store, reasoner = state
    for flags, expected in (([], set(reasoner.explicit())), (["--all"], reasoner.facts())):
        assert main(["export", str(program), "--redis", redis_server.url, "--namespace", "export", *flags]) == 0
        out, err = capsys.readouterr()
        lines = out.splitlines()
        assert lines == sorted(lines) and len(lines) == len(expected) > 0
        assert err.strip() == f"{len(lines)} {'facts' if flags else 'explicit facts'} of batch 0, program version 1"
        path = tmp_path / "explicit.jsonl"
        path.write_text(out, encoding="utf-8")
        assert set(read_facts(path, reasoner.prefixes)) == expected  # prefixed predicates, literals, ints
    assert '["ex:edge", "<http://example.org/a>", "<http://example.org/b>"]' in out


def test_export_refuses_a_state_that_changed_while_it_was_read(state, capsys, monkeypatch, redis_server):
    """A batch committed during the read would mix two batches' states: the export says so instead."""
    program, store, reasoner = state
    real = inspect.from_store

    def read_while_the_job_commits(*args, **kw):
        view = real(*args, **kw)
        store.commit(1, reasoner.export_changes(), {"through": None, "added": [], "removed": [], "dead": []})
        return view

    monkeypatch.setattr(inspect, "from_store", read_while_the_job_commits)
    assert main(["export", str(program), "--redis", redis_server.url, "--namespace", "export"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "the job committed batch 1 while batch 0's state was read" in err


def test_export_of_an_empty_namespace_is_a_clear_error(capsys, tmp_path, redis_server):
    program = tmp_path / "p.dl"
    program.write_text(PROGRAM, encoding="utf-8")
    assert main(["export", str(program), "--redis", redis_server.url, "--namespace", "nothing-here"]) == 1
    assert "no fluxmat state in" in capsys.readouterr().err


def test_export_reads_a_state_whose_program_changed_and_names_its_version(redis_server, capsys, tmp_path):
    """A changed program (stream.live_program) is read with the program in force; `--program` names its origin."""
    from fluxmat.engine import EngineOptions

    program = tmp_path / "p.dl"
    program.write_text("path(X, Y) :- edge(X, Y).\n", encoding="utf-8")
    store = RedisStateStore(redis_server.url, "export-changed")
    store.clear()
    try:
        reasoner = Reasoner.from_file(program, options=EngineOptions("fd-counting", core="arrays"))
        proc = BatchProcessor(reasoner, store, Recorder())
        proc.start([("edge", "a", "b"), ("edge", "b", "c")])
        change = json.dumps({"program": {"add": "path(X, Z) :- path(X, Y), edge(Y, Z)."}})
        proc.process(0, [(0, 0, None, change, None, True, len(change))])
        args = ["export", str(program), "--redis", redis_server.url, "--namespace", "export-changed", "--all"]
        assert main(args) == 0
        out, err = capsys.readouterr()
        assert err.strip() == "5 facts of batch 0, program version 2"
        assert '["path", "a", "c"]' in out.splitlines()
    finally:
        store.clear()
        store.close()
