"""`--output-format github`: GitHub Actions workflow commands (`::error title=...,file=...::message`), one per
distinct diagnostic, then the concise report for the log. `step_summary` is the Markdown appended to
`$GITHUB_STEP_SUMMARY`.

GitHub shows at most 10 errors and 10 warnings per step, so the concise lines carry the full list.
"""

from __future__ import annotations

from ...base.report import Diagnostic
from ...pipeline.results import FatalError, Run, TargetResult
from ..escape import text as safe
from ..escape import text_with_breaks
from . import concise
from .common import alerts, counts, entries, matrix_rows, mib, passing_tp_sizes, summary_line, where
from .options import RenderOptions

COMMAND = {"error": "error", "warning": "warning", "info": "notice"}


def escape_data(text: str) -> str:
    """The message part of a workflow command: data made safe text (no controls or bidi, see
    `..escape.text`), the legacy `##[` marker defused, then GitHub's escaping of `%` (first, so that the
    escapes are not escaped again) and of line breaks, which stay inside the annotation."""
    shown = text_with_breaks(text).replace("##[", "#\\x23[")
    return shown.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def workflow_command(level: str, message: str, properties: dict[str, object]) -> str:
    shown = ",".join(f"{key}={escape_property(str(value))}" for key, value in properties.items() if value is not None)
    return f"::{level} {shown}::{escape_data(message)}" if shown else f"::{level}::{escape_data(message)}"


def annotation(run: Run, result: TargetResult, diagnostic: Diagnostic) -> str:
    place = where(result, diagnostic)
    properties: dict[str, object] = {"title": f"gdr-check ({diagnostic.code})"}
    if place.path is not None:
        line, column = place.start
        properties.update(file=place.path, line=line, col=column)
        if place.end_line is not None:
            properties["endLine"] = place.end_line
        if place.end_column is not None:
            properties["endColumn"] = place.end_column
    # No TP suffix: the same finding at several TP sizes is one annotation.
    message = f"{place.prefix()}: {diagnostic.code} {diagnostic.message}"
    return workflow_command(COMMAND[diagnostic.severity], message, properties)


def all_annotations(run: Run, options: RenderOptions) -> list[str]:
    """Distinct annotations in report order: the same finding at several TP sizes or targets shows once.
    Info notes only with `--show-info`: the log's concise lines list them."""
    found: dict[str, None] = {}
    for result, diagnostic in alerts(run, options):
        found.setdefault(annotation(run, result, diagnostic))
    for result in run.results:
        if result.error is not None and result.error.diagnostic is None:
            found.setdefault(workflow_command("error", f"{result.target}: {result.error.message}",
                                              {"title": f"gdr-check ({result.error.code})"}))
    return list(found)


def render(run: Run, options: RenderOptions) -> str:
    return "".join(line + "\n" for line in all_annotations(run, options)) + concise.render(run, options)


def render_fatal(error: FatalError) -> str:
    properties: dict[str, object] = {"title": f"gdr-check ({error.code})"}
    return workflow_command("error", error.message, properties) + "\n"


# -- step summary ---------------------------------------------------------------------------------------------
def _cell(text: object) -> str:
    """Data in a Markdown table cell: safe text (see `..escape.text`), its pipes escaped."""
    return safe(text).replace("|", "\\|")


def step_summary(run: Run) -> str:
    found = counts(run)
    lines = ["## gdr-check", "", f"{summary_line(run).removeprefix('summary: ')}; exit code {run.exit_code}", ""]
    rows: dict[str, None] = {}
    for result, diagnostic in entries(run):
        place = where(result, diagnostic)
        tp = f" (tp={result.deployment_tp})" if run.is_matrix else ""
        rows.setdefault(f"| {diagnostic.severity} | {diagnostic.code} | `{_cell(place.prefix())}`{tp} | "
                        f"{_cell(diagnostic.message)} |")
    for result in run.results:
        if result.error is not None and result.error.diagnostic is None:
            rows.setdefault(f"| error | {result.error.code} | `{_cell(result.target)}` | "
                            f"{_cell(result.error.message)} |")
    if rows:
        lines += ["| severity | code | where | message |", "|---|---|---|---|", *rows, ""]
    elif not any(found.values()):
        lines += ["No diagnostics.", ""]
    if run.is_matrix:
        lines += ["| target | tp | result | errors | warnings | HV per rank | width | state per request |",
                  "|---|---|---|---|---|---|---|---|"]
        matrix = matrix_rows(run)
        for row in matrix:
            lines.append(f"| `{_cell(row.target)}` | {row.tp} | {'pass' if row.passed else 'fail'} | {row.errors} | "
                         f"{row.warnings} | {row.value_heads_per_rank or '-'} | {row.width or '-'} | "
                         f"{mib(row.state_bytes_per_request)} |")
        lines.append("")
        for target in dict.fromkeys(row.target for row in matrix):
            sizes = passing_tp_sizes(matrix, target)
            lines.append(f"`{_cell(target)}` passes at tp={', '.join(map(str, sizes))}" if sizes
                         else f"`{_cell(target)}` fails at every TP size checked")
        lines.append("")
    return "\n".join(lines) + "\n"


def fatal_step_summary(error: FatalError) -> str:
    return f"## gdr-check\n\ncould not complete: {_cell(error.message)} (exit code 2)\n"
