"""Looking into a materialisation: `fluxmat query`, `fluxmat why` and the dashboard's questions.

A `StateView` wraps a loaded `Reasoner` and answers two questions: which facts
match a pattern (`query`), and why a fact is in the materialisation (`why`, a
well-founded proof down to explicit facts; see engine.why). The state comes from
the streaming job's store (`from_store`: Redis, checked against the program's
fingerprint, with FD-Counting's derivation log), from files (`from_files`), or
from a running job (the dashboard passes its live reasoner and the job's lock,
so a question never sees a half-applied batch).
"""

from __future__ import annotations

import json
import sys
import threading
from contextlib import contextmanager
from itertools import islice

from fluxmat.connectors.files import read_facts
from fluxmat.connectors.programs import build_reasoner
from fluxmat.connectors.redact import redact
from fluxmat.connectors.state import INITIAL, open_store
from fluxmat.engine import EngineOptions, FluxmatError, Limits, Reasoner, atom_to_fact
from fluxmat.engine.parser import parse_facts, parse_pattern
from fluxmat.engine.why import is_capped, proof_size, render, to_json
from fluxmat.stream import live_program


class Busy(FluxmatError):
    """The job held its lock for longer than the question may wait."""


class StateView:
    """Answers `query` and `why` over one reasoner's current materialisation.

    A question waits at most `wait` seconds for `lock` (the job's batch lock),
    then raises `Busy`.
    """

    def __init__(self, reasoner: Reasoner, lock: threading.Lock | None = None, wait: float = 1.5):
        self.reasoner = reasoner
        self.lock = lock or threading.Lock()
        self.wait = wait
        self._triples = None  # (version, facts) and (version, TripleStore) for sparql()
        self._store = None

    @contextmanager
    def _locked(self):
        if not self.lock.acquire(timeout=self.wait):
            raise Busy(f"the job is busy with a micro-batch for more than {self.wait:g} s; try again")
        try:
            yield
        finally:
            self.lock.release()

    def _show(self, fact: tuple) -> str:
        return self.reasoner.show(fact)

    def query(self, pattern: str, limit: int | None = None, exact: bool = True) -> dict:
        """`{"pattern", "count", "facts", "truncated", "through"}`: matching facts, sorted, as text.

        `through` names the last update the answer reflects (read under the lock;
        absent when the state was not streamed).

        `exact` (the CLI) counts every match and shows the `limit` first in
        order. Otherwise (the dashboard) matching stops after `limit` + 1
        matches: `count` is then the number shown and `truncated` says there are
        more. Only matching and decoding hold the lock; sorting does not.
        """
        if limit is not None and limit < 0:
            raise FluxmatError(f"the limit must be at least 0, got {limit}")
        atom = parse_pattern(pattern, self.reasoner.prefixes)
        stop = None if exact or limit is None else limit + 1
        with self._locked():
            found = list(islice(self.reasoner.match(atom), stop))
            through = self._through()
        texts = sorted(map(self._show, found))
        shown = texts if limit is None else texts[:limit]
        count = len(texts) if exact or len(texts) <= len(shown) else len(shown)
        return _as_of({"pattern": pattern, "count": count, "facts": shown,
                        "truncated": len(shown) < len(texts)}, through)  # fmt: skip

    def _through(self):
        """The id of the last update the materialisation reflects (None: none, or not streamed)."""
        return self.reasoner.last_id if self.reasoner.fully_dynamic else None

    def sparql(self, query: str, fmt: str | None = None, limits=None, source: str = "<query>"):
        """(connectors.sparql.Answer, facts that are not triples) for a SPARQL query.

        The triple store is built from the facts under the lock and kept until the
        materialisation changes; the query itself runs outside the lock, bounded.
        """
        from fluxmat.connectors.sparql import Limits, TripleStore

        r = self.reasoner
        with self._locked():
            version = r.version()
            if self._triples is None or self._triples[0] != version:
                self._triples = (version, list(r.facts()))
            facts = self._triples
        if self._store is None or self._store[0] != facts[0]:
            self._store = (facts[0], TripleStore(facts[1]))
        store = self._store[1]
        return store.answer(query, fmt, limits or Limits(), source), store.skipped

    def why(self, fact_text: str, max_depth: int | None = None, max_nodes: int | None = None,
            max_facts: int = 200_000) -> dict:  # fmt: skip
        """`{"fact", "found", "lines", "proof", "nodes", "truncated", "through"}` for one ground fact.

        The proof is searched visiting at most `max_facts` facts, under the lock;
        it is shown with at most `max_depth` levels and `max_nodes` nodes (`… N
        more` for the rest), outside the lock.
        """
        text = fact_text.strip()
        atoms = parse_facts(text if text.endswith(".") else text + ".", "<fact>", self.reasoner.prefixes)
        if len(atoms) != 1:
            raise FluxmatError(f"expected one fact, found {len(atoms)}")
        fact = atom_to_fact(atoms[0])
        with self._locked():
            proof = self.reasoner.explain(fact, max_facts)
            through = self._through()
        shown = self._show(fact)
        if proof is None:
            return _as_of({"fact": shown, "found": False, "lines": [f"{shown} is not in the materialisation"]},
                          through)  # fmt: skip
        nodes = proof_size(proof)[id(proof)]
        lines = render(proof, self._show, max_depth, max_nodes)
        return _as_of({"fact": shown, "found": True, "lines": lines,
                       "proof": to_json(proof, self._show, max_depth, max_nodes), "nodes": nodes,
                       "truncated": is_capped(proof, max_depth, max_nodes)}, through)  # fmt: skip


def _as_of(answer: dict, through) -> dict:
    """The answer with `through`, the last update it reflects (only a streamed state has one)."""
    if through is not None:
        answer["through"] = through
    return answer


def json_text(value, default=str) -> str:
    """`json.dumps(value, ensure_ascii=False, default=default)` without recursion.

    Proofs thousands of steps deep nest their JSON as deep; Python's encoder
    recurses once per level and stops at the recursion limit.
    """
    parts: list[str] = []
    stack: list = [value]
    while stack:
        item = stack.pop()
        if type(item) is _Text:
            parts.append(item)
        elif isinstance(item, dict) and item:
            stack.append(_Text("}"))
            entries = list(item.items())
            for i in range(len(entries) - 1, -1, -1):
                key, val = entries[i]
                key = key if isinstance(key, str) else json.dumps(key)
                stack.append(val)
                stack.append(_Text(("{" if i == 0 else ", ") + json.dumps(key, ensure_ascii=False) + ": "))
        elif isinstance(item, list | tuple) and item:
            stack.append(_Text("]"))
            for i in range(len(item) - 1, -1, -1):
                stack.append(item[i])
                stack.append(_Text("[" if i == 0 else ", "))
        else:
            parts.append(json.dumps(item, ensure_ascii=False, default=default))
    return "".join(parts)


class _Text(str):
    """JSON text already encoded (json_text's punctuation)."""


def _reasoner(program: str | None, options: EngineOptions, ontologies, owl_rules: str = "axioms") -> Reasoner:
    """The program plus the ontologies' rules, as `run` built it (warnings to stderr)."""
    return build_reasoner(program, ontologies, options, owl_rules,
                          warn=lambda line: print(f"fluxmat: warning: {line}", file=sys.stderr))


def from_store(program: str | None, url: str, namespace: str = "default", ontologies=(),
               store=None, key: str | None = None, cluster: bool = False,
               owl_rules: str = "axioms") -> StateView:  # fmt: skip
    """The state the streaming job keeps in `url` under `namespace`, for `program` (+ ontologies).

    `store` is an open store to read it from (kept open), else one is opened:
    with `key`, that key's state (`--partition-by`); with `cluster`, `url` is a
    seed node of a Redis Cluster.
    """
    own = store is None
    store = open_store(url, namespace, key=key, cluster=cluster) if own else store
    try:
        snap = store.load()
    finally:
        if own:
            store.close()
    if snap is None:
        which = f"namespace {namespace!r}" + (f" and key {key!r}" if key is not None else "")
        raise FluxmatError(f"no fluxmat state in {redact(url)} under {which} (has the job run"
                           + (" with --partition-by and updates of this key?)" if key is not None else "?)"))
    algorithm = str(snap.meta.get("algorithm", "fd-counting"))
    core = str(snap.meta.get("core") or "objects")  # the core that kept it (engine.compact.state)
    reasoner = _reasoner(program, EngineOptions(algorithm=algorithm, core=core), ontologies, owl_rules)
    # a state whose program was changed is read with the program in force (stream.live_program)
    reasoner, _ = live_program.adopted(reasoner, snap.meta, live_program.origin(reasoner.program))
    reasoner.restore(snap)
    return StateView(reasoner)


def export_facts(program: str | None, url: str, namespace: str = "default", ontologies=(),
                 key: str | None = None, cluster: bool = False, everything: bool = False,
                 owl_rules: str = "axioms", versions: list | None = None) -> tuple[int, list[str]]:  # fmt: skip
    """The stored explicit facts (with `everything`, the whole materialisation) as sorted JSON Lines.

    Returns the batch whose state they are, and the lines: `["pred", arg, ...]`
    by engine.wire (predicates compacted with the program's prefixes where they
    read back the same), the `--facts` format of a `.jsonl` file. The stored
    state is dictionary-encoded, so this (not the Redis hash fields) is how to
    take the facts out. Raises if the job committed a batch while the state
    was read (the copy would mix two batches): stop the job, or run it again.
    `versions`, when given, is told the state's program version (stream.live_program).
    """
    from fluxmat.engine.printer import FactPrinter
    from fluxmat.engine.wire import fact_json

    store = open_store(url, namespace, key=key, cluster=cluster)
    try:
        before = store.last_batch()
        view = from_store(program, url, namespace, ontologies, store=store, key=key, cluster=cluster,
                          owl_rules=owl_rules)
        after = store.last_batch()
    finally:
        store.close()
    if before != after:
        raise FluxmatError(f"the job committed batch {after} while batch {before}'s state was read; "
                           "stop the job (or run the export again)")  # fmt: skip
    reasoner = view.reasoner
    printer = FactPrinter(reasoner.program.prefixes)
    facts = reasoner.facts() if everything else reasoner.explicit()
    lines = sorted(json.dumps(fact_json(f, printer), ensure_ascii=False) for f in facts)
    if versions is not None:
        versions.append(reasoner.program_version)
    return (INITIAL if before is None else before), lines


def from_files(program: str | None, facts: list[str], algorithm: str = "remat", ontologies=(),
               facts_format: str | None = None, max_facts: int | None = None,
               owl_rules: str = "axioms") -> StateView:  # fmt: skip
    """mat(P, E) computed from `program` (+ ontologies) and the explicit facts in `facts` (at most `max_facts`)."""
    options = EngineOptions(algorithm=algorithm, limits=Limits.of(facts=max_facts))
    reasoner = _reasoner(program, options, ontologies, owl_rules)
    reasoner.load([f for path in facts for f in read_facts(path, reasoner.prefixes, facts_format)])
    return StateView(reasoner)
