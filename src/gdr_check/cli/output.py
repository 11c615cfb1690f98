"""One output sink: report data to stdout (or --output-file), errors and hints to stderr.

Machine formats are written with plain writes, never through rich, which hard-wraps long lines when
stdout is not a terminal. A run that cannot complete still writes a record in the selected format
(a JSON document, a JSON line, a SARIF log, an `::error`, a JUnit error, a GitLab issue), to the output file when one is
named, so that the next CI step always finds something it can parse.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Sequence

MACHINE_FORMATS = ("json", "json-lines", "sarif", "github", "junit", "gitlab")
FORMATS = ("full", "concise", *MACHINE_FORMATS)
FORMAT_ENV = "GDR_CHECK_OUTPUT_FORMAT"
OUTPUT_FILE_ENV = "GDR_CHECK_OUTPUT_FILE"
STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
SCHEMA_VERSION = 1


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


def output_format_from_argv(argv: Sequence[str]) -> str:
    """The requested format, read before parsing so that usage errors honour it too."""
    chosen = _option_value(argv, ("--output-format",)) or os.environ.get(FORMAT_ENV, "full")
    return chosen if chosen in FORMATS else "full"


def output_file_from_argv(argv: Sequence[str]) -> str | None:
    return _option_value(argv, ("--output-file", "-o")) or os.environ.get(OUTPUT_FILE_ENV) or None


def tool_info() -> dict[str, str]:
    from .. import __version__

    return {"name": "gdr-check", "version": __version__}


class Output:
    def __init__(self, fmt: str = "full", output_file: str | os.PathLike[str] | None = None) -> None:
        self.format = fmt
        self.output_file = Path(output_file) if output_file else None

    @classmethod
    def from_argv(cls, argv: Sequence[str]) -> "Output":
        return cls(output_format_from_argv(argv), output_file_from_argv(argv))

    @property
    def is_machine(self) -> bool:
        return self.format in MACHINE_FORMATS

    def write(self, text: str) -> None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()

    def write_report(self, text: str) -> None:
        """The report itself: to --output-file when given (created, or replaced), else to stdout."""
        if self.output_file is not None:
            from .errors import ReportWriteError

            parent = self.output_file.parent
            try:
                if parent != Path(""):
                    if parent.exists() and not parent.is_dir():
                        raise NotADirectoryError(0, f"`{parent}` is not a directory")
                    parent.mkdir(parents=True, exist_ok=True)
                self.output_file.write_text(text, encoding="utf-8")
            except OSError as failure:
                reason = failure.strerror or type(failure).__name__
                raise ReportWriteError(f"cannot write `{self.output_file}`: {reason[:1].lower()}{reason[1:]}") from None
        elif text:
            sys.stdout.write(text)
            sys.stdout.flush()

    def info_line(self, message: str) -> None:
        sys.stderr.write(message + "\n")

    def error_line(self, message: str, hint: str | None = None) -> None:
        sys.stderr.write(f"error: {message}\n")
        if hint:
            sys.stderr.write(f"hint: {hint}\n")

    def fatal(self, code: str, message: str, *, path: str | None = None, hint: str | None = None) -> None:
        """Report a run that could not complete (exit 2): one stderr line, and a record in the format."""
        from .errors import ReportWriteError
        from .formats import format_module
        from .results import FatalError

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
        path = os.environ.get(STEP_SUMMARY_ENV)
        if not path:
            return
        try:
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(markdown)
        except OSError as failure:  # a summary is a courtesy: never fail the run over it
            self.error_line(f"cannot append to ${STEP_SUMMARY_ENV} ({path}): {(failure.strerror or 'error').lower()}")


def fatal_document(code: str, message: str, path: str | None) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": tool_info(),
        "source": path,
        "error": {"code": code, "message": message, "path": path},
        "diagnostics": [],
    }
