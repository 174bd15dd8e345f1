"""The fully dynamic engine's side of the upkeep modules (ltc's closures, engine.modules).

A mixin of `engine.fd.core.FullyDynamic`: when a base fact enters or leaves I,
the closure module says which pairs it now derives or no longer derives, and
these become pending additions (justified by `MODULE`) or deletions of the
current wave. It uses the engine's `closures`, `closure_bases`, `rel`, `E`,
`_determine_add` and `_enqueue_del`.
"""

from __future__ import annotations

from fluxmat.engine.fd.records import MODULE, Key


class ModuleUpkeep:
    """Pending work from the upkeep modules (see the module docstring)."""

    def has_base_support(self, key: Key) -> bool:
        """Policy hook: whether a present R fact is justified by a base rule now."""
        return False

    def _module_adds(self, pred: str, pairs, update: int) -> None:
        """Module additions for the `pairs` of closure `pred` not present."""
        present = self.rel(pred).facts
        for g in pairs:
            if g not in present:
                self._determine_add((pred, g), MODULE, update)

    def _module_dels(self, pred: str, pairs, wave: int, but=None) -> None:
        """Deletions, in `wave`, of the `pairs` of closure `pred` present (except `but`)."""
        present = self.rel(pred).facts
        for g in pairs:
            if g != but and g in present:
                self._enqueue_del((pred, g), wave)

    def link(self, key: Key, update: int) -> None:
        """`key` is a base fact: module additions for what the edge derives."""
        pred, f = key
        self._module_adds(pred, self.closures[pred].link(f), update)

    def s_link(self, key: Key, update: int) -> None:
        """An S fact entered I: module additions for the pairs of R it joins (ltc)."""
        for r in self.closure_bases[key[0]]:
            self._module_adds(r, self.closures[r].change(s_new=(key[1],))[1], update)

    def s_unlink(self, key: Key, wave: int) -> None:
        """An S fact left I: determine the deletion of the pairs it no longer joins (ltc)."""
        for r in self.closure_bases[key[0]]:
            self._module_dels(r, self.closures[r].change(s_gone=(key[1],))[0], wave)

    def touch(self, key: Key, update: int) -> None:
        """Link `key` if it is a base fact now (explicit or supported)."""
        pred, f = key
        if pred in self.closures and (f in self.E.get(pred, ()) or self.has_base_support(key)):
            self.link(key, update)

    def unlink_keeps(self, key: Key, wave: int) -> bool:
        """Unlink `key`, a fact being deleted that is not a base fact.

        Determines the deletion of the pairs its removal disconnects; True if the
        module still derives `key` itself.
        """
        pred, f = key
        closure = self.closures[pred]
        self._module_dels(pred, closure.unlink(f), wave, but=f)
        return closure.connected(f)
