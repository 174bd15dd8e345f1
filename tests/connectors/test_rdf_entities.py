"""RDF/XML entity expansion is bounded before the parser sees it (connectors.xml_guard).

A kilobyte of nested internal entities ("billion laughs") used to abort the process with
`memory allocation of 2400000000 bytes failed`. Every path that reads RDF/XML is run as a
real `fluxmat` process under a 2 GB address-space limit: it must end with exit code 1 and
one `fluxmat: error: FILE:LINE:COL: ...` line, never a crash or a traceback. Plain entity
declarations (as OWL files use for namespaces) still load.
"""

from __future__ import annotations

import gzip
import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from fluxmat.connectors.state import MemoryStateStore
from fluxmat.engine import Reasoner
from fluxmat.stream.batch import BatchProcessor
from tests.support import profile
from tests.support.shared import DeadLetters

ROOT = Path(__file__).resolve().parent.parent.parent
HEAD = ('<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" '
        'xmlns:ex="http://example.org/">\n')  # fmt: skip


def laughs(levels: int = 9) -> str:
    decls = ['<!ENTITY lol "lol">'] + [
        f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">' for i in range(1, levels + 1)
    ]
    return ('<?xml version="1.0"?>\n<!DOCTYPE rdf:RDF [\n' + "\n".join(decls) + "\n]>\n" + HEAD
            + f'<rdf:Description rdf:about="http://example.org/a"><ex:p>&lol{levels};</ex:p>'
            "</rdf:Description>\n</rdf:RDF>\n")  # fmt: skip


def with_entities(decls: str, body: str = '<rdf:Description rdf:about="&ex;a"><ex:p rdf:resource="&x;"/>'
                  "</rdf:Description>") -> str:  # fmt: skip
    return f'<?xml version="1.0"?>\n<!DOCTYPE rdf:RDF [\n{decls}\n]>\n{HEAD}{body}\n</rdf:RDF>\n'


OK = with_entities('<!ENTITY ex "http://example.org/">\n<!ENTITY x "&ex;x">')
HOSTILE = {
    "laughs": (laughs(), "entity 'lol6' expands to 3,000,000 characters"),
    "wide": (with_entities('<!ENTITY ex "http://example.org/">\n<!ENTITY x "&ex;x">\n<!ENTITY big "'
                           + "y" * 900_000 + '">', "<ex:n>" + "&big;" * 40 + "</ex:n>"),
             "entity references expand to more than"),
    "external": (with_entities('<!ENTITY ex "http://example.org/">\n<!ENTITY x SYSTEM "file:///etc/passwd">'),
                 "external entities are not supported"),
    "parameter": (with_entities('<!ENTITY % p "x">\n<!ENTITY ex "http://example.org/">'),
                  "parameter entities are not supported"),
    "cycle": (with_entities('<!ENTITY ex "http://example.org/">\n<!ENTITY x "&y;">\n<!ENTITY y "&x;">'),
              "refers to itself"),
}  # fmt: skip


def _limit():
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def fluxmat(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fluxmat.ops.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, preexec_fn=_limit)  # fmt: skip


def refused(r: subprocess.CompletedProcess, path: Path, what: str) -> None:
    assert r.returncode == 1, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"fluxmat: error: {path}:"), r.stderr
    assert what in lines[0], lines[0]


HOWS = ["facts", "facts-gz", "ontology", "owl2rl"]
# `make test` runs every hostile file on every path; `make test-fast` each file once and each path
# at least once (a `fluxmat` process per pair, about a second of CPU each)
PAIRS = [pytest.param(how, case, id=f"{how}-{case}") for how, case in profile.pick(
    ci=[(h, c) for c in sorted(HOSTILE) for h in HOWS],
    fast=[(HOWS[i % len(HOWS)], c) for i, c in enumerate(sorted(HOSTILE))],
)]  # fmt: skip


@pytest.fixture
def program(tmp_path):
    p = tmp_path / "p.dl"
    p.write_text("@prefix ex: <http://example.org/> .\nq(X) :- ex:p[X, Y] .\n")
    return p


@pytest.mark.parametrize(("how", "case"), PAIRS)
def test_hostile_entities_are_refused_with_a_position(tmp_path, program, case, how):
    text, what = HOSTILE[case]
    path = tmp_path / ("x.rdf.gz" if how == "facts-gz" else "x.rdf")
    path.write_bytes(gzip.compress(text.encode()) if how == "facts-gz" else text.encode())
    args = {"facts": ["materialise", str(program), "--facts", str(path)],
            "facts-gz": ["materialise", str(program), "--facts", str(path)],
            "ontology": ["materialise", "--ontology", str(path)],
            "owl2rl": ["owl2rl", str(path)]}[how]  # fmt: skip
    refused(fluxmat(*args), path, what)


def test_namespace_entities_still_load(tmp_path, program):
    path = tmp_path / "ok.rdf"
    path.write_text(OK)
    r = fluxmat("materialise", str(program), "--facts", str(path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["ex:p(ex:a, ex:x).", "q(ex:a)."]


def test_an_update_message_carrying_rdfxml_is_a_dead_letter_and_the_job_goes_on():
    pub = DeadLetters()
    p = BatchProcessor(Reasoner.from_text("q(X) :- p(X).", "fd-counting"), MemoryStateStore(), pub)
    p.start([])
    rows = [(0, 0, None, json.dumps({"format": "rdfxml", "add": laughs()}), 0),
            (0, 1, None, laughs(), 0),
            (0, 2, None, json.dumps({"add": [["p", "a"]]}), 0)]  # fmt: skip
    out = p.process(0, rows)
    assert out.dead == 2 and [o for _, o in pub.dead] == [0, 1]
    assert ("q", "a") in p.facts()
