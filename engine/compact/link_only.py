"""numba compiles a function that is only ever called from compiled code once, inside its callers.

numba turns every compiled function into an LLVM library of its own: the
function's module with the modules of everything it calls linked in, run
through LLVM's module optimiser and compiled to machine code. A caller links
in its callees' finished modules and optimises and compiles all of them
again, so a function five calls deep is optimised and compiled five times
and more, and the machine code of an inner function (one compiled with
`no_cpython_wrapper` and `no_cfunc_wrapper`, callable only from other
compiled code) is never run: its callers run their own copies. For the
small-update interpreter (engine.compact.small_run) that was two thirds of
its LLVM time.

`install` (run on import) makes a library without an entry point (no
CPython wrapper, named `_ZN7cpython...`) *link-only*: it links its callees and stops; the module
optimiser and the machine code run only when a caller with an entry point
(or numba asking for one of its addresses, or a cache write) needs them.
A `cfunc.` wrapper alone does not count as an entry point: numba gives one
to each of its own `@overload` implementations of numpy functions and typed
lists (no `cpython.` wrapper), compiled once per signature and caller, and
only asks for its address (which compiles it then) when a function is used
as a first-class value or as a `@cfunc`. Each callee is then optimised and compiled once per entry point
that calls it. The machine code of the entry points is the same kind as
before (the whole call tree optimised together at numba's optimisation level).

`FLUXMAT_NUMBA_LINK_ONLY=0` turns this off (measurements, a numba it does not
fit); so does a numba without the hooks used here.

Not here: where numba caches (engine.compact.cache), the interpreter's cache
stamp (engine.compact.small_cache).
"""

from __future__ import annotations

import os

from numba.core import codegen as cg
from numba.core import itanium_mangler
from numba.core.codegen import require_global_compiler_lock

# the name of a function's CPython wrapper (numba's `llvm_cpython_wrapper_name`): _ZN7cpython...
ENTRY_PREFIXES = (itanium_mangler.PREFIX + "N" + itanium_mangler.mangle_identifier("cpython"),)
_pending_envs: dict = {}  # environment globals whose function's machine code does not exist yet
_ORIGINAL: dict = {}


def has_entry(library) -> bool:
    """Whether the library defines a function callable from outside compiled code."""
    return any(not f.is_declaration and f.name.startswith(ENTRY_PREFIXES)
               for f in library._final_module.functions)  # fmt: skip


def is_deferred(library) -> bool:
    """Whether the library was linked but not yet optimised or compiled to machine code."""
    return getattr(library, "_fluxmat_deferred", False)


def _finalize(self) -> None:
    """Numba's `CPUCodeLibrary.finalize`, stopping after the linking for a library without entry."""
    if has_entry(self):
        _ORIGINAL["finalize"](self)
        return
    require_global_compiler_lock()
    self._raise_if_finalized()
    seen = set()
    for library in self._linking_libraries:
        if library not in seen:
            self._reload_init.update(library._reload_init)
            seen.add(library)
            self._final_module.link_in(library._get_module_for_linking(), preserve=True)
    self._fluxmat_deferred = True
    self._finalized = True


def _materialise(library) -> None:
    """What numba's `finalize` skipped for a link-only library: optimised, compiled, added."""
    if is_deferred(library):
        library._fluxmat_deferred = False
        library._shared_module = None
        library._optimize_final_module()
        library._final_module.verify()
        library._finalize_final_module()


def _get_pointer_to_function(self, name):
    self._ensure_finalized()  # (a library asked first, as a `@cfunc`'s is, is finalized link-only here)
    if is_deferred(self):
        try:
            fn = self._final_module.get_function(name)
        except NameError:
            return 0
        if fn.is_declaration:
            return 0
        _materialise(self)
    return _ORIGINAL["pointer"](self, name)


def _serialize_using_object_code(self):
    _materialise(self)
    return _ORIGINAL["serialize"](self)


def _set_env(self, env_name, env) -> None:
    """Numba's `set_env`, kept for later when the environment's global has no machine code yet."""
    if not self._engine.get_global_value_address(env_name):
        _pending_envs[env_name] = env
        return
    _ORIGINAL["set_env"](self, env_name, env)


def _finalize_specific(self) -> None:
    _ORIGINAL["specific"](self)
    for name in list(_pending_envs):
        if self._codegen._engine.get_global_value_address(name):
            _ORIGINAL["set_env"](self._codegen, name, _pending_envs.pop(name))


# (class, numba's attribute, ours, key in _ORIGINAL)
_HOOKS = (
    (cg.CPUCodeLibrary, "finalize", _finalize, "finalize"),
    (cg.CPUCodeLibrary, "serialize_using_object_code", _serialize_using_object_code, "serialize"),
    (cg.JITCodeLibrary, "get_pointer_to_function", _get_pointer_to_function, "pointer"),
    (cg.JITCodeLibrary, "_finalize_specific", _finalize_specific, "specific"),
    (cg.JITCPUCodegen, "set_env", _set_env, "set_env"),
)
_NEEDED = ("_final_module", "_linking_libraries", "_optimize_final_module", "_finalize_final_module",
           "_get_module_for_linking", "_raise_if_finalized")  # fmt: skip


def fits() -> bool:
    """Whether this numba has every hook used here."""
    hooks = all(callable(getattr(cls, name, None)) for cls, name, _, _ in _HOOKS)
    probe = cg.CPUCodeLibrary
    return hooks and all(hasattr(probe, n) or n in ("_final_module", "_linking_libraries")
                         for n in _NEEDED)  # fmt: skip


def install() -> bool:
    """Make libraries without an entry point link-only (once); False when off or not possible."""
    if os.environ.get("FLUXMAT_NUMBA_LINK_ONLY", "1") == "0" or not fits():
        return False
    if _ORIGINAL:
        return True
    for cls, name, ours, key in _HOOKS:
        _ORIGINAL[key] = getattr(cls, name)
        setattr(cls, name, ours)
    return True


def uninstall() -> None:
    """Numba's own behaviour again (tests)."""
    for cls, name, _, key in _HOOKS:
        if key in _ORIGINAL:
            setattr(cls, name, _ORIGINAL[key])
    _ORIGINAL.clear()


install()
