"""One output sink: report data to stdout (or --output-file), errors and hints to stderr.

Machine formats are written with plain writes, never through rich, which hard-wraps long lines when
stdout is not a terminal.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Sequence

MACHINE_FORMATS = ("json", "json-lines", "sarif", "github", "junit")
FORMATS = ("full", "concise", *MACHINE_FORMATS)
FORMAT_ENV = "GDR_CHECK_OUTPUT_FORMAT"
SCHEMA_VERSION = 1


def output_format_from_argv(argv: Sequence[str]) -> str:
    """The requested format, read before parsing so that usage errors honour it too."""
    chosen = os.environ.get(FORMAT_ENV, "full")
    for i, arg in enumerate(argv):
        if arg == "--output-format" and i + 1 < len(argv):
            chosen = argv[i + 1]
        elif arg.startswith("--output-format="):
            chosen = arg.split("=", 1)[1]
    return chosen if chosen in FORMATS else "full"


def tool_info() -> dict[str, str]:
    from .. import __version__

    return {"name": "gdr-check", "version": __version__}


class Output:
    def __init__(self, fmt: str = "full") -> None:
        self.format = fmt

    @property
    def is_machine(self) -> bool:
        return self.format in MACHINE_FORMATS

    def write(self, text: str) -> None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()

    def error_line(self, message: str, hint: str | None = None) -> None:
        sys.stderr.write(f"error: {message}\n")
        if hint:
            sys.stderr.write(f"hint: {hint}\n")

    def fatal(self, code: str, message: str, *, path: str | None = None, hint: str | None = None) -> None:
        """Report a run that could not complete (exit 2) in the selected format."""
        self.error_line(message, hint)
        if self.format in ("json", "json-lines", "sarif"):
            self.write(json.dumps(fatal_document(code, message, path), sort_keys=False))


def fatal_document(code: str, message: str, path: str | None) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": tool_info(),
        "source": path,
        "error": {"code": code, "message": message, "path": path},
        "diagnostics": [],
    }
