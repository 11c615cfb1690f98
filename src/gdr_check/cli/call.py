"""`gdr-check call FILE.json [--model M --tp N]`: check recorded kernel calls, and compare them with a model.

Each call in a recording made by `gdr_check.capture()` goes through the contract (GDR2xx: would the kernel
accept it, and what does it assume). With `--model`, the call the engine makes for that model and TP size is
built too, and every argument is compared with it (GDR16x: is it the call the model needs).
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional

import typer

from ..engines import DEFAULT_ENGINE
from ..errors import InputError
from ..report import Diagnostic
from ..tensors import TensorSpec, short_dtype
from .engine_option import engine_help, engine_option
from .main import app
from .output import SCHEMA_VERSION, Output, tool_info

CALL_FORMATS = ("full", "json")
_MAX_VALUES_SHOWN = 8


class EmptyRecording(InputError):
    """A recording without calls: nothing was checked, which must not pass a CI gate (exit 2)."""

    code = "recording"

    def __init__(self, path: str) -> None:
        super().__init__(f"{path}: no recorded calls (was the kernel called inside `gdr_check.capture()`?)")
        self.path = path


@dataclass
class CheckedCall:
    recorded: Any  # gdr_check.capture.RecordedCall
    engine: str
    diagnostics: list[Diagnostic]
    comparison: Any = None  # gdr_check.checks.compare.Comparison when a model was given

    def to_dict(self) -> dict[str, Any]:
        data = self.recorded.to_dict()
        data["engine"] = self.engine
        data["comparison"] = None if self.comparison is None else [r.to_dict() for r in self.comparison.rows]
        data["diagnostics"] = [d.to_dict() for d in self.diagnostics]
        return data


@dataclass
class CallRun:
    recording: Any  # gdr_check.capture.Recording
    target: str | None = None
    tp: int = 1
    models: dict[str, Any] = field(default_factory=dict)  # engine -> ModelCheck
    model_diagnostics: list[Diagnostic] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    calls: list[CheckedCall] = field(default_factory=list)

    def all_diagnostics(self) -> list[Diagnostic]:
        return self.model_diagnostics + [d for call in self.calls for d in call.diagnostics]

    @property
    def exit_code(self) -> int:
        return 1 if any(d.severity == "error" for d in self.all_diagnostics()) else 0


# -- the work ------------------------------------------------------------------------------------------------------
def _attention_head_dim(checkpoint: Any) -> int | None:
    config = getattr(checkpoint, "config", None) or {}
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    value = text.get("head_dim") if isinstance(text, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _model_for(run: CallRun, engine: str, state_dtype: str | None) -> Any:
    """The model check for `engine` (built once per engine); its errors are reported once, at the top."""
    from ..models import Deployment, check_model

    if engine not in run.models:
        try:
            deployment = Deployment(tp=run.tp, engine=engine, state_dtype=state_dtype)
        except ValueError as error:
            raise typer.BadParameter(str(error))
        check = check_model(run.target, deployment)  # type: ignore[arg-type]
        run.models[engine] = check
        run.notes.extend(note for note in check.source_dict()["notes"] if note not in run.notes)
        blocking = [d for d in check.report if d.severity == "error" and d.code < "GDR2"]
        run.model_diagnostics.extend(d for d in blocking if d not in run.model_diagnostics)
        if check.call is None:
            run.notes.append(f"no expected call for `{run.target}` at tp={run.tp}: the comparison is skipped")
    return run.models[engine]


# Wrapper checks that test two arguments at once but point at the first.
_PAIRED = {"a": ("a", "b"), "A_log": ("A_log", "dt_bias")}


def _defer_to_comparison(diagnostic: Diagnostic, comparison: Any, target: str) -> Diagnostic:
    """A contract error on an argument the comparison explains keeps its message (what the wrapper raises)
    but not its fixes: they guess the cause without the model, and the comparison names it with the model."""
    argument = diagnostic.location.argument if diagnostic.location is not None else None
    if diagnostic.severity != "error" or argument is None:
        return diagnostic
    codes: list[str] = []
    for name in _PAIRED.get(argument, (argument,)):
        codes += [code for code in comparison.causes.get(name, []) if code not in codes]
    if not codes:
        return diagnostic
    note = f"the comparison with `{target}` names the cause: see {', '.join(codes)}"
    return replace(diagnostic, fixes=[], notes=[*diagnostic.notes, note])


def check_call(recorded: Any, engine: str, run: CallRun, state_dtype: str | None) -> CheckedCall:
    from ..checks.compare import ModelGeometry, compare_call, contract_arguments
    from ..checks.contract import run_contract

    diagnostics = list(run_contract(recorded.call, engine))
    comparison = None
    if run.target is not None:
        check = _model_for(run, engine, state_dtype)
        if check.call is not None and check.model is not None:
            geometry = ModelGeometry.from_model(check.model, run.target, _attention_head_dim(check.checkpoint))
            comparison = compare_call(
                recorded.call, check.call, geometry, tp=run.tp, engine=engine,
                state_dtype_reason=check.settings.state_dtype_reason if check.settings else None,
                contract_flagged=contract_arguments(diagnostics),
            )
            replaced = comparison.supersedes
            diagnostics = [_defer_to_comparison(d, comparison, run.target) for d in diagnostics
                           if d.code not in replaced] + comparison.diagnostics
    return CheckedCall(recorded, engine, diagnostics, comparison)


def check_recording(path: str, *, target: str | None = None, tp: int = 1, engine: str | None = None,
                    state_dtype: str | None = None, index: int | None = None) -> CallRun:
    from ..capture import load_recording

    recording = load_recording(path)
    if not recording.calls:
        raise EmptyRecording(recording.path)
    calls = recording.calls
    if index is not None:
        if not 0 <= index < len(calls):
            raise typer.BadParameter(f"{recording.path} holds calls 0-{len(calls) - 1}; there is no call {index}",
                                     param_hint="--index")
        calls = [calls[index]]
    run = CallRun(recording=recording, target=target, tp=tp)
    if recording.calls_dropped:
        run.notes.append(f"{recording.calls_dropped} more call(s) ran after `max_calls` and were not recorded")
    for skipped in recording.skipped_targets:
        run.notes.append(f"capture skipped {skipped.get('target')}: {skipped.get('reason')}")
    for recorded in calls:
        run.calls.append(check_call(recorded, engine or recorded.engine or DEFAULT_ENGINE, run, state_dtype))
    return run


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


def render_json(run: CallRun) -> str:
    model = None
    if run.target is not None:
        model = {
            "target": run.target, "tp": run.tp,
            "source": next(iter(run.models.values())).source_dict() if run.models else None,
            "expected": {engine: (check.call.to_dict() if check.call is not None else None)
                         for engine, check in run.models.items()},
            "diagnostics": [d.to_dict() for d in run.model_diagnostics],
        }
    diagnostics = run.all_diagnostics()
    document = {
        "schema_version": SCHEMA_VERSION,
        "tool": tool_info(),
        "recording": {"path": run.recording.path, "calls": len(run.recording.calls),
                      "calls_seen": run.recording.calls_seen, "calls_dropped": run.recording.calls_dropped},
        "model": model,
        "notes": list(run.notes),
        "calls": [call.to_dict() for call in run.calls],
        "summary": {"calls": len(run.calls), "errors": sum(d.severity == "error" for d in diagnostics),
                    "warnings": sum(d.severity == "warning" for d in diagnostics),
                    "infos": sum(d.severity == "info" for d in diagnostics)},
        "exit_code": run.exit_code,
    }
    from .escape import dump_json

    return dump_json(document, indent=2) + "\n"


# -- the command ----------------------------------------------------------------------------------------------------
@app.command("call")
def call_command(
    recording: Path = typer.Argument(..., help="A recording written by `gdr_check.capture()`."),
    model: Optional[str] = typer.Option(None, "--model", help="Compare with this model: a checkpoint path or a repo id."),
    tp: int = typer.Option(1, "--tp", min=1, help="TP size of the deployment the calls came from (with --model)."),
    engine: Optional[str] = typer.Option(None, "--engine", help=engine_help("as recorded, else sglang")),
    state_dtype: Optional[str] = typer.Option(None, "--state-dtype", help="The SSM state dtype the deployment chose (default: the engine's)."),
    index: Optional[int] = typer.Option(None, "--index", help="Check only the call with this index (0-based)."),
    output_format: str = typer.Option("full", "--output-format", envvar="GDR_CHECK_OUTPUT_FORMAT", help=f"One of: {', '.join(CALL_FORMATS)}."),
    output_file: Optional[Path] = typer.Option(None, "--output-file", "-o", envvar="GDR_CHECK_OUTPUT_FILE", help="Write the report here instead of stdout."),
) -> int:
    """Check recorded kernel calls; with --model, compare each with the call the model needs at that TP size."""
    from .formats.full import use_color

    if output_format not in CALL_FORMATS:
        raise typer.BadParameter(f"the call command writes {' or '.join(CALL_FORMATS)} (got {output_format!r})",
                                 param_hint="--output-format")
    if engine is not None:
        engine_option(engine)
    if (state_dtype is not None or tp != 1) and model is None:
        raise typer.BadParameter("--tp and --state-dtype describe the model's deployment: pass --model too")
    run = check_recording(str(recording), target=model, tp=tp, engine=engine, state_dtype=state_dtype, index=index)
    if output_format == "json":
        text = render_json(run)
    else:
        text = render_full(run, color=use_color() and output_file is None)
    Output(output_format, output_file).write_report(text if text.endswith("\n") else text + "\n")
    return run.exit_code
