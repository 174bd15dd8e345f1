"""Layering (docs/architecture.md): engine/ imports no Spark, Kafka or Redis (and nothing above it)."""

import ast
import shutil
from pathlib import Path

import pytest

from tests.support.shared import in_repo

ROOT = Path(__file__).resolve().parent.parent.parent
FORBIDDEN = ("pyspark", "kafka", "redis", "connectors", "stream", "ops")


def _imports(path: Path) -> list[str]:
    """Every module a file imports (at any depth), named by its folder in the repository."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend(in_repo(a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module == "fluxmat" and node.level == 0:
            out.extend(a.name for a in node.names)  # from fluxmat import engine
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(in_repo(node.module))
    return out


ENGINE_FILES = sorted((ROOT / "engine").rglob("*.py"))


def test_engine_has_files():
    assert len(ENGINE_FILES) >= 5


@pytest.mark.parametrize("path", ENGINE_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_engine_imports_no_infrastructure(path):
    bad = [m for m in _imports(path) if m.split(".")[0] in FORBIDDEN]
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def test_detector_catches_a_forbidden_import(tmp_path):
    f = tmp_path / "x.py"
    f.write_text("import redis\nfrom pyspark.sql import SparkSession\n")
    assert [m for m in _imports(f) if m.split(".")[0] in FORBIDDEN] == ["redis", "pyspark.sql"]


# ---------------------------------------------------------------- no cycles inside engine/


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path, package: str = "engine") -> dict[str, set[str]]:
    """Module -> the modules of `package` it imports (every import statement, at any depth).

    Importing `a.b.c` runs the `__init__` of every package on the way that the
    importer is not itself inside, so `a.b` counts as imported too (that is how
    `engine.algorithms` and `engine.fd.core` formed a cycle).
    """
    files = {_module_name(p, root): p for p in (root / package).rglob("*.py")}
    packages = {m for m, p in files.items() if p.name == "__init__.py"}
    graph: dict[str, set[str]] = {}
    for mod, path in files.items():
        named: list[str] = []
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                named.extend(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the importer's package upwards
                    pkg = (mod if mod in packages else mod.rpartition(".")[0]).split(".")
                    pkg = pkg[: len(pkg) - node.level + 1]
                    base = ".".join(pkg + ([base] if base else []))
                named.append(base)
                named.extend(f"{base}.{a.name}" for a in node.names)
        deps = set()
        for name in map(in_repo, named):
            parts = name.split(".")
            for i in range(1, len(parts) + 1):
                target = ".".join(parts[:i])
                inside = mod == target or mod.startswith(target + ".")
                if target in files and not inside:
                    deps.add(target)
        graph[mod] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (or a self-import)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        todo = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while todo:
            v, it = todo[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    todo.append((w, iter(sorted(graph[w]))))
                elif w in stack:
                    low[v] = min(low[v], index[w])
                continue
            todo.pop()
            if todo:
                low[todo[-1][0]] = min(low[todo[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1 or v in graph[v]:
                    out.append(sorted(comp))
    return out


def test_engine_has_no_import_cycles():
    graph = import_graph(ROOT)
    assert len(graph) == len(ENGINE_FILES)
    assert not cycles(graph), f"import cycles inside engine/: {cycles(graph)}"


@pytest.mark.parametrize("package", ["connectors", "stream", "ops", "client"])
def test_no_package_has_import_cycles(package):
    """Function-level imports count too: they hide a cycle, they do not break it."""
    graph = import_graph(ROOT, package)
    assert graph, f"{package}/ has no modules"
    assert not cycles(graph), f"import cycles inside {package}/: {cycles(graph)}"


def test_cycle_check_sees_a_cycle_between_the_stream_modules(tmp_path):
    """The cycle stream.keyed -> stream.engine_host -> stream.keyed, reintroduced, is found."""
    copy = tmp_path / "copy"
    shutil.copytree(ROOT / "stream", copy / "stream")
    host = copy / "stream" / "engine_host.py"
    host.write_text(host.read_text(encoding="utf-8")
                    + "\n\ndef _late():\n    from fluxmat.stream.keyed import KeyedDriver\n\n    return KeyedDriver\n")
    assert any("stream.keyed" in c and "stream.engine_host" in c for c in cycles(import_graph(copy, "stream")))


def test_cycle_check_catches_a_reintroduced_cycle(tmp_path):
    """Copy engine/, add one function-level import that closes a loop: it is found.

    Once as in the code at b03e780 (engine.analysis imported engine.decompose inside
    `analyse`), once through a package `__init__` (engine.fd.core importing
    engine.algorithms.dred, whose package imports engine.fd).
    """
    import shutil

    copy = tmp_path / "repo"
    shutil.copytree(ROOT / "engine", copy / "engine")
    assert not cycles(import_graph(copy))
    decompose = copy / "engine" / "decompose.py"
    decompose.write_text(
        decompose.read_text(encoding="utf-8")
        + "\n\ndef _late():\n    from engine.analysis import analyse\n\n    return analyse\n",
        encoding="utf-8",
    )
    assert ["engine.analysis", "engine.decompose"] in cycles(import_graph(copy))
    shutil.copy(ROOT / "engine" / "decompose.py", decompose)
    core = copy / "engine" / "fd" / "core.py"
    core.write_text(
        core.read_text(encoding="utf-8") + "\n\nfrom engine.algorithms.dred import DRed  # noqa\n",
        encoding="utf-8",
    )
    assert any("engine.algorithms" in c and "engine.fd.core" in c for c in cycles(import_graph(copy)))


# ---------------------------------------------------------------- one interface, no refusals


def refusals(root: Path) -> list[str]:
    """Methods in `root`/engine that refuse to work (`raise AssertionError / NotImplementedError`)."""
    out = []
    for path in sorted((root / "engine").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef):
                continue
            for node in ast.walk(fn):
                exc = node.exc if isinstance(node, ast.Raise) else None
                if isinstance(exc, ast.Call):
                    exc = exc.func
                if isinstance(exc, ast.Name) and exc.id in ("AssertionError", "NotImplementedError"):
                    out.append(f"{path.relative_to(root)}:{node.lineno} {fn.name}")
    return out


def test_no_algorithm_refuses_an_inherited_method(tmp_path):
    """Issue 15: an algorithm implements only the interface, so nothing inherits a
    method it has to refuse; the check finds such a refusal when one is written."""
    assert refusals(ROOT) == []
    (tmp_path / "engine").mkdir()
    (tmp_path / "engine" / "x.py").write_text(
        "class A:\n    def update_stratum(self, s):\n"
        "        raise AssertionError('not used')\n"
    )
    assert refusals(tmp_path) == ["engine/x.py:3 update_stratum"]


# ---------------------------------------------------------------- ops -> stream -> connectors -> engine

LAYERS = ("engine", "connectors", "stream", "ops")  # each may import only those before it


def layer_violations(root: Path) -> list[str]:
    """Imports (at any depth, function-level ones included) of a later layer by an earlier one."""
    out = []
    for rank, layer in enumerate(LAYERS):
        later = set(LAYERS[rank + 1 :])
        for path in sorted((root / layer).rglob("*.py")):
            bad = sorted({m for m in _imports(path) if m.split(".")[0] in later})
            out.extend(f"{path.relative_to(root)} imports {m}" for m in bad)
    return out


def test_dependencies_point_one_way(tmp_path):
    """Issue 15: the job takes its observers from ops (stream.observe) instead of importing ops."""
    from tests.support.shared import scratch_copy

    assert layer_violations(ROOT) == []
    copy = scratch_copy(tmp_path, LAYERS, "stream/job.py",
                        "\n\ndef _late():\n    from ops.metrics import JobMetrics\n\n    return JobMetrics\n")
    assert layer_violations(copy) == ["stream/job.py imports ops.metrics"]


# ---------------------------------------------------------------- client/ stands alone

CLIENT_FILES = sorted((ROOT / "client").rglob("*.py"))
CLIENT_FORBIDDEN = ("pyspark", "redis", "engine", "connectors", "stream", "ops")


@pytest.mark.parametrize("path", CLIENT_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_client_imports_neither_spark_nor_the_engine(path):
    bad = [m for m in _imports(path) if m.split(".")[0] in CLIENT_FORBIDDEN]
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}"
