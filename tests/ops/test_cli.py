"""The `fluxmat` command line contract, run as a subprocess (`python -m fluxmat.ops.cli`).

Each command runs as a real subprocess in at least one test here (`fluxmat`); the other
cases call the same entry point in the test's process (`fluxmat_here`: same exit code,
stdout and stderr, without a Python start per case).

Success: `materialise` prints mat(P, E) sorted, one fact per line; `replay` gives
the same final result under every algorithm and writes one stats line per load
and update; `check` and `explain` summarise strata and plans. Failure (a user
mistake): exit code != 0, exactly one stderr line starting `fluxmat: error:`,
and never a traceback.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fluxmat.engine import ALGORITHMS
from tests.support.cli import ROOT, fluxmat, fluxmat_here, fluxmat_sampled, ok, user_error, write
from tests.support.shared import PROGRAMS, corpus_files, need

CORPUS = PROGRAMS

PATH = "path(X, Y) :- edge(X, Y).\npath(X, Z) :- path(X, Y), edge(Y, Z).\n"
FAMILY = (  # non-recursive, so that counting applies too
    "grand(X, Z) :- parent(X, Y), parent(Y, Z).\norphan(X) :- person(X), not parent(_, X).\n"
)
PATH_UPDATES = [
    {"id": "u1", "add": [["edge", "d", "e"]], "del": [["edge", "b", "c"]]},
    {"id": "u2", "add": [["edge", "b", "c"]]},
]
# after the load, u1 and u2 (worked out by hand): edges a-b-c-d-e, all paths along them
PATH_FINAL = [
    "edge(a, b).", "edge(b, c).", "edge(c, d).", "edge(d, e).",
    "path(a, b).", "path(a, c).", "path(a, d).", "path(a, e).", "path(b, c).",
    "path(b, d).", "path(b, e).", "path(c, d).", "path(c, e).", "path(d, e).",
]  # fmt: skip
# (added, removed) per line of the stats file: load, u1, u2
PATH_STATS = [(9, 0), (3, 5), (7, 0)]
FAMILY_UPDATES = [
    {"add": [["parent", "bo", "cy"], ["person", "di"]], "del": [["parent", "al", "bo"]]},
    {"add": [["person", "al"]], "del": [["person", "zz"]]},  # a no-op addition and deletion
    {"add": [["parent", "al", "bo"]]},
]
FAMILY_FINAL = [
    "grand(al, cy).", "orphan(al).", "orphan(di).", "parent(al, bo).", "parent(bo, cy).",
    "person(al).", "person(bo).", "person(cy).", "person(di).",
]  # fmt: skip


def jsonl(path: Path, items) -> Path:
    return write(path, "".join(json.dumps(i) + "\n" for i in items))


@pytest.fixture
def path_files(tmp_path: Path):
    program = write(tmp_path / "path.dl", PATH)
    facts = write(tmp_path / "facts.dl", "edge(a, b).\nedge(b, c).\nedge(c, d).\n")
    updates = jsonl(tmp_path / "updates.jsonl", PATH_UPDATES)
    return program, facts, updates


# ------------------------------------------------------------------ materialise


def test_materialise_prints_sorted_facts(path_files):
    program, facts, _ = path_files
    out = ok(fluxmat("materialise", program, "--facts", facts))
    assert out.splitlines() == [
        "edge(a, b).", "edge(b, c).", "edge(c, d).",
        "path(a, b).", "path(a, c).", "path(a, d).", "path(b, c).", "path(b, d).", "path(c, d).",
    ]  # fmt: skip


def test_materialise_jsonl_facts_and_output_file(tmp_path, path_files):
    program, _, _ = path_files
    facts = jsonl(tmp_path / "facts.jsonl", [["edge", "x", 1], ["edge", 1, "1"]])
    target = tmp_path / "out.dl"
    assert ok(fluxmat_here("materialise", program, "--facts", facts, "--output", target)) == ""
    assert target.read_text().splitlines() == [
        'edge(1, "1").',
        "edge(x, 1).",
        'path(1, "1").',
        'path(x, "1").',
        "path(x, 1).",
    ]


def test_materialise_program_with_inline_facts_only():
    golden = ROOT / "tests" / "golden" / "recursion" / "tc_right.dl"
    out = ok(fluxmat_here("materialise", golden))
    assert out == golden.with_suffix(".out").read_text()


# ------------------------------------------------------------------ replay


@pytest.mark.parametrize("algorithm", sorted(set(ALGORITHMS) - {"counting"}))
def test_replay_recursive_program(tmp_path, path_files, algorithm):
    program, facts, updates = path_files
    stats, output = tmp_path / "stats.jsonl", tmp_path / "out.dl"
    run = fluxmat if algorithm == "remat" else fluxmat_sampled  # one real subprocess in every profile
    out = ok(run(
        "replay", program, "--facts", facts, "--updates", updates,
        "--algorithm", algorithm, "--stats", stats, "--output", output,
    ))  # fmt: skip
    assert out == ""
    assert output.read_text().splitlines() == PATH_FINAL
    lines = [json.loads(line) for line in stats.read_text().splitlines()]
    assert len(lines) == 1 + len(PATH_UPDATES)
    for line in lines:
        assert {"seconds", "added", "removed", "rule_applications"} <= set(line)
        assert isinstance(line["seconds"], float) and line["seconds"] >= 0
        assert isinstance(line["rule_applications"], int)
    assert [(line["added"], line["removed"]) for line in lines] == PATH_STATS


@pytest.mark.parametrize("how", ["flag", "env"])
def test_replay_levels_flag_and_stats_details(tmp_path, how):
    """`--levels on|off` (or FLUXMAT_LEVELS): the same result; the stats lines carry
    dredc's details. On a ladder (reach over i->i+1 and i->i+2 up to 6), deleting
    e(0, 1) overdeletes e(0, 1) and reach(1) with levels, and e(0, 1) and
    reach(1..6) without (five of them rederived)."""
    program = write(tmp_path / "ladder.dl", "reach(Y) :- reach(X), e(X, Y).\n")
    edges = "".join(f"e({i}, {j}).\n" for i in range(6) for j in (i + 1, i + 2) if j <= 6)
    facts = write(tmp_path / "f.dl", "reach(0).\n" + edges)
    updates = jsonl(tmp_path / "u.jsonl", [{"del": [["e", 0, 1]]}])
    outputs, details = {}, {}
    for levels in ("on", "off"):
        stats = tmp_path / f"stats-{levels}.jsonl"
        args = ["replay", program, "--facts", facts, "--updates", updates, "--stats", stats,
                "--core", "objects"]  # --levels is the objects core's dredc (the arrays core has no levels)
        if how == "flag":
            outputs[levels] = ok(fluxmat_here(*args, "--levels", levels))
        else:
            outputs[levels] = ok(fluxmat_here(*args, env={"FLUXMAT_LEVELS": levels}))
        last = json.loads(stats.read_text().splitlines()[-1])
        details[levels] = (last["overdeleted"], last["rederived"], last["recomputed_strata"])
    assert outputs["on"] == outputs["off"]
    assert "reach(1)." not in outputs["on"] and "reach(6)." in outputs["on"]
    assert details == {"on": (2, 0, 0), "off": (7, 5, 0)}


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_replay_every_algorithm_same_output(tmp_path, algorithm):
    program = write(tmp_path / "family.dl", FAMILY)
    facts = write(tmp_path / "f.dl", "parent(al, bo).\nperson(al).\nperson(bo).\nperson(cy).\n")
    updates = jsonl(tmp_path / "u.jsonl", FAMILY_UPDATES)
    stats = tmp_path / "stats.jsonl"
    out = ok(fluxmat_here(
        "replay", program, "--facts", facts, "--updates", updates,
        "--algorithm", algorithm, "--stats", stats,
    ))  # fmt: skip
    assert out.splitlines() == FAMILY_FINAL
    lines = [json.loads(line) for line in stats.read_text().splitlines()]
    assert len(lines) == 1 + len(FAMILY_UPDATES)
    assert (lines[2]["noop_adds"], lines[2]["noop_deletes"]) == (1, 1)


def test_replay_algorithm_from_environment(path_files):
    program, facts, updates = path_files
    # the objects core refuses counting on a recursive program: the refusal shows the variable is read
    proc = fluxmat_here(
        "replay", program, "--facts", facts, "--updates", updates, "--core", "objects",
        env={"FLUXMAT_ALGORITHM": "counting"},
    )  # fmt: skip
    user_error(proc, "recursive", "path")
    # the arrays default runs every name it knows; an unknown name shows the variable is read there too
    proc = fluxmat_here(
        "replay", program, "--facts", facts, "--updates", updates, env={"FLUXMAT_ALGORITHM": "fd"},
    )  # fmt: skip
    user_error(proc, "unknown algorithm 'fd'")


@pytest.mark.parametrize("algorithm", ["dredc", "bf"])
def test_replay_interleaved_schedule_is_accepted(path_files, algorithm):
    program, facts, updates = path_files
    out = ok(fluxmat_here(
        "replay", program, "--facts", facts, "--updates", updates, "--algorithm", algorithm,
        "--schedule", "interleaved", "--seed", "3", "--budget", "10",
    ))  # fmt: skip
    assert out.splitlines() == PATH_FINAL


# ------------------------------------------------------------------ check / explain


def test_check_summarises_strata(path_files):
    program, _, _ = path_files
    out = ok(fluxmat("check", program))
    assert out.splitlines()[0] == f"{program}: ok"
    assert "strata: 1" in out
    assert "rules: 2 (1 non-recursive, 1 recursive)" in out
    assert "stratum 1: path" in out


def test_explain_prints_every_stage(tmp_path):
    program = write(tmp_path / "p.dl", PATH + "lonely(X) :- edge(X, _), not path(_, X).\n")
    out = ok(fluxmat("explain", program))
    for section in ("== AST", "== analysis", "== plans"):
        assert section in out
    assert "stratum 1: path" in out
    assert re.search(r"^stratum [2-9]: lonely$", out, re.MULTILINE)
    assert "module ltc(path): rules 1\n" in out  # dredc keeps it as reachability (both cores)
    assert "recursive, module ltc(path): path(X, Z) :- path(X, Y), edge(Y, Z)." in out
    objects = ok(fluxmat_here("explain", program, "--core", "objects"))
    assert "module ltc(path): rules 1\n" in objects
    off = ok(fluxmat_here("explain", program, "--core", "objects", "--modules", "off"))
    assert "module ltc(path): rules 1 (not used by dredc, core objects)\n" in off
    assert "rule 1 [delta on literal 1]" in out
    code = ok(fluxmat("explain", program, "--code"))
    assert "def run(" in code


def test_check_and_explain_show_modules(tmp_path):
    """Hu, Motik & Horrocks 2019: tc(R) and stc(R) modules are detected at compile time."""
    program = write(
        tmp_path / "m.dl",
        "r(X, Z) :- r(X, Y), r(Y, Z).\nr(Y, X) :- r(X, Y).\n"
        "path(X, Z) :- path(X, Y), path(Y, Z).\npath(X, Y) :- r(X, Y).\n",
    )
    out = ok(fluxmat_here("check", program))
    assert "modules: 2" in out
    assert re.search(r"stratum \d: stc\(r\) \(2 rules\)", out)
    assert re.search(r"stratum \d: tc\(path\) \(1 rule\)", out)
    out = ok(fluxmat_here("explain", program))
    assert "module stc(r): rules 0, 1" in out
    assert "[2] recursive, module tc(path): path(X, Z) :- path(X, Y), path(Y, Z)." in out


@pytest.mark.parametrize("core", ["arrays", "objects"])
def test_explain_shows_the_modules_each_core_runs(tmp_path, core):
    """`explain --core C --modules on|off` marks the modules the analysis finds but C does not run:
    the objects core runs tc, stc and ltc modules (dredc) when on, none when off; the arrays
    core runs the stc closure module when on, and inserts a linear closure by reachability
    whatever the flag; it maintains tc by DRed^c."""
    program = write(tmp_path / "m.dl", "s(X, Y) :- s(Y, X).\ns(X, Z) :- s(X, Y), s(Y, Z).\n"
                    "t(X, Z) :- t(X, Y), t(Y, Z).\n" + PATH)  # fmt: skip
    runs = {"arrays": {"on": {"stc(s)", "ltc(path)"}, "off": {"ltc(path)"}},
            "objects": {"on": {"stc(s)", "tc(t)", "ltc(path)"}, "off": set()}}  # fmt: skip
    for modules in ("on", "off"):
        out = ok(fluxmat_here("explain", program, "--core", core, "--modules", modules))
        found = re.findall(r"^  module (\w+\(\w+\)): rules [\d, ]+( \(not used by dredc, core \w+\))?$",
                           out, re.MULTILINE)  # fmt: skip
        assert {m for m, _ in found} == {"stc(s)", "tc(t)", "ltc(path)"}, out
        assert {m for m, unused in found if not unused} == runs[core][modules], out


@pytest.mark.parametrize("core", ["arrays", "objects"])
@pytest.mark.parametrize("algorithm", ["remat", "dredc", "dred"])
def test_modules_flag_and_environment(tmp_path, algorithm, core):
    """`--modules on|off` (env FLUXMAT_MODULES): same output; module work only when on.

    The objects core runs the tc(r) module and counts its inferences; the arrays core
    maintains tc(r) by DRed^c (its one module is the stc closure, see
    test_modules_flag_switches_the_arrays_closure_module) and counts no module inferences.
    """
    program = write(tmp_path / "m.dl", "r(X, Z) :- r(X, Y), r(Y, Z).\nr(a, b). r(b, c). r(c, d).\n")
    updates = write(tmp_path / "u.jsonl", '{"del": [["r", "b", "c"]]}\n{"add": [["r", "b", "c"]]}\n')
    outs, work = [], []
    for flags, env in (([], {}), (["--modules", "off"], {}), ([], {"FLUXMAT_MODULES": "off"})):
        stats = tmp_path / "s.jsonl"
        outs.append(ok(fluxmat_here(
            "replay", program, "--updates", updates, "--algorithm", algorithm,
            "--stats", str(stats), "--core", core, *flags, env=env,
        )))  # fmt: skip
        lines = [json.loads(x) for x in stats.read_text().splitlines()]
        work.append(sum(x["module_inferences"] for x in lines))
    assert outs[0] == outs[1] == outs[2]
    assert "r(a, d)." in outs[0]
    assert (work[0] > 0) == (algorithm != "dred" and core == "objects")
    assert work[1] == work[2] == 0
    assert ok(fluxmat_here("materialise", program, "--modules", "off")) == ok(fluxmat_here("materialise", program))
    user_error(fluxmat_here("materialise", program, "--modules", "maybe"), "--modules")


@pytest.mark.parametrize("program", corpus_files(CORPUS, "*.dlog"), ids=lambda p: getattr(p, "name", "missing"))
def test_corpus_programs_pass_check(program):
    program = need(program)
    out = ok(fluxmat_here("check", program))
    assert out.startswith(f"{program}: ok")
    assert "strata:" in out


# ------------------------------------------------------------------ errors


def test_error_missing_program(tmp_path):
    user_error(fluxmat_here("materialise", tmp_path / "nope.dl"), "nope.dl", "no such file")


def test_error_missing_facts_file(tmp_path, path_files):
    program, _, _ = path_files
    proc = fluxmat_here("materialise", program, "--facts", tmp_path / "nope.dl")
    user_error(proc, "nope.dl", "no such file")


def test_error_missing_updates_file(tmp_path, path_files):
    program, facts, _ = path_files
    proc = fluxmat_here("replay", program, "--facts", facts, "--updates", tmp_path / "nope.jsonl")
    user_error(proc, "nope.jsonl", "no such file")


def test_error_syntax_names_file_line_column(tmp_path):
    program = write(tmp_path / "bad.dl", "edge(a, b).\npath(X, Y) :- edge(X, Y.\n")
    user_error(fluxmat("materialise", program), f"{program}:2:24: expected")


def test_error_syntax_in_facts_file(tmp_path, path_files):
    program, _, _ = path_files
    facts = write(tmp_path / "f.dl", "edge(a, b).\nedge(b, Y).\n")
    user_error(fluxmat_here("materialise", program, "--facts", facts), f"{facts}:2:9:")


def test_error_unsafe_rule(tmp_path):
    program = write(tmp_path / "unsafe.dl", "p(X, Y) :- q(X).\n")
    user_error(fluxmat_here("check", program), f"{program}:1:1: unsafe rule", "variable Y")


def test_error_unstratifiable(tmp_path):
    program = write(tmp_path / "u.dl", "p(X) :- q(X), not r(X).\nr(X) :- p(X).\n")
    user_error(fluxmat_here("materialise", program), f"{program}:1:15:", "not stratifiable")


@pytest.mark.parametrize(
    ("lines", "fragments"),
    [
        ('{"add": []}\n{"add": [["edge", "a", "b"]],}\n', [":2:30: invalid JSON"]),
        ('{"add": [["edge", "a", "b"]], "del": [["edge", "a", "b"]]}\n',
         [":1:", "both added and deleted"]),
        ('{"add": [["edge", "a"]]}\n', [":1:", "edge(a) has 1 argument but predicate edge has 2"]),
        ('{"add": [["edge", "a", "b"]], "remove": []}\n', [":1:", "unknown key 'remove'"]),
    ],
    ids=["bad_json", "added_and_deleted", "wrong_arity", "unknown_key"],
)  # fmt: skip
def test_error_invalid_update_line(tmp_path, path_files, lines, fragments):
    program, facts, _ = path_files
    updates = write(tmp_path / "bad.jsonl", lines)
    output = tmp_path / "out.dl"
    proc = fluxmat_here(
        "replay", program, "--facts", facts, "--updates", updates, "--output", output,
    )  # fmt: skip
    user_error(proc, str(updates), *fragments)
    assert not output.exists()


def test_error_unknown_algorithm_flag(path_files):
    program, facts, updates = path_files
    proc = fluxmat_here("replay", program, "--facts", facts, "--updates", updates, "--algorithm", "nope")
    user_error(proc, "nope")


def test_error_unknown_algorithm_environment(path_files):
    program, facts, updates = path_files
    proc = fluxmat_here(
        "replay", program, "--facts", facts, "--updates", updates,
        env={"FLUXMAT_ALGORITHM": "nope"},
    )  # fmt: skip
    user_error(proc, "unknown algorithm 'nope'")


def test_error_counting_on_recursive_program(path_files):
    """The objects core refuses counting on a recursive program; the arrays core (the default)
    counts the non-recursive predicates and runs DRed^c for recursive components, so it runs it."""
    program, facts, updates = path_files
    args = ("replay", program, "--facts", facts, "--updates", updates, "--algorithm", "counting")
    user_error(fluxmat_here(*args, "--core", "objects"), "recursive", "predicate path")
    assert ok(fluxmat_here(*args)).splitlines() == PATH_FINAL


# ------------------------------------------------------------------ hostile input (issue 14)
# Each input class gave a Python traceback; now it is one `fluxmat: error:` line.


def test_error_program_not_utf8(tmp_path):
    program = tmp_path / "latin1.dl"
    program.write_bytes('p(a).\nq(X) :- p(X), X != "caf\xe9".\n'.encode("latin-1"))
    user_error(fluxmat_here("check", program), f"{program}:2:24: not UTF-8 text: byte 0xe9")
    facts = tmp_path / "facts.dl"
    facts.write_bytes(b"p(\xff).\n")
    user_error(fluxmat_here("materialise", write(tmp_path / "ok.dl", "q(X) :- p(X).\n"), "--facts", facts),
               f"{facts}:1:3: not UTF-8")  # fmt: skip


def test_error_directory_as_program(tmp_path):
    user_error(fluxmat_here("check", tmp_path), f"{tmp_path}: is a directory")
    user_error(fluxmat_here("query", tmp_path, "p(X)"), "is a directory")


def test_error_deeply_nested_brackets(tmp_path):
    program = write(tmp_path / "nest.dl", "q(X, Y) :- p(X), Y = " + "(" * 400 + "X" + ")" * 400 + ".\n")
    user_error(fluxmat_here("check", program), f"{program}:1:122: expression nested deeper than 100 levels")
    minus = write(tmp_path / "minus.dl", "q(Y) :- p(X), Y = " + "- " * 400 + "X.\n")
    user_error(fluxmat_here("explain", minus), "nested deeper than 100 levels")


@pytest.mark.parametrize("core", ["arrays", "objects"])
def test_long_sums_compile_and_compute_the_same(tmp_path, core):
    """A sum of 250 terms failed to compile (Python refuses ~200 nested calls);
    2,000 terms, a 1,000-factor product and a 1,000-term difference now run
    (plans are shared by the algorithms: three kinds are tried), with the values
    of the same sums written short. On both cores (the arrays core stopped at
    Python's recursion limit: its built-ins' terms were compared and written recursively)."""
    long = ("q(S, P, D) :- p(X), S = " + " + ".join(["X"] * 2000) + ", P = " + " * ".join(["1"] * 1000)
            + ", D = " + " - ".join(["X"] * 1000) + ".\np(2).\n")  # fmt: skip
    short = "q(S, P, D) :- p(X), S = X * 2000, P = 1, D = X - X * 999.\np(2).\n"
    updates = jsonl(tmp_path / "u.jsonl", [{"add": [["p", 3]]}, {"del": [["p", 2]]}])
    short_file = write(tmp_path / "short.dl", short)
    want = ok(fluxmat_here("replay", short_file, "--updates", updates, "--core", core))
    assert want.splitlines() == ["p(3).", "q(6000, 1, -2994)."]
    for algorithm in ("remat", "dredc", "fd-counting"):
        assert ok(fluxmat_here("replay", write(tmp_path / "long.dl", long), "--updates", updates,
                          "--algorithm", algorithm, "--core", core)) == want, algorithm  # fmt: skip


def test_error_huge_integers(tmp_path):
    program = write(tmp_path / "big.dl", "p(" + "1" * 5000 + ").\n")
    user_error(fluxmat_here("materialise", program), f"{program}:1:3: integer with 5000 digits: at most 4000")
    big = int("9" * 4000)
    ok_program = write(tmp_path / "edge.dl", f"p({big}).\nq(Y) :- p(X), Y = X + 1.\nr(Y) :- p(X), Y = X - 1.\n")
    assert ok(fluxmat_here("materialise", ok_program)).splitlines() == [f"p({big}).", f"r({big - 1})."]
    updates = write(tmp_path / "u.jsonl", '{"add": [["p", ' + "7" * 4100 + "]]}\n")
    user_error(fluxmat_here("replay", ok_program, "--updates", updates), f"{updates}:1:", "more than 4000 digits")


def test_why_json_of_a_deep_proof(tmp_path):
    chain = "".join(f"edge({i}, {i + 1}).\n" for i in range(600))
    program = write(tmp_path / "deep.dl", PATH + chain)
    text = ok(fluxmat("why", program, "path(0, 600)", "--json"))
    result = json.loads(text)  # flat: no recursion limit to raise
    steps = result["proof"]["steps"]
    assert [s["id"] for s in steps] == list(range(len(steps)))
    depth, node = 0, steps[result["proof"]["root"]]
    while node.get("premises"):
        node, depth = steps[node["premises"][0]], depth + 1
    assert depth == 600 and node == {"id": node["id"], "fact": "edge(0, 1)", "explicit": True}
    assert result["nodes"] == 1200 == len(steps) and not result["truncated"]


def test_error_query_with_nested_brackets(tmp_path, path_files):
    program, facts, _ = path_files
    user_error(fluxmat_here("query", program, "path(" + "(" * 1000, "--facts", facts),
               "<pattern>:1:", "nested deeper than 100 levels")  # fmt: skip
    user_error(fluxmat_here("query", program, "path(a, ?X)", "--facts", facts, "--limit", "-1"),
               "limit must be at least 0")  # fmt: skip


@pytest.mark.parametrize(
    ("url", "fragment"),
    [("http://x", "unsupported state store URL 'http://x'"),
     ("redis://:hunter2@127.0.0.1:notaport/0", "invalid Redis URL redis://:***@127.0.0.1:notaport/0"),
     ("redis://:hunter2@127.0.0.1:{port}/0", "cannot reach Redis at redis://:***@127.0.0.1:{port}/0")],
    ids=["scheme", "port", "unreachable"],
)  # fmt: skip
def test_error_bad_redis_urls_hide_their_password(path_files, url, fragment):
    from tests.support.servers import free_port

    program, _, _ = path_files
    port = free_port()
    run = fluxmat if "{port}" in url else fluxmat_sampled  # the one that connects: a subprocess always
    line = user_error(run("query", program, "path(?X, ?Y)", "--redis", url.format(port=port)),
                      fragment.format(port=port))  # fmt: skip
    assert "hunter2" not in line


def test_error_out_of_memory_names_the_limit(tmp_path):
    """A string that doubles with every derivation: MemoryError under `ulimit -v`."""
    import resource

    program = write(tmp_path / "double.dl", 's("ab").\ns(Z) :- s(X), Z = X + X.\n')
    limit = 640 * 2**20

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    proc = subprocess.run([sys.executable, "-m", "fluxmat.ops.cli", "materialise", str(program)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, preexec_fn=cap)  # fmt: skip
    user_error(proc, "out of memory: the address-space limit of 640 MiB (ulimit -v) was used up")


def test_error_recursion_limit_is_named(tmp_path, path_files):
    """Whatever still recurses is one line: here a program reader that recurses without end.

    (A low recursion limit for the whole run is not used: how deep the CLI's own frames go
    changes with the code, and argparse itself fails below ~25 frames.)
    """
    program, facts, _ = path_files
    code = ("import sys; from fluxmat.connectors import programs; from fluxmat.ops.cli import main\n"
            "sys.setrecursionlimit(200)\n"
            "def deeper(n): return deeper(n + 1)\n"
            "programs.load_program = lambda *a, **k: deeper(0)\n"
            f"sys.exit(main(['why', {str(program)!r}, 'path(a, d)', '--facts', {str(facts)!r}]))")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    user_error(proc, "the input nests too deeply: Python's recursion limit (200 frames) was reached")


def test_replay_validates_the_whole_file_before_applying(tmp_path, path_files):
    """A wrong arity on line 5,000 was found after 4,999 updates had been applied."""
    program, facts, _ = path_files
    stats, output = tmp_path / "stats.jsonl", tmp_path / "out.dl"
    good = [{"add": [["edge", f"n{i}", f"n{i + 1}"]]} for i in range(4999)]
    cases = {
        "arity against the program": (good + [{"add": [["edge", "x"]]}], "5000:", "edge(x) has 1 argument"),
        "arity against an earlier update": ([{"add": [["zz", "a"]]}, {}, {"del": [["zz", "a", "b"]]}],
                                            "3:", "zz(a, b) has 2 arguments but predicate zz has 1"),
        "add/delete clash": ([{}, {"add": [["edge", "p", "q"]], "del": [["edge", "p", "q"]]}],
                             "2:", "both added and deleted"),
    }  # fmt: skip
    for items, where, message in cases.values():
        updates = jsonl(tmp_path / "u.jsonl", items)
        proc = fluxmat_here("replay", program, "--facts", facts, "--updates", updates,
                       "--stats", stats, "--output", output)  # fmt: skip
        user_error(proc, f"{updates}:{where}", message)
        assert not stats.exists() and not output.exists()  # nothing was applied


def test_run_flags_are_checked_before_connecting(tmp_path, path_files):
    """No broker runs at 127.0.0.1:1: every bad flag is reported before it is tried."""
    from fluxmat.engine import FluxmatError
    from fluxmat.ops.cli import build_parser
    from fluxmat.ops.stream_cli import job_config

    program, _, _ = path_files
    base = ["run", str(program), "--bootstrap-servers", "127.0.0.1:1", "--updates-topic", "u",
            "--deltas-topic", "d", "--redis", "memory://", "--checkpoint", str(tmp_path / "cp")]  # fmt: skip
    for flags, fragment in [
        (["--metrics-port", "99999"], "--metrics-port must be a port number"),
        (["--trigger-interval", "soon"], "--trigger-interval expects a duration"),
        (["--starting-offsets", '{"0": -1}'], "--starting-offsets expects"),
        (["--algorithm", "remat"], "fully dynamic algorithm (fd-counting or fd-dred)"),
        (["--updates-topic", "a b"], "--updates-topic must be a Kafka topic name"),
        (["--redis", "http://:pw@x"], "--redis expects redis://"),
        (["--delta-compression", "zip"], "--delta-compression must be one of lz4, gzip, none, got 'zip'"),
        (["--redis-fsync", "sometimes"], "--redis-fsync must be one of everysec, always, keep, got 'sometimes'"),
    ]:  # fmt: skip
        with pytest.raises(FluxmatError, match=re.escape(fragment)) as exc:
            job_config(build_parser().parse_args(base + flags))
        assert ":pw@" not in str(exc.value)
    user_error(fluxmat(*base, "--budget", "-1"), "--budget must be at least 0")  # as a user sees it
    user_error(fluxmat(*base), "cannot reach Kafka broker at 127.0.0.1:1")  # one line, no kafka log


def test_error_dashboard_port_is_checked_first(path_files):
    program, _, _ = path_files
    user_error(fluxmat("dashboard", program, "--redis", "redis://127.0.0.1:1/0", "--port", "99999"),
               "--port must be a port number from 0 to 65535, got 99999")  # fmt: skip
