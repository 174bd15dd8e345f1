"""Where numba keeps the arrays core's compiled kernels (`cache=True`), chosen before numba is imported.

numba caches a kernel next to its source (`__pycache__`) when that folder is
writable, else in the user's cache folder (`~/.cache/numba` or
`$XDG_CACHE_HOME`). When neither is writable -- a read-only install run by a
user without a writable home, as in some containers -- and `NUMBA_CACHE_DIR`
is not set, it is set to `fluxmat-numba-<uid>` in the system's temporary
folder, so the kernels still load (and compile at most once per folder).
`NUMBA_CACHE_DIR`, when set, always wins.

Not here: the kernels (engine.compact.kernels).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


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
    if os.environ.get("NUMBA_CACHE_DIR"):
        return None
    if _writable(HERE / "__pycache__") or _writable(_user_cache()):
        return None
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    folder = Path(tempfile.gettempdir()) / f"fluxmat-numba-{uid}"
    os.environ["NUMBA_CACHE_DIR"] = str(folder)
    if "numba" in sys.modules:  # imported before us: make it read the variable again
        from numba.core import config

        config.reload_config()
    return str(folder)


choose_cache_dir()
