"""One import name: an install puts the single top-level package `fluxmat` into site-packages.

The repository's folders (engine/, connectors/, stream/, ops/, client/) are installed as
fluxmat.engine, fluxmat.connectors, ..., so fluxmat never collides with another
distribution's generic `engine` or `stream` module.
"""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def _install(source: Path, target: Path) -> set[str]:
    """A regular (not editable) install of this checkout into `target`: its top-level names.

    Built from a copy of the files a source distribution holds, so the build leaves nothing
    in the checkout.
    """
    for name in ("pyproject.toml", "setup.py", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    for folder in ("fluxmat", "engine", "connectors", "stream", "ops", "client"):
        if (ROOT / folder).is_dir():
            shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                           str(source)], capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {p.name for p in target.iterdir() if not p.name.endswith((".dist-info", ".egg-info"))}


def test_a_regular_install_has_one_top_level_package(tmp_path):
    site = tmp_path / "site"
    (tmp_path / "src").mkdir()
    top = _install(tmp_path / "src", site) - {"bin"}
    assert top == {"fluxmat"}, f"top-level names installed: {sorted(top)}"
    assert (site / "fluxmat" / "engine" / "fd" / "core.py").is_file()
    assert (site / "fluxmat" / "ops" / "dashboard.html").is_file(), "package data is installed"
    # the installed copy works on its own, from a directory where the checkout is not importable
    code = ("import fluxmat, sys; from fluxmat import Reasoner\n"
            "r = Reasoner.from_text('p(X) :- q(X).'); r.load([('q', 'a')])\n"
            "assert fluxmat.engine.__file__.startswith(sys.argv[1]), fluxmat.engine.__file__\n"
            "print(r.lines())")  # fmt: skip
    # -S: no .pth files, so the checkout's editable install cannot answer `import fluxmat`; the
    # dependencies (numpy, numba, ...) come from the directory they are installed in, after the copy
    import numpy

    deps = str(Path(numpy.__file__).resolve().parent.parent)
    out = subprocess.run([sys.executable, "-S", "-c", f"import sys; sys.path[:0] = [{str(site)!r}, {deps!r}]\n{code}",
                          str(site)], cwd=tmp_path, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "p(a)." in out.stdout


def test_the_public_api_is_at_the_top_and_lazy():
    code = ("import sys, fluxmat\n"
            "assert 'fluxmat.engine' not in sys.modules\n"
            "from fluxmat import Reasoner, EngineOptions\n"
            "assert Reasoner.__module__.startswith('fluxmat.engine.')\n"
            "print(fluxmat.__version__)")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip()[0].isdigit()
