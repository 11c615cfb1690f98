"""Find a model in the local Hugging Face cache: `org/name` -> `models--org--name/snapshots/<sha>/`.

`huggingface_hub` (an optional dependency) resolves the snapshot when it is installed; it is imported only
here, only for repo ids. The layout code below is the fallback without it, and also explains *why* a
cached entry has no usable snapshot, which the hub's lookup (it returns None) does not say.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from ..base.files import CACHE_REPO_PREFIX
from ..base.limits import read_bounded
from ..base.records import dataclass
from ..base.source_error import SourceError
from .metadata_reader import MetadataReader, permission_denied
from .rules import MissingCacheRevisions, ModelNotFound, UnreadableFiles, UnresolvedCacheRevisions

REVISION = "main"
# What `org/name` (or a bare `name`) may look like; `--` and `..` are refused by the hub as well.
_REPO_ID = re.compile(r"^(?:[A-Za-z0-9][\w.-]*/)?[A-Za-z0-9][\w.-]*$")
_COMMIT = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
# A revision as `--revision` takes it: a branch or tag (may hold `/`, e.g. `refs/pr/1`) or a commit (prefix).
_REVISION = re.compile(r"^[A-Za-z0-9._-][A-Za-z0-9._/-]{0,255}$")
# Files whose presence in a snapshot tells the hub lookup where the snapshot is.
_PROBE_FILES = ("config.json", "model.safetensors.index.json", "model.safetensors")


@dataclass(frozen=True)
class CacheEntry:
    repo_id: str
    repo_dir: Path  # models--org--name: the boundary for links
    snapshot: Path  # snapshots/<sha>: the checkpoint directory
    note: str


def looks_like_repo_id(text: str) -> bool:
    """`org/name` (or `org/name@revision`, the revision not empty), as typed on a command line: one slash, no
    `--` or `..`, no path syntax."""
    repo_id, revision = split_revision(text)
    if revision == "":  # `org/name@` names no revision: not read as main
        return False
    return "/" in repo_id and bool(_REPO_ID.match(repo_id)) and "--" not in repo_id and ".." not in repo_id


def split_revision(text: str) -> tuple[str, str | None]:
    """`org/name@rev` -> (`org/name`, `rev`); the revision is None without an `@`."""
    repo_id, at, revision = text.partition("@")
    return (repo_id, revision) if at else (text, None)


def cache_root(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """`cache_dir`, else the cache `huggingface_hub` uses: `$HF_HUB_CACHE`, else `$HUGGINGFACE_HUB_CACHE` (its
    older name), else `$HF_HOME/hub`, else `$XDG_CACHE_HOME/huggingface/hub`, else `~/.cache/huggingface/hub`.

    The hub computes the same path once, when it is imported (`huggingface_hub.constants.HF_HUB_CACHE`); it
    is computed here at call time so that the environment of the call decides, and so that it works without
    the hub installed.
    """
    if cache_dir:
        return Path(cache_dir).expanduser()
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(name):
            return Path(os.environ[name]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
    return Path(xdg).expanduser() / "huggingface" / "hub"


def repo_folder(repo_id: str) -> str:
    return CACHE_REPO_PREFIX + repo_id.replace("/", "--")


def repo_id_of(repo_dir: Path) -> str:
    return repo_dir.name[len(CACHE_REPO_PREFIX):].replace("--", "/")


def enclosing_cache_repo(path: Path) -> Path | None:
    """The `models--org--name` directory when `path` is a snapshot directory or a file directly in one."""
    for candidate in (path, path.parent):
        if candidate.parent.name == "snapshots" and candidate.parent.parent.name.startswith(CACHE_REPO_PREFIX):
            return candidate.parent.parent
    return None


def resolve_repo_id(repo_id: str, reader: MetadataReader, cache_dir: str | None = None,
                    revision: str | None = None) -> CacheEntry:
    """The cached snapshot of `repo_id` (at `revision`, else `main`); `SourceError` GDR007 when the cache
    does not hold the model, GDR012 when it does not hold the revision."""
    root = cache_root(cache_dir)
    repo_dir = root / repo_folder(repo_id)
    if permission_denied(os.listdir, repo_dir):  # a cache folder that cannot be searched: not a missing model
        raise UnreadableFiles(repo_dir, file=repo_dir.name, reason="permission denied (the Hugging Face cache "
                                                                     "cannot be searched there)")
    if not repo_dir.is_dir():
        # A revision is read from the cache only: the built-in descriptions are of the released main.
        pinned = (f"; a revision (`@{revision}`) is read from the cache only, never from the built-in description"
                  if revision is not None else "")
        # The revision asked for is named with the repo: `org/name@rev` is what is missing, not `org/name`.
        asked = repo_id if revision is None else f"{repo_id}@{revision}"
        download = repo_id if revision is None else f"{repo_id} --revision {revision}"
        raise ModelNotFound(None, repo_id=asked, cache_dir=str(root),
            fix=f"download it (`hf download {download}`), or set `HF_HUB_CACHE` to the cache that holds it{pinned}",
        )
    # The hub joins the revision into a path: only a well-formed one is handed to it.
    # ... and only when the ref it reads is a small regular file: the hub reads a ref whole, so a FIFO would
    # block and a multi-GB sparse file be read in full; our reader refuses both unread (GDR0xx).
    usable = (revision is None or _usable_revision(revision)) and _ref_is_small_file(repo_dir, revision or REVISION)
    snapshot = _snapshot_via_hub(repo_id, root, revision) if usable else None
    if snapshot is None:
        return resolve_cache_repo(repo_dir, reader, repo_id=repo_id, revision=revision)
    return CacheEntry(repo_id, repo_dir, snapshot, _resolved_note(repo_id, snapshot, revision))


def resolve_cache_repo(repo_dir: Path, reader: MetadataReader, repo_id: str | None = None,
                       revision: str | None = None) -> CacheEntry:
    """The snapshot of a cache repo directory that `revision` names (a ref, a commit or a commit prefix), or
    that `refs/main` points at when no revision is asked for."""
    repo_id = repo_id or repo_id_of(repo_dir)
    if revision is not None:
        return _resolve_revision(repo_dir, reader, repo_id, revision)
    ref = repo_dir / "refs" / REVISION

    def unresolved(reason: str) -> SourceError:
        return UnresolvedCacheRevisions(repo_dir, repo=repo_id, revision=REVISION, reason=reason,
            fix=f"download the model again (`hf download {repo_id}`)",
        )

    if os.path.lexists(ref):
        snapshot = _snapshot_of_ref(repo_dir, reader, repo_id, REVISION)
        return CacheEntry(repo_id, repo_dir, snapshot, _resolved_note(repo_id, snapshot))
    # Downloads pinned to a commit write no ref; a single snapshot is then unambiguous.
    candidates = _snapshots(repo_dir)
    if len(candidates) == 1:
        note = _resolved_note(repo_id, candidates[0]) + f"; it has no `refs/{REVISION}`, so its only snapshot was used"
        return CacheEntry(repo_id, repo_dir, candidates[0], note)
    if not candidates:
        raise unresolved(f"`refs/{REVISION}` is missing and there is no snapshot")
    raise unresolved(f"`refs/{REVISION}` is missing and there are {len(candidates)} snapshots to choose from")


def _snapshots(repo_dir: Path) -> list[Path]:
    snapshots = repo_dir / "snapshots"
    try:
        return sorted(p for p in snapshots.iterdir() if p.is_dir()) if snapshots.is_dir() else []
    except OSError as exc:
        raise UnreadableFiles(snapshots, file="snapshots", reason=(exc.strerror or "error").lower()) from None


def _snapshot_of_ref(repo_dir: Path, reader: MetadataReader, repo_id: str, ref_name: str) -> Path:
    """The snapshot directory `refs/<ref_name>` points at; GDR006 when the ref or the snapshot is unusable."""
    def unresolved(reason: str) -> SourceError:
        return UnresolvedCacheRevisions(
            repo_dir, repo=repo_id, revision=ref_name, reason=reason,
            fix=f"download the model again (`hf download {repo_id}"
                + ("`)" if ref_name == REVISION else f" --revision {ref_name}`)"),
        )

    ref = repo_dir / "refs" / ref_name
    commit = reader.read_small_file(ref, 256, f"`refs/{ref_name}`").decode("utf-8", "replace").strip()
    if not _COMMIT.match(commit) or commit in (".", ".."):
        raise unresolved(f"`refs/{ref_name}` does not hold a commit hash")
    snapshot = repo_dir / "snapshots" / commit
    if not snapshot.is_dir() or snapshot.is_symlink():
        raise unresolved(f"`snapshots/{commit}` is missing")
    return snapshot


def cached_revisions(repo_dir: Path) -> dict[str, str]:
    """The refs of a cache repo (`main`, tags, other branches) -> the commit each names, sorted by name."""
    refs = repo_dir / "refs"
    found: dict[str, str] = {}
    if not refs.is_dir():
        return found
    for folder, _dirs, files in os.walk(refs):
        for name in files:
            path = Path(folder) / name
            if path.is_symlink():
                continue
            try:
                # Non-blocking, fstat-checked and capped: a FIFO or a sparse multi-GB file is skipped.
                commit = read_bounded(path, 256).decode("utf-8", "replace").strip()[:128]
            except OSError:
                continue
            found[path.relative_to(refs).as_posix()] = commit
    return dict(sorted(found.items()))


def _usable_revision(revision: str) -> bool:
    """A name that stays inside `refs/` and `snapshots/` when joined to them."""
    return bool(_REVISION.match(revision)) and not {".", ".."} & set(revision.split("/"))


def _resolve_revision(repo_dir: Path, reader: MetadataReader, repo_id: str, revision: str) -> CacheEntry:
    """`revision` as the hub reads it, in the cache alone: a ref name (branch or tag), a commit hash, or (as
    git takes it) an unambiguous prefix of one of the cached commits."""
    usable = _usable_revision(revision)
    if usable and os.path.lexists(repo_dir / "refs" / revision) and (repo_dir / "refs" / revision).is_file():
        snapshot = _snapshot_of_ref(repo_dir, reader, repo_id, revision)
        return CacheEntry(repo_id, repo_dir, snapshot, _resolved_note(repo_id, snapshot, revision))
    snapshots = _snapshots(repo_dir)
    if usable and "/" not in revision:
        exact = [s for s in snapshots if s.name == revision and not s.is_symlink()]
        prefixed = exact or [s for s in snapshots if s.name.startswith(revision) and not s.is_symlink()]
        if len(prefixed) == 1:
            return CacheEntry(repo_id, repo_dir, prefixed[0], _resolved_note(repo_id, prefixed[0], revision))
        if len(prefixed) > 1:
            raise UnresolvedCacheRevisions(
                repo_dir, repo=repo_id, revision=revision,
                reason=f"it is a prefix of {len(prefixed)} cached commits ("
                       + ", ".join(s.name[:12] for s in prefixed) + ")",
                fix="give more characters of the commit hash",
            )
    refs = cached_revisions(repo_dir)
    referenced = set(refs.values())
    available = [f"{name} ({commit[:7]})" for name, commit in refs.items()]
    available += [s.name[:7] for s in snapshots if s.name not in referenced]
    raise MissingCacheRevisions(
        None, repo_id=repo_id, revision=revision, available=", ".join(available) or "none",
        fix=f"download it (`hf download {repo_id} --revision {revision}`), or pick one of the cached revisions",
    )


def _ref_is_small_file(repo_dir: Path, ref_name: str) -> bool:
    """False when `refs/<ref_name>` exists but is not a regular file of at most 256 bytes."""
    try:
        info = os.stat(repo_dir / "refs" / ref_name)
    except (OSError, ValueError):
        return True  # no such ref (a commit hash): nothing for the hub to read
    return stat.S_ISREG(info.st_mode) and info.st_size <= 256


def _snapshot_via_hub(repo_id: str, root: Path, revision: str | None) -> Path | None:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    for filename in _PROBE_FILES:
        try:
            found = try_to_load_from_cache(repo_id, filename, cache_dir=str(root), revision=revision)
        except Exception:  # noqa: BLE001 - the hub refuses the id or the layout; the layout code explains what is wrong
            return None
        if isinstance(found, str):
            return Path(found).parent
    return None


def _resolved_note(repo_id: str, snapshot: Path, revision: str | None = None) -> str:
    named = f"{repo_id} at revision {revision}" if revision is not None else repo_id
    return f"resolved {named} in the local Hugging Face cache (snapshot {snapshot.name[:7]})"
