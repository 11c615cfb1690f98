"""File facts shared by the readers (sources/) and the writers (capture, the CLI's report writer), kept in a
module that imports nothing of the package, so that `import gdr_check.capture` inside an engine stays small."""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from pathlib import Path

# The `kind` a recording of kernel calls declares (`gdr_check.capture()`, recording.py): JSON like a model's
# config.json, which the readers must tell apart.
RECORDING_KIND = "gdr-check-capture"

# A checkpoint's files: its config, safetensors weights and their index; pickle-based weights (reported, never
# opened); and the Hugging Face cache's folder of one model (`models--org--name`).
CONFIG_NAME = "config.json"
SAFETENSORS_SUFFIX = ".safetensors"
INDEX_SUFFIX = ".safetensors.index.json"
CHECKPOINT_SUFFIXES = (SAFETENSORS_SUFFIX, INDEX_SUFFIX)
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".bin.index.json", ".pt.index.json")
CACHE_REPO_PREFIX = "models--"


# JSON integers longer than this are not converted: Python refuses more than 4300 digits (and says so without a
# position), and no real field or recorded number is a hundredth as long.
MAX_INT_DIGITS = 4000


def bounded_int(literal: str) -> int:
    """A JSON integer literal (`json.loads(..., parse_int=bounded_int)`); past MAX_INT_DIGITS digits, a number
    of MAX_INT_DIGITS + 1 digits and the same sign stands for it: outside every limit like the literal, and
    shown as "an integer of at least ... digits"."""
    if len(literal) <= MAX_INT_DIGITS:
        return int(literal)
    stand_in: int = 10**MAX_INT_DIGITS
    return -stand_in if literal.startswith("-") else stand_in


def json_error_reason(error: json.JSONDecodeError) -> str:
    """The decoder's message as a clause of ours: lower-cased, "here" for the "at" that "Invalid control character
    at" leaves dangling (the position is given apart), and a byte-order mark named as the problem it is."""
    if error.msg.startswith("Unexpected UTF-8 BOM"):
        return "the text starts with a UTF-8 byte-order mark, which JSON does not allow"
    message = error.msg[:-3] + " here" if error.msg.endswith(" at") else error.msg
    return message[:1].lower() + message[1:]


def is_checkpoint_file_name(name: str) -> bool:
    """Whether a file of this name is part of a checkpoint: a `config.json`, a safetensors file or index."""
    return name == CONFIG_NAME or name.endswith(CHECKPOINT_SUFFIXES)


def is_cache_repo_dir(path: Path) -> bool:
    """A Hugging Face cache repository: `models--org--name` holding `snapshots/` or `refs/`."""
    # (os.path's tests answer False where the folder cannot be searched; Path's raise on Python 3.10 and 3.11)
    return path.name.startswith(CACHE_REPO_PREFIX) and any(os.path.isdir(path / name) for name in ("snapshots", "refs"))


def cache_refusal(path: Path, what: str) -> str | None:
    """Why `what` (a report, a recording) must not be written at `path` because it lies in a Hugging Face cache
    repository (a blob's name is its hash, so no name rule would catch one), or None. Links are followed."""
    target = Path(os.path.realpath(path))
    repository = next((folder for folder in target.parents if is_cache_repo_dir(folder)), None)
    if repository is None:
        return None
    return (f"it lies in the Hugging Face cache repository `{repository.name}`, whose files {what} must not "
            f"replace or add to: write the {what.split()[-1]} elsewhere")


def checkpoint_name_refusal(path: Path, what: str) -> str | None:
    """Why `what` must not be written at `path` because it, or the file a link there names, has the name of a
    checkpoint's file (it would replace one, or pose as one), or None."""
    names = (path.name, Path(os.path.realpath(path)).name)
    if not any(is_checkpoint_file_name(name) or name.endswith(PICKLE_SUFFIXES) for name in names):
        return None
    return (f"it is named as a checkpoint's file (a config or weights), which {what} must not replace or pose "
            f"as: name the {what.split()[-1]} otherwise")


def unwritable_folder(path: Path) -> str | None:
    """Why a new file at `path` could not be created because of its folder, or None: the nearest folder that
    exists (those below it are created on the way) is no directory, or cannot be written or searched."""
    folder = Path(os.path.abspath(path)).parent
    while not os.path.lexists(folder) and folder != folder.parent:
        folder = folder.parent
    if not os.path.isdir(folder):
        return f"`{folder}` is not a directory"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"`{folder}` is not writable"
    return None


def new_file_mode(existing: os.stat_result | None) -> int:
    """The mode of a file written atomically (a temporary file, renamed) where `existing` was: its mode, else what
    the umask leaves of 0o666, as `open` would give (`tempfile.mkstemp` makes 0600)."""
    if existing is not None:
        return stat.S_IMODE(existing.st_mode)
    return 0o666 & ~_umask()


def _umask() -> int:
    """The process's umask, read without setting it where Linux tells it (`os.umask` sets and restores, a window in
    which another thread of an engine would create files with the wrong mode)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0)
    os.umask(mask)
    return mask


# -- writing a file whole ----------------------------------------------------------------------------------------
def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:  # pragma: no cover - os.write raises rather than returning 0 for files
            raise OSError(errno.EIO, "short write")
        view = view[written:]


def _write_in_place(path: Path, data: bytes, flags: int = 0) -> None:
    """A device or FIFO: opened without blocking (a FIFO without a reader fails at once) and written."""
    fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | flags)
    try:
        os.set_blocking(fd, True)  # a reader is there: let it take the report at its pace
        _write_all(fd, data)
    finally:
        os.close(fd)


def _write_replacing(target: Path, data: bytes, existing: os.stat_result | None) -> None:
    folder = target.parent
    fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    try:
        try:
            _write_all(fd, data)
            if hasattr(os, "fchmod"):  # mkstemp makes 0600: keep the old report's mode, else the usual one
                os.fchmod(fd, new_file_mode(existing))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, target)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
    try:  # the rename itself is durable only once the directory is
        dir_fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


# A process's own descriptors, as paths: written in place and appended to, as a shell's `>>` would (a temporary
# file renamed over what one names would replace the file a redirection opened, and lose what it held).
_DESCRIPTOR_FOLDERS = ("/dev/fd", "/proc/self/fd")
_DESCRIPTOR_NAMES = ("/dev/stdout", "/dev/stderr")


def write_whole(path: Path, data: bytes) -> None:
    """Write `data` to `path` whole or not at all, as readers expect of a report or a recording. A link is
    followed: the file it names is written and the link stays. A regular (or new) file is written to a
    temporary file in its folder (created if missing), flushed to disk and renamed over it, keeping its mode,
    so that a full disk or an interrupted run leaves the old file as it was; a device or a FIFO is written in
    place, opened without blocking (a FIFO with no reader fails at once); a descriptor's path (`/dev/stdout`,
    `/dev/fd/N`) is appended to. Raises OSError."""
    shown = os.fspath(path)
    if shown in _DESCRIPTOR_NAMES or os.path.dirname(shown) in _DESCRIPTOR_FOLDERS:
        _write_in_place(path, data, os.O_APPEND)
        return
    target = Path(os.path.realpath(path))
    try:
        existing: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        existing = None
    if existing is not None and not stat.S_ISREG(existing.st_mode):
        _write_in_place(target, data)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    _write_replacing(target, data, existing)
