"""The limit flags of the CLI: `--max-facts`, `--max-update-work`, exit code 4.

Recursive arithmetic can make a materialisation infinite: `b(e, a, 1)` closes a
cycle in the SSPE program (tests/golden/builtins/path_lengths.dl), and every
lap derives new path lengths. Every command that computes a materialisation
must then stop at its limit with one `fluxmat: error:` line naming the flag and
exit code 4, never run until killed. Update files are decoded by the same
bounded JSON decoder as the stream (duplicate keys and deep nesting are errors
naming file:line).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import fluxmat, user_error, write

ROOT = Path(__file__).resolve().parent.parent.parent
SSPE = ROOT / "tests/golden/builtins/path_lengths.dl"
FACTS_FLAG = "raise --max-facts (env FLUXMAT_MAX_FACTS; 0: no limit)"
WORK_FLAG = "raise --max-update-work (env FLUXMAT_MAX_UPDATE_WORK; 0: no limit)"


def limit_error(proc, *fragments: str) -> str:
    line = user_error(proc, *fragments)
    assert proc.returncode == 4, proc.stderr
    return line


@pytest.fixture
def runaway(tmp_path) -> Path:
    return write(tmp_path / "cycle.dl", "b(e, a, 1).\n")


def test_materialise_stops_at_max_facts(runaway):
    line = limit_error(fluxmat("materialise", SSPE, "--facts", runaway, "--max-facts", "1000"),
                       "fact limit exceeded: ", "(limit 1,000)", FACTS_FLAG)  # fmt: skip
    assert "recursive arithmetic can make a materialisation infinite" in line


def test_max_facts_falls_back_to_the_environment(runaway):
    proc = fluxmat("materialise", SSPE, "--facts", runaway, env={"FLUXMAT_MAX_FACTS": "500"})
    limit_error(proc, "(limit 500)")


def test_the_default_fact_limit_stops_an_infinite_materialisation(runaway):
    """No flag at all: the default (engine.limits.DEFAULT_MAX_FACTS) ends it, with exit 4."""
    limit_error(fluxmat("materialise", SSPE, "--facts", runaway), "(limit 2,000,000)")


def test_a_finite_materialisation_is_not_limited_by_zero(tmp_path):
    proc = fluxmat("materialise", SSPE, "--max-facts", "0")
    assert proc.returncode == 0 and "d(e, 7)." in proc.stdout.splitlines(), proc.stderr
    limit_error(fluxmat("materialise", SSPE, "--max-facts", "15"), "(limit 15)")


@pytest.mark.parametrize("alg", ["dredc", "remat", "bf", "fd-counting", "fd-dred"])
def test_replay_stops_a_runaway_update_naming_its_line(tmp_path, alg):
    updates = write(tmp_path / "u.jsonl", json.dumps({"add": [["b", "e", "f", 1]]}) + "\n"
                    + json.dumps({"add": [["b", "e", "a", 1]]}) + "\n")  # fmt: skip
    proc = fluxmat("replay", SSPE, "--updates", updates, "--algorithm", alg,
                   "--schedule", "interleaved", "--max-update-work", "5000")  # fmt: skip
    limit_error(proc, f"{updates}:2: work limit exceeded: ", "(limit 5,000)", WORK_FLAG)
    proc = fluxmat("replay", SSPE, "--updates", updates, "--algorithm", alg, "--max-facts", "800",
                   env={"FLUXMAT_MAX_UPDATE_WORK": "0"})  # fmt: skip
    limit_error(proc, f"{updates}:2: fact limit exceeded: ", "(limit 800)")


@pytest.mark.parametrize("command", ["query", "why"])
def test_query_and_why_over_files_stop_at_max_facts(runaway, command):
    question = "d(e, X)" if command == "query" else "d(e, 3)"
    proc = fluxmat(command, SSPE, question, "--facts", runaway, "--max-facts", "300")
    limit_error(proc, "fact limit exceeded: ", "(limit 300)", FACTS_FLAG)


@pytest.mark.parametrize("value", ["-1", "lots"])
def test_a_bad_limit_is_a_usage_error(value):
    proc = fluxmat("materialise", SSPE, "--max-facts", value)
    assert proc.returncode == 2 and "--max-facts" in user_error(proc)


@pytest.mark.parametrize(("line", "fragment"), [
    ('{"add": [["b", "x", "y", 1]], "add": []}', ':2:1: invalid JSON: duplicate key "add"'),
    ('{"add": ' + "[" * 100_000, ":2:1: invalid JSON: nested deeper than 64 levels"),
    ('{"add": [["b", "x", "y", ' + "9" * 4_400 + "]]}", ":2:1: invalid JSON: an integer with more than 4000 digits (4,400)"),
])  # fmt: skip
def test_update_files_use_the_bounded_json_decoder(tmp_path, line, fragment):
    updates = write(tmp_path / "u.jsonl", '{"add": [["b", "x", "y", 1]]}\n' + line + "\n")
    proc = fluxmat("replay", SSPE, "--updates", updates)
    assert proc.returncode == 1
    user_error(proc, f"{updates}{fragment}")
