"""Installs the repository's folders under one import name, `fluxmat`.

`engine/` becomes `fluxmat.engine`, `connectors/` `fluxmat.connectors`, and so on, so an
install puts a single top-level package into site-packages. Everything else about the
distribution is in pyproject.toml.
"""

from setuptools import find_packages, setup

FOLDERS = ("engine", "connectors", "stream", "ops", "client")  # each becomes fluxmat.<folder>

setup(
    packages=["fluxmat"] + [f"fluxmat.{name}" for name in find_packages(include=[f"{f}*" for f in FOLDERS])],
    package_dir={"fluxmat": "fluxmat", **{f"fluxmat.{f}": f for f in FOLDERS}},
)
