"""`why --json`: the proof is a flat list of steps whose premises name steps by id.

An 800-step proof used to be JSON nested 800+ levels deep, which Python's `json` cannot
read back with its default recursion limit. Now nothing nests however deep the proof, a
fact proved once is one step however often it is used, and neither building the proof nor
writing it recurses in Python.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from fluxmat.engine import Reasoner
from fluxmat.engine.why import render, to_json

ROOT = Path(__file__).resolve().parent.parent.parent
REACH = "reach(Y) :- reach(X), edge(X, Y).\nreach(0).\n"  # a proof of reach(n) has n steps


def _depth(value) -> int:
    """Nesting depth of a JSON value, iteratively."""
    best, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        best = max(best, d)
        children = v.values() if isinstance(v, dict) else v if isinstance(v, list) else ()
        stack.extend((c, d + 1) for c in children)
    return best


def test_why_json_of_a_2000_step_proof_reads_back_with_default_limits(tmp_path):
    program = tmp_path / "deep.dl"
    program.write_text(REACH + "".join(f"edge({i}, {i + 1}).\n" for i in range(2000)))
    r = subprocess.run([sys.executable, "-m", "fluxmat.ops.cli", "why", str(program), "reach(2000)", "--json"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)  # the default recursion limit (1,000)
    proof = result["proof"]
    assert _depth(proof) <= 5  # proof {} > steps [] > step {} > premises [] > id
    steps = proof["steps"]
    assert len(steps) == 4001 and [s["id"] for s in steps] == list(range(4001))
    root = steps[proof["root"]]
    assert root["fact"] == "reach(2000)" and len(root["premises"]) == 2
    assert all(p > s["id"] for s in steps for p in s.get("premises", []))


def test_building_and_writing_a_deep_proof_does_not_recurse():
    r = Reasoner.from_text(REACH, "remat")
    r.load([("edge", i, i + 1) for i in range(2000)])
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200)
    try:
        proof = r.explain(("reach", 2000))
        flat = to_json(proof, str)
        lines = render(proof, str)
    finally:
        sys.setrecursionlimit(limit)
    assert len(flat["steps"]) == 4001 and len(lines) == 4001


def test_a_shared_sub_proof_is_one_step():
    """`d(a)` (derived) and `s(a)` (explicit) are used twice; each is one step, named twice."""
    text = ("t(X) :- m(X), n(X).\nm(X) :- d(X).\nn(X) :- d(X).\nd(X) :- s(X).\n"
            "u(X) :- s(X), d(X).\ns(a).\n")  # fmt: skip
    r = Reasoner.from_text(text, "remat")
    r.load([])
    for fact in ("t", "u"):
        flat = to_json(r.explain((fact, "a")), lambda f: f"{f[0]}({', '.join(map(str, f[1:]))})")
        facts = [s["fact"] for s in flat["steps"]]
        assert len(facts) == len(set(facts)), facts
        by_fact = {s["fact"]: s for s in flat["steps"]}
        assert by_fact["d(a)"]["premises"] == [by_fact["s(a)"]["id"]]
    users = [s for s in to_json(r.explain(("t", "a")), str)["steps"] if s.get("premises")]
    assert len(users) == 4  # t, m, n, d: m and n both name d's step
