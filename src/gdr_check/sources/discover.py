"""Find the checkpoints below a directory, as ruff finds Python files: `gdr-check .`, `gdr-check models/`.

A checkpoint directory (one holding a `config.json`, a `.safetensors` file or a safetensors index, or a
Hugging Face cache entry `models--org--name`) is one target: its own subdirectories are not searched. Hidden
directories, virtualenvs, `node_modules`, `__pycache__` and the other directories ruff skips by default are not
entered, nor is anything an exclude pattern matches. The order is sorted, so runs are deterministic.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path, PurePosixPath

from ..base.errors import display_path
from ..base.files import CACHE_REPO_PREFIX, is_checkpoint_file_name
from ..base.records import dataclass
from ..base.source_error import SourceError
from .rules import UnreadableFiles, UnrecognizedInputs

# ruff's default `exclude`, plus `__pycache__`: directories that never hold a model of the project's own.
DEFAULT_EXCLUDES = (
    ".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".ipynb_checkpoints", ".mypy_cache", ".nox",
    ".pants.d", ".pyenv", ".pytest_cache", ".pytype", ".ruff_cache", ".svn", ".tox", ".venv", ".vscode",
    "__pycache__", "__pypackages__", "_build", "buck-out", "dist", "node_modules", "site-packages", "venv",
)

# Hugging Face cache entries that are not models: their snapshots hold data sets and apps, never a checkpoint.
OTHER_CACHE_ENTRIES = ("datasets--", "spaces--")


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
    # (os.path's tests answer False where the folder cannot be searched; Path's raise on Python 3.10 and 3.11)
    if directory.name.startswith(CACHE_REPO_PREFIX) and os.path.isdir(directory / "snapshots"):
        return True
    try:
        names = os.listdir(directory)
    except OSError:
        return False
    return any(map(is_checkpoint_file_name, names))


def checkpoint_inputs(target: str) -> list[str]:
    """The files a check of `target` reads, as far as a listing tells: a directory's `config.json`, safetensors
    files and indexes; for a named file, the same in its directory. Empty for what is no path (a repo id)."""
    if not os.path.lexists(target):
        return []
    named = [] if os.path.isdir(target) else [target]
    directory = target if not named else os.path.dirname(target) or "."
    try:
        names = os.listdir(directory)
    except OSError:
        return named
    return [os.path.join(directory, name) for name in names if is_checkpoint_file_name(name)] + named


def is_default_excluded(directory: Path) -> bool:
    """Hidden directories, ruff's default excludes, and virtualenvs by their `pyvenv.cfg`."""
    return is_excluded(directory)


def find_checkpoints(
    directory: str | os.PathLike[str], *, excluded: Callable[[Path], bool] = is_default_excluded,
    follow_links: bool = False, on_unsearchable: Callable[[str], None] | None = None,
) -> list[str]:
    """Every checkpoint directory at or below `directory`, sorted, as paths spelled from `directory`.

    `excluded(path)` decides which subdirectories are skipped (the starting directory itself is always
    searched: the user named it). Linked directories are entered only with `follow_links`, and a directory is
    never entered twice (a link cycle ends there). Raises `SourceError` GDR002 when nothing is found, GDR004
    when `directory` itself cannot be searched. A folder below it that cannot be searched (permission denied)
    is skipped and passed to `on_unsearchable`, as spelled from `directory`, for the caller to say so.
    """
    start = os.fspath(directory)
    found: list[str] = []
    seen: set[str] = set()
    skipped = 0
    unsearchable = 0

    # Depth first, each folder's entries in name order, as a recursive walk would go; with a stack of its own, so
    # that a tree thousands of folders deep costs no recursion.
    # Each entry carries its real path: a folder that is no link is its real parent's real path and its name,
    # so only links are resolved (resolving every folder anew costs a system call per part of its path: the
    # square of the depth).
    pending: list[tuple[Path, str, str]] = [(Path(start), start, os.path.realpath(start))]
    while pending:
        path, spelled, real = pending.pop()
        if real in seen:
            continue
        seen.add(real)
        if is_checkpoint_dir(path):
            found.append(spelled)
            continue
        try:
            entries = sorted(os.scandir(path), key=lambda entry: entry.name)
        except PermissionError:
            if spelled == start:  # the folder named: say so (one found below is skipped)
                raise UnreadableFiles(start, file=display_path(start),
                                      reason="permission denied (the folder cannot be searched)") from None
            unsearchable += 1
            if on_unsearchable is not None:
                on_unsearchable(spelled)
            continue
        except OSError:
            continue
        children: list[tuple[Path, str, str]] = []
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
            children.append((child, os.path.normpath(os.path.join(spelled, entry.name)),
                             os.path.realpath(child) if entry.is_symlink() else os.path.join(real, entry.name)))
        pending.extend(reversed(children))

    if not found:
        notes = [f"{skipped} excluded director{'y' if skipped == 1 else 'ies'} not searched"] if skipped else []
        if unsearchable:
            notes.append(f"{unsearchable} director{'y' if unsearchable == 1 else 'ies'} could not be searched: "
                         "permission denied")
        also = f" ({'; '.join(notes)})" if notes else ""
        raise UnrecognizedInputs(
            start, path=display_path(start),
            reason=f"no `config.json`, `.safetensors` file or safetensors index in it or below it{also}",
        )
    return found


def is_excluded(path: Path, *, exclude: ExcludePatterns | None = None,
                extend: Sequence[ExcludePatterns] = ()) -> bool:
    """ruff's rule for a directory met while searching: hidden directories, virtualenvs and the Hugging Face
    cache entries of data sets and spaces always; then `exclude` when given (it replaces the default list), else
    `DEFAULT_EXCLUDES`; then every `extend` set."""
    if path.name.startswith((".", *OTHER_CACHE_ENTRIES)) or os.path.isfile(path / "pyvenv.cfg"):
        return True
    if exclude is not None:
        if exclude.matches(path):
            return True
    elif path.name in DEFAULT_EXCLUDES:
        return True
    return any(patterns.matches(path) for patterns in extend)


def expand_targets(paths: Iterable[str], excluded: Callable[[Path], bool] = is_default_excluded, *,
                   force_exclude: bool = False, follow_links: bool = False,
                   on_unsearchable: Callable[[str], None] | None = None) -> tuple[list[str], dict[str, SourceError]]:
    """The targets to check for the paths a user named: a directory that is not a checkpoint stands for the
    checkpoints below it. Returns the targets, without repeats, and those that failed (a directory with no
    checkpoint below it: its `SourceError`, to report in its place). As in ruff, a path named explicitly is
    checked even when excluded, unless `force_exclude` (what pre-commit needs, since it names every file).
    `on_unsearchable`: see `find_checkpoints`; called once per folder, however many targets lie above it."""
    targets: list[str] = []
    failed: dict[str, SourceError] = {}
    said: set[str] = set()

    def unsearchable_once(folder: str) -> None:  # targets that overlap meet the same folder again
        if on_unsearchable is not None and os.path.realpath(folder) not in said:
            said.add(os.path.realpath(folder))
            on_unsearchable(folder)

    for path in paths:
        if not os.path.lexists(path):
            targets.append(path)  # a repo id, or a path that does not exist (reported when checked)
        elif os.path.isdir(path) and not is_checkpoint_dir(Path(path)):
            try:
                targets.extend(find_checkpoints(path, excluded=excluded, follow_links=follow_links,
                                                on_unsearchable=unsearchable_once))
            except SourceError as error:
                targets.append(path)
                failed[path] = error
        elif not (force_exclude and _excluded_with_parents(Path(os.path.abspath(path)), excluded)):
            targets.append(path)
    return list(dict.fromkeys(targets)), failed


def _excluded_with_parents(path: Path, excluded: Callable[[Path], bool]) -> bool:
    """A named path is excluded when it or a directory above it is (up to the working directory)."""
    cwd = Path(os.getcwd())
    for candidate in (path, *path.parents):
        if candidate == cwd or candidate == candidate.parent:
            break
        if excluded(candidate):
            return True
    return False
