"""Guarded file access for the readers: the link policy, regular files only, bounded reads, a byte count.

Everything a reader opens goes through one `MetadataReader`, so the safety rules (links only where the
Hugging Face cache puts them, no FIFOs or devices, caps before reading) live in one place and `bytes_read`
counts every byte taken from disk.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from io import FileIO
from pathlib import Path

from ..base.errors import display_path
from .header_cache import HeaderCache
from .rules import (
    DanglingLinks,
    IncompleteDownloads,
    LinkLoops,
    LinksOutsideHfCacheBlobs,
    OversizedJsonFiles,
    UnreadableFiles,
)

INCOMPLETE_SUFFIX = ".incomplete"


class MetadataReader:
    """Opens a checkpoint's files under the safety rules and records what was read.

    `cache_repo` is the Hugging Face cache repo directory (`models--org--name`) when the checkpoint lives in
    the cache: only then may a checkpoint file be a link, and only into that repo's `blobs/`. With
    `follow_links` (the user's `--follow-links`: git-annex, DVC, shared storage) a link may point anywhere;
    what it points at is still opened read-only, regular files only, and read within the same caps.
    """

    def __init__(self, cache_repo: Path | None = None, named: Path | None = None, *,
                 follow_links: bool = False, metadata_cache: HeaderCache | None = None) -> None:
        self.cache_repo = cache_repo
        # Validated header and index reads kept between runs (header_cache.py); None: no cache.
        self.metadata_cache = metadata_cache
        self.follow_links = follow_links
        # The file the user named may itself be a link outside the cache: that is their choice. Links found
        # inside a checkpoint are not.
        self.named = named
        self.files_read: list[str] = []
        self.bytes_read = 0

    # -- link policy --------------------------------------------------------------------------------------
    def check_links(self, path: Path) -> None:
        """Raise unless `path` is a plain file entry or a cache link into this repo's `blobs/`."""
        if not path.is_symlink() or (path == self.named and self.cache_repo is None):
            return
        link_target = os.readlink(path)
        real = Path(os.path.realpath(path))

        def exists(candidate: Path) -> bool:
            """`candidate.exists()`, where a folder on the way that cannot be searched is said, not taken for a
            missing file."""
            if permission_denied(os.stat, candidate):
                raise UnreadableFiles(path, file=path.name, reason="permission denied (a folder on the way to "
                                                                    "where the link points cannot be searched)")
            return os.path.exists(candidate)

        blobs = Path(os.path.realpath(self.cache_repo / "blobs")) if self.cache_repo is not None else None
        if real.parent != blobs:
            if not exists(real):
                raise broken_link(path)
            if self.follow_links:
                return
            allowed = ("a Hugging Face cache snapshot (files inside a checkpoint must not be links)"
                       if self.cache_repo is None else f"`blobs/` of `{self.cache_repo.name}`")
            raise LinksOutsideHfCacheBlobs(
                path, file=path.name, link_target=link_target, allowed=allowed,
                fix="pass `--follow-links` to follow links you trust (git-annex, DVC, shared storage), or copy "
                    "the real files into the checkpoint directory",
            )
        partial = real.with_name(real.name + INCOMPLETE_SUFFIX)
        if real.name.endswith(INCOMPLETE_SUFFIX) or (not exists(real) and exists(partial)):
            blob = real if real.name.endswith(INCOMPLETE_SUFFIX) else partial
            raise IncompleteDownloads(path, file=path.name, blob=f"blobs/{blob.name}",
                fix=f"re-download `{path.name}` (run the download again; it resumes)",
            )
        if not exists(real):
            raise DanglingLinks(path, file=path.name, link_target=link_target, fix=f"re-download `{path.name}`"
            )

    # -- reading ------------------------------------------------------------------------------------------
    def open(self, path: Path) -> tuple[FileIO, int]:
        """Open a checkpoint file for reading after the link and file-type checks; returns (file, size)."""
        self.check_links(path)
        try:
            info = os.stat(path)
        except OSError as exc:
            raise UnreadableFiles(path, file=path.name, reason=_reason(exc)) from None
        # A FIFO or a device would block or never end: only regular files are read.
        if not stat.S_ISREG(info.st_mode):
            raise UnreadableFiles(path, file=path.name, reason="not a regular file",
                                  fix="replace it with the checkpoint's regular file: a FIFO, a device or a folder "
                                      "is never read")
        try:
            handle = open(path, "rb", buffering=0)
        except OSError as exc:
            raise UnreadableFiles(path, file=path.name, reason=_reason(exc)) from None
        self.files_read.append(display_path(path))
        return handle, info.st_size

    def read(self, handle: FileIO, path: Path, count: int) -> bytearray:
        """Read up to `count` bytes and add them to `bytes_read`. Callers bound `count` by the file size, so
        the buffer is allocated once, at most as large as the file."""
        buffer = bytearray(count)
        view, done = memoryview(buffer), 0
        try:
            while done < count:
                got = handle.readinto(view[done:])
                if not got:
                    break
                done += got
        except OSError as exc:
            raise UnreadableFiles(path, file=path.name, reason=_reason(exc)) from None
        finally:
            view.release()
        del buffer[done:]
        self.bytes_read += done
        return buffer

    def read_small_file(self, path: Path, limit: int, what: str, *, fix: str | None = None) -> bytearray:
        """The whole of a JSON metadata file, refusing files over `limit` bytes before reading them (GDR005, with
        `fix` as its help when given)."""
        handle, size = self.open(path)
        with handle:
            if size > limit:
                raise OversizedJsonFiles(path, what=what, size=size, limit=limit, fix=fix)
            data = self.read(handle, path, size + 1)  # +1 notices a file that grew since the size check
        if len(data) > limit:  # the file grew after the size check
            raise OversizedJsonFiles(path, what=what, size=len(data), limit=limit, fix=fix)
        return data


def broken_link(path: Path) -> DanglingLinks | LinkLoops:
    """The error for a link at `path` that reaches no file: a loop of links (the system's ELOOP), or a link to
    a missing file."""
    link_target = os.readlink(path)
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return LinkLoops(path, file=path.name, link_target=link_target,
                             fix=f"replace a link on the way with the real file, or point `{path.name}` at it")
    return DanglingLinks(path, file=path.name, link_target=link_target,
                         fix=f"fetch the file `{path.name}` stands for (`git annex get`, `dvc pull`, a re-download) "
                             "or fix the link")


def permission_denied(probe: Callable[[Path], object], path: Path) -> bool:
    """Whether `probe(path)` (`os.stat`, `os.listdir`) is refused for lack of permission: a folder on the way
    that cannot be searched, which Python 3.10/3.11's `Path` tests raise for and `os.path`'s take for a missing
    path. Any other failure is the caller's to find."""
    try:
        probe(path)
    except PermissionError:
        return True
    except (OSError, ValueError):
        pass
    return False


def _reason(exc: OSError) -> str:
    return (exc.strerror or type(exc).__name__).lower()
