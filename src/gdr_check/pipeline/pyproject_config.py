"""`[tool.gdr-check]` in a `pyproject.toml`: discovery, validation and per-path overrides.

As in ruff, each target is checked with the nearest `pyproject.toml` at or above it that has a
`[tool.gdr-check]` table (`ConfigResolver`); a repo id, which has no place on disk, takes the working
directory's. The settings of the whole run (output format, exit-zero, error-on-warning) come from the first
target's config, else the working directory's (`discover`). A `pyproject.toml` without the table is skipped,
so a project's own pyproject does not hide the one that configures gdr-check. Every mistake is one line naming
the file and the key (exit 2).
"""

from __future__ import annotations

import fnmatch
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import field
from pathlib import Path, PurePosixPath
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, released as tomli
    import tomli as tomllib

from ..base.errors import InputError, not_utf8
from ..base.files import PYPROJECT_NAME
from ..base.limits import LIMITS, LimitError, SizeError, parse_size, read_bounded, shorten
from ..base.records import dataclass
from ..engines.profiles import UnknownEngineError, profile_for, state_dtype_problem
from ..models.builtin import get_builtin
from .selection import RuleSelection, SelectorError, known_rules, rule_selection

PYPROJECT = PYPROJECT_NAME
TABLE = "tool.gdr-check"
SELECTION_KEYS = ("select", "extend-select", "ignore")
TOP_LEVEL_KEYS = (*SELECTION_KEYS, "output-format", "engine", "tp", "batch", "slots", "model", "state-dtype",
                  "gpu-memory", "exit-zero", "error-on-warning", "exclude", "extend-exclude", "overrides")
OVERRIDE_KEYS = ("paths", *SELECTION_KEYS)


class ConfigError(InputError):
    """A bad `[tool.gdr-check]`: exit 2 with one line naming the file and key."""

    code = "config"
    path: str  # always set: the file, as shown

    def __init__(self, path: Path, key: str | None, problem: str) -> None:
        self.path = _shown(path)
        where = f"{self.path}: `{key}`" if key else self.path
        super().__init__(f"{where}: {problem}")


@dataclass(frozen=True)
class Override:
    """`[[tool.gdr-check.overrides]]`: a selection layer for targets matching `paths` (globs, relative to the
    pyproject's directory; a glob also matches everything below what it matches)."""

    paths: tuple[str, ...]
    selection: RuleSelection

    def matches(self, relative: str) -> bool:
        candidates = [relative, *(str(parent) for parent in PurePosixPath(relative).parents if str(parent) != ".")]
        return any(fnmatch.fnmatchcase(candidate, pattern.rstrip("/"))
                   for pattern in self.paths for candidate in candidates)


@dataclass
class Config:
    """What `[tool.gdr-check]` sets; None means "not set"."""

    path: Path | None = None
    selection: RuleSelection = field(default_factory=RuleSelection)
    overrides: tuple[Override, ...] = ()
    output_format: str | None = None
    engine: str | None = None
    tp: list[int] | None = None
    batch: int | None = None
    slots: int | None = None
    model: str | None = None  # the model `explain` reasons with: a built-in or cached repo id, or a path
    state_dtype: str | None = None
    gpu_memory: str | None = None
    exit_zero: bool | None = None
    error_on_warning: bool | None = None
    exclude: list[str] | None = None  # replaces the default excludes, as ruff's `exclude` does
    extend_exclude: list[str] = field(default_factory=list)

    @property
    def root(self) -> Path | None:
        return self.path.parent if self.path is not None else None

    def layers_for(self, target: str) -> list[RuleSelection]:
        """The config's selection layers for one target: the table, then each override that matches it."""
        layers = [self.selection]
        relative = self.relative_target(target)
        if relative is not None:
            layers.extend(o.selection for o in self.overrides if o.matches(relative))
        return layers

    def relative_target(self, target: str) -> str | None:
        """`target` relative to the pyproject's directory (posix), the repo id as given, or None when outside."""
        if self.root is None:
            return None
        if not os.path.lexists(target):
            return target  # a repo id: overrides may name it (`paths = ["Qwen/*"]`)
        try:
            return Path(os.path.abspath(target)).relative_to(self.root).as_posix()
        except ValueError:
            return None


def _shown(path: Path) -> str:
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return str(path)
    if relative == ".":  # the working directory: "." names nothing in a message
        return os.path.abspath(path)
    return str(path) if relative.startswith("..") else relative


# -- discovery ------------------------------------------------------------------------------------------------
def find_config_file(start: Path) -> Path | None:
    """The nearest `pyproject.toml` with a `[tool.gdr-check]` table at or above `start`. (`os.path.isfile` and
    `isdir`, not `Path`'s: they answer False where a folder on the way cannot be searched, where Python 3.10 and
    3.11's `Path` methods raise, and the discovery goes on upwards as past a folder without settings.)"""
    directory = start if os.path.isdir(start) else start.parent
    for folder in (directory, *directory.parents):
        candidate = folder / PYPROJECT
        if os.path.isfile(candidate) and _has_table(candidate):
            return candidate
    return None


def discover(targets: Iterable[str], cwd: Path | None = None) -> Path | None:
    for target in targets:
        if os.path.lexists(target):
            found = find_config_file(Path(os.path.abspath(target)))
            if found is not None:
                return found
    return find_config_file(Path(os.path.abspath(cwd or os.getcwd())))


class ConfigResolver:
    """The config of each target: `explicit` (`--config`) for all, none with `isolated`, else the nearest
    `pyproject.toml` with a `[tool.gdr-check]` table at or above the target. Each file is read once.
    `output_formats`: the renderers' format names, which `output-format` must be one of (the library renders
    nothing, so it checks none)."""

    def __init__(self, *, explicit: Config | None = None, isolated: bool = False, cwd: Path | None = None,
                 output_formats: Sequence[str] | None = None) -> None:
        self.explicit = explicit
        self.output_formats = output_formats
        self.isolated = isolated
        self.cwd = Path(os.path.abspath(cwd or os.getcwd()))
        self._found: dict[Path, Path | None] = {}
        self._loaded: dict[Path, Config] = {}

    def for_target(self, target: str) -> Config:
        if self.explicit is not None:
            return self.explicit
        if self.isolated:
            return Config()
        start = Path(os.path.abspath(target)) if os.path.lexists(target) else self.cwd
        path = self._nearest(start if os.path.isdir(start) else start.parent)  # (see find_config_file)
        if path is None:
            return Config()
        if path not in self._loaded:
            self._loaded[path] = load_config(path, output_formats=self.output_formats)
        return self._loaded[path]

    def _nearest(self, directory: Path) -> Path | None:
        """The nearest `pyproject.toml` with a table at or above `directory`, each folder's answer kept. Up the
        tree in a loop: a target thousands of folders deep costs no recursion."""
        climbed: list[Path] = []
        answer: Path | None = None
        while directory not in self._found:
            climbed.append(directory)
            candidate = directory / PYPROJECT
            if os.path.isfile(candidate) and _has_table(candidate):
                answer = candidate
                break
            parent = directory.parent
            if parent == directory:
                break
            directory = parent
        else:
            answer = self._found[directory]
        for folder in climbed:
            self._found[folder] = answer
        return answer


def _read_toml(path: Path) -> dict[str, Any]:
    if os.path.isdir(path):  # (False, not an error, behind a folder that cannot be searched)
        raise ConfigError(path, None, "is a folder: the configuration is a pyproject.toml file")
    try:
        raw = read_bounded(path)
    except OSError as error:
        raise ConfigError(path, None, f"cannot read it: {str(error) or 'error'}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(path, None, not_utf8(raw, error)) from None
    try:
        data: dict[str, Any] = tomllib.loads(text)
        return data
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(path, None, f"not valid TOML: {error}") from None
    except ValueError:  # Python refuses to convert an integer of more than 4300 digits, and says not where
        found = re.search(r"[0-9][0-9_]{4300,}", text)
        where = f" at line {text.count(chr(10), 0, found.start()) + 1}" if found else ""
        raise ConfigError(path, None, f"an integer{where} has more than 4300 digits, past anything a setting "
                                      "takes") from None
    except RecursionError:
        raise ConfigError(path, None, "not valid TOML: nested too deeply") from None


def _has_table(path: Path) -> bool:
    tool = _read_toml(path).get("tool")
    return isinstance(tool, dict) and "gdr-check" in tool


# -- validation -----------------------------------------------------------------------------------------------
def _model_source(path: Path, model: str) -> str:
    """`model` as `explain --model` takes it: a path that exists relative to this file (as its globs are), else as
    written (a built-in model, a repo id of the local Hugging Face cache, a path from the working directory).
    Only `explain` reads it, and names this file and key when it cannot: `check` never fails on it."""
    if not model.strip():  # not this file's folder: an empty path names no checkpoint
        raise ConfigError(path, f"{TABLE}.model", "empty: name a built-in model, a cached repo id or a checkpoint")
    if get_builtin(model) is not None:
        return model
    beside = path.parent / os.path.expanduser(model)
    return str(beside) if beside.exists() else model


def load_config(path: Path, *, explicit: bool = False, output_formats: Sequence[str] | None = None) -> Config:
    """Read and validate `[tool.gdr-check]` of `path`. Raises ConfigError, also for a file named on purpose
    (`explicit`: `--config`) that has no such table, whose defaults would pass for its settings. `output-format`
    is checked against `output_formats` when given (the CLI's formats)."""
    tool = _read_toml(path).get("tool", {})
    if explicit and (not isinstance(tool, dict) or "gdr-check" not in tool):
        raise ConfigError(path, None, f"no [{TABLE}] table (given with --config)")
    table = tool.get("gdr-check", {}) if isinstance(tool, dict) else {}
    if not isinstance(table, dict):
        raise ConfigError(path, TABLE, "must be a table")
    _reject_unknown(path, TABLE, table, TOP_LEVEL_KEYS)
    reader = _Reader(path, table, TABLE)
    config = Config(path=path)
    config.selection = reader.selection()
    config.output_format = (reader.choice("output-format", tuple(output_formats)) if output_formats is not None
                            else reader.string("output-format"))
    config.engine = reader.engine("engine")
    config.tp = reader.tp_sizes("tp")
    config.batch = reader.integer("batch", minimum=0)
    config.slots = reader.integer("slots", minimum=1)
    model = reader.string("model")
    config.model = None if model is None else _model_source(path, model)
    config.state_dtype = reader.state_dtype("state-dtype")
    gpu_memory = table.get("gpu-memory")
    if gpu_memory is not None and (isinstance(gpu_memory, bool) or not isinstance(gpu_memory, (int, str))):
        raise ConfigError(path, f"{TABLE}.gpu-memory", f"expected a size like \"80GiB\" or a byte count, got "
                                                        f"{_toml_type(gpu_memory)}")
    config.gpu_memory = None if gpu_memory is None else str(gpu_memory)
    if config.gpu_memory is not None:  # refused when the file is read, whichever command reads it
        try:
            parse_size(config.gpu_memory)
        except SizeError as error:  # its own words: not a size, or a size out of range
            raise ConfigError(path, f"{TABLE}.gpu-memory",
                              error.in_file if isinstance(error, LimitError) else str(error)) from None
    config.exit_zero = reader.boolean("exit-zero")
    config.error_on_warning = reader.boolean("error-on-warning")
    config.exclude = reader.strings("exclude")
    config.extend_exclude = reader.strings("extend-exclude") or []
    config.overrides = _overrides(path, table.get("overrides"))
    return config


def _reject_unknown(path: Path, where: str, table: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
    for key in table:
        if key not in allowed:
            hint = {"extend_select": "extend-select", "output_format": "output-format",
                    "exit_zero": "exit-zero", "error_on_warning": "error-on-warning"}.get(key)
            suggestion = f"; did you mean `{hint}`?" if hint else f" (expected one of: {', '.join(allowed)})"
            raise ConfigError(path, f"{where}.{key}", f"unknown key{suggestion}")


def _toml_type(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a float", str: "a string", list: "an array",
            dict: "a table"}.get(type(value), type(value).__name__)


def _overrides(path: Path, value: Any) -> tuple[Override, ...]:
    if value is None:
        return ()
    key = f"{TABLE}.overrides"
    if not isinstance(value, list) or not all(isinstance(entry, dict) for entry in value):
        raise ConfigError(path, key, "expected an array of tables (`[[tool.gdr-check.overrides]]`)")
    overrides: list[Override] = []
    for index, entry in enumerate(value):
        where = f"{key}[{index}]"
        _reject_unknown(path, where, entry, OVERRIDE_KEYS)
        reader = _Reader(path, entry, where)
        paths = reader.strings("paths")
        if not paths:
            raise ConfigError(path, f"{where}.paths", "required: a non-empty array of globs")
        overrides.append(Override(tuple(paths), reader.selection()))
    return tuple(overrides)


class _Reader:
    """Typed reads from one TOML table; every error names the dotted key."""

    def __init__(self, path: Path, table: Mapping[str, Any], where: str) -> None:
        self.path, self.table, self.where = path, table, where

    def fail(self, key: str, problem: str) -> ConfigError:
        return ConfigError(self.path, f"{self.where}.{key}", problem)

    def strings(self, key: str) -> list[str] | None:
        value = self.table.get(key)
        if value is None:
            return None
        if not isinstance(value, list):
            raise self.fail(key, f"expected an array of strings, got {_toml_type(value)}")
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise self.fail(key, f"expected an array of strings, got {_toml_type(item)} at index {index}")
        return value

    def string(self, key: str) -> str | None:
        value = self.table.get(key)
        if value is not None and not isinstance(value, str):
            raise self.fail(key, f"expected a string, got {_toml_type(value)}")
        return value

    def choice(self, key: str, allowed: tuple[str, ...]) -> str | None:
        value = self.string(key)
        if value is not None and value not in allowed:
            raise self.fail(key, f"unknown value {value!r}; expected one of: {', '.join(allowed)}")
        return value

    def state_dtype(self, key: str) -> str | None:
        value = self.string(key)
        problem = state_dtype_problem(value) if value is not None else None
        if problem is not None:
            raise self.fail(key, problem)
        return value

    def engine(self, key: str) -> str | None:
        """An engine profile (`vllm`, `vllm@0.28`); the error names every choice."""
        value = self.string(key)
        if value is not None:
            try:
                profile_for(value)
            except UnknownEngineError as error:
                raise self.fail(key, str(error)) from None
        return value

    def boolean(self, key: str) -> bool | None:
        value = self.table.get(key)
        if value is not None and not isinstance(value, bool):
            raise self.fail(key, f"expected true or false, got {_toml_type(value)}")
        return value

    def integer(self, key: str, *, minimum: int) -> int | None:
        value = self.table.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"expected an integer, got {_toml_type(value)}")
        name = key.replace("-", "_")
        if name in LIMITS and not LIMITS[name].allows(value):  # the range's words, as the command line says them
            raise self.fail(key, LimitError(name, value).in_file)
        if value < minimum:
            raise self.fail(key, f"must be >= {minimum}, got {shorten(value)}")
        return value

    def tp_sizes(self, key: str) -> list[int] | None:
        value = self.table.get(key)
        if value is None:
            return None
        sizes = [value] if isinstance(value, int) and not isinstance(value, bool) else value
        if not isinstance(sizes, list) or not sizes or not all(
                isinstance(size, int) and not isinstance(size, bool) for size in sizes):
            raise self.fail(key, f"expected a TP size in {LIMITS['tp'].range_text} or a non-empty array of them, "
                                 "e.g. [1, 2, 4, 8]")
        for size in sizes:  # whole numbers: one outside the range is said as the command line says it
            if not LIMITS["tp"].allows(size):
                raise self.fail(key, LimitError("tp", size).in_file)
        return sizes

    def selection(self) -> RuleSelection:
        lists = {key: self.strings(key) for key in SELECTION_KEYS}
        rules = known_rules()
        for key, values in lists.items():
            for value in values or ():
                try:
                    rule_selection([value], rules=rules)
                except SelectorError as error:
                    raise self.fail(key, str(error)) from None
        return rule_selection(lists["select"], lists["extend-select"], lists["ignore"], rules=rules)
