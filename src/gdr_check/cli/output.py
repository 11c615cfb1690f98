"""One output sink: report data to stdout (or --output-file), errors and hints to stderr.

Machine formats are written with plain writes, never through rich, which hard-wraps long lines when
stdout is not a terminal. A run that cannot complete still writes a record in the selected format
(a JSON document, a JSON line, a SARIF log, an `::error`, a JUnit error, a GitLab issue), to the output file when one is
named, so that the next CI step always finds something it can parse.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import typer

from ..base.files import cache_refusal, empty_path_refusal, folder_name_refusal, reserved_name_refusal
from ..pipeline.results import FatalError
from .escape import neutralise_log, text
from .formats import FORMATS, format_module
from .safe_write import check_report_path, inputs_named, write_report_file
from .write_errors import ReportWriteError

FORMAT_ENV = "GDR_CHECK_OUTPUT_FORMAT"
OUTPUT_FILE_ENV = "GDR_CHECK_OUTPUT_FILE"
STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"


def _option_value(argv: Sequence[str], names: tuple[str, ...]) -> str | None:
    """The last value given to one of `names` (`--name VALUE`, `--name=VALUE`, `-n VALUE` or `-nVALUE`, as
    click reads them), read before parsing."""
    chosen = None
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if arg in names and i + 1 < len(argv):
            chosen = argv[i + 1]
        for name in names:
            if name.startswith("--") and arg.startswith(name + "="):
                chosen = arg.split("=", 1)[1]
            elif not name.startswith("--") and arg.startswith(name) and not arg.startswith("--") and arg != name:
                chosen = arg[len(name):]
    return chosen


EXPLAIN_FORMATS = ("full", "json")  # what `explain` writes
LAUNCH_FORMATS = ("full", "json")  # what `launch` writes
# The commands that write only some formats and take no report file: a usage error of theirs is written in one of
# their formats (a run that asked for another left a SARIF document on stdout beside "unknown format 'sarif'").
_FEW_FORMATS = {"explain": EXPLAIN_FORMATS, "launch": LAUNCH_FORMATS}


def output_format_from_argv(argv: Sequence[str]) -> str:
    """The requested format, read before parsing so that usage errors honour it too."""
    chosen = _option_value(argv, ("--output-format",)) or os.environ.get(FORMAT_ENV, "full")
    return chosen if chosen in FORMATS else "full"


def output_file_from_argv(argv: Sequence[str]) -> str | None:
    """The report file, read before parsing so that usage errors honour it too (None: stdout, also for a path
    `report_path` would refuse)."""
    chosen = _option_value(argv, ("--output-file", "-o"))
    if chosen is None:  # an empty -o is the command line's (refused), not the environment's turn
        chosen = os.environ.get(OUTPUT_FILE_ENV) or None
    return None if chosen is None or chosen in _STDOUT_NAMES or report_path_problem(chosen) else chosen


# Names of standard output: the report is written to it as without -o (a file a redirection opened is appended
# to by the shell's rules, never replaced, and the report keeps its place among the run's other output).
_STDOUT_NAMES = ("-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1")


def report_path(value: str | os.PathLike[str] | None) -> Path | None:
    """`-o`'s value as given (the options take it as a string: a Path would drop a trailing slash): `-` (or
    `/dev/stdout`) is stdout, as for most command-line tools (not a file named `-`); an empty path or a folder's
    is refused."""
    if value is None:
        return None
    given = os.fspath(value)
    problem = report_path_problem(given)
    if problem is not None:
        from_command_line = _option_value(_RUN_ARGV, ("--output-file", "-o")) is not None
        raise typer.BadParameter(problem, param_hint="--output-file" if from_command_line else OUTPUT_FILE_ENV)
    return None if given in _STDOUT_NAMES else Path(given)


def report_path_problem(given: str) -> str | None:
    """Why `given` names no report file, or None: it is empty, or it ends with a slash, so it names a folder
    (which Path() would turn into a file of the folder's name)."""
    empty = empty_path_refusal(given, "a report")
    if empty is not None:
        return empty
    folder = folder_name_refusal(given, "a report")
    return None if folder is None else f"`{text(given)}` {folder}"


# The command line of the CLI run, whose inputs no report may replace (`safe_write.inputs_named`, worked out
# only when a report file is written), set once per run by `main`.
_RUN_ARGV: tuple[str, ...] = ()


def protect_inputs(argv: Sequence[str]) -> None:
    global _RUN_ARGV
    _RUN_ARGV = tuple(argv)


def format_option_name() -> str:
    """Where this run's output format came from, for an error about it: `--output-format`, or the environment
    variable when the command line has none."""
    given = _option_value(_RUN_ARGV, ("--output-format",)) is not None
    return FORMAT_ENV if not given and os.environ.get(FORMAT_ENV) else "--output-format"


class Output:
    def __init__(self, fmt: str = "full", output_file: str | os.PathLike[str] | None = None) -> None:
        self.format = fmt
        self.output_file = Path(output_file) if output_file else None
        self.read: set[str] = set()  # what the run found or read beyond its command line (`protect`)

    def protect(self, paths: Iterable[str | None]) -> None:
        """Files the run found or read (a checkpoint's files below a folder it searched, a settings file): the
        report never replaces one, by any name (a hard link included), as it never replaces a named input."""
        self.read.update(path for path in paths if path)

    def _named(self) -> frozenset[str]:
        return inputs_named(_RUN_ARGV)

    @classmethod
    def from_argv(cls, argv: Sequence[str]) -> Output:
        """Where a run that fails before its command parses its options reports: the format and file the command
        line asks for. `explain` and `launch` take no report file and write full or json only: their usage errors
        write nothing else (a `-o` explain refuses left a SARIF file behind)."""
        command = next((arg for arg in argv if not arg.startswith("-")), None)
        if command in _FEW_FORMATS:
            chosen = output_format_from_argv(argv)
            return cls(chosen if chosen in _FEW_FORMATS[command] else "full", None)
        return cls(output_format_from_argv(argv), output_file_from_argv(argv))

    def write(self, text: str) -> None:
        _to_stdout(text if text.endswith("\n") else text + "\n")

    def write_report(self, text: str) -> None:
        """The report itself: to --output-file when given (replaced whole, or left as it was), else to stdout."""
        if self.output_file is not None:
            write_report_file(self.output_file, text, self._named(), self.read)
        elif text:
            _to_stdout(text)

    def check_destination(self) -> None:
        """Refuse now (ReportWriteError) an --output-file that the report could not be written to at the end."""
        if self.output_file is not None:
            check_report_path(self.output_file, self._named(), self.read)

    def info_line(self, message: str) -> None:
        _to_stderr(message)

    def error_line(self, message: str, hint: str | None = None) -> None:
        _to_stderr(f"error: {message}")
        if hint:
            _to_stderr(f"hint: {hint}")

    def fatal(self, code: str, message: str, *, path: str | None = None, hint: str | None = None) -> None:
        """Report a run that could not complete (exit 2): one stderr line, and a record in the format."""

        self.error_line(message, hint)
        error = FatalError(code, message, path)
        try:
            record = format_module(self.format).render_fatal(error)
            if record:  # the human formats have nothing to add to the stderr line
                self.write_report(record)
        except ReportWriteError as failure:  # the output file itself cannot be written: say so, keep exit 2
            self.error_line(str(failure))
        if self.format == "github":
            self.append_step_summary(format_module("github").fatal_step_summary(error))

    def append_step_summary(self, markdown: str) -> None:
        """Append to `$GITHUB_STEP_SUMMARY`: a courtesy, so a failure is a warning and never blocks or fails
        the run. Only a regular file (or a new one) is written; a FIFO or a device is skipped."""
        path = os.environ.get(STEP_SUMMARY_ENV)
        if not path:
            return
        shown = text(path)
        refusal = cache_refusal(Path(path), "a step summary") or reserved_name_refusal(Path(path), "a step summary")
        if refusal is not None:  # the report's own rules: never into a checkpoint, a cache or the settings
            self.info_line(f"warning: ${STEP_SUMMARY_ENV} ({shown}) not written: {text(refusal)}")
            return
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0)
        try:
            fd = os.open(path, flags, 0o666)
        except OSError as failure:
            self.info_line(f"warning: cannot append to ${STEP_SUMMARY_ENV} ({shown}): {_reason(failure)}")
            return
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                self.info_line(f"warning: ${STEP_SUMMARY_ENV} ({shown}) is not a regular file: not written")
                return
            os.set_blocking(fd, True)
            data = markdown.encode("utf-8", "backslashreplace")
            while data:
                data = data[os.write(fd, data):]
        except OSError as failure:
            self.info_line(f"warning: cannot append to ${STEP_SUMMARY_ENV} ({shown}): {_reason(failure)}")
        finally:
            os.close(fd)


def _reason(failure: OSError) -> str:
    reason = failure.strerror or type(failure).__name__
    return reason[:1].lower() + reason[1:]


# What writing to a standard stream raises when it cannot take the text: a full device, a broken pipe or an
# I/O error (OSError), a closed stream (ValueError), no stream at all (None: the descriptor was closed when
# Python started; AttributeError).
_STREAM_FAILURES = (OSError, ValueError, AttributeError)


def _to_stdout(text: str) -> None:
    """Report text to stdout; undecodable bytes that got this far are written as escapes, never a crash. (A
    stdout that cannot take it fails in `GuardedStdout`, which the CLI's runs write through.)"""
    try:
        sys.stdout.write(text)
    except UnicodeEncodeError:
        encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
        sys.stdout.write(text.encode(encoding, "backslashreplace").decode(encoding))
    sys.stdout.flush()


def stdout_failure(failure: BaseException) -> Exception:
    """The error to report when stdout failed with `failure` (`ReportWriteError`: one line, exit 2)."""

    reason = _reason(failure) if isinstance(failure, OSError) else "it is closed"
    return ReportWriteError(f"cannot write to standard output: {reason}")


class GuardedStdout:
    """`sys.stdout` for the length of a CLI run (`main._main`): text it cannot take raises `ReportWriteError`
    (one line, exit 2) whoever writes it, the report or typer's help, click's version and rich, which would turn
    a broken pipe into exit 1 and a full device into a traceback. A closed stdout (None: the descriptor was closed
    when Python started) fails the same way instead of being skipped. Every other attribute is the stream's."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.failed = False  # whether a write or flush failed (click's probes of the stream included)

    def write(self, text: str) -> int:
        if self._stream is None:
            self.failed = True
            raise stdout_failure(ValueError("closed"))
        try:
            return int(self._stream.write(text))
        except UnicodeError:  # the caller's to handle (`_to_stdout` writes escapes instead)
            raise
        except _STREAM_FAILURES as failure:
            self.failed = True
            raise stdout_failure(failure) from None

    def flush(self) -> None:
        if self._stream is None:
            return
        try:
            self._stream.flush()
        except _STREAM_FAILURES as failure:
            self.failed = True
            raise stdout_failure(failure) from None

    def give_back(self) -> Any:
        """The stream, to put back as `sys.stdout`. After a failure its descriptor is pointed at the null
        device, so that the interpreter's last flush of what is still buffered does not fail again."""
        if self.failed and self._stream is not None:
            try:
                null = os.open(os.devnull, os.O_WRONLY)
                try:
                    os.dup2(null, self._stream.fileno())
                finally:
                    os.close(null)
            except _STREAM_FAILURES:  # no descriptor (a StringIO): nothing buffered for one either
                pass
        return self._stream

    def isatty(self) -> bool:
        """A closed stdout is no terminal (colour and progress are decided by asking): the report's write then
        fails as one line."""
        if self._stream is None:
            return False
        try:
            return bool(self._stream.isatty())
        except _STREAM_FAILURES:
            return False

    # What click asks of a text stream before it writes to it, answered for a closed stdout.
    _CLOSED = {"encoding": "utf-8", "errors": "strict"}

    def __getattr__(self, name: str) -> Any:
        if self._stream is None:
            if name in self._CLOSED:
                return self._CLOSED[name]
            raise AttributeError(name)
        return getattr(self._stream, name)


def _to_stderr(line: str) -> None:
    """One line to stderr: data in it escaped (controls, bidi, undecodable bytes; never a second line) and
    nothing a CI runner would take for a command. A stderr that cannot take it is left alone: there is
    nowhere else to say it, and the exit code still says the run failed."""
    shown = neutralise_log(text(line)) + "\n"
    try:
        sys.stderr.write(shown)
        sys.stderr.flush()
    except _STREAM_FAILURES:
        pass



