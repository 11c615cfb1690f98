"""How a report looks: chosen by the command line and where the report goes, never by the run it renders."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RenderOptions:
    color: bool = False
    ascii_only: bool = False  # tables in ASCII boxes: stdout's encoding lacks box drawing
    show_info: bool = False  # info notes as alerts too (SARIF results, annotations, code-quality issues)
    quiet: bool = False  # the diagnostics only: no headers, tables or summary
    # The human report names the targets that could not be read, as their stderr lines do: a report file,
    # which those lines do not reach (on stdout they would say it twice).
    errors_in_report: bool = False
