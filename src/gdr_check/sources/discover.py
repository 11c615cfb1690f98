"""Find the checkpoints below a directory, as ruff finds Python files: `gdr-check .`, `gdr-check models/`.

A checkpoint directory (one holding a `config.json`, a `.safetensors` file or a safetensors index, or a
Hugging Face cache entry `models--org--name`) is one target: its own subdirectories are not searched. Hidden
directories, virtualenvs, `node_modules`, `__pycache__` and the other directories ruff skips by default are not
entered, nor is anything an exclude pattern matches. The order is sorted, so runs are deterministic.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Callable, Iterable

from .errors import SourceError, display_path
from .hf_cache import REPO_PREFIX

CONFIG_NAME = "config.json"
CHECKPOINT_SUFFIXES = (".safetensors", ".safetensors.index.json")
# ruff's default `exclude`, plus `__pycache__`: directories that never hold a model of the project's own.
DEFAULT_EXCLUDES = (
    ".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".ipynb_checkpoints", ".mypy_cache", ".nox",
    ".pants.d", ".pyenv", ".pytest_cache", ".pytype", ".ruff_cache", ".svn", ".tox", ".venv", ".vscode",
    "__pycache__", "__pypackages__", "_build", "buck-out", "dist", "node_modules", "site-packages", "venv",
)


@dataclass(frozen=True)
class ExcludePatterns:
    """Exclude globs, each relative to `base` (the working directory for `--exclude`, the pyproject's
    directory for its `exclude`). As in ruff, a pattern matches a path relative to `base` or a file name, and a
    directory that matches excludes everything below it."""

    patterns: tuple[str, ...]
    base: Path

    def matches(self, path: Path) -> bool:
        if not self.patterns:
            return False
        try:
            relative = PurePosixPath(Path(os.path.abspath(path)).relative_to(self.base).as_posix())
        except ValueError:
            relative = None
        names = [path.name]
        if relative is not None and str(relative) != ".":
            names += [str(relative), *(str(parent) for parent in relative.parents if str(parent) != ".")]
            names += [part for part in relative.parts]
        for pattern in self.patterns:
            glob = pattern.rstrip("/")
            if glob.startswith("./"):
                glob = glob[2:]
            if any(fnmatch.fnmatchcase(name, glob) for name in names):
                return True
        return False


def is_checkpoint_dir(directory: Path) -> bool:
    """A directory that is one checkpoint: it holds a config.json, a safetensors file or index, or is a
    Hugging Face cache entry."""
    if directory.name.startswith(REPO_PREFIX) and (directory / "snapshots").is_dir():
        return True
    try:
        names = os.listdir(directory)
    except OSError:
        return False
    return any(name == CONFIG_NAME or name.endswith(CHECKPOINT_SUFFIXES) for name in names)


def is_default_excluded(directory: Path) -> bool:
    """Hidden directories, ruff's default excludes, and virtualenvs by their `pyvenv.cfg`."""
    name = directory.name
    return name.startswith(".") or name in DEFAULT_EXCLUDES or (directory / "pyvenv.cfg").is_file()


def find_checkpoints(
    directory: str | os.PathLike[str], *, excluded: Callable[[Path], bool] = is_default_excluded,
    follow_links: bool = False,
) -> list[str]:
    """Every checkpoint directory at or below `directory`, sorted, as paths spelled from `directory`.

    `excluded(path)` decides which subdirectories are skipped (the starting directory itself is always
    searched: the user named it). Linked directories are entered only with `follow_links`, and a directory is
    never entered twice (a link cycle ends there). Raises `SourceError` GDR002 when nothing is found.
    """
    start = os.fspath(directory)
    found: list[str] = []
    seen: set[str] = set()
    skipped = 0

    def walk(path: Path, spelled: str) -> None:
        nonlocal skipped
        real = os.path.realpath(path)
        if real in seen:
            return
        seen.add(real)
        if is_checkpoint_dir(path):
            found.append(spelled)
            return
        try:
            entries = sorted(os.scandir(path), key=lambda entry: entry.name)
        except OSError:
            return
        for entry in entries:
            try:
                if not entry.is_dir(follow_symlinks=True):
                    continue
            except OSError:
                continue
            child = Path(entry.path)
            if entry.is_symlink() and not follow_links:
                continue
            if excluded(child):
                skipped += 1
                continue
            walk(child, os.path.join(spelled, entry.name) if spelled not in (".", "./") else entry.name)

    walk(Path(start), start)
    if not found:
        also = f" ({skipped} excluded director{'y' if skipped == 1 else 'ies'} not searched)" if skipped else ""
        raise SourceError(
            "GDR002", start, path=display_path(start),
            reason=f"no `config.json`, `.safetensors` file or safetensors index in it or below it{also}",
        )
    return found


def combine(*tests: Callable[[Path], bool] | None) -> Callable[[Path], bool]:
    """One exclusion test from several: a path is excluded when any of them excludes it."""
    active = [test for test in tests if test is not None]
    return lambda path: any(test(path) for test in active)


def patterns_test(pattern_sets: Iterable[ExcludePatterns]) -> Callable[[Path], bool]:
    sets = [patterns for patterns in pattern_sets if patterns.patterns]
    return lambda path: any(patterns.matches(path) for patterns in sets)
