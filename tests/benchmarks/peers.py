"""Peer systems, run in-process: DuckDB (recursive SQL) and clingo (Python API).

Both recompute from scratch; each function returns (wall seconds, fact count).
The fact count includes the explicit facts, like fluxmat's `Reasoner.facts()`.
"""

from __future__ import annotations

import json
import threading
import time

from engine import Program
from engine.syntax import Atom, Const, Iri, Negation, Var

# ---------------------------------------------------------------- DuckDB (DAG only)

TC_SQL = """
CREATE OR REPLACE TABLE path AS
WITH RECURSIVE tc(x, y) AS (
    SELECT x, y FROM edge
    UNION
    SELECT tc.x, edge.y FROM tc JOIN edge ON tc.y = edge.x
)
SELECT x, y FROM tc
"""


class DuckDBClosure:
    """`edge` table plus `path` = its transitive closure via WITH RECURSIVE ... UNION."""

    def __init__(self, cap: float):
        import duckdb

        self.con = duckdb.connect(":memory:")
        self.con.execute("CREATE TABLE edge (x INTEGER, y INTEGER)")
        self.cap = cap
        self.threads = self.con.execute("SELECT current_setting('threads')").fetchone()[0]

    def _guard(self, fn):
        timer = threading.Timer(self.cap, self.con.interrupt)
        timer.start()
        try:
            return fn()
        finally:
            timer.cancel()

    def _insert(self, facts: list[tuple]) -> None:
        xs = [f[1] for f in facts]
        ys = [f[2] for f in facts]
        self.con.execute(
            "INSERT INTO edge SELECT unnest(?::INTEGER[]), unnest(?::INTEGER[])", [xs, ys]
        )

    def _closure(self) -> int:
        self.con.execute(TC_SQL)
        n_path = self.con.execute("SELECT count(*) FROM path").fetchone()[0]
        n_edge = self.con.execute("SELECT count(*) FROM edge").fetchone()[0]
        return n_path + n_edge

    def load(self, facts: list[tuple]) -> tuple[float, int]:
        """Insert the edges (untimed), then time the closure."""
        self.con.execute("DELETE FROM edge")
        self._insert(facts)
        start = time.perf_counter()
        n = self._guard(self._closure)
        return time.perf_counter() - start, n

    def delete(self, facts: list[tuple]) -> tuple[float, int]:
        """Delete edges and recompute the closure from scratch (both timed)."""
        start = time.perf_counter()

        def go():
            xs = [f[1] for f in facts]
            ys = [f[2] for f in facts]
            self.con.execute(
                "DELETE FROM edge WHERE (x, y) IN "
                "(SELECT unnest(?::INTEGER[]) AS x, unnest(?::INTEGER[]) AS y)",
                [xs, ys],
            )
            return self._closure()

        n = self._guard(go)
        return time.perf_counter() - start, n

    def insert(self, facts: list[tuple]) -> tuple[float, int]:
        """Insert edges and recompute the closure from scratch (both timed)."""
        start = time.perf_counter()

        def go():
            self._insert(facts)
            return self._closure()

        n = self._guard(go)
        return time.perf_counter() - start, n

    def update(self, add: list[tuple], delete: list[tuple]) -> tuple[float, int]:
        """Delete and insert edges, then recompute the closure once (all timed)."""
        start = time.perf_counter()

        def go():
            xs = [f[1] for f in delete]
            ys = [f[2] for f in delete]
            self.con.execute(
                "DELETE FROM edge WHERE (x, y) IN "
                "(SELECT unnest(?::INTEGER[]) AS x, unnest(?::INTEGER[]) AS y)",
                [xs, ys],
            )
            self._insert(add)
            return self._closure()

        n = self._guard(go)
        return time.perf_counter() - start, n

    def close(self) -> None:
        self.con.close()


# ---------------------------------------------------------------- clingo (any positive program)


class AspTranslator:
    """fluxmat AST / facts -> ASP text, with predicates renamed to safe `p<i>`."""

    def __init__(self, program: Program):
        self.preds: dict[str, str] = {}
        self.rules = "\n".join(self._rule(r) for r in program.rules)
        self.program_facts = "\n".join(self._atom(a) + "." for a in program.facts)

    def pred(self, name: str) -> str:
        p = self.preds.get(name)
        if p is None:
            p = self.preds[name] = f"p{len(self.preds)}"
        return p

    @staticmethod
    def value(v) -> str:
        if isinstance(v, bool):
            raise ValueError(f"no ASP translation for {v!r}")
        if isinstance(v, int):
            return str(v)
        if isinstance(v, Iri):
            v = v.value
        return json.dumps(str(v), ensure_ascii=False)  # "..." with \" and \\ escapes

    def term(self, t) -> str:
        if isinstance(t, Var):
            return "V" + t.name
        if isinstance(t, Const):
            return self.value(t.value)
        raise ValueError(f"no ASP translation for term {t!r}")

    def _atom(self, a: Atom) -> str:
        p = self.pred(a.pred)
        return f"{p}({','.join(self.term(t) for t in a.args)})" if a.args else p

    def _rule(self, rule) -> str:
        body = []
        for lit in rule.body:
            if isinstance(lit, Atom):
                body.append(self._atom(lit))
            elif isinstance(lit, Negation):
                body.append("not " + self._atom(lit.atom))
            else:
                raise ValueError(f"no ASP translation for literal {lit!r}")
        return f"{self._atom(rule.head)} :- {', '.join(body)}."

    def facts(self, facts: list[tuple]) -> str:
        out = []
        for f in facts:
            p = self.pred(f[0])
            args = ",".join(self.value(v) for v in f[1:])
            out.append(f"{p}({args})." if args else f"{p}.")
        return "\n".join(out)


def clingo_from_scratch(asp: AspTranslator, facts: list[tuple]) -> tuple[float, int]:
    """Ground and solve rules + facts from scratch; count the atoms of the model.

    The facts are turned into ASP text before the clock starts; parsing it is timed.
    """
    import clingo

    text = asp.rules + "\n" + asp.program_facts + "\n" + asp.facts(facts)
    count = [0]

    def on_model(model):
        count[0] = len(model.symbols(atoms=True))

    start = time.perf_counter()
    ctl = clingo.Control(["--warn=none"])
    ctl.add("base", [], text)
    ctl.ground([("base", [])])
    ctl.solve(on_model=on_model)
    return time.perf_counter() - start, count[0]
