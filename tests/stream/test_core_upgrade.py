"""A namespace kept by the objects core before the arrays core became the default (stream.loading.settle_core).

Without `--core` (or FLUXMAT_CORE, or a --config key) the job goes on with
the stored state's core and says so in one line; a chosen core that differs
is refused as before. The same for the local snapshot and for a keyed
namespace (whose own state records the core its keys run on).
"""

import json

import pytest

from fluxmat.connectors.state import RedisStateStore
from fluxmat.engine import StateChanges, StateMismatch
from fluxmat.stream.batch import BatchProcessor
from fluxmat.stream.config_sources import load
from fluxmat.stream.keyed import KeyedDriver
from fluxmat.stream.loading import load_reasoner, settle_core
from fluxmat.stream.snapshots import Snapshots

PROGRAM = "path(X, Y) :- edge(X, Y).\npath(X, Z) :- path(X, Y), edge(Y, Z).\n"
INITIAL = [("edge", "a", "b"), ("edge", "b", "c")]


class Publisher:
    def publish_delta(self, batch, through, added, removed, causes=None):
        pass

    def publish_dead_letter(self, *args, **kw):
        raise AssertionError(f"unexpected dead letter {args[:1]}")


@pytest.fixture
def job(redis_server, tmp_path, request):
    """The sources of a job (flags as `fluxmat run` gives them) and its namespace's store, emptied."""
    program = tmp_path / "path.dl"
    program.write_text(PROGRAM, encoding="utf-8")
    namespace = request.node.name[:40]
    flags = {"program": str(program), "bootstrap_servers": "127.0.0.1:9", "updates_topic": "u",
             "deltas_topic": "d", "redis": redis_server.url, "namespace": namespace,
             "checkpoint": str(tmp_path / "ckpt")}  # fmt: skip
    store = RedisStateStore(redis_server.url, namespace=namespace)
    store.clear()
    yield flags, store
    store.clear()
    store.close()


def processor(cfg, store) -> BatchProcessor:
    return BatchProcessor(load_reasoner(cfg, log=lambda m: None), store, Publisher())


def keep_objects_state(flags, store, snapshots=None):
    """What a job of the previous version left: the objects core's state of two batches (and its snapshot)."""
    proc = processor(load({**flags, "core": "objects"}), store)
    proc.start(INITIAL)
    proc.process(0, [(0, 0, None, json.dumps({"add": [["edge", "c", "d"]]}), None)])
    assert "core" not in store.state_meta()  # as the objects core's states have always been
    if snapshots is not None:
        assert snapshots.write(proc.committed, proc.reasoner)
    return proc.reasoner.facts()


def test_without_core_a_stored_objects_state_goes_on_with_the_objects_core(job):
    flags, store = job
    facts = keep_objects_state(flags, store)
    lines = []
    cfg = settle_core(load(flags, environ={}), store.state_meta(), lines.append)
    assert cfg.core == "objects"
    assert len(lines) == 1 and "kept by core=objects" in lines[0] and "another --namespace" in lines[0]
    proc = processor(cfg, store)
    assert proc.start(INITIAL).startswith("restored state of batch 0")
    assert proc.reasoner.core == "objects" and proc.reasoner.facts() == facts
    # a new namespace (nothing stored) starts on the default, silently
    fresh = settle_core(load({**flags, "namespace": "elsewhere"}, environ={}), {}, lines.append)
    assert fresh.core == "arrays" and len(lines) == 1


@pytest.mark.parametrize("given", ["flag", "env", "file"])
def test_a_chosen_core_that_differs_is_refused(job, tmp_path, given):
    flags, store = job
    keep_objects_state(flags, store)
    config = tmp_path / "job.toml"
    config.write_text('core = "arrays"\n', encoding="utf-8")
    sources = {"flag": ({**flags, "core": "arrays"}, {}, None), "env": (flags, {"FLUXMAT_CORE": "arrays"}, None),
               "file": (flags, {}, str(config))}[given]  # fmt: skip
    lines = []
    cfg = settle_core(load(*sources), store.state_meta(), lines.append)
    assert cfg.core == "arrays" and lines == []
    with pytest.raises(StateMismatch, match="kept by core=objects .* run it with --core objects"):
        processor(cfg, store).start(INITIAL)


def test_with_equality_a_stored_objects_state_is_refused_not_gone_on_with(job):
    flags, store = job
    keep_objects_state(flags, store)
    lines = []
    cfg = settle_core(load({**flags, "equality": "rewrite"}, environ={}), store.state_meta(), lines.append)
    assert cfg.core == "arrays" and lines == []  # the objects core cannot run equality in the job
    with pytest.raises(StateMismatch, match="kept by core=objects"):
        processor(cfg, store).start(INITIAL)


def test_the_local_snapshot_of_an_objects_state_is_used(job, tmp_path):
    flags, store = job
    snapshots = Snapshots(tmp_path / "snap", flags["namespace"])
    facts = keep_objects_state(flags, store, snapshots)
    cfg = settle_core(load(flags, environ={}), store.state_meta(), lambda line: None)
    proc = processor(cfg, store)
    said = proc.start(INITIAL, snapshots=snapshots)
    assert "from the local snapshot" in said and proc.reasoner.facts() == facts


def test_a_keyed_namespace_records_its_core_and_an_old_one_goes_on_with_objects(job):
    flags, store = job
    keyed = {**flags, "partition_by": "message-key"}
    store.commit(0, StateChanges(meta={}), {"dead": []})  # a namespace of the previous version: no core recorded
    lines = []
    assert settle_core(load(keyed, environ={}), store.state_meta(), lines.append).core == "objects"
    assert len(lines) == 1
    KeyedDriver(load({**keyed, "core": "arrays"}), store, Publisher()).commit(1, [], None)
    assert store.state_meta()["core"] == "arrays"
    assert settle_core(load(keyed, environ={}), store.state_meta(), lines.append).core == "arrays"
    KeyedDriver(load({**keyed, "core": "objects"}), store, Publisher()).commit(2, [], None)
    assert settle_core(load(keyed, environ={}), store.state_meta(), lines.append).core == "objects"
