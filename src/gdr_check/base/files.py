"""File facts shared by the readers (sources/) and the writers (capture, the CLI's report writer), kept in a
module that imports nothing of the package, so that `import gdr_check.capture` inside an engine stays small."""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

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
PYPROJECT_NAME = "pyproject.toml"  # where `[tool.gdr-check]` settings live


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


# A run of more than MAX_INT_DIGITS digits, looked for in the text's UTF-8 bytes with every ASCII digit mapped to
# b"0" and every other byte to b" " (UTF-8 uses the bytes 0x30-0x39 for those digits alone): a C-level translation
# and substring search, linear in the text whatever its numbers. (A look-behind regex did the same at ~35 ns a
# character: a quarter of a second for a 41-shard checkpoint's 7 MB index.)
_DIGITS_AS_ZEROS = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
_LONG_RUN = b"0" * (MAX_INT_DIGITS + 1)


def has_long_digit_run(text: str, raw: bytes | bytearray | None = None) -> bool:
    """Whether `text` holds more than MAX_INT_DIGITS ASCII digits in a row (in a string or a number); `raw`, when
    given, is `text`'s UTF-8 encoding (the bytes it was decoded from), which saves encoding it again."""
    if len(text) <= MAX_INT_DIGITS:
        return False
    data = text.encode("utf-8", "surrogatepass") if raw is None else raw
    return _LONG_RUN in data.translate(_DIGITS_AS_ZEROS)


def loads_bounded(text: str, raw: bytes | bytearray | None = None) -> Any:
    """`json.loads(text)` with integers bounded as `bounded_int` bounds them. The decoder calls `parse_int` once
    per integer (a config's array of millions of numbers took seconds in those calls): it is given only when the
    text holds a digit run that long at all (in a string or a number), else the decoder converts in C. `raw`: as
    for `has_long_digit_run`."""
    if not has_long_digit_run(text, raw):
        return json.loads(text)
    return json.loads(text, parse_int=bounded_int)


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


def reserved_name_refusal(path: Path, what: str) -> str | None:
    """Why `what` must not be written at `path` because it, or the file a link there names, has the name of a
    file the tool reads (it would replace one, or pose as one): a checkpoint's, or the settings' `pyproject.toml`.
    None otherwise."""
    names = (path.name, Path(os.path.realpath(path)).name)
    if PYPROJECT_NAME in names:
        return (f"it is named as the settings' file (`{PYPROJECT_NAME}`), which {what} must not replace or pose as: "
                f"name the {what.split()[-1]} otherwise")
    if not any(is_checkpoint_file_name(name) or name.endswith(PICKLE_SUFFIXES) for name in names):
        return None
    return (f"it is named as a checkpoint's file (a config or weights), which {what} must not replace or pose "
            f"as: name the {what.split()[-1]} otherwise")


def unwritable_folder(path: Path) -> str | None:
    """Why a new file at `path` (a link followed) could not be created because of its folder, or None: the folder
    is missing or no directory (`missing_folder_refusal`: none is created), or cannot be written or searched."""
    missing = missing_folder_refusal(path)
    if missing is not None:
        return missing
    folder = Path(os.path.realpath(path)).parent
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"`{folder}` is not writable"
    return None


def missing_folder_refusal(path: Path) -> str | None:
    """Why a file at `path` cannot be written because its folder is missing or is no directory (none is created,
    as a shell's `>` creates none), or None. The words of `-o`'s and `gdr_check.capture`'s refusals."""
    # A link is followed: the file it names is written, in its own folder.
    parent = Path(os.path.realpath(path)).parent
    if parent.exists() and not parent.is_dir():
        return f"`{path.parent}` is not a directory"
    if not parent.exists():
        blocking = next((p for p in parent.parents if p.exists() and not p.is_dir()), None)
        if blocking is not None:
            return f"`{blocking}` is not a directory"
        shown = path.parent if os.path.realpath(path.parent) == os.fspath(parent) else parent
        return f"folder `{shown}` does not exist"
    return None


def empty_path_refusal(given: str, what: str) -> str | None:
    """Why `given` names no file for `what` ("a report") because it is empty (a whole sentence), or None."""
    return None if given else f"an empty path names no {what.split()[-1]} file"


def folder_name_refusal(given: str, what: str) -> str | None:
    """Why `given`, a path as written, names no file for `what` ("a report"): it ends with a slash, so it names a
    folder, which `Path()` would turn into a file of the folder's name; or None. Worded to follow its subject."""
    if given.endswith(("/", os.sep)):
        return f"ends with a slash, so it names a folder: name the {what.split()[-1]}'s file"
    return None


def write_problem(path: Path) -> str | None:
    """Why `write_whole` would refuse or fail to write `path`, as far as can be told without writing, or None: a
    file that exists must be writable (it is written, in place or replaced); a new one needs a folder that takes
    it."""
    if os.path.exists(path):
        return None if os.access(path, os.W_OK) else "permission denied"
    return unwritable_folder(path)


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
    """Open `path` for writing (without blocking: a FIFO with no reader fails at once) and write `data`."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | flags)
    except OSError as error:
        if error.errno == errno.ENXIO:
            raise OSError(errno.ENXIO, "a FIFO with no reader", os.fspath(path)) from None
        raise
    try:
        os.set_blocking(fd, True)  # a reader is there: let it take the text at its pace
        _write_all(fd, data)
    finally:
        os.close(fd)


def _write_replacing(target: Path, data: bytes, existing: os.stat_result | None) -> None:
    folder = target.parent
    # (the name's start only: a temporary name longer than a 255-byte name allowed would fail)
    fd, temporary = tempfile.mkstemp(prefix=f".{target.name[:64]}.", suffix=".tmp", dir=folder)
    try:
        try:
            _write_all(fd, data)
            if hasattr(os, "fchmod"):  # mkstemp makes 0600: keep the old file's mode, else the usual one
                os.fchmod(fd, new_file_mode(existing))
            if existing is not None and hasattr(os, "fchown") and os.geteuid() == 0:
                os.fchown(fd, existing.st_uid, existing.st_gid)  # root replacing another user's file: still theirs
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


def _standard_stream(status: os.stat_result) -> bool:
    """Whether `status` is this process's standard output or error, whatever the path that led to it
    (`/dev/stdout`, `/dev/fd/1`, a link to either, or the file a redirection opened)."""
    for descriptor in (1, 2):
        try:
            stream = os.fstat(descriptor)
        except OSError:
            continue
        if (stream.st_dev, stream.st_ino) == (status.st_dev, status.st_ino):
            return True
    return False


def write_whole(path: Path, data: bytes) -> None:
    """Write `data` to `path` whole or not at all, as readers expect of a report or a recording. Raises OSError.

    - A link is followed: the file it names is written and the link stays.
    - A regular (or new) file is written to a temporary file in its folder (which must exist), flushed and
      renamed over it, keeping its mode (and, for root, its owner): a full disk or an interrupted run leaves the
      old file as it was.
    - A read-only file is refused, as a shell's `>` would refuse it. A file the rename cannot replace although
      it may be written (its folder is read-only, sticky and another user's, or takes no new file, as /proc) or
      that has other hard links is written in place: not atomic, but the file stays the one it was.
    - A device or a FIFO is written in place; standard output or error (`/dev/stdout`, the file a redirection
      opened) is appended to, as a shell's `>>` would."""
    try:
        existing: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        existing = None
    if existing is not None and _standard_stream(existing):
        _write_in_place(path, data, os.O_APPEND)
        return
    target = Path(os.path.realpath(path))
    if existing is not None and not stat.S_ISREG(existing.st_mode):
        _write_in_place(target, data)
        return
    if existing is not None and not os.access(target, os.W_OK):
        raise PermissionError(errno.EACCES, "permission denied", os.fspath(path))
    if existing is not None and (existing.st_nlink > 1 or not os.access(target.parent, os.W_OK | os.X_OK)):
        _write_in_place(target, data, os.O_TRUNC)
        return
    try:
        _write_replacing(target, data, existing)
    except (PermissionError, FileNotFoundError):
        # A sticky folder (/tmp) keeps another user's file from being renamed over; a folder that takes no new
        # file (/proc, /sys: ENOENT for the temporary one) is none of the file's business. Either way the file
        # is written in place, and its own error (EIO for /proc/version) is the one reported.
        if existing is None:
            raise
        _write_in_place(target, data, os.O_TRUNC)
