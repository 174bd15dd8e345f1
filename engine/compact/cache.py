"""Where numba keeps the arrays core's compiled kernels (`cache=True`), chosen before numba is imported.

numba caches a kernel next to its source (`__pycache__`) when that folder is
writable, else in the user's cache folder (`~/.cache/numba` or
`$XDG_CACHE_HOME`). When neither is writable -- a read-only install run by a
user without a writable home, as in some containers -- and `NUMBA_CACHE_DIR`
is not set, it is set to `fluxmat-numba-<uid>` in the system's temporary
folder, so the kernels still load (and compile at most once per folder).
`NUMBA_CACHE_DIR`, when set to a folder that can be written, always wins; one
that cannot be created or written is dropped with a warning (numba would
otherwise cache nothing there, or fail at import when no other folder is
writable), and the folder is chosen as if it were not set.

Not here: the kernels (engine.compact.kernels).
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
log = logging.getLogger("fluxmat.numba_cache")


def _writable(folder: Path) -> bool:
    """Whether files can be created in `folder` (created when missing and its parent allows)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(folder, os.W_OK | os.X_OK)


def _user_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "numba"


def choose_cache_dir() -> str | None:
    """Set `NUMBA_CACHE_DIR` when numba would find no writable cache folder; the folder set, else None."""
    given = os.environ.get("NUMBA_CACHE_DIR")
    if given and _writable(Path(given)):
        return None
    folder = None
    if not (_writable(HERE / "__pycache__") or _writable(_user_cache())):
        uid = os.getuid() if hasattr(os, "getuid") else "user"
        folder = str(Path(tempfile.gettempdir()) / f"fluxmat-numba-{uid}")
    if not given and folder is None:
        return None
    if given:
        instead = folder or "numba's default folder"
        log.warning("NUMBA_CACHE_DIR=%s cannot be written: compiled code is cached in %s instead",
                    given, instead)  # fmt: skip
        del os.environ["NUMBA_CACHE_DIR"]
    if folder is not None:
        os.environ["NUMBA_CACHE_DIR"] = folder
    if "numba" in sys.modules:  # imported before us: make it read the variable again
        from numba.core import config

        config.reload_config()
    return folder


choose_cache_dir()
