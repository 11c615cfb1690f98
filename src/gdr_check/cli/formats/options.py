"""How a report looks: chosen by the command line and where the report goes, never by the run it renders."""

from __future__ import annotations

import os
import sys

from ...base.records import dataclass


@dataclass(frozen=True)
class RenderOptions:
    color: bool = False
    ascii_only: bool = False  # tables in ASCII boxes: stdout's encoding lacks box drawing
    show_info: bool = False  # info notes as alerts too (SARIF results, annotations, code-quality issues)
    quiet: bool = False  # the diagnostics only: no headers, tables or summary
    # The human report names the targets that could not be read, as their stderr lines do: a report file,
    # which those lines do not reach (on stdout they would say it twice).
    errors_in_report: bool = False


def stdout_lacks_boxes() -> bool:
    """Whether stdout's encoding cannot write rich's box drawing (PYTHONIOENCODING=ascii, a Latin-1 terminal):
    a report written there draws its tables in ASCII instead of an escape per border character."""
    try:
        "\u2501\u2503\u2547".encode(getattr(sys.stdout, "encoding", None) or "utf-8")
    except (UnicodeEncodeError, LookupError):
        return True
    return False


def use_color() -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    return bool(os.environ.get("FORCE_COLOR")) or sys.stdout.isatty()


def render_options(fmt: str, output_file: str | os.PathLike[str] | None, *, show_info: bool = False,
                   quiet: bool = False) -> RenderOptions:
    """How a report looks where it goes: on stdout, in colour where the terminal takes it and in ASCII boxes where
    its encoding lacks box drawing; in a report file, plain UTF-8 (naming the targets it could not read)."""
    to_stdout = output_file is None
    return RenderOptions(color=fmt == "full" and to_stdout and use_color(),
                         ascii_only=to_stdout and stdout_lacks_boxes(), show_info=show_info, quiet=quiet,
                         errors_in_report=not to_stdout)
