"""`--output-format full`: the human report (header, per-rank shapes, rustc-style diagnostics, summary)."""

from __future__ import annotations

import importlib
import io
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from ...base.limits import counted
from ...base.tensor_spec import short_dtype
from ...base.variants import variant_spec
from ...pipeline.results import FatalError, Run, TargetResult
from ..escape import neutralise_log, text
from .common import entries, matrix_rows, mib, passing_tp_sizes, summary_line, tp_suffix, where
from .console import make_console, render_diagnostic
from .console import markup as escape
from .options import RenderOptions

if TYPE_CHECKING:
    from ...pipeline.model_check import ModelCheck

# The `full` sections of the other commands' subjects, by `kind`: the module of this folder that renders them
# (`render_subject`), imported when such a subject is rendered, as `format_module` imports a format, so that a
# check's report never loads the call and dry-run modules.
SECTIONS = {"call": "call_sections", "dry-run": "dryrun_sections"}


def _ranges(values: list[int]) -> str:
    """[0, 1, 2, 4, 5] -> "0-2, 4-5"."""
    runs: list[tuple[int, int]] = []  # (first, last) of each run of values one apart, in the given order
    for v in values:
        if runs and v == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], v)
        else:
            runs.append((v, v))
    return ", ".join(str(first) if first == last else f"{first}-{last}" for first, last in runs)


def _mib(n: int | float | None) -> str:
    return "?" if n is None else mib(n)


def _source_line(check: ModelCheck) -> str:
    src = check.source_dict()
    kind = src["kind"]
    if kind == "builtin":
        return "built-in description (no files read)"
    read = f"{len(src['files_read'])} file(s), {src['bytes_read']:,} bytes of metadata"
    what = {"config-only": "config.json only (no weights cross-checked)", "sharded": "sharded safetensors checkpoint",
            "safetensors-file": "single safetensors file", "directory": "model directory",
            "hf-cache": "Hugging Face cache snapshot"}.get(kind, kind)
    return f"{what}, {counted(src['tensors'], 'tensor')}; read {read}"


def _checked(result: TargetResult) -> ModelCheck:
    """The model check of a result that was read (`error` None): the full report's headers and tables."""
    assert result.check is not None, "a readable check result holds its model check"
    return result.check


def _header(console: Console, result: TargetResult, tp_sizes: list[int | None] | None = None) -> None:
    """Source, model and deployment; with `tp_sizes` (a matrix) the TP sizes instead of one, and only the
    checkpoint's notes (each TP size's own notes would repeat)."""
    check = _checked(result)
    console.print(f"[bold]{escape(result.target)}[/bold]", soft_wrap=True)
    rows: list[tuple[str, str]] = [("source", _source_line(check))]
    model = check.model
    if model is not None:
        layers = model.linear_layers
        total = "?" if model.num_hidden_layers is None else model.num_hidden_layers  # unusable: its GDR108 says why
        rows.append(("model", f"{model.architecture} ({model.family}), {variant_spec(model.kind).label}: "
                              f"{len(layers)} of {total} layers linear [{_ranges(layers)}]"))
        dims = {"H": model.num_k_heads, "HV": model.num_v_heads, "K": model.head_k_dim, "V": model.head_v_dim,
                "conv": model.conv_kernel}
        # A dimension the config does not give as a usable integer is "?" here; its diagnostic says why.
        rows.append(("heads", " ".join(f"{name}={'?' if value is None else value}" for name, value in dims.items())))
    dep = check.deployment
    settings = check.settings
    state = settings.state_dtype if settings else (dep.state_dtype or "default")
    slots = f"{counted(check.num_slots, 'slot')} ({dep.profile.slot_zero_note})"
    tp_text = f"tp={dep.tp}" if tp_sizes is None else "tp=" + ", ".join(map(str, tp_sizes))
    rows.append(("deployment", f"{dep.profile.label}, {tp_text}, batch={dep.batch}, {slots}, state {state}"))
    notes = check.source_dict()["notes"] if tp_sizes is None else list(getattr(check.checkpoint, "notes", []) or [])
    for note in notes:
        rows.append(("note", note))
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        console.print(f"  [dim]{key.ljust(width)}[/dim]  {escape(value)}", soft_wrap=True)


def _shapes_table(console: Console, check: ModelCheck) -> None:
    if check.call is None:
        return
    tp = check.deployment.tp
    table = Table(title=f"kernel call per rank (tp={tp}: each of {tp} rank(s), every linear layer)",
                  title_justify="left", show_edge=False, pad_edge=False)
    for column in ("argument", "shape", "dtype", "strides"):
        table.add_column(column)
    for name, spec in check.call.tensors().items():
        table.add_row(name, str(list(spec.shape)), short_dtype(spec.dtype), str(list(spec.stride)))
    table.add_row("scale", f"{check.call.scale:.6g}", "float", "")
    for name, spec in check.pools.items():
        if name in check.call.tensors():  # the pool view the kernel receives is already listed
            continue
        label = f"{check.deployment.engine} {name}"
        table.add_row(f"[dim]{escape(label)}[/dim]", str(list(spec.shape)), short_dtype(spec.dtype),
                      str(list(spec.stride)))
    console.print()
    console.print(table)
    # Bytes per request are in the GDR131 note; the table only adds what a --gpu-memory budget holds: with the
    # engine's ping-pong slots and draft tokens where it models them (the pool plan, GDR135), as GDR136 counts.
    budget = check.pool if check.pool is not None and check.pool.budget is not None else check.memory
    if budget is not None and budget.budget is not None:
        console.print(escape(f"  state budget: {budget.requests_that_fit} request(s) fit in {_mib(budget.budget)} "
                             f"per rank at {_mib(budget.bytes_per_request)} each"), soft_wrap=True)


def _matrix_table(console: Console, run: Run, target: str) -> None:
    rows = [row for row in matrix_rows(run) if row.target == target]
    table = Table(title=f"deployment matrix ({len(rows)} TP sizes)", title_justify="left", show_edge=False,
                  pad_edge=False)
    for column in ("tp", "result", "errors", "warnings", "HV per rank", "width", "state per request"):
        table.add_column(column, justify="left" if column == "result" else "right")
    for row in rows:
        verdict = "[green]pass[/green]" if row.passed else "[red]fail[/red]"
        table.add_row(str(row.tp), verdict, str(row.errors), str(row.warnings),
                      str(row.value_heads_per_rank or "-"), str(row.width or "-"), mib(row.state_bytes_per_request))
    console.print(table)
    sizes = passing_tp_sizes(rows, target)
    console.print(f"  passes at tp={', '.join(map(str, sizes))}" if sizes else "  fails at every TP size checked",
                  soft_wrap=True)
    console.print()


def _tp_heading(console: Console, run: Run, result: TargetResult) -> None:
    errors = sum(d.severity == "error" for d in result.diagnostics)
    warnings = sum(d.severity == "warning" for d in result.diagnostics)
    verdict = "[red]fail[/red]" if run.fails(result) else "[green]pass[/green]"
    console.print(f"[bold]tp={result.deployment_tp}[/bold]: {verdict}, {errors} error(s), {warnings} warning(s)",
                  soft_wrap=True)
    console.print()


def _target_groups(results: list[TargetResult]) -> dict[str, list[TargetResult]]:
    groups: dict[str, list[TargetResult]] = {}
    for result in results:
        groups.setdefault(result.target, []).append(result)
    return groups


def _render_quiet(console: Console, run: Run) -> None:
    """`--quiet`: the diagnostics alone, without headers, tables or the summary."""
    for result, diagnostic in entries(run):
        if result.error is None:
            render_diagnostic(console, diagnostic, origin=where(result, diagnostic).prefix(),
                              suffix=tp_suffix(run, result))


def _render_subject(result: TargetResult, options: RenderOptions) -> str:
    """`call` and `dry-run` results keep their own sections (the calls; the step table and timing). Told apart by
    `kind`, not by class: a check's report must not load the call and dry-run modules to ask."""
    sections = importlib.import_module(f"{__package__}.{SECTIONS[result.kind]}")
    text: str = sections.render_subject(result, options)
    return text


def render(run: Run, options: RenderOptions) -> str:
    subject = run.results[0] if len(run.results) == 1 else None
    if not options.quiet and subject is not None and subject.kind != "check" and subject.error is None:
        return _render_subject(subject, options)
    buffer = io.StringIO()
    console = make_console(buffer, options.color, options.ascii_only)
    if options.quiet:
        _render_quiet(console, run)
        return neutralise_log("".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines())
                              + _error_lines(run, options))
    for target, results in _target_groups(run.results).items():
        readable = [r for r in results if r.error is None]  # unreadable ones are one stderr line each
        if not readable:
            continue
        if len(results) == 1:
            result = readable[0]
            _header(console, result)
            _shapes_table(console, _checked(result))
            console.print()
            for diagnostic in result.diagnostics:
                render_diagnostic(console, diagnostic)
            continue
        _header(console, readable[0], tp_sizes=[r.deployment_tp for r in readable])
        console.print()
        for result in readable:
            _tp_heading(console, run, result)
            for diagnostic in result.diagnostics:
                render_diagnostic(console, diagnostic)
        _matrix_table(console, run, target)
    if any(r.error is None for r in run.results):
        console.print(summary_line(run), soft_wrap=True)
    # rich pads table lines to the table's width; trailing blanks only get in the way of diffs and greps
    return neutralise_log("".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines())
                          + _error_lines(run, options))


def _error_lines(run: Run, options: RenderOptions) -> str:
    """The `error:` line of each target that could not be read, where the report is a file (`errors_in_report`)."""
    if not options.errors_in_report:
        return ""
    return "".join(f"error: {text(result.error.message)}\n" for result in run.results if result.error is not None)


def render_fatal(error: FatalError) -> str:
    return ""  # one `error:` line on stderr
