"""The one way a report reaches a file: whole or not at all, and never where a report must not go.

The path is checked first (`check_report_path` runs the same checks before a long run): not into a Hugging Face
cache repository, not over an input of the run, not under a checkpoint file's name, not a directory. Then
`files.write_whole` writes it: a regular file (or a new one) through a temporary file in the same directory,
flushed and renamed over it only when complete, so that a full disk, a file-size limit or an interrupted run
leaves the previous report byte for byte as it was; a device or a FIFO (`/dev/null`, a FIFO a reader holds
open) in place. (`-o -` and `-o /dev/stdout` are standard output: `output.report_path`.) Every failure is one
`ReportWriteError` naming the path and the reason.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..base.files import cache_refusal, missing_folder_refusal, reserved_name_refusal, write_problem, write_whole
from ..sources.discover import checkpoint_inputs
from .escape import text
from .write_errors import ReportWriteError

ENCODING = "utf-8"
# Undecodable bytes kept by surrogateescape are written as escapes, never as an encoding error.
ENCODING_ERRORS = "backslashreplace"


def _reason(failure: OSError) -> str:
    reason = failure.strerror or (os.strerror(failure.errno) if failure.errno else type(failure).__name__)
    return reason[:1].lower() + reason[1:]


def _failure(path: Path, reason: str) -> ReportWriteError:
    return ReportWriteError(f"cannot write `{text(os.fspath(path))}`: {text(reason)}")


def _refuse_destination(path: Path, protected: Iterable[str], found: Iterable[str] = ()) -> None:
    """ReportWriteError for a path a report must not or cannot take, by every check that needs no write: its
    folder must exist (none is created). `protected`: the inputs the command line names; `found`: what the run
    found or read beyond them (after the check of a reserved name, which says more)."""
    # A link is followed: the report replaces the file it names, and the link stays.
    target = Path(os.path.realpath(path))
    in_cache = cache_refusal(path, "a report")
    if in_cache is not None:
        raise _failure(path, in_cache)
    # As a shell's `>`: a mistyped folder is an error, not a tree made anywhere (the Action makes its own).
    missing = missing_folder_refusal(path)
    if missing is not None:
        raise _failure(path, missing)
    try:
        existing: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        existing = None
    if existing is not None and stat.S_ISDIR(existing.st_mode):
        raise _failure(path, "is a directory")
    # (a usage error's record goes to -o too: these checks are here, on every way a report is written)
    if existing is not None and _is_one_of(target, protected):
        raise _failure(path, _INPUT)
    misnamed = reserved_name_refusal(path, "a report")
    if misnamed is not None:
        raise _failure(path, misnamed)
    if existing is not None and _is_one_of(target, found):
        raise _failure(path, _INPUT)


_INPUT = ("it is an input of this run (named on the command line, a file of a checkpoint named or found there, or a "
          "settings file it read): write the report elsewhere")


def _is_one_of(target: Path, paths: Iterable[str]) -> bool:
    """Whether `target` is one of `paths` by device and inode: through any name, a hard link included."""
    return any(os.path.samefile(target, kept) for kept in paths if os.path.lexists(kept))


def check_report_path(path: str | os.PathLike[str], protected: Iterable[str] = (), found: Iterable[str] = ()) -> None:
    """Refuse, before a long run, a report path that `write_report_file` would refuse, or whose folder cannot be
    written (ReportWriteError)."""
    path = Path(path)
    try:
        _refuse_destination(path, protected, found)
        problem = write_problem(path)
    except OSError as failure:
        raise _failure(path, _reason(failure)) from None
    if problem is not None:
        raise _failure(path, problem)


def write_report_file(path: str | os.PathLike[str], content: str, protected: Iterable[str] = (),
                      found: Iterable[str] = ()) -> None:
    """Write `content` to `path` atomically (see the module's docstring), into a folder that exists. Never over
    a file in `protected` (the run's inputs, `inputs_named`), nor to a name a checkpoint's files have, nor into a
    Hugging Face cache repository."""
    path = Path(path)
    data = content.encode(ENCODING, ENCODING_ERRORS)
    try:
        _refuse_destination(path, protected, found)
        write_whole(path, data)
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
