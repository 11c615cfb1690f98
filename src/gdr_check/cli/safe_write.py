"""The one way a report reaches a file: whole or not at all.

A regular file (or a new one) is written to a temporary file in the same directory, flushed to disk and renamed
over the target only when complete, so that a full disk, a file-size limit or an interrupted run leaves the
previous report byte for byte as it was. A target that is not a regular file (`/dev/stdout`, `/dev/null`, a
FIFO a reader holds open) is written in place, non-blocking where it may be a FIFO. Every failure is one
`ReportWriteError` naming the path and the reason.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..files import cache_refusal, checkpoint_name_refusal, new_file_mode
from ..sources.discover import checkpoint_inputs
from .errors import ReportWriteError

ENCODING = "utf-8"
# Undecodable bytes kept by surrogateescape are written as escapes, never as an encoding error.
ENCODING_ERRORS = "backslashreplace"


def _reason(failure: OSError) -> str:
    reason = failure.strerror or (os.strerror(failure.errno) if failure.errno else type(failure).__name__)
    return reason[:1].lower() + reason[1:]


def _failure(path: Path, reason: str) -> ReportWriteError:
    from .escape import text

    return ReportWriteError(f"cannot write `{text(os.fspath(path))}`: {text(reason)}")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:  # pragma: no cover - os.write raises rather than returning 0 for files
            raise OSError(errno.EIO, "short write")
        view = view[written:]


def _write_in_place(path: Path, data: bytes) -> None:
    """A device or FIFO: opened without blocking (a FIFO without a reader fails at once) and written."""
    fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
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


def _destination(path: Path, protected: Iterable[str]) -> tuple[Path, os.stat_result | None]:
    """The file a report for `path` goes to (links followed) and its stat, after every check that needs no write;
    ReportWriteError for a path a report must not or cannot take. Creates no folder."""
    # A link is followed: the report replaces the file it names, and the link stays.
    target = Path(os.path.realpath(path))
    parent = target.parent
    in_cache = cache_refusal(path, "a report")
    if in_cache is not None:
        raise _failure(path, in_cache)
    if parent.exists() and not parent.is_dir():
        raise _failure(path, f"`{path.parent}` is not a directory")
    if not parent.exists():
        blocking = next((p for p in parent.parents if p.exists() and not p.is_dir()), None)
        if blocking is not None:
            raise _failure(path, f"`{blocking}` is not a directory")
    try:
        existing: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        existing = None
    if existing is not None and stat.S_ISDIR(existing.st_mode):
        raise _failure(path, "is a directory")
    # (a usage error's record goes to -o too: these checks are here, on every way a report is written)
    if existing is not None and any(os.path.samefile(target, kept) for kept in protected if os.path.lexists(kept)):
        raise _failure(path, "it is an input of this run (named on the command line, or a file of a checkpoint "
                             "named there): write the report elsewhere")
    misnamed = checkpoint_name_refusal(path, "a report")
    if misnamed is not None:
        raise _failure(path, misnamed)
    return target, existing


def check_report_path(path: str | os.PathLike[str], protected: Iterable[str] = ()) -> None:
    """Refuse, before a long run, a report path that `write_report_file` would refuse, or whose folder cannot be
    written (ReportWriteError)."""
    path = Path(path)
    try:
        target, existing = _destination(path, protected)
        folder = next((p for p in (target.parent, *target.parent.parents) if p.exists()), None)
        writable = os.access(target if existing is not None else folder or target.parent, os.W_OK)
    except OSError as failure:
        raise _failure(path, _reason(failure)) from None
    if not writable:
        raise _failure(path, "permission denied")


def write_report_file(path: str | os.PathLike[str], content: str, protected: Iterable[str] = ()) -> None:
    """Write `content` to `path` atomically (see the module's docstring); parents are created as needed. Never over
    a file in `protected` (the run's inputs, `inputs_named`), nor to a name a checkpoint's files have, nor into a
    Hugging Face cache repository."""
    path = Path(path)
    data = content.encode(ENCODING, ENCODING_ERRORS)
    try:
        target, existing = _destination(path, protected)
        target.parent.mkdir(parents=True, exist_ok=True)
        if existing is not None and not stat.S_ISREG(existing.st_mode):
            _write_in_place(target, data)
            return
        _write_replacing(target, data, existing)
    except ReportWriteError:
        raise
    except OSError as failure:
        if failure.errno == errno.ENXIO:  # a FIFO that nobody reads
            raise _failure(path, "a FIFO with no reader") from None
        raise _failure(path, _reason(failure)) from None


def inputs_named(argv: Sequence[str]) -> frozenset[str]:
    """The files a run given `argv` may read, as far as the command line tells before it is parsed: every
    existing path it names (an option's value too: `--config`, `--model`, a recording), and for each the files
    of the checkpoint it is or lies in. The value of `-o/--output-file` itself is left out (the same path named
    as a target is not)."""
    names: list[str] = []
    after_output = False
    for arg in argv:
        if after_output:
            after_output = False
        elif arg in ("-o", "--output-file"):
            after_output = True
        elif not arg.startswith(("-o", "--output-file=")):
            names.append(arg.split("=", 1)[1] if arg.startswith("--") and "=" in arg else arg)
    found: set[str] = set()
    for name in names:
        if name and (os.path.isfile(name) or os.path.isdir(name)):
            found.update({name, *checkpoint_inputs(name)})
    return frozenset(path for path in found if os.path.isfile(path))
