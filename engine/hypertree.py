"""Stage 3b: plans that evaluate a rule over its hypertree decomposition (Zhang et al. 2023).

A decomposed plan honours exactly the `Plan.run(D, V, out, vals, intern)`
contract of engine.plans for kinds ``full`` and ``delta`` (backward plans stay
ordinary): it produces the same multiset of heads -- one per rule instance --
or, with `instances`, the same `(head, positive facts, negated facts)` triples,
so every maintenance algorithm uses it unchanged.

Evaluation (a Yannakakis-style pass over the join tree, rooted at bag 0 for a
full plan and at the bag of the delta literal for a delta plan):

  1. in-node evaluation, top-down: the root bag joins its atoms (the delta
     literal ranging over D); in a delta plan each other bag is evaluated only
     for the distinct separator values its parent produced (the paper's
     incremental variant starts from the Delta-labelled node and propagates),
     in a full plan each bag joins its atoms on its own;
  2. cross-node join, bottom-up with multiplicities: each bag groups its rows
     by the separator with its parent and keeps, per group, the head variables
     (and with `instances` the facts) its subtree binds, with a count of the
     rule instances behind each. Variables used by neither the head nor a
     parent are projected away here, which is where the decomposition avoids
     the intermediate blow-up of a left-to-right join.

The root's groups give every head with its number of instances; it is
appended that many times. Each bag's join is compiled like an ordinary plan
(engine.plans.place_body), so views, exclusions and negation behave the same.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from operator import itemgetter

from fluxmat.engine.decompose import Decomposition
from fluxmat.engine.plans import RUNTIME, Compiler, Plan, place_body, pyvar
from fluxmat.engine.rules import AnalysedRule, term_vars
from fluxmat.engine.storage import Dictionary


def _compile_bag(rule, bag, lits, delta, seeds, keep, facts, dictionary, size, count):
    """One bag's join as `run(D, S, V, out, vals, intern)`.

    It appends one flat row per instance of the bag: the values of variables
    `keep`, then (with `facts`) its positive and negated facts; `S` gives values
    of `seeds` (None: unseeded).
    """
    comp = Compiler(rule, dictionary, "D, S, V, vals, intern")
    comp.count_work = count
    comp.needed, comp.keep_facts = set(keep), facts
    e = comp.e
    if seeds:
        e.open_loop("for s in S:")
        for k, v in enumerate(seeds):
            e.emit(f"{pyvar(v)} = s[{k}]")
            comp.bound.add(v)
        comp.order.append("seeded on " + ", ".join(seeds))
    if delta is not None:
        comp.scan_delta(delta, lits[delta].args)
    place_body(
        comp, lits, [i for i in bag.lits if i != delta], [i for i in bag.negs if i != delta],
        list(bag.builtins), size,
    )  # fmt: skip
    row = "".join(pyvar(v) + ", " for v in keep)
    if facts:
        row += "".join(comp.tvars[i] + ", " for i in bag.lits + bag.negs)
    e.emit(f"out_append(({row}))")
    source = comp.source("run(D, S, V, out, vals, intern)", ("    out_append = out.append",))
    ns: dict = dict(RUNTIME)
    ns["C"] = comp.consts
    ns["W"] = [0]
    exec(compile(source, f"<bag of rule {rule.id}>", "exec"), ns)
    return ns["run"], ns["W"], comp.order, comp.needs, source


def _compile_head(rule: AnalysedRule, dictionary: Dictionary, slots: dict, instances: bool):
    """`emit(groups, out, vals, intern)`: append each head (or instance) `count` times."""
    comp = Compiler(rule, dictionary)
    e = comp.e
    e.open_loop("for s, n in R.items():")
    for v, k in slots["vars"].items():
        e.emit(f"{pyvar(v)} = s[{k}]")
    parts = []
    for a in rule.head.args:
        ident = comp.id_expr(a)
        if ident is None:
            hv = e.fresh("hv")
            e.emit(f"{hv} = {comp.value_expr(a)}")
            e.emit(f"if {hv} is None: continue")
            ident = f"intern({hv})"
        parts.append(ident)
    head = "(" + "".join(p + ", " for p in parts) + ")"
    if instances:
        pos = "".join(f"s[{k}], " for k in slots["pos"])
        neg = "".join(f"s[{k}], " for k in slots["neg"])
        e.emit(f"item = ({head}, ({pos}), ({neg}))")
    else:
        e.emit(f"item = {head}")
    e.emit("if n == 1:")
    e.emit("    out_append(item)")
    e.emit("else:")
    e.emit("    out.extend([item] * n)")
    source = "\n".join(
        ["def emit(R, out, vals, intern):", "    out_append = out.append"] + e.lines
    ) + "\n"  # fmt: skip
    ns: dict = dict(RUNTIME)
    ns["C"] = comp.consts
    exec(compile(source, f"<head of rule {rule.id}>", "exec"), ns)
    return ns["emit"], source


def compile_decomposed(
    rule: AnalysedRule,
    dec: Decomposition,
    kind: str,
    delta: int | None,
    dictionary: Dictionary,
    size: Callable[[str], int],
    instances: bool = False,
    count: bool = False,
) -> Plan:
    """A ``full`` or ``delta`` plan for `rule` over decomposition `dec` (see module doc).

    With `count`, `Plan.work` counts the facts the bags read plus the partial
    results the cross-node join builds.
    """
    lits = list(rule.positives) + list(rule.negatives)
    bags = dec.bags
    root = 0 if delta is None else dec.bag_of(delta)
    order, parent, children = _rooted(dec, root)
    head_vars = {v for a in rule.head.args for v in term_vars(a)}
    sep, own_vars, keep = _variables(dec, order, parent, children, head_vars)

    compiled, needs, describe, sources = {}, [], [], []
    for b in order:
        seeds = sep.get(b, ()) if delta is not None else ()
        run_b, w_b, steps, nd, src = _compile_bag(
            rule, bags[b], lits, delta if b == root else None, seeds, keep[b], instances,
            dictionary, size, count,
        )  # fmt: skip
        compiled[b] = run_b, w_b, seeds
        needs.extend(nd)
        sources.append(src)
        where = "root" if parent[b] is None else f"child of bag {parent[b]}"
        describe.append(f"[bag {b} {bags[b]} ({where}): " + " -> ".join(steps) + "]")
    own, slots = _layout(rule, dec, order, children, keep, own_vars, head_vars, instances)
    emit, head_src = _compile_head(rule, dictionary, slots, instances)
    sources.append(head_src)

    plan_work = [0]
    join = _Join(order, parent, children, compiled, emit)
    join.down = {c: _getter([keep[parent[c]].index(v) for v in sep[c]]) for c in sep}
    join.up = {b: _getter([keep[b].index(v) for v in sep.get(b, ())]) for b in order}
    join.mine = {b: _getter(own[b]) for b in order}

    def run(D, V, out, vals, intern, first=False):
        built = join.run(D, V, out, vals, intern)
        if count:
            plan_work[0] += built

    return Plan(
        rule, kind + ("*" if instances else ""), delta,
        (f"hypertree {dec}",) + tuple(describe), tuple(needs),
        tuple(a.pred for a in lits), "\n".join(sources), run, _Work(plan_work, compiled),
    )  # fmt: skip


def _rooted(dec: Decomposition, root: int) -> tuple[list[int], dict, dict]:
    """The bags in top-down order from `root`, each bag's parent and its children.

    A forest hangs every further component under the root, with an empty separator.
    """
    adj: dict[int, list[int]] = {i: [] for i in range(len(dec.bags))}
    for a, b in dec.edges:
        adj[a].append(b)
        adj[b].append(a)
    parent: dict[int, int | None] = {root: None}
    order = [root]
    for start in [root] + list(range(len(dec.bags))):
        if start not in parent:
            parent[start] = root
            order.append(start)
        k = order.index(start)
        while k < len(order):
            for c in adj[order[k]]:
                if c not in parent:
                    parent[c] = order[k]
                    order.append(c)
            k += 1
    children = {i: [c for c in order if parent[c] == i] for i in order}
    return order, parent, children


def _variables(dec, order, parent, children, head_vars) -> tuple[dict, dict, dict]:
    """Per bag: its separator, the head variables it owns, the variables its rows keep.

    The separator is shared with the parent; a bag owns the head variables
    outside it; rows keep separators (its own, its children's) and owned ones.
    """
    bags = dec.bags
    sep = {
        c: tuple(v for v in bags[c].vars if v in bags[parent[c]].vars)
        for c in order if parent[c] is not None
    }  # fmt: skip
    own_vars = {
        b: [v for v in bags[b].vars if v in head_vars and v not in sep.get(b, ())] for b in order
    }
    keep = {
        b: sorted(set(sep.get(b, ())) | {v for c in children[b] for v in sep[c]} | set(own_vars[b]))
        for b in order
    }  # fmt: skip
    return sep, own_vars, keep


def _layout(rule, dec, order, children, keep, own_vars, head_vars, instances):
    """The slot layout of the partial results each subtree reports to its parent.

    Returns the row positions each bag contributes and, for the head, where the
    root's partial results hold each head variable (and with `instances` each
    positive and negated fact).
    """
    bags = dec.bags
    own: dict[int, list[int]] = {}
    cover: dict[int, list] = {}
    for b in reversed(order):
        width = len(keep[b])
        mine = [(("var", v), keep[b].index(v)) for v in own_vars[b]]
        if instances:
            mine += [(("lit", i), width + k) for k, i in enumerate(bags[b].lits + bags[b].negs)]
        own[b] = [k for _s, k in mine]
        cover[b] = [s for s, _k in mine] + [s for c in children[b] for s in cover[c]]
    layout = cover[order[0]]
    npos, nlits = len(rule.positives), len(rule.positives) + len(rule.negatives)
    slots = {
        "vars": {x: layout.index(("var", x)) for x in sorted(head_vars)},
        "pos": [layout.index(("lit", i)) for i in range(npos)] if instances else [],
        "neg": [layout.index(("lit", i)) for i in range(npos, nlits)] if instances else [],
    }
    return own, slots


class _Join:
    """Steps 1 and 2 of the module doc over compiled bags; `run` returns the partials built."""

    def __init__(self, order, parent, children, compiled, emit):
        self.order, self.parent, self.children = order, parent, children
        self.bottom_up = list(reversed(order))
        self.compiled, self.emit = compiled, emit
        self.down: dict = {}  # child -> its separator values in its parent's rows
        self.up: dict = {}  # bag -> its separator values in its own rows
        self.mine: dict = {}  # bag -> the values it contributes to the partial results

    def run(self, D, V, out, vals, intern) -> int:
        rows: dict[int, Counter] = {}
        for b in self.order:
            run_b, _w, seeds = self.compiled[b]
            S = set(map(self.down[b], rows[self.parent[b]])) if seeds else None
            got: list = []
            run_b(D, S, V, got, vals, intern)
            if not got:
                return 0
            rows[b] = Counter(got)
        groups: dict[int, dict] = {}
        built = 0
        for b in self.bottom_up:
            kids = [(groups[c], self.down[c]) for c in self.children[b]]
            mine, n = _group(rows[b], kids, self.up[b], self.mine[b])
            built += n
            if not mine:
                return built
            groups[b] = mine
        self.emit(groups[self.order[0]].get((), {}), out, vals, intern)
        return built


def _group(rows: Counter, kids: list, key_of, part_of) -> tuple[dict, int]:
    """One bag's rows joined with its children's groups, grouped by its separator.

    Returns separator value -> {partial result: instances}, and how many
    partial results were built.
    """
    mine: dict = {}
    built = 0
    for row, mult in rows.items():
        combos = {part_of(row): mult}
        for g, sep_of in kids:
            got_c = g.get(sep_of(row))
            if got_c is None:
                combos = {}
                break
            nxt: dict = {}
            for a, n in combos.items():
                for s, m in got_c.items():
                    k = a + s
                    nxt[k] = nxt.get(k, 0) + n * m
            combos = nxt
        if not combos:
            continue
        built += len(combos)
        d = mine.get(key := key_of(row))
        if d is None:
            mine[key] = combos
        else:
            for s, n in combos.items():
                d[s] = d.get(s, 0) + n
    return mine, built


class _Work:
    """`Plan.work` of a decomposed plan: `work[0]` sums the bags' reads and the join's partials."""

    def __init__(self, joined: list[int], compiled: dict):
        self.joined = joined
        self.bags = [w for _r, w, _s in compiled.values()]

    def __getitem__(self, k: int) -> int:
        return self.joined[k] + sum(w[k] for w in self.bags)


def _getter(ix: list[int]) -> Callable[[tuple], tuple]:
    """`row -> tuple(row[i] for i in ix)`, fast."""
    if not ix:
        return lambda row: ()
    if len(ix) == 1:
        i = ix[0]
        return lambda row: (row[i],)
    return itemgetter(*ix)
