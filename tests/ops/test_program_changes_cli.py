"""Program changes from the command line: `{"program": ...}` lines in `fluxmat replay`, `fluxmat program check|apply`."""

from __future__ import annotations

import json

from tests.support.cli import NEW, OLD, fluxmat, ok, user_error

FACTS = "edge(a, b).\nedge(b, c).\nedge(c, d).\n"
UPDATES = [
    {"add": [["edge", "d", "e"]]},
    {"program": {"add": "path(X, Z) :- path(X, Y), edge(Y, Z)."}, "id": "v2"},
    {"del": [["edge", "b", "c"]]},
    {
        "program": {
            "del": "path(X, Z) :- path(X, Y), edge(Y, Z).",
            "add": "path(X, Y) :- edge(Y, X).",
        }
    },
    {"add": [["edge", "b", "c"]]},
    {"program": {"whole": NEW}},
]


def _files(tmp_path, updates=UPDATES):
    (tmp_path / "old.dl").write_text(OLD)
    (tmp_path / "new.dl").write_text(NEW)
    (tmp_path / "facts.dl").write_text(FACTS)
    (tmp_path / "u.jsonl").write_text("".join(json.dumps(u) + "\n" for u in updates))
    return tmp_path


def test_replay_applies_program_lines_in_order(tmp_path):
    d = _files(tmp_path)
    out = ok(fluxmat("replay", d / "old.dl", "--facts", d / "facts.dl", "--updates", d / "u.jsonl",
                     "--core", "arrays", "--stats", d / "stats.jsonl"))  # fmt: skip
    (d / "final.dl").write_text(FACTS + "edge(d, e).\n")
    assert out == ok(fluxmat("materialise", d / "new.dl", "--facts", d / "final.dl"))
    stats = [json.loads(line) for line in (d / "stats.jsonl").read_text().splitlines()]
    assert [s.get("program_version") for s in stats] == [None, None, 2, None, 3, None, 4]
    assert (stats[2]["id"], stats[2]["added"], stats[2]["removed"]) == ("v2", 9, 0)


def test_replay_of_a_middle_state(tmp_path):
    d = _files(tmp_path, UPDATES[:4])
    out = ok(fluxmat("replay", d / "old.dl", "--facts", d / "facts.dl", "--updates", d / "u.jsonl",
                     "--core", "arrays"))  # fmt: skip
    (d / "mid.dl").write_text(OLD + "path(X, Y) :- edge(Y, X).\n")
    (d / "final.dl").write_text("edge(a, b).\nedge(c, d).\nedge(d, e).\n")
    assert out == ok(fluxmat("materialise", d / "mid.dl", "--facts", d / "final.dl"))


def test_replay_refuses_program_lines_on_the_objects_core(tmp_path):
    d = _files(tmp_path)
    user_error(fluxmat("replay", d / "old.dl", "--updates", d / "u.jsonl", "--core", "objects"),
               "u.jsonl:2: program changes need the arrays core (--core arrays)")  # fmt: skip


def test_replay_bad_program_lines(tmp_path):
    d = _files(tmp_path, [{"program": {"add": "p(X :- q(X)."}}])
    user_error(fluxmat("replay", d / "old.dl", "--updates", d / "u.jsonl", "--core", "arrays"),
               "u.jsonl:1: program.add:1:5: expected")  # fmt: skip
    d = _files(tmp_path, [{"add": [["edge", "x", "y"]]}, {"program": {"add": "p(X) :- q(Y)."}}])
    user_error(fluxmat("replay", d / "old.dl", "--updates", d / "u.jsonl", "--core", "arrays"),
               "u.jsonl:2: <add>:1:1: unsafe rule: variable X")  # fmt: skip
    for body in ({"add": 3}, {"whole": "a.", "add": "b."}, {}, {"other": ""}):
        d = _files(tmp_path, [{"program": body}])
        user_error(fluxmat("replay", d / "old.dl", "--updates", d / "u.jsonl", "--core", "arrays"),
                   "u.jsonl:1:", "program")  # fmt: skip


def test_program_check_prints_the_difference(tmp_path):
    d = _files(tmp_path)
    out = ok(fluxmat("program", "check", d / "new.dl", "--program", d / "old.dl"))
    assert out.splitlines() == [
        f"+ path(X, Z) :- path(X, Y), edge(Y, Z).  ({d / 'new.dl'}:2:1)",
        "strata whose rules change: 1 (of 2)",
        "strata the change may reach: 1, 2",
    ]
    out = ok(
        fluxmat(
            "program", "check", d / "old.dl", "--program", d / "new.dl", "--facts", d / "facts.dl"
        )
    )
    assert out.splitlines()[0] == f"- path(X, Z) :- path(X, Y), edge(Y, Z).  ({d / 'new.dl'}:2:1)"
    assert out.splitlines()[-1].startswith("facts added: 0, removed: 5 (")


def test_program_check_and_apply_refuse_invalid_programs(tmp_path):
    d = _files(tmp_path)
    (d / "bad.dl").write_text("p(X) :- q(X), not p(X).\n")
    user_error(
        fluxmat("program", "check", d / "bad.dl", "--program", d / "old.dl"),
        "bad.dl:1:",
        "stratifiable",
    )
    (d / "arity.dl").write_text("far(X, Y) :- edge(X, Y).\n")
    for facts in ([], ["--facts", d / "facts.dl"]):
        user_error(fluxmat("program", "check", d / "arity.dl", "--program", d / "old.dl", *facts),
                   "arity.dl:1:1: predicate far has 2 arguments here but 1")  # fmt: skip
    user_error(fluxmat("program", "check", d / "new.dl"), "needs --program")
    user_error(
        fluxmat("program", "apply", d / "new.dl"), "needs --bootstrap-servers and --updates-topic"
    )
    # refused before any broker is contacted (nothing listens on port 1)
    user_error(fluxmat("program", "apply", d / "bad.dl", "--bootstrap-servers", "127.0.0.1:1",
                       "--updates-topic", "u"), "bad.dl:1:", "stratifiable")  # fmt: skip
