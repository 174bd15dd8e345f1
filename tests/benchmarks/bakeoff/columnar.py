"""Bake-off candidate "columnar": relations and counters as Polars columns, rules applied set-at-a-time.

Every predicate is one Polars DataFrame: the term ids in int64 columns `c0..c{k-1}`,
an `exp` flag (explicit or not) and a `cnt` column (int32: the number of rule
instances deriving the fact; in a recursive stratum, of its non-recursive rules
only). No persistent index: every rule application is a chain of Polars hash
joins over whole columns, one lazy query per round.

Maintenance, per stratum (a strongly connected component of the predicate
dependency graph, dependencies first):

* a non-recursive stratum (one predicate, no rule of it uses it) is kept by
  **counting**: the change of every rule's instance count is the telescoped sum
  over its body positions i of `new(B1..Bi-1) x delta(Bi) x old(Bi+1..Bn)`, each a
  join with a signed multiplicity column; a fact is present while `cnt > 0` or
  `exp`. Deletions need no recomputation.
* a recursive stratum (LUBM: colleagues, connectedCourses, subOrganizationOf,
  degreeFrom/hasAlumnus, member/memberOf, the component around Person) is kept by
  **DRed^c**: facts with a non-recursive derivation (`cnt > 0`) or `exp` are solid;
  over-delete (semi-naively, on the old state) the other facts with a derivation
  through a removed fact, skipping those with a one-step derivation from solid
  facts; rederive the over-deleted facts that keep a one-step derivation; insert
  semi-naively to the fixpoint. Counts alone are unsound on cyclic derivations.

Each stratum hands the next its net change (added and removed key frames) and
the old versions of changed relations, which the counting telescope needs.
The program is positive: no negation, no arithmetic.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass

import numpy as np
import polars as pl

from fluxmat.engine.graph import components

FORMAT = "fluxmat-bakeoff-columnar/1"


@dataclass(frozen=True)
class _Atom:
    pred: str
    terms: tuple  # of ("var", name) | ("const", int)


@dataclass(frozen=True)
class _Rule:
    head: _Atom
    body: tuple


def _atom(shape, fresh: list[int]) -> _Atom:
    pred, terms = shape
    out = []
    for kind, value in terms:
        if kind == "var" and value == "_":
            fresh[0] += 1
            value = f"_anon{fresh[0]}"
        if kind not in ("var", "const"):
            raise ValueError(f"term kind {kind!r}: expected 'var' or 'const'")
        out.append((kind, value if kind == "var" else int(value)))
    return _Atom(str(pred), tuple(out))


def _compile(rules: list) -> list[_Rule]:
    fresh = [0]
    out = []
    for r in rules:
        rule = _Rule(_atom(r.head, fresh), tuple(_atom(b, fresh) for b in r.body))
        bound = {v for a in rule.body for k, v in a.terms if k == "var"}
        unsafe = [v for k, v in rule.head.terms if k == "var" and v not in bound]
        if unsafe or not rule.body:
            raise ValueError(f"rule for {rule.head.pred}: head variables {unsafe} not bound by a body atom")
        out.append(rule)
    return out


def _cols(arity: int) -> list[str]:
    return [f"c{i}" for i in range(arity)]


def _keys_frame(rows: np.ndarray | None, arity: int) -> pl.DataFrame:
    if rows is None or len(rows) == 0:
        return pl.DataFrame(schema={c: pl.Int64 for c in _cols(arity)})
    arr = np.asarray(rows, dtype=np.int64).reshape(-1, arity)
    return pl.from_numpy(arr, schema=_cols(arity), orient="row").unique()


def _matches(small: pl.DataFrame, big: pl.DataFrame, cols: list[str]) -> pl.DataFrame:
    """The rows of `big` whose keys are in `small` (an inner join: an anti or left join with `big` on
    the right hashes all of `big`, ~4-8x slower for a small `small`)."""
    return small.select(cols).unique().join(big, on=cols, how="inner")


def _absent(small: pl.DataFrame, big: pl.DataFrame, cols: list[str]) -> pl.DataFrame:
    """The rows of `small` whose keys are not in `big`."""
    return small.join(_matches(small, big.select(cols), cols), on=cols, how="anti")


# ---------------------------------------------------------------- joins


def _bind(atom: _Atom, frame: pl.DataFrame) -> pl.DataFrame:
    """The rows of `frame` (columns c0..) that match `atom`, as columns named by its variables (plus `m`)."""
    lazy, _ = _bind_lazy(atom, frame)
    return lazy.collect()


def _bind_lazy(atom: _Atom, frame: pl.DataFrame) -> tuple[pl.LazyFrame, list[str]]:
    """`_bind` as a lazy query, with the names of its columns."""
    conds, seen = [], {}
    for i, (kind, value) in enumerate(atom.terms):
        col = f"c{i}"
        if kind == "const":
            conds.append(pl.col(col) == value)
        elif value in seen:
            conds.append(pl.col(col) == pl.col(seen[value]))
        else:
            seen[value] = col
    lazy = frame.lazy().filter(conds) if conds else frame.lazy()
    extra = [pl.col("m")] if "m" in frame.columns else []
    if not seen:  # a ground atom: keep its rows' count in a column (a frame of no columns has no rows)
        extra.append(pl.col("c0").is_not_null().alias("_u"))  # not pl.lit: a literal alone gives one row
    names = list(seen) + (["m"] if "m" in frame.columns else []) + ([] if seen else ["_u"])
    return lazy.select([pl.col(c).alias(v) for v, c in seen.items()] + extra), names


def _head_rows(head: _Atom, bound, cols: list[str]):
    """The head facts of the bindings `bound` (columns `cols`), with `m` if it has one."""
    anchor = pl.col(cols[0]).cast(pl.Int64) * 0  # a constant as a column: pl.lit alone would make one row
    exprs = [(anchor + v).alias(f"c{i}") if k == "const" else pl.col(v).alias(f"c{i}")
             for i, (k, v) in enumerate(head.terms)]  # fmt: skip
    if "m" in cols:
        exprs.append(pl.col("m"))
    return bound.select(exprs)


def _order(rule: _Rule, first: set[str], rest: list[int]) -> list[int]:
    """Body positions `rest` in join order: each next the one sharing most variables with those bound."""
    bound, out, left = set(first), [], list(rest)
    while left:
        best = max(left, key=lambda j: (len(bound & _vars(rule.body[j])), -left.index(j)))
        out.append(best)
        left.remove(best)
        bound |= _vars(rule.body[best])
    return out


def _vars(atom: _Atom) -> set[str]:
    return {v for k, v in atom.terms if k == "var"}


def _union(frames: list) -> pl.LazyFrame:
    """The rows of all `frames` (eager or lazy) as one lazy query: its branches run in one Polars call."""
    return pl.concat([f.lazy() for f in frames])


def _join_rest(rule: _Rule, acc: pl.DataFrame, rest: list[int], source, distinct: bool) -> pl.LazyFrame:
    """Join `acc` (bound variables) with the body atoms at positions `rest` (`source(j)` gives each frame).

    A lazy query: the caller collects a round's queries together.
    """
    if acc.height == 0:
        schema = {f"c{i}": pl.Int64 for i in range(len(rule.head.terms))}
        return pl.LazyFrame(schema=schema | ({"m": pl.Int64} if "m" in acc.columns else {}))
    order = _order(rule, set(acc.columns), rest)
    lazy, cols = acc.lazy(), list(acc.columns)
    for n, j in enumerate(order):
        other, ocols = _bind_lazy(rule.body[j], source(j))
        shared = [c for c in ocols if c in cols and c != "m"]
        lazy = lazy.join(other, on=shared, how="inner") if shared else lazy.join(other, how="cross")
        cols += [c for c in ocols if c not in cols]
        needed = _vars(rule.head).union(*(_vars(rule.body[k]) for k in order[n + 1 :]))
        keep = [c for c in cols if c in needed or c == "m"]
        if keep:
            lazy, cols = lazy.select(keep), keep
        else:  # no columns would mean no rows
            lazy, cols = lazy.select(pl.col(cols[0]).is_not_null().alias("_u")), ["_u"]
        if distinct:
            lazy = lazy.unique()
    return _head_rows(rule.head, lazy, cols)


# ---------------------------------------------------------------- the core


class ColumnarCore:
    """Relations, counters and explicit flags as Polars columns; see the module docstring."""

    name = "columnar"

    def __init__(self, rules: list, arities: dict[str, int]) -> None:
        self.rules = _compile(rules)
        self.arities = dict(arities)
        for r in self.rules:
            for a in (r.head, *r.body):
                if self.arities.setdefault(a.pred, len(a.terms)) != len(a.terms):
                    raise ValueError(f"{a.pred} used with arities {self.arities[a.pred]} and {len(a.terms)}")
        if any(k == 0 for k in self.arities.values()):
            raise ValueError("nullary predicates are not supported by this candidate")
        deps: dict[str, list[str]] = {p: [] for p in self.arities}
        for r in self.rules:
            deps[r.head.pred].extend(a.pred for a in r.body)
        self.strata = components(sorted(self.arities), deps)
        self.recursive = [len(s) > 1 or any(p in deps[p] for p in s) for s in self.strata]
        self.by_head: dict[str, list[_Rule]] = {p: [] for p in self.arities}
        for r in self.rules:
            self.by_head[r.head.pred].append(r)
        self.rel: dict[str, pl.DataFrame] = {}
        rec = {p for s, flag in zip(self.strata, self.recursive, strict=True) if flag for p in s}
        for p, k in self.arities.items():
            schema = {c: pl.Int64 for c in _cols(k)} | {"cnt": pl.Int32, "exp": pl.Boolean}
            self.rel[p] = pl.DataFrame(schema=schema)
        self.counted = {p for p in self.arities if p not in rec}
        self.profile: dict[str, float] = {}  # seconds per stratum (its first predicate), summed over updates

    # ------------------------------------------------------------ the interface

    def load(self, facts: dict[str, np.ndarray]) -> None:
        self.update(facts, {})

    def update(self, add: dict[str, np.ndarray], delete: dict[str, np.ndarray]) -> tuple[int, int]:
        adds, dels = self._explicit_changes(add, delete)
        changes: dict[str, tuple[pl.DataFrame, pl.DataFrame]] = {}
        old: dict[str, pl.DataFrame] = {}
        for stratum, recursive in zip(self.strata, self.recursive, strict=True):
            touched = [p for p in stratum if p in adds or p in dels]
            inputs = {a.pred for p in stratum for r in self.by_head[p] for a in r.body} & changes.keys()
            if not touched and not inputs:
                continue
            t = time.perf_counter()
            if recursive:
                self._dred(stratum, adds, dels, changes, old)
            else:
                self._count(stratum[0], adds, dels, changes, old)
            label = ("DRed " if recursive else "count ") + "/".join(p.rsplit("#", 1)[-1] for p in stratum)
            self.profile[label] = self.profile.get(label, 0.0) + time.perf_counter() - t
        return sum(c[0].height for c in changes.values()), sum(c[1].height for c in changes.values())

    def facts(self) -> dict[str, set[tuple[int, ...]]]:
        return {p: set(f.select(_cols(self.arities[p])).iter_rows()) for p, f in self.rel.items()}

    def nbytes(self) -> int:
        return sum(f.estimated_size() for f in self.rel.values())

    def size(self) -> int:
        """Facts in the materialisation."""
        return sum(f.height for f in self.rel.values())

    def digest(self) -> str:
        """Identifies the program (rules and arities): a snapshot of another program is never used."""
        text = repr((self.rules, sorted(self.arities.items())))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def save(self, path: str, compression: str = "uncompressed") -> None:
        """One Arrow IPC file per predicate and a manifest, written beside `path` and then moved into place."""
        tmp = f"{path}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        files = {}
        for n, (p, frame) in enumerate(sorted(self.rel.items())):
            frame.write_ipc(os.path.join(tmp, f"{n}.arrow"), compression=compression)
            files[p] = {"file": f"{n}.arrow", "rows": frame.height}
        with open(os.path.join(tmp, "manifest.json"), "w", encoding="utf-8") as out:
            json.dump({"format": FORMAT, "program": self.digest(), "relations": files}, out)
        shutil.rmtree(path, ignore_errors=True)
        os.replace(tmp, path)

    @classmethod
    def restore(cls, path: str, rules: list, arities: dict[str, int]) -> ColumnarCore:
        """The core saved at `path`; ValueError if it is of another format or program, or incomplete."""
        core = cls(rules, arities)
        try:
            with open(os.path.join(path, "manifest.json"), encoding="utf-8") as f:
                manifest = json.load(f)
        except (OSError, ValueError) as e:
            raise ValueError(f"{path}: no readable snapshot manifest ({e})") from None
        if manifest.get("format") != FORMAT or manifest.get("program") != core.digest():
            raise ValueError(f"{path}: a snapshot of another format or program")
        if set(manifest["relations"]) != set(core.rel):
            raise ValueError(f"{path}: the snapshot's predicates differ from the program's")
        for p, entry in manifest["relations"].items():
            try:
                frame = pl.read_ipc(os.path.join(path, entry["file"]))
            except (OSError, pl.exceptions.PolarsError) as e:
                raise ValueError(f"{path}/{entry['file']}: unreadable ({e})") from None
            if frame.height != entry["rows"] or frame.schema != core.rel[p].schema:
                raise ValueError(f"{path}/{entry['file']}: truncated or of another shape")
            core.rel[p] = frame
        return core

    # ------------------------------------------------------------ explicit changes

    def _explicit_changes(self, add, delete):
        """Per predicate: facts to make explicit (not explicit now) and to retract (explicit now); add wins."""
        adds, dels = {}, {}
        for p in set(add) | set(delete):
            if p not in self.arities:
                raise ValueError(f"unknown predicate {p!r}")
            k = self.arities[p]
            a = _keys_frame(add.get(p), k)
            d = _keys_frame(delete.get(p), k)
            exp = _matches(pl.concat([a, d]), self.rel[p], _cols(k)).filter(pl.col("exp")).select(_cols(k))
            d = d.join(a, on=_cols(k), how="anti").join(exp, on=_cols(k), how="semi")
            a = a.join(exp, on=_cols(k), how="anti")
            if a.height:
                adds[p] = a
            if d.height:
                dels[p] = d
        return adds, dels

    # ------------------------------------------------------------ counting (non-recursive strata)

    def _count(self, p, adds, dels, changes, old) -> None:
        k = self.arities[p]
        cols = _cols(k)
        parts = []
        for rule in self.by_head[p]:
            parts.extend(self._count_rule(rule, changes, old))
        delta = _union(parts) if parts else pl.LazyFrame(schema={c: pl.Int64 for c in cols} | {"m": pl.Int64})
        delta = delta.group_by(cols).agg(pl.col("m").sum().alias("d")).filter(pl.col("d") != 0).collect()
        exp_ch = pl.concat([
            adds.get(p, _keys_frame(None, k)).with_columns(pl.lit(1, dtype=pl.Int8).alias("e")),
            dels.get(p, _keys_frame(None, k)).with_columns(pl.lit(-1, dtype=pl.Int8).alias("e")),
        ])  # fmt: skip
        ch = delta.join(exp_ch, on=cols, how="full", coalesce=True)
        if ch.height == 0:
            return
        rel = self.rel[p]
        t = ch.join(_matches(ch, rel, cols), on=cols, how="left").with_columns(
            pl.col("cnt").fill_null(0), pl.col("exp").fill_null(False), pl.col("d").fill_null(0), pl.col("e").fill_null(0)
        )
        t = t.with_columns(
            was=(pl.col("cnt") > 0) | pl.col("exp"),
            cnt=(pl.col("cnt") + pl.col("d")).cast(pl.Int32),
            exp=pl.when(pl.col("e") == 1).then(True).when(pl.col("e") == -1).then(False).otherwise(pl.col("exp")),
        ).with_columns(now=(pl.col("cnt") > 0) | pl.col("exp"))
        plus = t.filter(pl.col("now") & ~pl.col("was")).select(cols)
        minus = t.filter(pl.col("was") & ~pl.col("now")).select(cols)
        kept = t.filter(pl.col("now")).select([*cols, "cnt", "exp"])
        self.rel[p] = pl.concat([rel.join(t.select(cols), on=cols, how="anti"), kept])
        self._record(p, rel, plus, minus, changes, old)

    def _count_rule(self, rule: _Rule, changes, old):
        """The signed instance-count changes of `rule`: sum over i of new(B<i) x delta(Bi) x old(B>i)."""
        out = []
        for i, atom in enumerate(rule.body):
            if atom.pred not in changes:
                continue
            plus, minus = changes[atom.pred]
            delta = pl.concat([plus.with_columns(m=pl.lit(1, dtype=pl.Int64)),
                               minus.with_columns(m=pl.lit(-1, dtype=pl.Int64))])  # fmt: skip

            def source(j, i=i):
                pred = rule.body[j].pred
                return self._keys(pred) if j < i else old.get(pred, self._keys(pred))

            acc = _bind(atom, delta)
            out.append(_join_rest(rule, acc, [j for j in range(len(rule.body)) if j != i], source, False))
        return out

    def _keys(self, p: str) -> pl.DataFrame:
        return self.rel[p].select(_cols(self.arities[p]))

    def _record(self, p, before, plus, minus, changes, old) -> None:
        if plus.height or minus.height:
            changes[p] = (plus, minus)
            old[p] = before.select(_cols(self.arities[p]))

    # ------------------------------------------------------------ DRed (recursive strata)

    def _dred(self, stratum, adds, dels, changes, old) -> None:
        """DRed^c: `cnt` counts a fact's instances of non-recursive rules; facts with cnt > 0 or exp are solid."""
        before = {p: self.rel[p] for p in stratum}
        fresh, lost = self._nonrecursive_counts(stratum, adds, dels, changes, old)
        gone = self._overdelete(stratum, lost, changes, old, before)
        for p, d in gone.items():
            self.rel[p] = self.rel[p].join(d, on=_cols(self.arities[p]), how="anti")
        seeds = self._rederive(gone, stratum)
        for p, f in fresh.items():
            seeds.setdefault(p, []).append(f.select(_cols(self.arities[p])))
        for p in stratum:
            if p in adds:
                seeds.setdefault(p, []).append(adds[p])
        for rule in self._recursive_rules(stratum):
            for i, atom in enumerate(rule.body):
                if atom.pred in changes and atom.pred not in stratum and changes[atom.pred][0].height:
                    acc = _bind(atom, changes[atom.pred][0])
                    rest = [j for j in range(len(rule.body)) if j != i]
                    seeds.setdefault(rule.head.pred, []).append(
                        _join_rest(rule, acc, rest, lambda j, r=rule: self._keys(r.body[j].pred), True))
        came = self._insert(stratum, seeds)
        for p in stratum:
            self.rel[p] = self._add_counts(self._set_exp(p, adds.get(p), None), fresh.get(p), p)
            cols = _cols(self.arities[p])
            new = pl.concat(came[p]) if p in came else _keys_frame(None, len(cols))
            out = gone.get(p, _keys_frame(None, len(cols)))  # net: inserted not over-deleted, and conversely
            self._record(p, before[p], new.join(out, on=cols, how="anti"), out.join(new, on=cols, how="anti"),
                         changes, old)  # fmt: skip

    def _recursive_rules(self, stratum) -> list[_Rule]:
        inside = set(stratum)
        return [r for p in stratum for r in self.by_head[p] if any(a.pred in inside for a in r.body)]

    def _nonrecursive_counts(self, stratum, adds, dels, changes, old) -> dict[str, pl.DataFrame]:
        """Apply explicit and non-recursive count changes to present facts.

        Returns the absent facts gaining a count (with it) and the present ones that lost
        their last solid support (the over-deletion seeds).
        """
        inside, fresh, lost = set(stratum), {}, {}
        for p in stratum:
            cols = _cols(self.arities[p])
            parts = [f for r in self.by_head[p] if not any(a.pred in inside for a in r.body)
                     for f in self._count_rule(r, changes, old)]  # fmt: skip
            rel = self._set_exp(p, adds.get(p), dels.get(p))
            touched = dels[p] if p in dels else _keys_frame(None, len(cols))
            if parts:
                d = _union(parts).group_by(cols).agg(pl.col("m").sum().alias("d")).filter(pl.col("d") != 0).collect()
                rel = self._add_counts(rel, d, p)
                fresh[p] = _absent(d, rel, cols)
                touched = pl.concat([touched, d.select(cols)])
            gone = rel.filter((pl.col("cnt") == 0) & ~pl.col("exp")).join(touched, on=cols, how="semi")
            if gone.height:
                lost[p] = gone.select(cols)
            self.rel[p] = rel
        return {p: f for p, f in fresh.items() if f.height}, lost

    def _add_counts(self, rel: pl.DataFrame, d: pl.DataFrame | None, p: str) -> pl.DataFrame:
        if d is None or d.height == 0:
            return rel
        cols = _cols(self.arities[p])
        return rel.join(d, on=cols, how="left").with_columns(
            cnt=(pl.col("cnt") + pl.col("d").fill_null(0)).cast(pl.Int32)).drop("d")

    def _set_exp(self, p, add, dele) -> pl.DataFrame:
        rel, cols = self.rel[p], _cols(self.arities[p])
        if dele is not None:
            mark = dele.with_columns(_d=pl.lit(True))
            rel = rel.join(mark, on=cols, how="left").with_columns(
                exp=pl.col("exp") & pl.col("_d").is_null()).drop("_d")
        if add is not None:
            mark = add.with_columns(_a=pl.lit(True))
            rel = rel.join(mark, on=cols, how="left").with_columns(
                exp=pl.col("exp") | pl.col("_a").is_not_null()).drop("_a")
        return rel

    def _overdelete(self, stratum, lost, changes, old, before) -> dict[str, pl.DataFrame]:
        """Facts of `stratum` with a derivation (in the old state) through a removed fact, minus the safe ones.

        Safe: solid (cnt > 0 or exp), or with a one-step derivation from safe facts and the
        (final) lower strata: such a fact holds after the update whatever else is over-deleted,
        so it is neither over-deleted nor propagated through. This stops DRed from
        over-deleting whole cliques of a transitive relation whose pairs have direct support.
        """

        def source(j, rule):
            pred = rule.body[j].pred
            if pred in before:
                return before[pred].select(_cols(self.arities[pred]))
            return old.get(pred, self._keys(pred))

        solid: dict[str, pl.DataFrame] = {}  # filled when first needed: a pass over the whole relation
        held_all: dict[str, list[pl.DataFrame]] = {}

        def safe(j, rule):
            pred = rule.body[j].pred
            if pred not in stratum:
                return None
            if pred not in solid:
                rel = self.rel[pred]
                solid[pred] = rel.filter((pl.col("cnt") > 0) | pl.col("exp")).select(_cols(self.arities[pred]))
            return pl.concat([solid[pred], *held_all.get(pred, [])])

        gone: dict[str, pl.DataFrame] = {}
        pending = {p: [f] for p, f in lost.items()}
        delta = {p: changes[p][1] for p in changes if p not in stratum and changes[p][1].height}
        rules = self._recursive_rules(stratum)
        while pending or delta:
            for p, fs in pending.items():
                cols = _cols(self.arities[p])
                new = _union(fs).unique().collect()
                firm = _matches(new, self.rel[p], cols).filter((pl.col("cnt") > 0) | pl.col("exp")).select(cols)
                for f in [firm, *held_all.get(p, [])] + ([gone[p]] if p in gone else []):
                    new = new.join(f, on=cols, how="anti")
                held = self._derivable({p: new}, stratum, safe)
                if held.get(p) is not None:
                    held_all.setdefault(p, []).append(held[p])
                    new = new.join(held[p], on=cols, how="anti")
                if new.height:
                    gone[p] = pl.concat([gone[p], new]) if p in gone else new
                    delta[p] = new
            pending = {}
            for rule in rules:
                for i, atom in enumerate(rule.body):
                    if atom.pred in delta:
                        rest = [j for j in range(len(rule.body)) if j != i]
                        got = _join_rest(rule, _bind(atom, delta[atom.pred]), rest, lambda j, r=rule: source(j, r), True)
                        pending.setdefault(rule.head.pred, []).append(got)
            delta = {}
        return gone

    def _derivable(self, facts: dict[str, pl.DataFrame], stratum, inside) -> dict[str, pl.DataFrame]:
        """The `facts` of `stratum` with a one-step derivation by a recursive rule.

        Body atoms of the stratum read `inside(j, rule)` (a frame of keys), lower ones the current state.
        """
        out: dict[str, list] = {}
        for rule in self._recursive_rules(stratum):
            d = facts.get(rule.head.pred)
            if d is None or d.height == 0:
                continue

            def source(j, r=rule):
                got = inside(j, r)
                return self._keys(r.body[j].pred) if got is None else got

            got = _join_rest(rule, _bind(rule.head, d).unique(), list(range(len(rule.body))), source, True)
            out.setdefault(rule.head.pred, []).append(got)
        return {p: _union(fs).unique().collect() for p, fs in out.items()}

    def _rederive(self, gone, stratum) -> dict[str, list[pl.DataFrame]]:
        """The over-deleted facts that keep a one-step derivation (by a recursive rule) in the current state."""
        found = self._derivable(gone, stratum, lambda j, r: None)
        return {p: [f] for p, f in found.items()}

    def _insert(self, stratum, seeds: dict[str, list[pl.DataFrame]]) -> dict[str, list[pl.DataFrame]]:
        """Add `seeds` (not explicit unless already so) and their consequences in `stratum`, semi-naively.

        Returns the facts that were added, per predicate.
        """
        delta = self._absorb(seeds)
        came = {p: [f] for p, f in delta.items()}
        while delta:
            found: dict[str, list[pl.DataFrame]] = {}
            for rule in self._recursive_rules(stratum):
                for i, atom in enumerate(rule.body):
                    if atom.pred in delta:
                        rest = [j for j in range(len(rule.body)) if j != i]
                        got = _join_rest(rule, _bind(atom, delta[atom.pred]), rest,
                                         lambda j, r=rule: self._keys(r.body[j].pred), True)  # fmt: skip
                        found.setdefault(rule.head.pred, []).append(got)
            delta = self._absorb(found)
            for p, f in delta.items():
                came.setdefault(p, []).append(f)
        return came

    def _absorb(self, found: dict[str, list[pl.DataFrame]]) -> dict[str, pl.DataFrame]:
        """Add the new facts of `found` to their relations; returns them (explicit adds keep exp=True)."""
        delta = {}
        for p, fs in found.items():
            cols = _cols(self.arities[p])
            new = _absent(_union([f.select(cols) for f in fs]).unique().collect(), self.rel[p], cols)
            if new.height:
                delta[p] = new
                row = new.with_columns(cnt=pl.lit(0, dtype=pl.Int32), exp=pl.lit(False))
                self.rel[p] = pl.concat([self.rel[p], row])
        return delta
