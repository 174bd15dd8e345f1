"""From-scratch peers: DuckDB (SQL per workload) and clingo (any translatable program).

Both recompute the materialisation from the explicit facts of each task's
state (tasks.plan); loading the facts (DuckDB tables, clingo's fact text) is
not timed, evaluation is. Counts include the explicit facts, like fluxmat's.
`run_peer` (peers_inc.py) calls `clingo_rows` / `duckdb_rows` in a child.

DuckDB queries (the issue: recursive SQL where expressible):

* dag: `WITH RECURSIVE` transitive closure of `edge`;
* stc: `WITH RECURSIVE` closure of the symmetric edge set (pairs joined by a
  path of length >= 1 over the undirected graph = the symmetric-transitive
  closure, including `related(x, x)` for every node with an edge);
* sspe: `WITH RECURSIVE` over `b` from source 0 with `d.z + b.w` (UNION
  removes duplicate (node, length) pairs, so it terminates on a DAG);
* exp: the three 9-atom rules as plain joins, iterated from Python until no new
  row (a recursive CTE may reference itself only once);
* lubm: not written (107 rules; "n/a").
"""

from __future__ import annotations

import json
import threading
import time

from fluxmat.engine import Program
from fluxmat.engine.syntax import Atom, BinOp, Comparison, Const, Iri, Negation, Var

# ---------------------------------------------------------------- DuckDB

_EXP_RULE = """
SELECT n.c0 AS n, vl.c1 AS s, {expr} AS v
FROM t_{op} n
JOIN t_left l ON l.c0 = n.c0
JOIN t_right r ON r.c0 = n.c0
JOIN t_expr en ON en.c0 = n.c0
JOIN t_expr el ON el.c0 = l.c1 AND el.c1 = en.c1
JOIN t_expr er ON er.c0 = r.c1 AND er.c1 = en.c1
JOIN t_valset vs ON vs.c0 = en.c1
JOIN v vl ON vl.c0 = l.c1 AND vl.c1 = vs.c1
JOIN v vr ON vr.c0 = r.c1 AND vr.c1 = vs.c1
"""
_EXP_STEP = "INSERT INTO v SELECT DISTINCT * FROM ({}) EXCEPT SELECT * FROM v".format(
    " UNION ".join(
        _EXP_RULE.format(op=op, expr=expr)
        for op, expr in (("add", "(vl.c2 + vr.c2) % 1000"),
                         ("sub", "(vl.c2 - vr.c2 + 1000) % 1000"),
                         ("mul", "(vl.c2 * vr.c2) % 1000"))
    )  # fmt: skip
)

# workload -> (SQL computing the derived relation as table `derived`, or None for a loop)
DUCKDB_SQL = {
    "dag": """CREATE OR REPLACE TABLE derived AS WITH RECURSIVE tc(x, y) AS (
        SELECT c0, c1 FROM t_edge UNION
        SELECT tc.x, e.c1 FROM tc JOIN t_edge e ON tc.y = e.c0) SELECT * FROM tc""",
    "stc": """CREATE OR REPLACE TABLE derived AS WITH RECURSIVE
        sym(x, y) AS (SELECT c0, c1 FROM t_related UNION SELECT c1, c0 FROM t_related),
        r(x, y) AS (SELECT x, y FROM sym UNION
                    SELECT r.x, sym.y FROM r JOIN sym ON r.y = sym.x)
        SELECT * FROM r""",
    "sspe": """CREATE OR REPLACE TABLE derived AS WITH RECURSIVE d(y, z) AS (
        SELECT c1, c2 FROM t_b WHERE c0 = 0 UNION
        SELECT b.c1, d.z + b.c2 FROM d JOIN t_b b ON d.y = b.c0) SELECT * FROM d""",
    "exp": None,
}
# derived relations that also hold explicit facts: count the union, not the sum
DUCKDB_SHARED = {"stc": "t_related", "exp": "v"}


class DuckDBPeer:
    """One in-memory database; `run(facts)` reloads the tables and times the query."""

    def __init__(self, workload: str, cap: float):
        import duckdb

        self.workload = workload
        self.con = duckdb.connect(":memory:")
        self.cap = cap
        self.threads = self.con.execute("SELECT current_setting('threads')").fetchone()[0]

    def _load(self, facts: list[tuple]) -> dict[str, int]:
        by_pred: dict[str, list[tuple]] = {}
        for f in facts:
            by_pred.setdefault(f[0], []).append(f[1:])
        sizes = {}
        for pred, rows in by_pred.items():
            cols = list(zip(*rows, strict=True)) if rows[0] else []
            types = ["BIGINT" if all(isinstance(v, int) for v in c) else "VARCHAR" for c in cols]
            name = f"t_{pred}"
            columns = ", ".join(f"c{i} {t}" for i, t in enumerate(types))
            self.con.execute(f"CREATE OR REPLACE TABLE {name} ({columns})")
            self.con.execute(f"INSERT INTO {name} SELECT " + ", ".join(
                f"unnest(?::{t}[])" for t in types), [list(c) for c in cols])  # fmt: skip
            sizes[name] = len(rows)
        for name in ("t_left", "t_right", "t_expr", "t_valset", "t_add", "t_sub", "t_mul"):
            if self.workload == "exp" and name not in sizes:  # empty tables still join
                cols = {"t_add": 1, "t_sub": 1, "t_mul": 1}.get(name, 2)
                self.con.execute(f"CREATE OR REPLACE TABLE {name} "
                                 f"({', '.join(f'c{i} BIGINT' for i in range(cols))})")  # fmt: skip
        return sizes

    def _derive(self, sizes: dict[str, int]) -> int:
        sql = DUCKDB_SQL[self.workload]
        if sql is not None:
            self.con.execute(sql)
            derived = self.con.execute("SELECT count(*) FROM derived").fetchone()[0]
            shared = DUCKDB_SHARED.get(self.workload)
            return derived + sum(n for t, n in sizes.items() if t != shared)
        # exp: iterate the plain-join rules until no new value row
        self.con.execute("CREATE OR REPLACE TABLE v AS SELECT * FROM t_value")
        while self.con.execute(_EXP_STEP).fetchone()[0]:
            pass
        derived = self.con.execute("SELECT count(*) FROM v").fetchone()[0]
        return derived + sum(n for t, n in sizes.items() if t != "t_value")

    def run(self, facts: list[tuple]) -> tuple[float, int]:
        sizes = self._load(facts)
        timer = threading.Timer(self.cap, self.con.interrupt)
        timer.start()
        try:
            start = time.perf_counter()
            n = self._derive(sizes)
            return time.perf_counter() - start, n
        finally:
            timer.cancel()

    def close(self) -> None:
        self.con.close()


# ---------------------------------------------------------------- clingo


class AspTranslator:
    """fluxmat AST / facts -> ASP text, with predicates renamed to safe `p<i>`."""

    OPS = {"%": "\\"}  # ASP spells modulo `\`

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
        if isinstance(v, bool) or isinstance(v, float):
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
        if isinstance(t, BinOp):
            return f"({self.term(t.left)} {self.OPS.get(t.op, t.op)} {self.term(t.right)})"
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
            elif isinstance(lit, Comparison) and lit.op in ("=", "!=", "<", "<=", ">", ">="):
                body.append(f"{self.term(lit.left)} {lit.op} {self.term(lit.right)}")
            else:
                raise ValueError(f"no ASP translation for literal {lit}")
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
