"""`fluxmat program check|apply --equality rewrite`: a change validated as the job with equality does.

In this process (`fluxmat_here`); `apply` is refused before any broker is contacted
(nothing listens on port 1), so these need no server.
"""

from __future__ import annotations

from tests.support.cli import fluxmat_here, ok, user_error, write

OWL = "@prefix owl: <http://www.w3.org/2002/07/owl#> .\n"
OLD_EQ = OWL + "p(X, Y) :- e(X, Y).\n"
SAME_TARGET = "owl:sameAs(X, Y) :- p(X, Z), p(Y, Z).\n"
APPLY = ("--bootstrap-servers", "127.0.0.1:1", "--updates-topic", "u")


def _files(tmp_path):
    write(tmp_path / "old.dl", OLD_EQ)
    write(tmp_path / "facts.dl", "e(a, c).\ne(b, c).\ng(a).\n")
    write(tmp_path / "negation.dl", OLD_EQ + "q(X) :- p(X, Y),\n    not e(Y, X).\n")
    write(tmp_path / "builtin.dl", OLD_EQ + "r(X) :- p(X, X).\nr(Y) :- p(X, Y), X != Y.\n")
    return tmp_path


def test_rewrite_refuses_what_the_job_with_equality_refuses_before_sending(tmp_path):
    d = _files(tmp_path)
    for action, extra in (("check", ()), ("apply", APPLY)):
        line = user_error(fluxmat_here("program", action, d / "negation.dl", "--program", d / "old.dl",
                                       "--equality", "rewrite", *extra))  # fmt: skip
        assert f"{d / 'negation.dl'}:3:1:" in line and "uses negation" in line, line
        line = user_error(fluxmat_here("program", action, d / "builtin.dl", "--program", d / "old.dl",
                                       "--equality", "rewrite", *extra))  # fmt: skip
        assert f"{d / 'builtin.dl'}:4:1:" in line and "uses a built-in" in line, line
    # without --program: the new program alone, as rewrite mode requires
    user_error(fluxmat_here("program", "apply", d / "negation.dl", "--equality", "rewrite", *APPLY),
               "negation.dl:3:1:", "uses negation")  # fmt: skip
    # the environment variable, as for the other commands
    user_error(fluxmat_here("program", "check", d / "negation.dl", "--program", d / "old.dl",
                            env={"FLUXMAT_EQUALITY": "rewrite"}), "uses negation")  # fmt: skip


def test_without_equality_the_same_changes_are_accepted(tmp_path):
    d = _files(tmp_path)
    out = ok(fluxmat_here("program", "check", d / "negation.dl", "--program", d / "old.dl"))
    assert out.startswith("+ q(X) :- p(X, Y), not e(Y, X).")
    ok(
        fluxmat_here(
            "program", "check", d / "builtin.dl", "--program", d / "old.dl", "--equality", "off"
        )
    )


def test_rewrite_applies_a_change_deriving_same_as_with_equality(tmp_path):
    d = _files(tmp_path)
    write(d / "new.dl", OLD_EQ + SAME_TARGET)
    args = ("program", "check", d / "new.dl", "--program", d / "old.dl", "--facts", d / "facts.dl")
    # with equality: a ~ b, so g(a) holds of b too (sameAs(a, a), ... were already there, reflexive)
    assert "facts added: 3, removed: 0" in ok(fluxmat_here(*args, "--equality", "rewrite"))
    # without: owl:sameAs is a predicate like any other, its four facts over {a, b} and no more
    assert "facts added: 4, removed: 0" in ok(fluxmat_here(*args))
