"""The two fully dynamic algorithms: what a deletion propagates to, how support is found.

* `FDDRed` -- overdelete / rederive / insert. Executing `del(F)` overdeletes the
  head of every rule instance that used F (evaluated at that moment, so only over
  facts introduced before the deletion); rederivation evaluates rules backwards
  once F's wave is complete. No derivation log.
* `FDCounting` -- counting over applied derivations. Every rule instance that was
  actually applied is kept in a derivation log; a fact's counter counts the logged
  instances whose same-stratum body facts are older than the fact (its
  well-founded support). Deletions follow the log only; a fact is deleted when its
  counter reaches zero; its other logged instances (and instances stopped by the
  wave) are the candidates for rederivation when the wave completes. No rule is
  evaluated backwards.
"""

from __future__ import annotations

from engine.analysis import Analysis
from engine.fd.core import FullyDynamic, Inst, Key, Wave
from engine.storage import Dictionary


class FDDRed(FullyDynamic):
    name = "fd-dred"

    def __init__(self, analysis: Analysis, dictionary: Dictionary | None = None, **kw):
        super().__init__(analysis, dictionary, **kw)
        self.by_head: dict[str, list] = {}
        for r in self.active_rules:
            self.by_head.setdefault(r.head.pred, []).append(r)

    def _overdelete(self, heads, wave: int) -> None:
        for hp, h in heads:
            if h in self.rel(hp).facts and h not in self.E.get(hp, ()):
                self._enqueue_del((hp, h), wave)

    def _heads(self, rules, Ip, In, P, N):
        for rule, hs in self.ev.derive(rules, Ip, In, P, N):
            hp = rule.head.pred
            for h in hs:
                yield hp, h

    def on_deleted(self, key: Key, wave: Wave) -> None:
        pred, f = key
        rules = self.pos_rules.get(pred)
        if rules:
            self._overdelete(self._heads(rules, self._with(pred, f), self.OLD, {pred: {f}}, None), wave.id)

    def on_negated_inserted(self, key: Key, update: int) -> None:
        pred, f = key
        heads = [
            (hp, h)
            for hp, h in self._heads(self.neg_rules[pred], self.OLD, self._without(pred, f), None, {pred: {f}})
            if h in self.rel(hp).facts and h not in self.E.get(hp, ())
        ]
        if heads:
            wave = self._new_wave(update)
            self._overdelete(heads, wave)
            self._maybe_complete(wave)

    def find_support(self, key: Key, wave: Wave):
        pred, f = key
        for rule in self.by_head.get(pred, ()):
            if self.ev.backward(rule, (f,), self.OLD, self.OLD, True):
                return True
        return None


class FDCounting(FullyDynamic):
    name = "fd-counting"
    wants_present_heads = True

    def __init__(self, analysis: Analysis, dictionary: Dictionary | None = None, **kw):
        super().__init__(analysis, dictionary, **kw)
        self.log: dict[tuple, tuple[Inst, bool]] = {}  # (rule, positives) -> (instance, supports)
        self.uses: dict[Key, set] = {}  # positive body fact -> log keys
        self.neg_uses: dict[Key, set] = {}  # negated fact -> log keys
        self.heads: dict[Key, set] = {}  # head -> log keys
        self.sc: dict[Key, int] = {}  # supporting (well-founded) logged derivations

    def counters(self, fact) -> tuple[int, int]:
        """(explicit occurrence, supporting applied derivations) of a fact."""
        pred, f = self.encode(fact)
        return int(f in self.E.get(pred, ())), self.sc.get((pred, f), 0)

    def derivations(self, fact) -> int:
        """How many applied derivations of `fact` the log holds."""
        pred, f = self.encode(fact)
        return len(self.heads.get((pred, f), ()))

    def log_size(self) -> int:
        return len(self.log)

    # -- the log
    def after_load(self) -> None:
        self.log.clear()
        self.uses.clear()
        self.neg_uses.clear()
        self.heads.clear()
        self.sc.clear()
        for inst in self._instances([r.id for r in self.active_rules], self.OLD, self.OLD, None, None):
            self._log(inst)

    def _log(self, inst: Inst) -> None:
        lk = (inst[0], inst[2])
        if lk in self.log:
            return
        head = inst[1]
        born = self.born
        level = born[head]
        s = self.stratum_of(head[0])
        supporting = all(born[g] < level for g in inst[2] if self.stratum_of(g[0]) == s)
        self.log[lk] = (inst, supporting)
        self.journal.log.add(lk)
        for g in inst[2]:
            self.uses.setdefault(g, set()).add(lk)
        for n in inst[3]:
            self.neg_uses.setdefault(n, set()).add(lk)
        self.heads.setdefault(head, set()).add(lk)
        if supporting:
            self.sc[head] = self.sc.get(head, 0) + 1

    def _unlog(self, lk) -> tuple[Inst, bool]:
        inst, supporting = self.log.pop(lk)
        self.journal.log.add(lk)
        for table, keys in ((self.uses, inst[2]), (self.neg_uses, inst[3]), (self.heads, (inst[1],))):
            for g in keys:
                s = table.get(g)
                if s is not None:
                    s.discard(lk)
                    if not s:
                        del table[g]
        if supporting:
            self.sc[inst[1]] -= 1
        return inst, supporting

    def _retract(self, lk, wave: int) -> None:
        inst, supporting = self._unlog(lk)
        head = inst[1]
        if supporting and self.sc[head] == 0 and head[1] not in self.E.get(head[0], ()):
            if head[1] in self.rel(head[0]).facts:
                self._enqueue_del(head, wave)

    # -- policy hooks
    def may_delete(self, key: Key) -> bool:
        return self.sc.get(key, 0) == 0

    def has_base_support(self, key: Key) -> bool:
        return self.sc.get(key, 0) > 0

    def explicit_delete_propagates(self, key: Key) -> bool:
        return self.sc.get(key, 0) == 0

    def on_present(self, key: Key, inst: Inst) -> None:
        self._log(inst)

    def on_blocked(self, wave: Wave, key: Key, inst: Inst) -> None:
        wave.candidates.setdefault(key, []).append(inst)

    def on_inserted(self, key: Key, inst: Inst | None) -> None:
        if inst is not None:
            self._log(inst)

    def on_deleted(self, key: Key, wave: Wave) -> None:
        for lk in list(self.heads.get(key, ())):
            inst, _ = self._unlog(lk)
            wave.candidates.setdefault(key, []).append(inst)
        self.sc.pop(key, None)
        for lk in list(self.uses.get(key, ())):
            self._retract(lk, wave.id)

    def on_negated_inserted(self, key: Key, update: int) -> None:
        lks = self.neg_uses.get(key)
        if not lks:
            return
        wave = self._new_wave(update)
        for lk in list(lks):
            self._retract(lk, wave)
        self._maybe_complete(wave)

    def find_support(self, key: Key, wave: Wave):
        for inst in wave.candidates.get(key, ()):
            if self._fires(inst):
                return inst
        return None

    def keep_candidates(self, key: Key, wave: Wave) -> None:
        """Log every candidate that still fires: they are applied derivations of `key`."""
        for inst in wave.candidates.get(key, ()):
            if self._fires(inst):
                self._log(inst)
