"""`gdr-check call FILE.json [--model M --tp N]`: check recorded kernel calls, and compare them with a model.

Each call in a recording made by `gdr_check.capture()` goes through the contract (GDR2xx: would the kernel
accept it, and what does it assume). With `--model`, the call the engine makes for that model and TP size is
built too, and every argument is compared with it (GDR16x: is it the call the model needs).

Parsing only: the work is `gdr_check.pipeline.call_check.check_recording`, which returns the `Run` that every output
format renders (the `full` sections are `cli/formats/call_sections.py`).
"""

from __future__ import annotations

from pathlib import Path

import typer

from ..base.limits import checked
from ..pipeline.call_check import CallModelError, check_recording
from .engine_option import engine_help, engine_option, state_dtype_option
from .formats.options import render_options
from .main import app
from .numbers import whole_number
from .output import Output, report_path
from .run_options import (
    ERROR_ON_WARNING_HELP,
    EXIT_ZERO_HELP,
    EXTEND_SELECT_HELP,
    FORMAT_HELP,
    IGNORE_HELP,
    ISOLATED_HELP,
    OUTPUT_FILE_HELP,
    QUIET_HELP,
    SELECT_HELP,
    RunOptions,
    check_format,
    write_run,
)


# -- the command ----------------------------------------------------------------------------------------------------
@app.command("call")
def call_command(
    recording: Path = typer.Argument(..., metavar="RECORDING", help="A recording written by `gdr_check.capture()`."),
    model: str | None = typer.Option(None, "--model", help="Compare with this model: a checkpoint path or a repo id."),
    tp: int = typer.Option(1, "--tp", parser=whole_number("--tp"),
                           help="TP size of the deployment the calls came from (with --model)."),
    engine: str | None = typer.Option(None, "--engine", help=engine_help(
        "as recorded, else [tool.gdr-check]'s, else the installed engine, else sglang")),
    state_dtype: str | None = typer.Option(
        None, "--state-dtype", help="The SSM state dtype the deployment chose (default: the engine's)."),
    index: int | None = typer.Option(None, "--index", parser=whole_number("--index"),
                                     help="Check only the call with this index (0-based)."),
    select: list[str] | None = typer.Option(None, "--select", help=SELECT_HELP),
    extend_select: list[str] | None = typer.Option(None, "--extend-select", help=EXTEND_SELECT_HELP),
    ignore: list[str] | None = typer.Option(None, "--ignore", help=IGNORE_HELP),
    exit_zero: bool | None = typer.Option(None, "--exit-zero", help=EXIT_ZERO_HELP),
    error_on_warning: bool | None = typer.Option(None, "--error-on-warning", help=ERROR_ON_WARNING_HELP),
    isolated: bool = typer.Option(False, "--isolated", help=ISOLATED_HELP),
    quiet: bool = typer.Option(False, "--quiet", "-q", help=QUIET_HELP),
    output_format: str | None = typer.Option(None, "--output-format", envvar="GDR_CHECK_OUTPUT_FORMAT",
                                             help=FORMAT_HELP),
    output_file: Path | None = typer.Option(None, "--output-file", "-o", envvar="GDR_CHECK_OUTPUT_FILE",
                                            parser=report_path, metavar="PATH", help=OUTPUT_FILE_HELP),
) -> int:
    """Check recorded kernel calls; with --model, compare each with the call the model needs at that TP size."""

    fmt = check_format(output_format)
    checked("tp", tp)  # the range of docs/limits.md, in the words of every other command's
    if engine is not None:
        engine_option(engine)
    if state_dtype is not None:
        state_dtype_option(state_dtype)
    if (state_dtype is not None or tp != 1) and model is None:
        given = "--tp" if state_dtype is None else "--state-dtype" if tp == 1 else "--tp and --state-dtype"
        raise typer.BadParameter(f"{given} describe{'s' if ' and ' not in given else ''} the model's deployment: "
                                 "pass --model too", param_hint=given.replace(" and ", "/"))
    out = Output(fmt, output_file)
    options = RunOptions(model or str(recording), out, select=select, extend_select=extend_select, ignore=ignore,
                         exit_zero=exit_zero, error_on_warning=error_on_warning, isolated=isolated)
    try:
        run = check_recording(str(recording), target=model, tp=tp, engine=engine, state_dtype=state_dtype,
                              index=index, selection=options.selection, failing=options.failing,
                              exit_zero=options.exit_zero, engine_reason="flag", config_engine=options.engine)
    except CallModelError as refused:  # a model without linear-attention layers: named by the option, as explain does
        raise typer.BadParameter(str(refused), param_hint="--model") from None
    return write_run(run, out, render_options(fmt, output_file, quiet=quiet))
