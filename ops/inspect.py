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


def from_store(program: str, url: str, namespace: str = "default") -> StateView:
    """The state the streaming job keeps in `url` under `namespace`, for `program`."""
    store = open_store(url, namespace)
    try:
        snap = store.load()
    finally:
        store.close()
    if snap is None:
        raise FluxmatError(f"no fluxmat state in {url} under namespace {namespace!r} (has the job run?)")
    reasoner = Reasoner.from_file(program, str(snap.meta.get("algorithm", "fd-counting")))
    check_fingerprint(reasoner.maintainer, snap)
    restore(reasoner.maintainer, snap)
    return StateView(reasoner)


def from_files(program: str, facts: list[str], algorithm: str = "remat") -> StateView:
    """mat(P, E) computed from `program` and the explicit facts in `facts`."""
    reasoner = Reasoner.from_file(program, algorithm)
    reasoner.load([f for path in facts for f in read_facts(path, reasoner.prefixes)])
    return StateView(reasoner)
