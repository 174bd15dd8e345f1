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

import threading
from contextlib import contextmanager
from pathlib import Path

from connectors.files import read_facts
from connectors.state import open_store
from engine import FluxmatError, Reasoner, atom_to_fact
from engine.fd.snapshot import check_fingerprint, restore
from engine.parser import parse_facts, parse_pattern
from engine.why import Explainer, match, render, to_json


class Busy(FluxmatError):
    """The job held its lock for longer than the question may wait."""


class StateView:
    """Answers `query` and `why` over one reasoner's current materialisation."""

    def __init__(self, reasoner: Reasoner, lock: threading.Lock | None = None, wait: float = 10.0):
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
        return self.reasoner.maintainer.show_fact(fact)

    def query(self, pattern: str, limit: int | None = None) -> dict:
        """`{"pattern", "count", "facts", "truncated"}`: matching facts, sorted, as text."""
        atom = parse_pattern(pattern, self.reasoner.prefixes)
        with self._locked():
            found = sorted(self._show(f) for f in match(self.reasoner.maintainer, atom))
        shown = found if limit is None else found[:limit]
        return {"pattern": pattern, "count": len(found), "facts": shown,
                "truncated": len(shown) < len(found)}  # fmt: skip

    def sparql(self, query: str, fmt: str | None = None, limits=None, source: str = "<query>"):
        """(connectors.sparql.Answer, facts that are not triples) for a SPARQL query.

        The triple store is built from the facts under the lock and kept until the
        materialisation changes; the query itself runs outside the lock, bounded.
        """
        from connectors.sparql import Limits, TripleStore

        m = self.reasoner.maintainer
        with self._locked():
            version = (getattr(m, "clock", None), getattr(m, "last_seq", None),
                       sum(len(r) for r in m.I.values()))  # fmt: skip
            if self._triples is None or self._triples[0] != version:
                self._triples = (version, list(m.facts()))
            facts = self._triples
        if self._store is None or self._store[0] != facts[0]:
            self._store = (facts[0], TripleStore(facts[1]))
        store = self._store[1]
        return store.answer(query, fmt, limits or Limits(), source), store.skipped

    def why(self, fact_text: str) -> dict:
        """`{"fact", "found", "lines", "proof"}` for one ground fact in program syntax."""
        text = fact_text.strip()
        atoms = parse_facts(text if text.endswith(".") else text + ".", "<fact>", self.reasoner.prefixes)
        if len(atoms) != 1:
            raise FluxmatError(f"expected one fact, found {len(atoms)}")
        fact = atom_to_fact(atoms[0])
        with self._locked():
            proof = Explainer(self.reasoner.maintainer, program=self.reasoner.program).explain(fact)
            shown = self._show(fact)
            if proof is None:
                return {"fact": shown, "found": False, "lines": [f"{shown} is not in the materialisation"]}
            return {"fact": shown, "found": True, "lines": render(proof, self._show),
                    "proof": to_json(proof, self._show)}  # fmt: skip


def _program(path: str) -> Path:
    p = Path(path)
    if not p.is_file():
        raise FluxmatError(f"{path}: no such file")
    return p


def _reasoner(program: str | None, algorithm: str, ontologies) -> Reasoner:
    if ontologies or program is None:  # the program plus the ontologies' rules, as `run` built it
        from ops.rdf_cli import reasoner

        return reasoner(program, ontologies, algorithm)
    return Reasoner.from_file(_program(program), algorithm)


def from_store(program: str | None, url: str, namespace: str = "default", ontologies=()) -> StateView:
    """The state the streaming job keeps in `url` under `namespace`, for `program` (+ ontologies)."""
    store = open_store(url, namespace)
    try:
        snap = store.load()
    finally:
        store.close()
    if snap is None:
        raise FluxmatError(f"no fluxmat state in {url} under namespace {namespace!r} (has the job run?)")
    reasoner = _reasoner(program, str(snap.meta.get("algorithm", "fd-counting")), ontologies)
    check_fingerprint(reasoner.maintainer, snap)
    restore(reasoner.maintainer, snap)
    return StateView(reasoner)


def from_files(program: str | None, facts: list[str], algorithm: str = "remat", ontologies=(),
               facts_format: str | None = None) -> StateView:  # fmt: skip
    """mat(P, E) computed from `program` (+ ontologies) and the explicit facts in `facts`."""
    reasoner = _reasoner(program, algorithm, ontologies)
    reasoner.load([f for path in facts for f in read_facts(path, reasoner.prefixes, facts_format)])
    return StateView(reasoner)
