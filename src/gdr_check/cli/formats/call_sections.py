"""The `full` report of `gdr-check call`: each distinct recorded call with its table and diagnostics, then the
summary (the `call` command renders through the formats like every command). Calls alike in everything a section
shows but their recorded values share one section, whose title lists which are identical and which values differ
(`_signature`)."""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING, Any, cast

from rich.console import Console
from rich.table import Table

from ...base.limits import counted
from ...base.tensor_spec import TensorSpec, short_dtype
from ...base.variants import variant_spec
from ..escape import neutralise_log
from .common import calls_checked, diagnostics_tally
from .console import make_console, markup, render_diagnostic
from .console import markup as escape

if TYPE_CHECKING:
    from ...pipeline.call_check import CallResult, CallRun, CheckedCall
    from ...pipeline.results import TargetResult
    from .options import RenderOptions

_MAX_VALUES_SHOWN = 8


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


def _signature(call: CheckedCall, *, values: bool) -> str:
    """What a call's section shows, as one comparable string: the function, engine, caller and whether index
    values were read; every argument's dtype, shape and strides, with its recorded values when `values`; the
    scalars; each diagnostic's severity, message, notes, fixes and bound dims. Not compared: where each
    diagnostic points in the recording (every call's own lines) and the buffers the tensors live in (`storage`,
    `offset`: not shown; GDR246 reports an overlap they make)."""
    data = call.recorded.call.to_dict()
    hidden = ("storage", "offset") if values else ("values", "storage", "offset")
    for name, value in data.items():
        if isinstance(value, dict):
            data[name] = {k: v for k, v in value.items() if k not in hidden}
    diagnostics = [(d.severity, d.code, d.message, d.notes, d.fixes, d.bindings) for d in call.diagnostics]
    recorded = call.recorded
    return json.dumps([recorded.function, call.engine, recorded.caller, recorded.values_read, data, diagnostics],
                      sort_keys=True, default=str)


def _index_list(indices: list[int]) -> str:
    return ", ".join(f"#{i}" for i in indices[:6]) + (", ..." if len(indices) > 6 else "")


def _values_differ(first: CheckedCall, other: CheckedCall) -> list[str]:
    """The arguments whose recorded values differ between two calls of one section (alike in all else)."""
    mine, theirs = first.recorded.call.tensors(), other.recorded.call.tensors()
    return [name for name, spec in mine.items() if spec.values != theirs[name].values]


def _alike(members: list[CheckedCall]) -> str:
    """' (and 3 alike: #1, #3 identical; #2 with other values of `ssm_state_indices`)' for a section's calls after
    the first; '' for a call alone."""
    if len(members) < 2:
        return ""
    first, others = members[0], members[1:]
    kinds: dict[tuple[str, ...], list[int]] = {}
    for member in others:
        kinds.setdefault(tuple(_values_differ(first, member)), []).append(member.recorded.index)
    if list(kinds) == [()]:
        return f" (and {len(others)} identical: {_index_list(kinds[()])})"
    parts = [f"{_index_list(indices)} identical" if not names else
             f"{_index_list(indices)} with other values of {', '.join(f'`{n}`' for n in names)}"
             for names, indices in sorted(kinds.items(), key=lambda kind: kind[1][0])]
    return f" (and {len(others)} alike: {'; '.join(parts)})"


def _add_row(table: Table, *cells: str) -> None:
    """A table row of data: each cell made safe text, its rich markup escaped (see `.escape.markup`)."""
    table.add_row(*(markup(cell) for cell in cells))


def _call_table(console: Console, call: CheckedCall, tp: int) -> None:
    comparison = call.comparison
    compared = comparison is not None
    table = Table(show_edge=False, pad_edge=False, box=None)
    for column in ("argument", "recorded", *((f"expected (tp={tp})", "differs") if compared else ())):
        table.add_column(column, overflow="fold")
    if comparison is not None:
        for row in comparison.rows:
            _add_row(table, row.argument, _cell(row.recorded), _cell(row.expected), ", ".join(row.differences))
    else:
        recorded = call.recorded.call
        for name, spec in recorded.tensors().items():
            _add_row(table, name, _tensor_text(spec))
        _add_row(table, "scale", _cell(recorded.scale))
        _add_row(table, "use_qk_l2norm_in_kernel", str(recorded.use_qk_l2norm_in_kernel))
        _add_row(table, "variant", recorded.variant)
    if variant_spec(call.recorded.call.variant).has_lower_bound:
        _add_row(table, "lower_bound", _cell(call.recorded.call.lower_bound), *(("", "") if compared else ()))
    console.print(table)


def render_subject(result: TargetResult, options: RenderOptions) -> str:
    """A `call` run's `full` report (`full.render` comes here for a `call` subject)."""
    return render_full(cast("CallResult", result).record, color=options.color, ascii_only=options.ascii_only)


def render_full(run: CallRun, *, color: bool = False, ascii_only: bool = False) -> str:
    """The `full` report of a call run: each distinct call with its table and diagnostics, then the summary."""
    buffer = io.StringIO()
    console = make_console(buffer, color, ascii_only)
    # One section per group of calls alike in all it shows but recorded values; its title says which differ.
    groups: dict[str, list[CheckedCall]] = {}
    for call in run.calls:
        groups.setdefault(_signature(call, values=False), []).append(call)
    distinct = len({_signature(call, values=True) for call in run.calls})
    sections = "" if distinct == len(groups) else (
        f", shown in {counted(len(groups), 'section')} (calls that differ only in recorded values share one)")
    compared = f"; compared with {run.target} at tp={run.tp}" if run.target else ""
    if run.recording.guard is not None:  # a served worker's guard report: its findings, no calls
        console.print(f"[bold]{escape(run.recording.path)}[/bold]: guard report, "
                      f"{calls_checked(run.recording.guard.calls)} in the worker", soft_wrap=True)
    else:
        console.print(f"[bold]{escape(run.recording.path)}[/bold]: {calls_checked(len(run.calls))}, "
                      f"{distinct} distinct{escape(sections)}{escape(compared)}", soft_wrap=True)
    for note in run.notes:
        console.print(f"  [dim]note[/dim]  {escape(note)}", soft_wrap=True)
    console.print()
    for diagnostic in run.model_diagnostics:
        render_diagnostic(console, diagnostic)
    for members in groups.values():
        first = members[0]
        recorded = first.recorded
        alike = _alike(members)
        origin = f"  from {recorded.caller}" if recorded.caller else ""
        console.print(f"[bold]call #{recorded.index}[/bold]{escape(alike)}  "
                      f"{escape(recorded.function or 'packed decode')} ({first.engine}, "
                      f"{variant_spec(recorded.call.variant).label}){escape(origin)}", soft_wrap=True)
        if not recorded.values_read:
            console.print("  [dim]note[/dim]  index values were not read (recorded during CUDA-graph capture)",
                          soft_wrap=True)
        _call_table(console, first, run.tp)
        console.print()
        for diagnostic in first.diagnostics:
            render_diagnostic(console, diagnostic)
    checked = len(run.calls) if run.recording.guard is None else run.recording.guard.calls
    console.print(f"summary: {calls_checked(checked)}: {diagnostics_tally(run.all_diagnostics())}",
                  soft_wrap=True)
    return neutralise_log(buffer.getvalue())
