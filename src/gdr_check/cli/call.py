"""`gdr-check call FILE.json [--model M --tp N]`: check recorded kernel calls, and compare them with a model.

Each call in a recording made by `gdr_check.capture()` goes through the contract (GDR2xx: would the kernel
accept it, and what does it assume). With `--model`, the call the engine makes for that model and TP size is
built too, and every argument is compared with it (GDR16x: is it the call the model needs).

Parsing and the `full` sections only: the work is `gdr_check.api.check_recording`, which returns the `Run` that
every output format renders.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ..report import Diagnostic
from ..tensors import TensorSpec, short_dtype
from .engine_option import engine_help, engine_option
from .main import app
from .output import Output
from .run_options import (
    ERROR_ON_WARNING_HELP,
    EXIT_ZERO_HELP,
    EXTEND_SELECT_HELP,
    FORMAT_HELP,
    IGNORE_HELP,
    OUTPUT_FILE_HELP,
    SELECT_HELP,
    RunOptions,
    check_format,
    write_run,
)

if TYPE_CHECKING:
    from ..api import CallRun, CheckedCall
_MAX_VALUES_SHOWN = 8


# -- rendering -------------------------------------------------------------------------------------------------------
def _tensor_text(spec: TensorSpec) -> str:
    text = f"{short_dtype(spec.dtype)}[{','.join(map(str, spec.shape))}] ({', '.join(map(str, spec.stride))})"
    if spec.values is not None:
        shown = ", ".join(str(v) for v in spec.values[:_MAX_VALUES_SHOWN])
        text += f" = [{shown}{', ...' if len(spec.values) > _MAX_VALUES_SHOWN else ''}]"
    return text


def _cell(value: Any) -> str:
    if isinstance(value, TensorSpec):
        return _tensor_text(value)
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _signature(call: CheckedCall) -> str:
    """Calls that look alike and give the same diagnostics are shown once."""
    data = call.recorded.call.to_dict()
    for name, value in data.items():
        if isinstance(value, dict):
            data[name] = {k: v for k, v in value.items() if k not in ("values", "storage", "offset")}
    diagnostics = [(d.code, d.message) for d in call.diagnostics]
    return json.dumps([call.recorded.function, call.engine, data, diagnostics], sort_keys=True, default=str)


def _index_list(indices: list[int]) -> str:
    return ", ".join(f"#{i}" for i in indices[:6]) + (", ..." if len(indices) > 6 else "")


def _add_row(table: Any, *cells: str) -> None:
    """A table row of data: each cell made safe text, its rich markup escaped (see `.escape.markup`)."""
    from .escape import markup

    table.add_row(*(markup(cell) for cell in cells))


def _call_table(console: Any, call: CheckedCall, tp: int) -> None:
    from rich.table import Table

    compared = call.comparison is not None
    table = Table(show_edge=False, pad_edge=False, box=None)
    for column in ("argument", "recorded", *((f"expected (tp={tp})", "differs") if compared else ())):
        table.add_column(column, overflow="fold")
    if compared:
        for row in call.comparison.rows:
            _add_row(table, row.argument, _cell(row.recorded), _cell(row.expected), ", ".join(row.differences))
    else:
        recorded = call.recorded.call
        for name, spec in recorded.tensors().items():
            _add_row(table, name, _tensor_text(spec))
        _add_row(table, "scale", _cell(recorded.scale))
        _add_row(table, "use_qk_l2norm_in_kernel", str(recorded.use_qk_l2norm_in_kernel))
        _add_row(table, "variant", recorded.variant)
    if call.recorded.call.variant == "kda":
        _add_row(table, "lower_bound", _cell(call.recorded.call.lower_bound), *(("", "") if compared else ()))
    console.print(table)


def _counts(diagnostics: list[Diagnostic]) -> str:
    counts = {s: sum(d.severity == s for d in diagnostics) for s in ("error", "warning", "info")}
    return f"{counts['error']} error(s), {counts['warning']} warning(s), {counts['info']} note(s)"


def render_full(run: CallRun, *, color: bool = False) -> str:
    """The `full` report of a call run: each distinct call with its table and diagnostics, then the summary."""
    from .escape import markup as escape
    from .escape import neutralise_log
    from .formats.full import make_console, render_diagnostic

    buffer = io.StringIO()
    console = make_console(buffer, color)
    groups: dict[str, list[CheckedCall]] = {}
    for call in run.calls:
        groups.setdefault(_signature(call), []).append(call)
    compared = f"; compared with {run.target} at tp={run.tp}" if run.target else ""
    console.print(f"[bold]{escape(run.recording.path)}[/bold]: {len(run.calls)} call(s) checked, "
                  f"{len(groups)} distinct{escape(compared)}", soft_wrap=True)
    for note in run.notes:
        console.print(f"  [dim]note[/dim]  {escape(note)}", soft_wrap=True)
    console.print()
    for diagnostic in run.model_diagnostics:
        render_diagnostic(console, diagnostic)
    for members in groups.values():
        first = members[0]
        recorded = first.recorded
        alike = f" (and {len(members) - 1} identical: {_index_list([m.recorded.index for m in members[1:]])})" \
            if len(members) > 1 else ""
        origin = f"  from {recorded.caller}" if recorded.caller else ""
        console.print(f"[bold]call #{recorded.index}[/bold]{escape(alike)}  "
                      f"{escape(recorded.function or 'packed decode')} ({first.engine}, "
                      f"{recorded.call.variant.upper()}){escape(origin)}", soft_wrap=True)
        if not recorded.values_read:
            console.print("  [dim]note[/dim]  index values were not read (recorded during CUDA-graph capture)",
                          soft_wrap=True)
        _call_table(console, first, run.tp)
        console.print()
        for diagnostic in first.diagnostics:
            render_diagnostic(console, diagnostic)
    console.print(f"summary: {len(run.calls)} call(s) checked: {_counts(run.all_diagnostics())}", soft_wrap=True)
    return neutralise_log(buffer.getvalue())


# -- the command ----------------------------------------------------------------------------------------------------
@app.command("call")
def call_command(
    recording: Path = typer.Argument(..., help="A recording written by `gdr_check.capture()`."),
    model: str | None = typer.Option(None, "--model", help="Compare with this model: a checkpoint path or a repo id."),
    tp: int = typer.Option(1, "--tp", min=1, help="TP size of the deployment the calls came from (with --model)."),
    engine: str | None = typer.Option(None, "--engine", help=engine_help("as recorded, else sglang")),
    state_dtype: str | None = typer.Option(
        None, "--state-dtype", help="The SSM state dtype the deployment chose (default: the engine's)."),
    index: int | None = typer.Option(None, "--index", help="Check only the call with this index (0-based)."),
    select: list[str] | None = typer.Option(None, "--select", help=SELECT_HELP),
    extend_select: list[str] | None = typer.Option(None, "--extend-select", help=EXTEND_SELECT_HELP),
    ignore: list[str] | None = typer.Option(None, "--ignore", help=IGNORE_HELP),
    exit_zero: bool | None = typer.Option(None, "--exit-zero", help=EXIT_ZERO_HELP),
    error_on_warning: bool | None = typer.Option(None, "--error-on-warning", help=ERROR_ON_WARNING_HELP),
    isolated: bool = typer.Option(False, "--isolated", help="Ignore every pyproject.toml."),
    output_format: str | None = typer.Option(None, "--output-format", envvar="GDR_CHECK_OUTPUT_FORMAT",
                                             help=FORMAT_HELP),
    output_file: Path | None = typer.Option(None, "--output-file", "-o", envvar="GDR_CHECK_OUTPUT_FILE",
                                            help=OUTPUT_FILE_HELP),
) -> int:
    """Check recorded kernel calls; with --model, compare each with the call the model needs at that TP size."""
    from ..api import check_recording
    from .formats.full import use_color

    fmt = check_format(output_format)
    if engine is not None:
        engine_option(engine)
    if (state_dtype is not None or tp != 1) and model is None:
        raise typer.BadParameter("--tp and --state-dtype describe the model's deployment: pass --model too")
    out = Output(fmt, output_file)
    options = RunOptions(model or str(recording), out, select=select, extend_select=extend_select, ignore=ignore,
                         exit_zero=exit_zero, error_on_warning=error_on_warning, isolated=isolated)
    run = check_recording(str(recording), target=model, tp=tp, engine=engine, state_dtype=state_dtype, index=index,
                          selection=options.selection, failing=options.failing, exit_zero=options.exit_zero)
    run.color = fmt == "full" and output_file is None and use_color()
    return write_run(run, out)
