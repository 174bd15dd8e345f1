"""Where the job's settings come from: flags, the environment, a TOML file, the defaults.

Precedence, highest first: a flag on the command line (`--redis-timeout 5`),
the environment variable (`FLUXMAT_REDIS_TIMEOUT=5`), the key of the
`--config` file (`redis_timeout = 5`), the default (or the value a caller such
as `fluxmat demo` fixes). An empty environment variable counts as unset.
Flags and variables are text, read by the setting's kind; a file's values are
TOML values and must have the setting's type (seconds may be integers). The
settings, their kinds and checks are stream.config's; here they are gathered,
and a refused value is reported where it was given:

    --stall-seconds must be more than 0 seconds, got 0
    FLUXMAT_STALL_SECONDS must be more than 0 seconds, got 0
    job.toml:4: stall_seconds must be more than 0 seconds, got 0

`render_toml` writes the effective configuration as a file `--config` reads
back to the same `JobConfig` (`fluxmat run --print-config`).
"""

from __future__ import annotations

import difflib
import json
import re
import textwrap
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fluxmat.connectors.redact import redact
from fluxmat.engine import FluxmatError
from fluxmat.stream.config import SETTINGS, JobConfig, Setting, SettingError, check_values


@dataclass(frozen=True)
class Origin:
    """Where a setting's value came from: a flag, a variable, a file (and line), or the default."""

    kind: str  # "flag" | "env" | "file" | "default"
    path: str = ""
    line: int | None = None

    def label(self, s: Setting) -> str:
        """How the user gave the setting: `--redis`, `FLUXMAT_REDIS`, `redis` (a file's key)."""
        return {"env": s.env, "file": s.name}.get(self.kind, s.flag)

    def where(self) -> str:
        """The file and line an error begins with ("job.toml:4: "), else nothing."""
        if self.kind != "file":
            return ""
        return f"{self.path}:{self.line}: " if self.line else f"{self.path}: "


@dataclass
class Gathered:
    """The settings' values after every source, and where each came from."""

    values: dict[str, Any] = field(default_factory=lambda: {n: s.default for n, s in SETTINGS.items()})
    origins: dict[str, Origin] = field(default_factory=lambda: dict.fromkeys(SETTINGS, Origin("default")))

    def error(self, exc: SettingError) -> FluxmatError:
        """`exc` as the user reads it: each setting named as they gave it."""
        message = exc.render(lambda name: self.origins[name].label(SETTINGS[name]))
        return FluxmatError(self.origins[exc.key].where() + message)

    def text(self, s: Setting, text, origin: Origin) -> None:
        """Set `s` from a flag's or a variable's text (argparse hands switches and repeated files typed)."""
        self.origins[s.name] = origin
        if isinstance(text, bool | list | tuple):
            value = s.kind.normal(text)
        elif text == "" and s.default is None:
            value = None
        else:
            try:
                value = s.kind.read(text)
            except ValueError:
                raise SettingError(s.name, f"expects {s.kind.what}, got {text!r}") from None
        self.values[s.name] = value


def gather(flags: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None,
           path: str | None = None, fixed: Mapping[str, Any] | None = None) -> Gathered:  # fmt: skip
    """The values of every setting, by precedence: flags > environ > the file at `path` > fixed > defaults.

    `flags` maps setting names to what the command line gave (only those given);
    `fixed` replaces defaults (values as JobConfig holds them).
    """
    g = Gathered()
    g.values.update(fixed or {})
    try:
        if path:
            _file(g, path)
        for s in SETTINGS.values():
            if (environ or {}).get(s.env):
                g.text(s, environ[s.env], Origin("env"))
        for name, text in (flags or {}).items():
            g.text(SETTINGS[name], text, Origin("flag"))
    except SettingError as exc:
        raise g.error(exc) from None
    return g


def load(flags: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None,
         path: str | None = None, fixed: Mapping[str, Any] | None = None) -> JobConfig:  # fmt: skip
    """The checked JobConfig of these sources (see `gather`); a refused value: FluxmatError naming its source."""
    g = gather(flags, environ, path, fixed)
    try:
        return JobConfig(**g.values, core_given=g.origins["core"].kind != "default")
    except SettingError as exc:
        raise g.error(exc) from None


# ---------------------------------------------------------------- the file


def _file(g: Gathered, path: str) -> None:
    """The settings of a TOML file into `g` (unknown keys and bad TOML refused with file and line)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise FluxmatError(f"{path}: cannot read the --config file: {reason}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        at = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        where = f"{path}:{at[1]}:{at[2]}" if at else path
        raise FluxmatError(f"{where}: not a TOML file: {re.sub(r' [(]at .*[)]$', '', str(exc))}") from None
    lines = text.splitlines()
    for key, value in data.items():
        origin = Origin("file", path, _line(lines, key))
        if key not in SETTINGS:
            table = "; settings are keys at the top of the file, not in tables" if isinstance(value, dict) else ""
            raise FluxmatError(f"{origin.where()}unknown key {key!r} (the nearest setting: {nearest(key)!r}{table})")
        g.origins[key] = origin
        g.values[key] = None if value == "" and SETTINGS[key].default is None else value


def nearest(key: str) -> str:
    """The setting whose name is closest to `key` (a flag's spelling is read as the name)."""
    name = key.strip().lstrip("-").replace("-", "_").lower()
    return difflib.get_close_matches(name, list(SETTINGS), n=1, cutoff=0.0)[0]


def _line(lines: list[str], key: str) -> int | None:
    """The line defining `key` at the top level (`key = ...`, `"key" = ...`, `[key]`), None if not found."""
    name = re.escape(key)
    pattern = re.compile(rf"\s*(?:(?:{name}|\"{name}\"|'{name}')\s*[=.]|\[+\s*{name}\s*[\].])")
    return next((n for n, line in enumerate(lines, start=1) if pattern.match(line)), None)


# ---------------------------------------------------------------- --print-config

HEADER = """\
# The configuration of `fluxmat run` (flags > environment > --config file > defaults).
# Read it back with `fluxmat run --config FILE`; each key is a flag's name without the
# leading dashes, with underscores (--redis-timeout: redis_timeout).
"""


def toml_value(value) -> str:
    """A setting's value in TOML: a string, an integer, a float, a boolean, an array of strings."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, tuple | list):
        return "[" + ", ".join(map(toml_value, value)) + "]"
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


def render_toml(g: Gathered) -> str:
    """The gathered settings as a TOML file, each with its help as a comment (required ones may be missing)."""
    try:
        check_values(g.values, require=False)
    except SettingError as exc:
        raise g.error(exc) from None
    out = [HEADER.rstrip("\n")]
    for s in SETTINGS.values():
        out += ["", *textwrap.wrap(s.help, 96, initial_indent="# ", subsequent_indent="# ", break_on_hyphens=False)]
        out.append(_entry(s, g.values[s.name], g.origins[s.name]))
    return "\n".join(out) + "\n"


def _entry(s: Setting, value, origin: Origin) -> str:
    if value is None:
        return f"# {s.name} is required: set it here, as {s.flag} or as {s.env}" if s.required else \
            f"# {s.name} is not set"  # fmt: skip
    if s.secret or (isinstance(value, str) and redact(value) != value):
        return f"# {s.name} is set but not shown (it holds a secret): give it as {s.env}"
    source = {"flag": s.flag, "env": s.env, "file": f"{origin.path}"}.get(origin.kind)
    return f"{s.name} = {toml_value(value)}" + (f"  # from {source}" if source else "")
