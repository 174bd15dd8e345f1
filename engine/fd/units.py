"""The units of work of the fully dynamic engine: executing add, del and rederive items.

A mixin of `engine.fd.core.FullyDynamic` (which schedules the items and keeps
waves and the queues). An `add` item carries its justification: a rule instance
as the flat tuple `(rule id, positive body facts..., negated facts...)` (the
derivation log's key: predicates follow from the rule), None (explicit) or
`MODULE`. The operations a unit implies are determined when it runs, against
the state at that moment (engine/ALGORITHMS.md): the instances a fact takes
part in come from `forward` (engine.fd.forward), the compiled delta plans over
views built once.

The policies (engine.fd.policies) implement the hooks at the end.
"""

from __future__ import annotations

from abc import abstractmethod

from fluxmat.engine.fd.records import MODULE, Key, Wave


class Units:
    """Executing pending items (see the module docstring)."""

    wants_present_heads = False  # counting also logs instances whose head exists
    del_instances = False  # whether `on_deleted` wants whole instances (else heads)

    def _fires(self, lk: tuple) -> bool:
        """Whether the instance `lk` fires in I: its positive facts present, its negated ones absent."""
        rels = self.I
        pos, neg = self.shape[lk[0]]
        i = 1
        for pred in pos:
            rel = rels.get(pred)
            if rel is None or lk[i] not in rel.facts:
                return False
            i += 1
        for pred in neg:
            rel = rels.get(pred)
            if rel is not None and lk[i] in rel.facts:
                return False
            i += 1
        return True

    def _exec_add(self, key: Key, inst, explicit: bool, update: int) -> None:
        pred, f = key
        if explicit:
            if f not in self.E.get(pred, ()):  # a newer update deleted it again
                self.stats.cancelled += 1
                return
        elif not (self._fires(inst) if inst is not MODULE else self.closures[pred].connected(f)):
            self.stats.cancelled += 1  # its justification was deleted meanwhile
            return
        rel = self.I.get(pred)
        if rel is not None and f in rel.facts:
            if inst is not None and inst is not MODULE:
                self.on_present(key, inst)
                if pred in self.closures:
                    self.link(key, update)
            return
        if not explicit and inst is not MODULE:
            wave = self._blocked(key)
            if wave is not None:
                self.stats.recursion_stops += 1
                self.on_blocked(self.waves[wave], key, inst)
                return
        self._insert(key, inst, update)

    def _insert(self, key: Key, inst, update: int) -> None:
        pred, f = key
        self.rel(pred).add(f)
        self.clock += 1
        self.born[key] = self.clock
        self.journal.facts.add(key)
        self.dirty.setdefault(key, False)
        self.changed_by[key] = update if self.changed_by.get(key, update) == update else 0
        self.deleted_by.pop(key, None)
        self.stats.executed += 1
        if inst is MODULE:
            inst = None
        elif pred in self.closures:
            self.link(key, update)
        if pred in self.closure_bases:
            self.s_link(key, update)
        self.on_inserted(key, inst)
        if pred in self.pos_rules:
            self._determine_adds(self.forward(pred, (f,)), update)
        if pred in self.neg_rules:
            self.on_negated_inserted(key, update)

    def _determine_adds(self, found: list, update: int) -> None:
        """Queue `add(head via instance)` for the instances `found` (FD-DRed: absent heads only)."""
        q = None
        n = 0
        skip_present = not self.wants_present_heads
        rels = self.I
        for rid, hp, triples in found:
            rel = rels.get(hp)
            present = rel.facts if rel is not None else ()
            for h, pf, nf in triples:
                if skip_present and h in present:
                    continue
                if q is None:
                    q = self.queues.get(update)
                    if q is None:
                        q = self.queues[update] = []
                q.append(("a", (hp, h), (rid, *pf, *nf), False, update))
                n += 1
        self.stats.determined += n

    def _determine_add(self, key: Key, inst, update: int, explicit: bool = False) -> None:
        """Queue `add(key)` justified by `inst` (a rule instance, None, or MODULE)."""
        self.stats.determined += 1
        self._push(update, ("a", key, inst, explicit, update))

    def _exec_del(self, key: Key, wave: int) -> None:
        if self.pending_del.get(key) != wave:
            return  # cancelled by a newer explicit addition
        del self.pending_del[key]
        w = self.waves[wave]
        pred, f = key
        rel = self.rel(pred)
        if f not in rel.facts or f in self.E.get(pred, ()) or not self.may_delete(key):
            self.stats.cancelled += 1
            if pred in self.closures and f in rel.facts:
                self.link(key, w.update)  # a base fact is an edge (if it was not yet)
        elif pred in self.closures and self.unlink_keeps(key, wave):
            self.stats.cancelled += 1
        else:
            # the instances f took part in, over the I it leaves (Pi<I u {f}, I |> {f}> after)
            used = self.forward(pred, (f,), False, self.del_instances, True) if pred in self.pos_rules else ()
            rel.discard(f)
            self.born.pop(key, None)
            self.journal.facts.add(key)
            self.dirty.setdefault(key, True)
            self.changed_by[key] = w.update if self.changed_by.get(key, w.update) == w.update else 0
            self.deleted_by[key] = wave
            w.deleted.append(key)
            self.stats.executed += 1
            if pred in self.closure_bases:
                self.s_unlink(key, wave)
            self.on_deleted(key, w, used)
            if pred in self.neg_rules:
                self._determine_adds(self.forward(pred, (f,), True), w.update)
        w.pending -= 1
        self._maybe_complete(wave)

    def _exec_rederive(self, key: Key, wave: int) -> None:
        w = self.waves[wave]
        if self.deleted_by.get(key) == wave:
            del self.deleted_by[key]
        pred, f = key
        if f in self.rel(pred).facts:  # it came back meanwhile
            self.keep_candidates(key, w)
            self.touch(key, w.update)
        elif f in self.E.get(pred, ()):
            self._insert(key, None, w.update)
            self.keep_candidates(key, w)
        else:
            support = self.find_support(key, w)
            if support is None and pred in self.closures and self.closures[pred].connected(f):
                support = MODULE
            if support is not None:
                self.stats.rederivations += 1
                self._insert(key, support or None, w.update)
                self.keep_candidates(key, w)
        w.candidates.pop(key, None)
        w.rederive_left -= 1
        if w.rederive_left == 0:
            del self.waves[wave]

    # ------------------------------------------------------------ policy hooks
    def may_delete(self, key: Key) -> bool:
        return True

    def on_present(self, key: Key, lk: tuple) -> None:
        """An executed addition (justified by instance `lk`) whose fact already exists."""

    def on_blocked(self, wave: Wave, key: Key, lk: tuple) -> None:
        """A propagated addition stopped by an active wave that deleted its fact."""

    def on_inserted(self, key: Key, lk: tuple | None) -> None:
        """A fact was inserted (justified by instance `lk`, or explicit when None)."""

    @abstractmethod
    def on_deleted(self, key: Key, wave: Wave, used: list) -> None:
        """A fact was deleted by `wave`: determine the deletions it implies.

        `used`: the instances it took part in, as `forward` gives them (whole
        instances if `del_instances`, else heads).
        """

    @abstractmethod
    def on_negated_inserted(self, key: Key, update: int) -> None:
        """A fact used under negation was inserted: retract what it falsified."""

    @abstractmethod
    def find_support(self, key: Key, wave: Wave):
        """At rederivation: an instance deriving `key` now, True, or None."""

    def keep_candidates(self, key: Key, wave: Wave) -> None:
        """Hook at rederivation when `key` is present: keep what still derives it."""
