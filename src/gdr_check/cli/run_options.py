"""What `call` and `dry-run` share with `check`: the rule selection (`--select/--extend-select/--ignore` over the
nearest `[tool.gdr-check]`), the failing severities, and writing the `Run` in any output format."""

from __future__ import annotations

import typer

from ..pipeline.results import FAILING_DEFAULT, FAILING_WITH_WARNINGS, Run
from ..pipeline.selection import Selection, SelectorError, known_rules, rule_selection
from ..pipeline.settings import ConfigResolver
from .formats import FORMATS, format_module
from .formats.common import summary_line
from .output import Output, format_option_name

SELECT_HELP = ("Rules to report: codes (GDR213), prefixes (GDR2), names, or ALL; comma-separated or repeated. "
               "Replaces the configured selection.")
EXTEND_SELECT_HELP = "Rules to report in addition to the selection."
IGNORE_HELP = "Rules not to report (codes, prefixes, names)."
EXIT_ZERO_HELP = "Exit 0 even when diagnostics fail the run (2 still means the run could not complete)."
ERROR_ON_WARNING_HELP = "Warnings fail the run too (exit 1)."
FORMAT_HELP = f"One of: {', '.join(FORMATS)}; default full."
OUTPUT_FILE_HELP = "Write the report here instead of stdout (`-`: stdout)."
QUIET_HELP = "Print the diagnostics only: no headers, tables, summary or progress. The exit code is unchanged."
ISOLATED_HELP = "Ignore every pyproject.toml."


def check_format(output_format: str | None) -> str:
    if output_format is not None and output_format not in FORMATS:
        raise typer.BadParameter(f"unknown format {output_format!r}; expected one of: {', '.join(FORMATS)}",
                                 param_hint=format_option_name())
    return output_format or "full"


class RunOptions:
    """The options of one command resolved against the `[tool.gdr-check]` table nearest `anchor` (the checkpoint,
    else the recording): the table's selection under the command line's, its exit-zero and error-on-warning."""

    def __init__(self, anchor: str, out: Output, *, select: list[str] | None, extend_select: list[str] | None,
                 ignore: list[str] | None, exit_zero: bool | None, error_on_warning: bool | None,
                 isolated: bool = False) -> None:
        rules = known_rules()
        for option, values in (("--select", select), ("--extend-select", extend_select), ("--ignore", ignore)):
            try:
                rule_selection(values, rules=rules)
            except SelectorError as error:
                out.fatal("usage", f"{option}: {error}")
                raise typer.Exit(2) from None
        config = ConfigResolver(isolated=isolated, output_formats=FORMATS).for_target(anchor)
        layers = [*config.layers_for(anchor), rule_selection(select, extend_select, ignore, rules=rules)]
        self.selection = Selection(tuple(layer for layer in layers if not layer.is_empty))
        warn = error_on_warning if error_on_warning is not None else config.error_on_warning
        self.failing = FAILING_WITH_WARNINGS if warn else FAILING_DEFAULT
        self.exit_zero = bool(exit_zero if exit_zero is not None else config.exit_zero)


def write_run(run: Run, out: Output) -> int:
    """Render `run` in the output's format (to `-o` when given), then what `check` adds around it: a line per
    result that could not complete, the summary on stderr for the line formats, the GitHub step summary."""

    renderer = format_module(out.format)
    out.write_report(renderer.render(run))
    for result in run.results:
        if result.error is not None:
            out.error_line(result.error.message)
    if out.format in ("concise", "github") and not run.quiet:
        out.info_line(summary_line(run))
    if out.format == "github":
        out.append_step_summary(renderer.step_summary(run))
    return run.exit_code
