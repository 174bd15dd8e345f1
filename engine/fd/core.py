"""The fully dynamic engine: overlapping updates over one shared set of pending work.

Illich & Glimm (2023), Algorithm 1: updates arrive one after another; the engine
keeps pending operations `add(F)` / `del(F)`, each belonging to the update it came
from, and repeatedly either integrates a new update or performs one unit of work,
choosing fairly (uniformly at random, seeded) among the updates that have work.

Units of work:
  * ``add``      execute an addition: insert F (if its justifying rule instance
                 still fires) and determine the operations it implies;
  * ``del``      execute a deletion: remove F (if the policy says it lost its
                 support) and determine the operations it implies;
  * ``rederive`` once the deletion *wave* that removed F is complete, check
                 whether F still has a derivation and re-insert it.

They are executed in rounds (`_step`): a set of one update's items, one after
another (engine.fd.units executes them; engine.fd.forward finds the rule
instances a fact takes part in through plans and views built once).

A wave is the set of deletions caused, transitively, by one root cause (an
update's explicit deletions, or an insertion that falsified a negated atom).
While a wave is active, a propagated addition may not re-insert a fact the wave
deleted (the *recursion stop*): this is what prevents Example 1's invalid
addition and its endless delete/re-add cycle. Facts of the wave that still have
a derivation are rederived when the wave completes.

The policies (engine.fd.policies) decide what a deletion propagates to and how
rederivation finds support. engine/ALGORITHMS.md states the invariants and why a
quiescent state equals mat(P, E_n).

Limits (engine.limits, `set_limits`): every unit of work is charged to the
update whose queue it came from; the work and the materialisation's size are
checked after every round of units (one update's). A budget that runs out raises with the charged update (`.update`)
and leaves the engine mid-way: the caller rebuilds it (engine.fd.snapshot.restore).
engine/ALGORITHMS.md says when the charge is exact.
"""

from __future__ import annotations

import random

from fluxmat.engine.analysis import Analysis, ModuleSpec
from fluxmat.engine.fd.forward import Forward
from fluxmat.engine.fd.records import ConsistencyPoint, FDStats, Journal, Key, NotQuiescent, Wave
from fluxmat.engine.fd.units import Units
from fluxmat.engine.fd.upkeep import ModuleUpkeep
from fluxmat.engine.maintainer import Report, Update
from fluxmat.engine.seminaive import SemiNaive
from fluxmat.engine.storage import Dictionary, Fact, paused_gc


class FullyDynamic(Units, ModuleUpkeep, SemiNaive):
    """Shared machinery of FD-DRed and FD-Counting (see the module docstring).

    Library use::

        fd = create("fd-counting", analysis)
        fd.load(facts)
        fd.submit(add=[...], delete=[...], id="u1")   # at any time
        fd.step(100)                                   # bounded work
        if fd.quiescent:
            point = fd.poll()   # ConsistencyPoint: through, added, removed

    With ``interleaved=False`` (the sequential schedule) an update is integrated
    only once the previous one is fully processed.
    """

    name = "fd"
    supports_modules = True  # tc/stc/ltc modules of strata that hold R alone (`takes`)
    upkeep_modules = True  # kept operation by operation, as upkeep modules

    def __init__(
        self,
        analysis: Analysis,
        dictionary: Dictionary | None = None,
        seed: int = 0,
        interleaved: bool = True,
        modules: bool = True,
        hypertree: bool = True,
        levels: bool = True,  # accepted for a uniform interface; DRed^c's levels are not used
    ):
        """A fully dynamic engine; `seed` drives the fair choice of the next unit of work."""
        super().__init__(analysis, dictionary, modules, hypertree)
        self.rng = random.Random(seed)
        self.interleaved = interleaved
        self.queues: dict[int, list] = {}
        self.inbox: list[tuple] = []
        self.seq = 0
        self.last_id: object = None
        self.last_seq = 0
        self.born: dict[Key, int] = {}
        self.clock = 0
        self.pending_del: dict[Key, int] = {}
        self.waves: dict[int, Wave] = {}
        self.deleted_by: dict[Key, int] = {}
        self.dirty: dict[Key, bool] = {}  # changed since the last poll -> was it in I then
        self.changed_by: dict[Key, int] = {}  # and the update whose work changed it (0: several)
        self.journal = Journal()
        self.stats = FDStats()
        self.charged: dict[int, int] = {}  # update -> work of its units (limits only)
        self._unit_update = 0  # the update of the unit being executed
        self.chooser = None  # optional (queues) -> (update, index): scripted schedules in tests
        self.active_rules = [r for r in analysis.rules if r.id not in self.module_rules]
        self.base_rules = {  # closure pred -> the other rules of its stratum (its edges)
            p: [r.id for r in self.active_rules if r.head.pred == p] for p in self.closures
        }
        self.closure_bases: dict[str, list[str]] = {}  # ltc: S pred -> closure preds
        for p, c in self.closures.items():
            for b in c.bases:
                self.closure_bases.setdefault(b, []).append(p)
        self.pos_rules: dict[str, list[int]] = {}
        self.neg_rules: dict[str, list[int]] = {}
        for r in self.active_rules:
            for a in r.positives:
                self.pos_rules.setdefault(a.pred, []).append(r.id)
            for a in r.negatives:
                self.neg_rules.setdefault(a.pred, []).append(r.id)
        self.shape = {  # rule id -> the predicates of an instance's positive, negated facts
            r.id: (tuple(a.pred for a in r.positives), tuple(a.pred for a in r.negatives))
            for r in analysis.rules
        }
        self.forward = Forward(self.ev, self.OLD, [r.id for r in self.active_rules])

    # ------------------------------------------------------------ configuration
    def configure(self, seed: int | None = None, interleaved: bool | None = None) -> None:
        if seed is not None:
            self.rng = random.Random(seed)
        if interleaved is not None:
            self.interleaved = interleaved

    # ------------------------------------------------------------ load
    def enter(self, pred: str, facts) -> None:
        super().enter(pred, facts)
        born = self.born
        for f in facts:
            self.clock += 1
            born[(pred, f)] = self.clock

    def materialise(self, report: Report) -> None:
        """mat(P, E) with birth stamps; then the policy's state and the upkeep modules'."""
        self.discard_pending()
        self.born.clear()
        self.clock = 0
        super().materialise(report)
        with self.unreported():  # a report counts the materialisation's work only
            self.after_load()
            self.rebuild_closures()
        self.dirty.clear()
        self.changed_by.clear()
        self.journal = Journal()
        report.details["log_size"] = self.log_size()

    def prepare(self) -> None:
        """Plans and indexes for updates (SemiNaive); views for `forward` rebuilt over the new I."""
        super().prepare()
        self.forward.clear()

    def after_load(self) -> None:
        """Hook: build policy state (e.g. the derivation log) over the loaded I."""

    def rebuild_closures(self) -> None:
        """Build the upkeep modules from the current I.

        The edges are the explicit R facts and the heads of the stratum's other rules.
        """

        def edges(pred: str) -> set[Fact]:
            found = set(self.E.get(pred, ()))
            base = self.base_rules[pred]
            if base:
                for _rule, heads in self.ev.derive(base, self.OLD, self.OLD):
                    found.update(heads)
            return found & self.rel(pred).facts

        self.build_closures(edges)

    def takes(self, spec: ModuleSpec) -> bool:
        """Take a tc/stc/ltc(R) module if R's stratum holds R alone and only its rules recur."""
        s = next(s for s in self.analysis.strata if s.index == spec.stratum)
        return s.preds == {spec.pred} and set(s.recursive) == set(spec.rules)

    # ------------------------------------------------------------ the public API
    @property
    def quiescent(self) -> bool:
        return not self.queues and not self.inbox

    @property
    def pending(self) -> int:
        """Operations waiting to be executed (plus updates not yet integrated)."""
        return sum(len(q) for q in self.queues.values()) + len(self.inbox)

    def submit(self, add=(), delete=(), id: object = None) -> int:
        """Accept an update now; returns its sequence number.

        Interleaved: it is integrated at once, overlapping the work still pending.
        Sequential: it waits until the engine is quiescent.
        """
        plus, minus = self.encode_update(add, delete)  # errors surface here, at once
        return self.submit_encoded(plus, minus, id)

    def submit_encoded(self, plus, minus, id: object = None) -> int:
        """`submit` for an update `encode_update` has validated and encoded (now or queued)."""
        self.seq += 1
        entry = (self.seq, id, plus, minus)
        if self.interleaved or self.quiescent:
            self._integrate(entry)
        else:
            self.inbox.append(entry)
        return self.seq

    def step(self, budget: int = 1) -> int:
        """Perform up to `budget` units of work; returns how many were done."""
        with paused_gc():
            return self._step(budget)

    def _step(self, budget: int) -> int:
        """Up to `budget` units, in rounds: a round is a set of items of one update (below).

        The update is chosen as `_next` chooses it (fairly at random, or the oldest
        with the sequential schedule); the round takes its queued items (at most
        the budget left, chosen at random when interleaved) and executes them one
        after another in random order. Items they determine wait for a later
        round. This is one of the schedules of single units (those items could
        have been chosen in that order) with the choice made once per round.
        A scripted `chooser` (tests) chooses every single unit.
        """
        done = 0
        limited = self.limits.active
        counts, charged, born = self.counts, self.charged, self.born
        max_work = self.limits.work or float("inf")
        max_facts = self.limits.facts or float("inf")
        queues, rng, interleaved = self.queues, self.rng, self.interleaved
        while done < budget:
            if not queues:
                if self.inbox:
                    self._integrate(self.inbox.pop(0))
                    continue
                self.charged.clear()  # quiescent: every update so far is complete
                break
            if self.chooser is not None:
                items = [self._next()]
            else:
                if not interleaved:
                    upd = min(queues)
                else:
                    upd = rng.choice(list(queues)) if len(queues) > 1 else next(iter(queues))
                q = queues[upd]
                room = budget - done
                if interleaved and len(q) > 1:
                    rng.shuffle(q)
                if len(q) <= room:
                    items = q
                    del queues[upd]
                else:
                    items = q[-room:]
                    del q[-room:]
                if not interleaved:
                    items.reverse()  # the newest first, as one unit at a time does
                self._unit_update = upd
            before = counts.work
            self._round(items)
            done += len(items)
            if limited:  # the round's items all belong to `upd`: the charge is theirs
                upd = self._unit_update
                work = charged[upd] = charged.get(upd, 0) + counts.work - before
                if work > max_work or len(born) > max_facts:
                    self._charge(upd, 0)  # raises
        self.stats.units += done
        return done

    def _round(self, items: list) -> None:
        """Execute `items` in order."""
        add, delete, rederive = self._exec_add, self._exec_del, self._exec_rederive
        for item in items:
            kind = item[0]
            if kind == "a":
                add(item[1], item[2], item[3], item[4])
            elif kind == "d":
                delete(item[1], item[2])
            else:
                rederive(item[1], item[2])

    def _charge(self, update: int, work: int) -> None:
        """Add `work` to `update`'s charge; raise if it, or the materialisation, is over budget."""
        total = self.charged[update] = self.charged.get(update, 0) + work
        self.limits.check_work(total, update)
        self.limits.check_facts(len(self.born), update)

    def discard_pending(self) -> None:
        """Forget all pending work, waves and charges (the state is about to be rebuilt)."""
        self.queues.clear()
        self.inbox.clear()
        self.pending_del.clear()
        self.waves.clear()
        self.deleted_by.clear()
        self.charged.clear()
        self.forward.clear()  # I is about to be rebuilt

    def run(self, max_units: int | None = None) -> int:
        """Work until quiescent; raise NotQuiescent past `max_units`."""
        total = 0
        while not self.quiescent:
            total += self.step(1000)
            if max_units is not None and total > max_units:
                raise NotQuiescent(f"no quiescence after {total} units of work")
        return total

    def poll(self) -> ConsistencyPoint | None:
        """The delta since the previous consistency point, if quiescent now."""
        if not self.quiescent:
            return None
        rels, by = self.I, self.changed_by
        added, removed, added_by, removed_by = [], [], [], []
        for (pred, f), was in self.dirty.items():
            rel = rels.get(pred)
            now = rel is not None and f in rel.facts
            if now != was and pred not in self.analysis.internal:
                (added if now else removed).append(self.decode(pred, f))
                (added_by if now else removed_by).append(by.get((pred, f), 0))
        self.dirty.clear()
        by.clear()
        return ConsistencyPoint(self.last_seq, self.last_id, added, removed, added_by, removed_by)

    # ------------------------------------------------------------ the Maintainer interface
    def normalise(self, add, delete) -> Update:
        """Encode only: no-ops are dropped when the update is integrated (it may wait)."""
        return Update(*self.encode_update(add, delete))

    def maintain(self, update: Update, report: Report) -> None:
        """Submit one update and run to quiescence (the classic interface)."""
        stats_before = self.stats.as_dict()
        self.submit_encoded(update.plus, update.minus, None)
        self.run()
        point = self.poll()
        assert point is not None  # quiescent after run()
        for pred, f in self._encode_all(point.added):
            report.added_facts.setdefault(pred, set()).add(f)
        for pred, f in self._encode_all(point.removed):
            report.removed_facts.setdefault(pred, set()).add(f)
        report.added, report.removed = len(point.added), len(point.removed)
        now = self.stats.as_dict()
        report.details = {k: now[k] - stats_before[k] for k in now}
        report.noop_adds = report.details.pop("noop_adds")
        report.noop_deletes = report.details.pop("noop_deletes")
        report.details["log_size"] = self.log_size()

    def _encode_all(self, facts):
        for fact in facts:
            yield self.encode(fact)

    def log_size(self) -> int:
        """Rule instances kept in the derivation log (0 for policies without one)."""
        return 0

    def show(self, key: Key) -> str:
        """A fact key in program syntax (for traces and tests)."""
        return self.show_fact(self.decode(*key))

    def describe(self, item: tuple) -> str:
        """A pending work item as text, e.g. `add b(x)` or `del a(x) [wave 2]`."""
        kind = {"a": "add", "d": "del", "r": "rederive"}[item[0]]
        return f"{kind} {self.show(item[1])}"

    # ------------------------------------------------------------ scheduling
    def _push(self, update: int, item: tuple) -> None:
        q = self.queues.get(update)
        if q is None:
            q = self.queues[update] = []
        q.append(item)

    def _next(self) -> tuple:
        """The item the scripted `chooser` picks (one unit; it names the update and index)."""
        upd, i = self.chooser(self.queues)
        q = self.queues[upd]
        q[i], q[-1] = q[-1], q[i]
        self._unit_update = upd
        item = q.pop()
        if not q:
            del self.queues[upd]
        return item

    # ------------------------------------------------------------ integration
    def _integrate(self, entry) -> None:
        """Determine the explicit operations of an update (rule 1-i)."""
        seq, uid, plus, minus = entry
        work = self.counts.work
        update = self.drop_noops(plus, minus)  # against E now
        self.stats.noop_adds += update.noop_adds
        self.stats.noop_deletes += update.noop_deletes
        self.stats.updates += 1
        self.last_seq, self.last_id = seq, (uid if uid is not None else seq)
        update.apply(self.E)
        wave = None
        for pred, fs in update.minus.items():
            self.journal.explicit.update((pred, f) for f in fs)
            rel = self.rel(pred)
            for f in fs:
                if f in rel.facts and self.explicit_delete_propagates((pred, f)):
                    if wave is None:
                        wave = self._new_wave(seq)
                    self._enqueue_del((pred, f), wave)
        for pred, fs in update.plus.items():
            self.journal.explicit.update((pred, f) for f in fs)
            rel = self.rel(pred)
            for f in fs:
                key = (pred, f)
                if key in self.pending_del:  # a newer explicit add cancels a pending delete
                    self._cancel_del(key)
                if f not in rel.facts:
                    self._determine_add(key, None, seq, explicit=True)
                elif pred in self.closures:
                    self.link(key, seq)
        if wave is not None:
            self._maybe_complete(wave)
        if self.limits.active:  # closure modules may link at integration
            self._charge(seq, self.counts.work - work)

    def explicit_delete_propagates(self, key: Key) -> bool:
        """Whether removing `key` from E requires a deletion (policy hook)."""
        return True

    # ------------------------------------------------------------ waves
    def _new_wave(self, update: int) -> int:
        self.stats.waves += 1
        wid = self.stats.waves
        self.waves[wid] = Wave(wid, update)
        return wid

    def _enqueue_del(self, key: Key, wave: int) -> None:
        if key in self.pending_del:
            return
        self.pending_del[key] = wave
        w = self.waves[wave]
        w.pending += 1
        self.stats.determined += 1
        self._push(w.update, ("d", key, wave))

    def _cancel_del(self, key: Key) -> None:
        wave = self.pending_del.pop(key)
        self.stats.cancelled += 1
        w = self.waves[wave]
        w.pending -= 1
        self._maybe_complete(wave)

    def _maybe_complete(self, wave: int) -> None:
        w = self.waves[wave]
        if w.pending or w.done:
            return
        w.done = True
        if not w.deleted:
            del self.waves[wave]
            return
        w.rederive_left = len(w.deleted)
        for key in w.deleted:
            self._push(w.update, ("r", key, wave))

    def _blocked(self, key: Key) -> int | None:
        """The active wave that deleted `key`, if any (the recursion stop)."""
        w = self.deleted_by.get(key)
        if w is None:
            return None
        wave = self.waves.get(w)
        return w if wave is not None and not wave.done else None

