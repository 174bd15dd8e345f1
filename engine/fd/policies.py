"""The two fully dynamic algorithms: what a deletion propagates to, how support is found.

* `FDDRed` -- overdelete / rederive / insert. Executing `del(F)` overdeletes the
  head of every rule instance that used F (evaluated at that moment, so only over
  facts introduced before the deletion); rederivation evaluates rules backwards
  once F's wave is complete. No derivation log.
* `FDCounting` -- counting over applied derivations. Every rule instance that was
  actually applied is kept in a derivation log; a fact's counter counts the logged
  instances whose same-stratum body facts are older than the fact (its
  well-founded support). A deletion retracts the logged instances that used the
  fact (found by evaluating rules forward with it as the delta); a fact is
  deleted when its counter reaches zero; its other logged instances (and
  instances stopped by the wave) are the candidates for rederivation when the
  wave completes. No rule is evaluated backwards.
"""

from __future__ import annotations

from fluxmat.engine.analysis import Analysis
from fluxmat.engine.fd.core import FullyDynamic
from fluxmat.engine.fd.records import Inst, Key, Wave
from fluxmat.engine.storage import Dictionary, Fact


class FDDRed(FullyDynamic):
    name = "fd-dred"

    def __init__(self, analysis: Analysis, dictionary: Dictionary | None = None, **kw):
        super().__init__(analysis, dictionary, **kw)
        self.by_head: dict[str, list] = {}
        for r in self.active_rules:
            self.by_head.setdefault(r.head.pred, []).append(r)

    def _overdelete(self, found: list, wave: int) -> None:
        """del(head) in `wave` for the heads `found` that are present and not explicit."""
        for _rid, hp, heads in found:
            present, explicit = self.rel(hp).facts, self.E.get(hp, ())
            for h in heads:
                if h in present and h not in explicit:
                    self._enqueue_del((hp, h), wave)

    def on_deleted(self, key: Key, wave: Wave, used: list) -> None:
        self._overdelete(used, wave.id)

    def on_negated_inserted(self, key: Key, update: int) -> None:
        pred, f = key
        found = self.forward(pred, (f,), True, False)
        if any(h in self.rel(hp).facts and h not in self.E.get(hp, ()) for _r, hp, hs in found for h in hs):
            wave = self._new_wave(update)
            self._overdelete(found, wave)
            self._maybe_complete(wave)

    def find_support(self, key: Key, wave: Wave):
        pred, f = key
        for rule in self.by_head.get(pred, ()):
            if self.forward.backward(rule, (f,)):
                return True
        return None


class FDCounting(FullyDynamic):
    """Counting over the derivation log (see the module docstring).

    The log is kept compact, under each head: `heads[pred][fact]` is
    `[supporting count, {instance: supporting}]`, the fact's applied instances in
    the order they were logged. An instance is the flat tuple `(rule id, positive
    body facts..., negated facts...)` -- predicates follow from the rule, the
    facts are the materialisation's own tuples -- and determines its head, so a
    lookup always knows where to look; removing one is O(1) even under a head
    with hundreds. Instances that use a deleted (or newly falsified) fact are
    found by evaluating the rules forward with that fact as the delta and kept
    if logged, instead of through a per-fact index of uses.
    """

    name = "fd-counting"
    wants_present_heads = True
    del_instances = True

    def __init__(self, analysis: Analysis, dictionary: Dictionary | None = None, **kw):
        super().__init__(analysis, dictionary, **kw)
        self.heads: dict[str, dict[Fact, list]] = {}  # pred -> fact -> [supporting, {instance: supporting}]
        self.log_by_rule: dict[int, int] = {}  # rule id -> its instances in the log (work per rule)
        self._same = {  # rule id -> (position in an instance, pred) of its same-stratum positive facts
            r.id: tuple(
                (i, a.pred) for i, a in enumerate(r.positives, 1)
                if self.stratum_of(a.pred) == self.stratum_of(r.head.pred)
            )
            for r in analysis.rules
        }  # fmt: skip

    def counters(self, fact) -> tuple[int, int]:
        """(explicit occurrence, supporting applied derivations) of a fact."""
        pred, f = self.encode(fact)
        return int(f in self.E.get(pred, ())), self._support((pred, f))

    def derivations(self, fact) -> int:
        """How many applied derivations of `fact` the log holds."""
        rec = self._record(self.encode(fact))
        return len(rec[1]) if rec else 0

    def log_size(self) -> int:
        return sum(self.log_by_rule.values())

    def support_counts(self) -> dict[Key, int]:
        """Every fact with a supporting applied derivation, and how many."""
        return {(p, f): rec[0] for p, d in self.heads.items() for f, rec in d.items() if rec[0]}

    def logged(self, key: Key) -> list[Inst]:
        """The applied instances deriving `key`."""
        rec = self._record(key)
        return [self.instance(lk, key) for lk in rec[1]] if rec else []

    def log_entries(self):
        """(instance, head) for every logged instance."""
        for p, d in self.heads.items():
            for f, rec in d.items():
                for lk in rec[1]:
                    yield lk, (p, f)

    def is_logged(self, lk: tuple, head: Key) -> bool:
        """Whether the instance `lk` (deriving `head`) is in the log."""
        rec = self._record(head)
        return rec is not None and lk in rec[1]

    def instance(self, lk: tuple, head: Key) -> Inst:
        """A logged instance in the engine's (rule, head, positives, negated) form."""
        pos, neg = self.shape[lk[0]]
        k = len(pos) + 1
        return (lk[0], head, tuple(zip(pos, lk[1:k], strict=True)), tuple(zip(neg, lk[k:], strict=True)))

    # -- the log
    def _record(self, key: Key) -> list | None:
        d = self.heads.get(key[0])
        return d.get(key[1]) if d else None

    def _support(self, key: Key) -> int:
        rec = self._record(key)
        return rec[0] if rec else 0

    def clear_log(self) -> None:
        self.heads.clear()
        self.log_by_rule.clear()

    def after_load(self) -> None:
        self.clear_log()
        ids = [r.id for r in self.active_rules]
        for rule, triples in self.ev.derive(ids, self.OLD, self.OLD, instances=True):
            rid, hp = rule.id, rule.head.pred
            for h, pf, nf in triples:
                self.log_instance((rid, *pf, *nf), (hp, h))

    @staticmethod
    def _lk(inst: Inst) -> tuple:
        return (inst[0], *(f for _, f in inst[2]), *(f for _, f in inst[3]))

    def log_applied(self, inst: Inst) -> None:
        """Log an applied instance (no-op when logged): whether it supports its head is fixed now."""
        self.log_instance(self._lk(inst), inst[1])

    def log_instance(self, lk: tuple, head: Key) -> None:
        """`log_applied` for the instance `lk` (flat: rule id, positive then negated body arguments) deriving `head`."""
        pred, f = head
        d = self.heads.get(pred)
        if d is None:
            d = self.heads[pred] = {}
        rec = d.get(f)
        if rec is not None and lk in rec[1]:
            return
        same = self._same[lk[0]]
        supporting = not same or self._older(same, lk, head)
        if rec is None:
            d[f] = [1 if supporting else 0, {lk: supporting}]
        else:
            rec[1][lk] = supporting
            if supporting:
                rec[0] += 1
        self.journal.log[lk] = head
        self.log_by_rule[lk[0]] = self.log_by_rule.get(lk[0], 0) + 1

    def _older(self, same: tuple, lk: tuple, head: Key) -> bool:
        """Whether the instance's same-stratum positive facts are older than its head (it supports it)."""
        born = self.born
        level = born[head]
        return all(born[(p, lk[i])] < level for i, p in same)

    def restore_log(self, entries) -> None:
        """`log_instance` for each `(lk, head)` of a stored log, in bulk (restoring: no journal)."""
        heads, same_of, older, by_rule = self.heads, self._same, self._older, self.log_by_rule
        for lk, head in entries:
            pred, f = head
            d = heads.get(pred)
            if d is None:
                d = heads[pred] = {}
            same = same_of[lk[0]]
            supporting = not same or older(same, lk, head)
            rec = d.get(f)
            if rec is None:
                d[f] = [1 if supporting else 0, {lk: supporting}]
            elif lk in rec[1]:
                continue
            else:
                rec[1][lk] = supporting
                rec[0] += supporting
            by_rule[lk[0]] = by_rule.get(lk[0], 0) + 1

    def _retract(self, lk: tuple, head: Key, d: dict, rec: list, wave: int) -> None:
        """Remove the logged `lk` (in `rec` = d[head's fact]); del(head) in `wave` if it lost its last support."""
        lks = rec[1]
        supporting = lks.pop(lk)
        self.journal.log[lk] = head
        self.log_by_rule[lk[0]] -= 1
        pred, f = head
        if not lks:
            del d[f]
        if supporting:
            rec[0] -= 1
            if not rec[0] and f not in self.E.get(pred, ()):
                rel = self.I.get(pred)
                if rel is not None and f in rel.facts:
                    self._enqueue_del(head, wave)

    def _retract_logged(self, found: list, wave: int) -> None:
        """Retract the logged instances among `found` (as `forward` gives them)."""
        heads = self.heads
        for rid, hp, triples in found:
            d = heads.get(hp)
            if not d:
                continue
            for h, pf, nf in triples:
                rec = d.get(h)
                if rec is not None:
                    lk = (rid, *pf, *nf)
                    if lk in rec[1]:  # logged (an instance is met once: delta plans)
                        self._retract(lk, (hp, h), d, rec, wave)

    # -- policy hooks
    def may_delete(self, key: Key) -> bool:
        return self._support(key) == 0

    def has_base_support(self, key: Key) -> bool:
        return self._support(key) > 0

    def explicit_delete_propagates(self, key: Key) -> bool:
        return self._support(key) == 0

    def on_present(self, key: Key, lk: tuple) -> None:
        self.log_instance(lk, key)

    def on_blocked(self, wave: Wave, key: Key, lk: tuple) -> None:
        wave.candidates.setdefault(key, []).append(lk)

    def on_inserted(self, key: Key, lk: tuple | None) -> None:
        if lk is not None:
            self.log_instance(lk, key)

    def on_deleted(self, key: Key, wave: Wave, used: list) -> None:
        pred, f = key
        d = self.heads.get(pred)
        rec = d.pop(f, None) if d else None
        if rec:  # all of its logged instances go at once: candidates for its rederivation
            lks = rec[1]
            wave.candidates.setdefault(key, []).extend(lks)
            journal, by_rule = self.journal.log, self.log_by_rule
            for lk in lks:
                journal[lk] = key
                by_rule[lk[0]] -= 1
        self._retract_logged(used, wave.id)

    def on_negated_inserted(self, key: Key, update: int) -> None:
        pred, f = key
        found = self.forward(pred, (f,), True)
        heads = self.heads
        if not any(
            (d := heads.get(hp)) and (rec := d.get(h)) and (rid, *pf, *nf) in rec[1]
            for rid, hp, triples in found for h, pf, nf in triples
        ):  # fmt: skip
            return
        wave = self._new_wave(update)
        self._retract_logged(found, wave)
        self._maybe_complete(wave)

    def find_support(self, key: Key, wave: Wave):
        for lk in wave.candidates.get(key, ()):
            if self._fires(lk):
                return lk
        return None

    def keep_candidates(self, key: Key, wave: Wave) -> None:
        """Log every candidate that still fires: they are applied derivations of `key`."""
        for lk in wave.candidates.get(key, ()):
            if self._fires(lk):
                self.log_instance(lk, key)
