"""Find a model in the local Hugging Face cache: `org/name` -> `models--org--name/snapshots/<sha>/`.

`huggingface_hub` (an optional dependency) resolves the snapshot when it is installed; it is imported only
here, only for repo ids. The layout code below is the fallback without it, and also explains *why* a
cached entry has no usable snapshot, which the hub's lookup (it returns None) does not say.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..checks.rules_source import (
    ModelNotFound,
    UnreadableFiles,
    UnresolvedCacheRevisions,
)
from .errors import SourceError
from .files import MetadataReader

REPO_PREFIX = "models--"
REVISION = "main"
# What `org/name` (or a bare `name`) may look like; `--` and `..` are refused by the hub as well.
_REPO_ID = re.compile(r"^(?:[A-Za-z0-9][\w.-]*/)?[A-Za-z0-9][\w.-]*$")
_COMMIT = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
# Files whose presence in a snapshot tells the hub lookup where the snapshot is.
_PROBE_FILES = ("config.json", "model.safetensors.index.json", "model.safetensors")


@dataclass(frozen=True)
class CacheEntry:
    repo_id: str
    repo_dir: Path  # models--org--name: the boundary for links
    snapshot: Path  # snapshots/<sha>: the checkpoint directory
    note: str


def looks_like_repo_id(text: str) -> bool:
    """`org/name`, as typed on a command line: one slash, no `--` or `..`, no path syntax."""
    return "/" in text and bool(_REPO_ID.match(text)) and "--" not in text and ".." not in text


def cache_root(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """`cache_dir`, else `$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `~/.cache/huggingface/hub` (read now,
    not at import, so the environment at call time decides)."""
    if cache_dir:
        return Path(cache_dir).expanduser()
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
    return Path(xdg).expanduser() / "huggingface" / "hub"


def repo_folder(repo_id: str) -> str:
    return REPO_PREFIX + repo_id.replace("/", "--")


def repo_id_of(repo_dir: Path) -> str:
    return repo_dir.name[len(REPO_PREFIX):].replace("--", "/")


def is_cache_repo_dir(path: Path) -> bool:
    return path.name.startswith(REPO_PREFIX) and ((path / "snapshots").is_dir() or (path / "refs").is_dir())


def enclosing_cache_repo(path: Path) -> Path | None:
    """The `models--org--name` directory when `path` is a snapshot directory or a file directly in one."""
    for candidate in (path, path.parent):
        if candidate.parent.name == "snapshots" and candidate.parent.parent.name.startswith(REPO_PREFIX):
            return candidate.parent.parent
    return None


def resolve_repo_id(repo_id: str, reader: MetadataReader, cache_dir: str | None = None) -> CacheEntry:
    """The cached snapshot of `repo_id`; `SourceError` GDR007 when the cache does not hold it."""
    root = cache_root(cache_dir)
    repo_dir = root / repo_folder(repo_id)
    if not repo_dir.is_dir():
        raise ModelNotFound(None, repo_id=repo_id, cache_dir=str(root),
            fix=f"download it (`hf download {repo_id}`), or set `HF_HUB_CACHE` to the cache that holds it",
        )
    snapshot = _snapshot_via_hub(repo_id, root)
    if snapshot is None:
        return resolve_cache_repo(repo_dir, reader, repo_id=repo_id)
    return CacheEntry(repo_id, repo_dir, snapshot, _resolved_note(repo_id, snapshot))


def resolve_cache_repo(repo_dir: Path, reader: MetadataReader, repo_id: str | None = None) -> CacheEntry:
    """The snapshot that `refs/main` of a cache repo directory points at."""
    repo_id = repo_id or repo_id_of(repo_dir)
    snapshots = repo_dir / "snapshots"
    ref = repo_dir / "refs" / REVISION

    def unresolved(reason: str) -> SourceError:
        return UnresolvedCacheRevisions(repo_dir, repo=repo_id, revision=REVISION, reason=reason,
            fix=f"download the model again (`hf download {repo_id}`)",
        )

    if os.path.lexists(ref):
        commit = reader.read_small_file(ref, 256, f"`refs/{REVISION}`").decode("utf-8", "replace").strip()
        if not _COMMIT.match(commit) or commit in (".", ".."):
            raise unresolved(f"`refs/{REVISION}` does not hold a commit hash")
        snapshot = snapshots / commit
        if not snapshot.is_dir() or snapshot.is_symlink():
            raise unresolved(f"`snapshots/{commit}` is missing")
        return CacheEntry(repo_id, repo_dir, snapshot, _resolved_note(repo_id, snapshot))
    # Downloads pinned to a commit write no ref; a single snapshot is then unambiguous.
    try:
        candidates = sorted(p for p in snapshots.iterdir() if p.is_dir()) if snapshots.is_dir() else []
    except OSError as exc:
        raise UnreadableFiles(snapshots, file="snapshots", reason=(exc.strerror or "error").lower()) from None
    if len(candidates) == 1:
        note = _resolved_note(repo_id, candidates[0]) + f"; it has no `refs/{REVISION}`, so its only snapshot was used"
        return CacheEntry(repo_id, repo_dir, candidates[0], note)
    if not candidates:
        raise unresolved(f"`refs/{REVISION}` is missing and there is no snapshot")
    raise unresolved(f"`refs/{REVISION}` is missing and there are {len(candidates)} snapshots to choose from")


def _snapshot_via_hub(repo_id: str, root: Path) -> Path | None:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    for filename in _PROBE_FILES:
        try:
            found = try_to_load_from_cache(repo_id, filename, cache_dir=str(root))
        except Exception:  # the hub refuses the id or the layout; the layout code explains what is wrong
            return None
        if isinstance(found, str):
            return Path(found).parent
    return None


def _resolved_note(repo_id: str, snapshot: Path) -> str:
    return f"resolved {repo_id} in the local Hugging Face cache (snapshot {snapshot.name[:7]})"
