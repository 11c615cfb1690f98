"""What `call` and `dry-run` share with `check`: the rule selection (`--select/--extend-select/--ignore` over the
nearest `[tool.gdr-check]`), the failing severities, and writing the `Run` in any output format."""

from __future__ import annotations

import typer

from ..pipeline.results import Run
from ..pipeline.run_settings import CommandLine, RunSettings, config_resolver
from ..pipeline.selection import SelectorError, known_rules, rule_selection
from .formats import FORMATS, format_module
from .formats.common import summary_line
from .formats.options import RenderOptions
from .output import Output, format_option_name
from .statistics import render as render_statistics

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
NO_CACHE_HELP = ("Neither read nor write the cache of checked checkpoint headers (names, dtypes and shapes, never "
                 "weights; in $GDR_CHECK_CACHE_DIR, else $XDG_CACHE_HOME/gdr-check, else ~/.cache/gdr-check). "
                 "GDR_CHECK_NO_CACHE=1 does the same.")


def check_format(output_format: str | None) -> str:
    if output_format is not None and output_format not in FORMATS:
        raise typer.BadParameter(f"unknown format {output_format!r}; expected one of: {', '.join(FORMATS)}",
                                 param_hint=format_option_name())
    return output_format or "full"


class RunOptions:
    """The options of one command resolved against the `[tool.gdr-check]` table nearest `anchor` (the checkpoint,
    else the recording), as `check` resolves its own (`pipeline.run_settings`): the table's selection under the
    command line's, its exit-zero and error-on-warning."""

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
        command_line = CommandLine(selection=rule_selection(select, extend_select, ignore, rules=rules),
                                   exit_zero=exit_zero, error_on_warning=error_on_warning)
        resolver = config_resolver(None, isolated, FORMATS)
        settings = RunSettings(command_line, resolver, resolver.for_target(anchor))
        self.engine = settings.config.engine  # `engine` in [tool.gdr-check] (a command that takes one reads it)
        self.selection = settings.selection_for(anchor)
        self.failing = settings.failing
        self.exit_zero = settings.exit_zero


def write_run(run: Run, out: Output, options: RenderOptions, *, statistics: bool = False, silent: bool = False
              ) -> int:
    """Render `run` in the output's format (to `-o` when given; how often each rule fired with `statistics`;
    nothing on stdout when `silent`), then a line per result that could not complete, the summary on stderr for
    the line formats, the GitHub step summary. Returns the run's exit code."""

    renderer = format_module(out.format)
    if silent and out.output_file is None:
        pass  # the exit code says it all
    elif statistics:
        out.write_report(render_statistics(run, out.format))
    else:
        out.write_report(renderer.render(run, options))
    for result in run.results:
        if result.error is not None:
            out.error_line(result.error.message)
    if out.format in ("concise", "github") and not (options.quiet or silent or statistics):
        out.info_line(summary_line(run))
    if out.format == "github":
        out.append_step_summary(renderer.step_summary(run))
    return run.exit_code
