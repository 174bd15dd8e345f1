"""The documentation: the MkDocs site builds strictly, the CLI reference matches the
parsers, the README stays a first page, and nothing refers outside the repository."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fluxmat.ops import cli_reference

ROOT = Path(__file__).resolve().parent.parent.parent
MKDOCS = ROOT / "mkdocs.yml"

# Things that are not in the repository: the development notes and papers beside it,
# design and style notes that were never part of it, a module that does not exist,
# developers' absolute paths, and the two files that moved into docs/.
OUTSIDE = re.compile(
    r"\.\./shared|DESIGN\.md|STYLE\.md|engine\.fd\.closure|/work/"
    r"|ops/RUNBOOK\.md|engine/ALGORITHMS\.md"
)
# Where a moved file's old path may still be named: the changelog says where it went.
MOVED_NOTE = {"CHANGELOG.md": re.compile(r"ops/RUNBOOK\.md|engine/ALGORITHMS\.md")}
TEXT = {".py", ".md", ".yml", ".yaml", ".toml", ".json", ".txt", ".cfg", ".ini", ".html",
        ".dl", ".dlog", ".jsonl", ".rq", ".ttl", ".sh", ""}  # fmt: skip
README_MAX_LINES = 150  # one or two screens; the rest belongs in docs/


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess:
    # no --quiet: it hides the warnings that --strict counts, and the build passes
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                           "-f", str(config), "-d", str(site)],
                          capture_output=True, text=True, timeout=300)  # fmt: skip


def test_site_builds_strictly(tmp_path):
    proc = mkdocs_build(MKDOCS, tmp_path / "site")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "site" / "reference" / "cli" / "index.html").exists()
    assert (tmp_path / "site" / "dashboard.png").exists()


def _copy_site(tmp_path: Path) -> Path:
    shutil.copy(MKDOCS, tmp_path / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    return tmp_path / "mkdocs.yml"


@pytest.mark.parametrize("damage", [
    ("getting-started.md", "](streaming.md)", "](streaming-job.md)"),   # a missing page
    ("getting-started.md", "](streaming.md)", "](streaming.md#no-such-section)"),  # a missing anchor
])  # fmt: skip
def test_strict_build_fails_on_a_broken_link(tmp_path, damage):
    config = _copy_site(tmp_path)
    page, old, new = damage
    path = tmp_path / "docs" / page
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    proc = mkdocs_build(config, tmp_path / "site")
    assert proc.returncode != 0
    assert new.strip("]()").split("#")[-1] in proc.stdout + proc.stderr


def test_strict_build_ignores_incoming_pages(tmp_path):
    """Other branches put pages in docs/_incoming/ before they are placed in the nav."""
    config = _copy_site(tmp_path)
    (tmp_path / "docs" / "_incoming").mkdir(exist_ok=True)
    (tmp_path / "docs" / "_incoming" / "draft.md").write_text("# Draft\n\n[gone](nowhere.md)\n")
    proc = mkdocs_build(config, tmp_path / "site")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_cli_reference_is_current():
    page = cli_reference.PAGE.read_text(encoding="utf-8")
    assert page == cli_reference.render(), "run: python -m fluxmat.ops.cli_reference"


def test_cli_reference_names_every_command_and_flag():
    from fluxmat.ops.cli import build_parser

    page = cli_reference.render()
    with cli_reference.empty_environment():
        parser = build_parser()
    for name, _, _, sub in cli_reference._subcommands(parser):
        assert f"## fluxmat {name}\n" in page
        for action in cli_reference._arguments(sub):
            for flag in action.option_strings:
                assert f"`{flag}" in page or f", {flag}" in page, (name, flag)


def test_cli_reference_does_not_depend_on_the_environment(monkeypatch):
    before = cli_reference.render()
    monkeypatch.setenv("FLUXMAT_ALGORITHM", "fd-dred")
    monkeypatch.setenv("FLUXMAT_MAX_FACTS", "7")
    assert cli_reference.render() == before


def test_cli_reference_check_mode_detects_a_stale_page(tmp_path, monkeypatch):
    stale = tmp_path / "cli.md"
    stale.write_text(cli_reference.render().replace("--max-facts", "--max-fact"), encoding="utf-8")
    monkeypatch.setattr(cli_reference, "PAGE", stale)
    assert cli_reference.main(["--check"]) == 1
    monkeypatch.setattr(cli_reference, "PAGE", cli_reference.PAGE)
    cli_reference.main([])
    assert cli_reference.main(["--check"]) == 0


def _project_files() -> list[str]:
    proc = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                          cwd=ROOT, capture_output=True, text=True)  # fmt: skip
    if proc.returncode != 0:  # not a git checkout: every file outside virtual envs and caches
        skip = {".venv", ".git", "__pycache__", ".pytest_cache", ".hypothesis", ".ruff_cache"}
        return [str(p.relative_to(ROOT)) for p in ROOT.rglob("*")
                if p.is_file() and not skip & set(p.relative_to(ROOT).parts)]  # fmt: skip
    return [f for f in proc.stdout.splitlines() if (ROOT / f).is_file()]


def outside_references(files: list[str]) -> list[str]:
    """`file:line: text` of every line that refers to something outside the repository."""
    found = []
    for name in files:
        path = ROOT / name
        if path.suffix not in TEXT or name == "tests/project/test_docs.py":
            continue
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (UnicodeDecodeError, OSError):
            continue
        allowed = [p for f, p in MOVED_NOTE.items() if f == name]
        for n, line in enumerate(lines, 1):
            spans = [a.span() for p in allowed for a in p.finditer(line)]
            for m in OUTSIDE.finditer(line):
                if not any(a <= m.start() < b for a, b in spans):
                    found.append(f"{name}:{n}: {line.strip()[:120]}")
                    break
    return found


def test_nothing_refers_outside_the_repository():
    assert outside_references(_project_files()) == []


def test_outside_reference_check_finds_one(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "notes.py").write_text('"""Measured (../shared/notes/costs.md)."""\n')
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "shared.py").write_text('"""Found at <repo>/../shared."""\n')
    assert outside_references(["notes.py", "tests/shared.py"]) == [  # no file is exempt any more
        "notes.py:1: \"\"\"Measured (../shared/notes/costs.md).\"\"\"",
        "tests/shared.py:1: \"\"\"Found at <repo>/../shared.\"\"\""]


@pytest.mark.parametrize("doc", ["README.md", "CONTRIBUTING.md", "CHANGELOG.md", "docker/README.md"])
def test_repository_markdown_links_resolve(doc):
    text = (ROOT / doc).read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = target.partition("#")[0]
        assert ((ROOT / doc).parent / path).exists(), f"{doc}: link to missing {path}"


def test_readme_is_a_first_page():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines: move detail to docs/"
    text = "\n".join(lines)
    assert text.index("make demo") < text.index("## ")  # the two commands come first
    assert "make test" in text and "from fluxmat import Reasoner" in text


def _real_environment_variables() -> set[str]:
    """Every FLUXMAT_* variable the code, the tests, the Makefile or a flag reads."""
    texts = [cli_reference.render().replace("\\_", "_"), (ROOT / "Makefile").read_text()]
    texts += [p.read_text(encoding="utf-8") for d in ("engine", "connectors", "stream", "ops", "tests")
              for p in (ROOT / d).rglob("*.py") if p.name != "test_docs.py"]  # fmt: skip
    return set(re.findall(r"FLUXMAT_[A-Z_]*[A-Z]", "\n".join(texts)))


def test_docs_name_only_real_environment_variables():
    real = _real_environment_variables()
    pages = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").rglob("*.md")]
    named = {(p.name, v) for p in pages
             for v in re.findall(r"FLUXMAT_[A-Z_]*[A-Z]", p.read_text(encoding="utf-8"))}  # fmt: skip
    assert {(page, v) for page, v in named if v not in real} == set()


def test_every_command_is_in_the_usage_page():
    from fluxmat.ops.cli import build_parser

    page = (ROOT / "docs" / "reference" / "commands.md").read_text(encoding="utf-8")
    with cli_reference.empty_environment():
        names = [name for name, *_ in cli_reference._subcommands(build_parser())]
    assert [n for n in names if f"| `fluxmat {n}` |" not in page] == []


def tutorial_commands(markdown: str) -> list[tuple[str, str]]:
    """(command, output) of every `$ fluxmat ...` / `$ cat ...` in the tutorial's sh blocks
    whose output is shown whole (no `...` line)."""
    found = []
    for block in re.findall(r"```sh\n(.*?)```", markdown, flags=re.S):
        for chunk in re.split(r"^\$ ", block, flags=re.M)[1:]:
            lines = chunk.splitlines()
            command = lines.pop(0)
            while command.endswith("\\"):
                command = command[:-1] + lines.pop(0).strip()
            if re.match(r"(fluxmat|cat) ", command) and "..." not in lines:
                found.append((command, "\n".join(lines)))
    return found


def test_tutorial_commands_print_what_the_tutorial_shows(tmp_path):
    """Getting started: every command whose whole output is shown prints exactly that."""
    (tmp_path / "ops").symlink_to(ROOT / "ops")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("FLUXMAT_")},
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}  # fmt: skip
    commands = tutorial_commands((ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8"))
    assert len(commands) >= 6
    for command, output in commands:
        proc = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert proc.returncode == 0, (command, proc.stderr)
        assert proc.stdout.rstrip("\n") == output.rstrip("\n"), command
