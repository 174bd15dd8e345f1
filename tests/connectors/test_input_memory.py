"""Memory that runs out while an input file is read names the file (and the line when known).

The process is given an address-space limit (RLIMIT_AS) far below what the
file's facts need; the one `fluxmat: error:` line must say which file was
being read, where, and which limit was used up.
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIMIT_MIB = 400  # the CLI with a small file needs < 350 MiB of address space
LINES = 400_000  # ~76 MB of N-Triples, several hundred MiB of facts


def _cap():
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_MIB << 20, LIMIT_MIB << 20))


@pytest.fixture(scope="module")
def big_nt(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("oom") / "big.nt"
    pad = "x" * 120
    with path.open("w", encoding="utf-8") as fh:
        for i in range(LINES):
            fh.write(f'<http://example.org/s{i}> <http://example.org/p> "value {i} {pad}" .\n')
    return path


def one_line(args: list[str]) -> str:
    # the objects core: numba's LLVM alone maps more than LIMIT_MIB of address space (the arrays core
    # needs a larger `ulimit -v`); what is tested is reading the input
    env = {**os.environ, "FLUXMAT_CORE": "objects"}
    proc = subprocess.run([sys.executable, "-m", "fluxmat.ops.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, preexec_fn=_cap, env=env)  # fmt: skip
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr[-2000:]
    return lines[0]


def test_out_of_memory_reading_facts_names_the_file_and_line(tmp_path, big_nt):
    program = tmp_path / "p.dl"
    program.write_text("q(X) :- <http://example.org/p>[X, Y] .\n", encoding="utf-8")
    line = one_line(["materialise", str(program), "--facts", str(big_nt)])
    m = re.fullmatch(rf"fluxmat: error: {re.escape(str(big_nt))}:(\d+): out of memory while reading it: "
                     rf"the address-space limit of {LIMIT_MIB} MiB \(ulimit -v\) was used up", line)  # fmt: skip
    assert m, line
    assert 1 <= int(m.group(1)) <= LINES


def test_out_of_memory_reading_an_ontology_names_the_file(big_nt):
    line = one_line(["materialise", "--ontology", str(big_nt)])
    assert line.startswith(f"fluxmat: error: {big_nt}"), line
    assert f"out of memory while reading it: the address-space limit of {LIMIT_MIB} MiB" in line, line
