"""numba's cache of the small-update interpreter, keyed by every source file it compiles from.

numba keys a cached function by the contents of the one file that defines it.
The interpreter's functions call functions of other files (its plan runner,
its relations, engine.compact.kernels), whose machine code is compiled into
the caller's cache entry; an edit to one of those alone left the caller's
entry stale. Importing this module (the interpreter's modules do, before
they define anything) makes the cached functions of `STAMPED` carry one
stamp, a hash of all of `SOURCES`: an edit to any of them recompiles all.

It adds a cache locator in front of numba's own (the same folders, only the
stamp differs); a numba without that hook caches by file as before.

Not here: the interpreter (engine.compact.small_run), where numba's cache
folder is (engine.compact.cache).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import pickle
from pathlib import Path

from numba.core import caching

from fluxmat.engine.compact import (
    cache,  # noqa: F401  (a writable cache folder first)
    link_only,  # noqa: F401  (inner functions compiled once)
)

HERE = Path(__file__).resolve().parent
# the interpreter's files: their cached functions carry the stamp of all of SOURCES
STAMPED = tuple(
    HERE / f"{name}.py" for name in ("small_plan", "small_program", "small_rel", "small_run")
)
# every file whose numba functions the interpreter compiles into its entry point
SOURCES = (*STAMPED, HERE / "kernels.py", HERE / "small_cache.py")


@functools.cache
def sources_stamp() -> str:
    """A hash of the contents of every file in `SOURCES`."""
    h = hashlib.sha256()
    for path in SOURCES:
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def _locators() -> list | None:
    """The cache locator classes numba tries (its `CacheImpl`, `_CacheImpl` in older numbas); None: none."""
    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)
    classes = getattr(impl, "_locator_classes", None)
    return classes if isinstance(classes, list) else None


def _standard(py_func, py_file):
    """The locator numba would use itself for this function (None: none fits)."""
    for cls in _locators() or ():
        if cls is not SourcesLocator:
            found = cls.from_function(py_func, py_file)
            if found is not None:
                return found
    return None


class SourcesLocator(caching._CacheLocator):  # noqa: SLF001  (numba's locator interface)
    """numba's own locator for a function of `SOURCES`, stamped with `sources_stamp`."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def ensure_cache_path(self) -> None:
        self.inner.ensure_cache_path()

    def get_cache_path(self) -> str:
        return self.inner.get_cache_path()

    def get_source_stamp(self) -> str:
        return sources_stamp()

    def get_disambiguator(self) -> str:
        return self.inner.get_disambiguator()

    @classmethod
    def from_function(cls, py_func, py_file):
        if Path(py_file).resolve() not in STAMPED:
            return None
        inner = _standard(py_func, py_file)
        return None if inner is None else cls(inner)


def cached(py_func) -> bool:
    """Whether numba's cache holds `py_func` (a function of `STAMPED`) compiled from today's sources."""
    path = inspect.getfile(py_func)
    locator = SourcesLocator.from_function(py_func, path)
    if locator is None:
        return False
    pattern = f"{Path(path).stem}.{py_func.__qualname__}-*.nbi"
    for index in Path(locator.get_cache_path()).glob(pattern):
        try:
            with index.open("rb") as f:
                pickle.load(f)  # numba's version
                stamp, overloads = pickle.loads(f.read())
        except Exception:  # noqa: BLE001  (unreadable or another numba's: not cached)
            continue
        if stamp == sources_stamp() and overloads:
            return True
    return False


def install() -> bool:
    """Put `SourcesLocator` first in numba's locators (once); False when numba has no such hook."""
    classes = _locators()
    if classes is None:
        return False
    if SourcesLocator not in classes:
        classes.insert(0, SourcesLocator)
    return True


install()
