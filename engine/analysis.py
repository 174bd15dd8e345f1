"""Stage 2: analysis of a parsed program (AST -> frozen `Analysis`).

Computed once, then only queried:
  * rewrites (Program -> Program): an expression in a body atom becomes a
    fresh variable and a comparison (`q(X, Y + 1)` is `q(X, #b0), #b0 = Y + 1`);
    variables local to a negated atom are projected away through an auxiliary
    predicate (`not q(X, _)` holds when no `q(X, .)` exists, as in Nemo);
  * per rule: positive atoms, negated atoms and built-ins, with `=` resolved to an
    assignment where its left (or right) side is an unbound variable;
  * safety and arity checks (errors name file, line and column);
  * the predicate dependency graph, its strongly connected components, one
    stratum per component in dependency order, and recursive vs non-recursive
    rules (a rule is recursive when a positive body atom is in its head's stratum);
  * specialised modules (Hu, Motik & Horrocks 2019), found by a pattern matcher:
    `R(x, z) :- R(x, y), R(y, z).` over a binary R is a transitive-closure module
    tc(R); together with `R(y, x) :- R(x, y).` a symmetric-transitive-closure
    module stc(R). The stratum's other recursive rules stay generic.

Nothing here evaluates rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fluxmat.engine.decompose import decompositions
from fluxmat.engine.errors import AnalysisError
from fluxmat.engine.graph import components
from fluxmat.engine.rules import AnalysedRule, Assign, Builtin, Filter, term_vars
from fluxmat.engine.syntax import Atom, BinOp, Call, Comparison, Negation, Pos, Program, Rule, Var

INTERNAL_PREFIX = "__"
# the relations the engine makes itself: projected negations, the arrays core's unit relation,
# equality's rule constants (engine.equality.program)
_ENGINE_MADE = re.compile(r"__(?:neg\d+|unit|const\w*)\Z")


def engine_made(pred: object) -> bool:
    """Whether `pred` names a relation the engine makes itself (`__negN`, `__unit`, `__const...`).

    Their facts are the engine's bookkeeping and are never given from outside;
    other names starting with `__` (a translator's helper relations in a
    program built as a syntax tree) are ordinary relations.
    """
    return isinstance(pred, str) and _ENGINE_MADE.match(pred) is not None


@dataclass(frozen=True)
class Stratum:
    index: int
    preds: frozenset[str]
    nonrecursive: tuple[int, ...]
    recursive: tuple[int, ...]

    @property
    def rules(self) -> tuple[int, ...]:
        return self.nonrecursive + self.recursive


@dataclass(frozen=True)
class ModuleSpec:
    """A recursive module of one stratum: `kind` is "tc" or "stc" over binary `pred`.

    `rules` are the ids of the rules the module evaluates instead of the generic
    semi-naive loop (duplicates of the pattern included).
    """

    kind: str
    pred: str
    stratum: int
    rules: tuple[int, ...]

    def __str__(self) -> str:
        return f"{self.kind}({self.pred})"


@dataclass(frozen=True)
class Analysis:
    program: Program
    rules: tuple[AnalysedRule, ...]
    arity: dict[str, int]
    strata: tuple[Stratum, ...]
    stratum_of: dict[str, int]
    internal: frozenset[str]
    overloads: dict[str, dict[int, str]] = field(default_factory=dict)
    display: dict[str, str] = field(default_factory=dict)  # internal relation -> predicate
    modules: tuple[ModuleSpec, ...] = ()
    decompositions: dict = field(default_factory=dict)  # rule id -> engine.decompose result

    def modules_of(self, stratum: Stratum) -> tuple[ModuleSpec, ...]:
        """The specialised modules detected in `stratum` (empty for most strata)."""
        return tuple(m for m in self.modules if m.stratum == stratum.index)

    def relation(self, pred: str, arity: int) -> str:
        """The relation holding `pred` facts of `arity` (differs for RDFox overloads)."""
        table = self.overloads.get(pred)
        return table.get(arity, pred) if table else pred

    @property
    def recursive_preds(self) -> frozenset[str]:
        return frozenset(self.rules[r].head.pred for s in self.strata for r in s.recursive)

    @property
    def is_recursive(self) -> bool:
        return any(s.recursive for s in self.strata)

    def body_preds(self, stratum: Stratum) -> frozenset[str]:
        return frozenset(
            a.pred for r in stratum.rules for a in self.rules[r].positives + self.rules[r].negatives
        )


def _atom_vars(atom: Atom) -> list[str]:
    return [v for a in atom.args for v in term_vars(a)]


# ---------------------------------------------------------------- rewrites


def project_negation_locals(program: Program) -> Program:
    """Rewrite `not q(X, Y)` with Y local to the negation into `not __negK(X)`."""
    rules: list[Rule] = []
    aux: dict[tuple, str] = {}
    for rule in program.rules:
        body = []
        for i, lit in enumerate(rule.body):
            if not isinstance(lit, Negation):
                body.append(lit)
                continue
            elsewhere = set(_atom_vars(rule.head))
            for j, other in enumerate(rule.body):
                if j != i:
                    elsewhere.update(_literal_vars(other))
            local = [v for v in _atom_vars(lit.atom) if v not in elsewhere]
            if not local:
                body.append(lit)
                continue
            shared = list(dict.fromkeys(v for v in _atom_vars(lit.atom) if v in elsewhere))
            key = (lit.atom.pred, lit.atom.args, tuple(shared))
            name = aux.get(key)
            if name is None:
                name = f"{INTERNAL_PREFIX}neg{len(aux)}"
                aux[key] = name
                head = Atom(name, tuple(Var(v) for v in shared), lit.pos)
                rules.append(Rule(head, (lit.atom,), lit.pos))
            body.append(Negation(Atom(name, tuple(Var(v) for v in shared), lit.pos), lit.pos))
        rules.append(Rule(rule.head, tuple(body), rule.pos))
    return Program(tuple(rules), program.facts, program.prefixes, program.source)


def _literal_vars(lit) -> list[str]:
    if isinstance(lit, Atom):
        return _atom_vars(lit)
    if isinstance(lit, Negation):
        return _atom_vars(lit.atom)
    return term_vars(lit.left) + term_vars(lit.right)


def _map_atoms(program: Program, fn) -> Program:
    def lit(x):
        if isinstance(x, Atom):
            return fn(x)
        if isinstance(x, Negation):
            return Negation(fn(x.atom), x.pos)
        return x

    rules = tuple(Rule(fn(r.head), tuple(lit(b) for b in r.body), r.pos) for r in program.rules)
    return Program(rules, tuple(fn(f) for f in program.facts), program.prefixes, program.source)


def _all_atoms(program: Program):
    for r in program.rules:
        yield r.head
        for b in r.body:
            if isinstance(b, Atom):
                yield b
            elif isinstance(b, Negation):
                yield b.atom
    yield from program.facts


def overloads(program: Program) -> dict[str, dict[int, str]]:
    """RDFox predicates used with several arities, only in `pred[...]` atoms.

    Maps the predicate to one internal relation name per arity (`pred/arity`).
    """
    arities: dict[str, set[int]] = {}
    plain: set[str] = set()
    for a in _all_atoms(program):
        arities.setdefault(a.pred, set()).add(len(a.args))
        if not a.rdf:
            plain.add(a.pred)
    return {
        p: {k: f"{p}/{k}" for k in sorted(ks)}
        for p, ks in arities.items()
        if len(ks) > 1 and p not in plain
    }


def split_overloads(program: Program) -> Program:
    """Give each arity of an overloaded RDFox predicate its own relation."""
    table = overloads(program)
    if not table:
        return program
    return _map_atoms(
        program,
        lambda a: Atom(table[a.pred][len(a.args)], a.args, a.pos, a.rdf) if a.pred in table else a,
    )


def body_expression_var(k: int) -> str:
    """The fresh variable standing for a rule's k-th body-atom expression (no program text can name it)."""
    return f"#b{k}"


def lift_body_expressions(program: Program) -> Program:
    """Rewrite an expression in a body atom into a fresh variable and a comparison.

    `p(X) :- q(X, Y + 1), r(Y).` becomes `p(X) :- q(X, #b0), r(Y), #b0 = Y + 1.`
    (and likewise inside a negated atom), which every core evaluates with the
    built-ins it already has: the atom matches the facts whose column holds the
    expression's value. The expression's variables must be bound elsewhere in
    the body; a rule without body expressions is kept as it is.
    """
    rules: list[Rule] = []
    for rule in program.rules:
        made: list[Comparison] = []

        def lift(atom: Atom, made=made) -> Atom:
            if not any(isinstance(t, BinOp | Call) for t in atom.args):
                return atom
            args = []
            for t in atom.args:
                if isinstance(t, BinOp | Call):
                    v = Var(body_expression_var(len(made)))
                    made.append(Comparison("=", v, t, atom.pos))
                    t = v
                args.append(t)
            return Atom(atom.pred, tuple(args), atom.pos, atom.rdf)

        body = [
            Negation(lift(lit.atom), lit.pos) if isinstance(lit, Negation)
            else lift(lit) if isinstance(lit, Atom) else lit
            for lit in rule.body
        ]  # fmt: skip
        rules.append(Rule(rule.head, (*body, *made), rule.pos) if made else rule)
    return Program(tuple(rules), program.facts, program.prefixes, program.source)


REWRITES = (split_overloads, lift_body_expressions, project_negation_locals)


# ---------------------------------------------------------------- per rule


def _resolve_builtins(rule: Rule, bound: set[str]) -> tuple[Builtin, ...]:
    pending = [lit for lit in rule.body if isinstance(lit, Comparison)]
    out: list[Builtin] = []
    while pending:
        progress = False
        for c in list(pending):
            lv, rv = set(term_vars(c.left)), set(term_vars(c.right))
            made: Builtin | None = None
            if c.op in ("=", ":=") and isinstance(c.left, Var) and c.left.name not in bound and rv <= bound:
                made = Assign(c.left.name, c.right)
                bound.add(c.left.name)
            elif c.op == "=" and isinstance(c.right, Var) and c.right.name not in bound and lv <= bound:
                made = Assign(c.right.name, c.left)
                bound.add(c.right.name)
            elif lv <= bound and rv <= bound:
                made = Filter("=" if c.op == ":=" else c.op, c.left, c.right)
            if made is not None:
                out.append(made)
                pending.remove(c)
                progress = True
        if not progress:
            c = pending[0]
            free = [v for v in term_vars(c.left) + term_vars(c.right) if v not in bound]
            raise AnalysisError(
                f"unsafe rule: variable {free[0]} in '{c}' is not bound by a positive body atom "
                "or an assignment",
                c.pos,
            )
    return tuple(out)


def _analyse_rule(rule: Rule) -> tuple[tuple[Atom, ...], tuple[Atom, ...], tuple[Builtin, ...]]:
    positives = tuple(lit for lit in rule.body if isinstance(lit, Atom))
    negatives = tuple(lit.atom for lit in rule.body if isinstance(lit, Negation))
    bound = {v for a in positives for v in _atom_vars(a)}
    builtins = _resolve_builtins(rule, bound)
    for lit in rule.body:
        if isinstance(lit, Negation):
            for v in _atom_vars(lit.atom):
                if v not in bound:
                    raise AnalysisError(
                        f"unsafe rule: variable {v} in negated atom '{lit.atom}' is not bound "
                        "by a positive body atom",
                        lit.pos,
                    )
    for v in _atom_vars(rule.head):
        if v not in bound:
            raise AnalysisError(
                f"unsafe rule: variable {v} in the head of '{rule}' does not occur in a "
                "positive body atom",
                rule.head.pos,
            )
    return positives, negatives, builtins


# ---------------------------------------------------------------- program


def _check_arities(program: Program) -> dict[str, int]:
    seen: dict[str, tuple[int, Pos]] = {}

    def visit(atom: Atom) -> None:
        prev = seen.get(atom.pred)
        if prev is None:
            seen[atom.pred] = (len(atom.args), atom.pos)
        elif prev[0] != len(atom.args):
            raise AnalysisError(
                f"arity clash: predicate {atom.pred} has {len(atom.args)} arguments here but "
                f"{prev[0]} at {prev[1]}",
                atom.pos,
            )

    for rule in program.rules:
        visit(rule.head)
        for lit in rule.body:
            if isinstance(lit, Atom):
                visit(lit)
            elif isinstance(lit, Negation):
                visit(lit.atom)
    for fact in program.facts:
        visit(fact)
    return {p: a for p, (a, _) in seen.items()}


def _sccs(nodes: list[str], edges: dict[str, list[str]]) -> list[list[str]]:
    """Strongly connected components in dependency order (sources first)."""
    return components(nodes, edges)[::-1]


def analyse(program: Program) -> Analysis:
    """Check and analyse `program`; raises AnalysisError on the first problem found."""
    table = overloads(program)
    for rewrite in REWRITES:
        program = rewrite(program)
    arity = _check_arities(program)
    parts = [_analyse_rule(r) for r in program.rules]

    heads = {r.head.pred for r in program.rules}
    edges: dict[str, list[str]] = {}
    for rule, (pos, neg, _) in zip(program.rules, parts, strict=True):
        for a in pos + neg:
            edges.setdefault(a.pred, []).append(rule.head.pred)
    nodes = sorted(arity)
    components = _sccs(nodes, edges)
    comp_of = {p: i for i, comp in enumerate(components) for p in comp}

    for rule, (_, neg, _) in zip(program.rules, parts, strict=True):
        for a in neg:
            if comp_of[a.pred] == comp_of[rule.head.pred]:
                raise AnalysisError(
                    f"program is not stratifiable: {rule.head.pred} depends negatively on "
                    f"{a.pred}, which depends on {rule.head.pred}",
                    next(
                        lit.pos for lit in rule.body if isinstance(lit, Negation) and lit.atom == a
                    ),
                )

    stratum_of: dict[str, int] = {p: 0 for p in arity if p not in heads}
    order = [comp for comp in components if any(p in heads for p in comp)]
    for s, comp in enumerate(order, start=1):
        for p in comp:
            stratum_of[p] = s

    rules: list[AnalysedRule] = []
    for i, (rule, (pos, neg, bi)) in enumerate(zip(program.rules, parts, strict=True)):
        s = stratum_of[rule.head.pred]
        rec = any(stratum_of[a.pred] == s for a in pos)
        rules.append(AnalysedRule(i, rule, pos, neg, bi, s, rec))

    by_stratum: dict[int, list[AnalysedRule]] = {}
    for r in rules:  # grouped once: thousands of strata would make a scan per stratum quadratic
        by_stratum.setdefault(r.stratum, []).append(r)
    strata = []
    for s, comp in enumerate(order, start=1):
        mine = by_stratum.get(s, [])
        strata.append(
            Stratum(
                s,
                frozenset(comp),
                tuple(r.id for r in mine if not r.recursive),
                tuple(r.id for r in mine if r.recursive),
            )
        )
    internal = frozenset(p for p in arity if p.startswith(INTERNAL_PREFIX))
    display = {name: p for p, by_arity in table.items() for name in by_arity.values()}
    return Analysis(
        program, tuple(rules), arity, tuple(strata), stratum_of, internal, table, display,
        detect_modules(rules, strata, stratum_of), decompositions(rules),
    )  # fmt: skip


# ---------------------------------------------------------------- modules


def linear_base(rule: AnalysedRule) -> str:
    """S of an ltc rule `R(x, z) :- R(x, y), S(y, z).`."""
    match = _linear(rule)
    assert match is not None, "only ltc rules"
    return match[1]


def _linear(rule: AnalysedRule) -> tuple[str, str] | None:
    """(R, S) when `rule` is `R(x, z) :- R(x, y), S(y, z).` (body in either order)."""
    if rule.negatives or rule.builtins or len(rule.rule.body) != 2 or len(rule.positives) != 2:
        return None
    head = rule.head
    atoms = (head, *rule.positives)
    if any(len(a.args) != 2 for a in atoms):
        return None
    if not all(isinstance(t, Var) and not t.name.startswith("_") for a in atoms for t in a.args):
        return None
    x, z = (t.name for t in head.args)
    for own, base in (rule.positives, rule.positives[::-1]):
        if own.pred != head.pred or base.pred == head.pred:
            continue
        (a, y), (y2, b) = ([t.name for t in own.args], [t.name for t in base.args])
        if a == x and b == z and y == y2 and len({x, y, z}) == 3:
            return head.pred, base.pred
    return None


def _pattern(rule: AnalysedRule) -> tuple[str, str] | None:
    """("tc" | "sym", R) when `rule` is `R(x, z) :- R(x, y), R(y, z).` or `R(y, x) :- R(x, y).`.

    Variables must be distinct, named (not `_`) and the rule must have no other
    literal; the order of the two body atoms does not matter.
    """
    if rule.negatives or rule.builtins or len(rule.rule.body) != len(rule.positives):
        return None
    head, body = rule.head, rule.positives
    atoms = (head, *body)
    if len(head.args) != 2 or any(a.pred != head.pred or len(a.args) != 2 for a in atoms):
        return None
    if not all(isinstance(t, Var) and not t.name.startswith("_") for a in atoms for t in a.args):
        return None
    x, z = (t.name for t in head.args)
    names = [[t.name for t in a.args] for a in body]
    if x == z:
        return None
    if len(body) == 1:
        return ("sym", head.pred) if names[0] == [z, x] else None
    if len(body) == 2:
        for (a1, y1), (y2, b2) in (names, names[::-1]):
            if a1 == x and b2 == z and y1 == y2 and y1 not in (x, z):
                return "tc", head.pred
    return None


def detect_modules(
    rules: list[AnalysedRule], strata: list[Stratum], stratum_of: dict[str, int]
) -> tuple[ModuleSpec, ...]:
    """tc(R) / stc(R) / ltc(R) modules among the recursive rules of each stratum.

    ltc(R): the stratum holds R alone and every recursive rule is
    `R(x, z) :- R(x, y), S(y, z).` with S from a lower stratum.
    """
    out: list[ModuleSpec] = []
    for s in strata:
        linear = [_linear(rules[rid]) for rid in s.recursive]
        if s.recursive and len(s.preds) == 1 and all(
            m is not None and stratum_of.get(m[1], 0) < s.index for m in linear
        ):
            out.append(ModuleSpec("ltc", next(iter(s.preds)), s.index, tuple(s.recursive)))
            continue
        found: dict[tuple[str, str], list[int]] = {}
        for rid in s.recursive:
            match = _pattern(rules[rid])
            if match is not None:
                found.setdefault(match, []).append(rid)
        for (kind, pred), tc_rules in sorted(found.items()):
            if kind != "tc":
                continue
            sym = found.get(("sym", pred))
            if sym:
                out.append(ModuleSpec("stc", pred, s.index, tuple(sorted(tc_rules + sym))))
            else:
                out.append(ModuleSpec("tc", pred, s.index, tuple(tc_rules)))
    return tuple(out)
