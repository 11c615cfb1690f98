"""The `full` report of `gdr-check dry-run`: the header, the step table and timing, the diagnostics and the
verdict; `render_ranks` for `--ranks all` (the `dry-run` command renders through the formats like every command)."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any, cast

from rich.console import Console
from rich.table import Table

from ...base.limits import counted
from ...base.tensor_spec import short_dtype
from ...base.variants import variant_spec
from ...pipeline.dryrun.diagnose import KERNEL_NAMES, fmt, number
from ...pipeline.dryrun.rank_run import RanksResult
from ..escape import neutralise_log
from .common import diagnostics_tally
from .console import make_console, render_diagnostic
from .console import markup as escape

if TYPE_CHECKING:
    from ...pipeline.dryrun.driver import DryRunResult
    from ...pipeline.dryrun.entry import DryRunTargetResult
    from ...pipeline.results import TargetResult
    from .options import RenderOptions


def _dims(dims: dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in dims.items())


def _spec(spec: dict[str, Any]) -> str:
    return f"{spec['shape']} {short_dtype(spec['dtype'])} strides {spec['stride']}"


def _device_line(env: dict[str, Any]) -> str:
    versions = f"torch {env.get('torch')}, triton {env.get('triton')}"
    if env.get("interpreter"):
        return (f"{env.get('reason')}: Triton interpreter on CPU (TRITON_INTERPRET=1) at reduced sizes; timings are "
                f"not kernel times ({versions})")
    return f"{env.get('device_name')} (CUDA; {versions})"


def _header(console: Console, target: str, result: DryRunResult) -> None:
    check = result.check
    rows: list[tuple[str, str]] = []
    model = check.model
    if model is not None:
        rows.append(("model", f"{model.architecture} ({model.family}), {variant_spec(model.kind).label}: "
                              f"H={model.num_k_heads} HV={model.num_v_heads} "
                              f"K={model.head_k_dim} V={model.head_v_dim}"))
    dep = check.deployment
    state = check.settings.state_dtype if check.settings else (dep.state_dtype or "default")
    rows.append(("deployment", f"{dep.profile.label}, tp={dep.tp}, batch={dep.batch}, "
                               f"{counted(check.num_slots, 'slot')}, state {state}"))
    child = result.child
    for name, label in (child.get("kernels") or {}).items():
        rows.append(("kernel" if name == "builtin" else "backend", label))
    if child.get("device"):
        rows.append(("device", _device_line(child["device"])))
    geometry = child.get("geometry")
    if geometry:
        launched = _dims(geometry["dims"])
        if geometry["dims"] != geometry["deployed_dims"]:
            launched += f" (deployed: {_dims(geometry['deployed_dims'])})"
        rows.append(("launched", launched))
        if geometry.get("pool"):
            rows.append(("state", f"layer {geometry['pool_layer']} of ssm_pool {_spec(geometry['pool'])}"))
        else:
            rows.append(("state", _spec(geometry["call"]["initial_state"])))
        substituted = geometry.get("substitutions") or []
        if substituted:
            names = ", ".join(change["what"].strip("`") for change in substituted)
            rows.append(("dtypes", f"bf16 run as fp16 (the interpreter cannot run bf16): {names}"))
    console.print(f"[bold]{escape(target)}[/bold]  dry-run", soft_wrap=True)
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        console.print(f"  [dim]{key.ljust(width)}[/dim]  {escape(value)}", soft_wrap=True)


def _error(check: dict[str, Any], expected_tolerance: float | None, key: str = "error") -> str:
    """The error, its own tolerance when it is not the column's (a beta rounding tie), red when it fails."""
    text = fmt(check[key])
    if expected_tolerance is not None and number(check["tolerance"]) != expected_tolerance:
        text += f" (tol {fmt(check['tolerance'])})"
    return text if check.get("passed", True) else f"[bold red]{text}[/bold red]"


def _flags(run: dict[str, Any]) -> str:
    """untouched slots / skipped rows zero / every element written: "ok" or the offending count."""
    parts = []
    for key, count in (("untouched", "modified_elements"), ("skipped_rows", "nonzero_elements"),
                       ("written", "nan_elements")):
        check = run[key]
        parts.append("ok" if check.get("passed", True) else f"[bold red]{check[count]}[/bold red]")
    return " / ".join(parts)


def _column_tolerance(steps: list[dict[str, Any]], key: str) -> float | None:
    for step in steps:
        for run in step["kernels"].values():
            if key in run:
                return number(run[key]["tolerance"])
    return None


def _steps_table(console: Console, result: DryRunResult) -> None:
    steps = result.child.get("steps") or []
    if not steps:
        return
    out_tol, state_tol = _column_tolerance(steps, "output"), _column_tolerance(steps, "state")
    table = Table(title="steps: errors relative to the largest float64 reference value", title_justify="left",
                  show_edge=False, pad_edge=False)
    table.add_column("step")
    table.add_column("kernel")
    table.add_column("live/skip")
    table.add_column(f"out (tol {fmt(out_tol)})")
    table.add_column(f"state (tol {fmt(state_tol)})")
    table.add_column("checks")
    engine = result.plan.backend if result.plan is not None else "builtin"
    agreement = any("agreement" in s for s in steps)
    if agreement:
        table.add_column(f"vs {KERNEL_NAMES.get(engine, engine)}: out / state")
    for step in steps:
        for name, run in step["kernels"].items():
            cells = [str(step["step"]), KERNEL_NAMES.get(name, name), f"{step['live_rows']}/{step['skipped_rows']}"]
            if "raised" in run:
                cells += [f"[bold red]raised {escape(run['raised']['exception'])}[/bold red]", "", ""]
            else:
                cells += [_error(run["output"], out_tol), _error(run["state"], state_tol), _flags(run)]
            if agreement:
                agree = step.get("agreement")
                shown = bool(agree) and name == "builtin"
                cells.append(f"{_error(agree['out'], None, 'difference')} / "
                             f"{_error(agree['initial_state'], None, 'difference')}" if shown else "")
            table.add_row(*cells)
    console.print()
    console.print(table)
    console.print("checks: untouched slots bitwise equal / skipped rows zero / no NaN left in `out`", soft_wrap=True)


def _timing_lines(console: Console, result: DryRunResult) -> None:
    timing = result.child.get("timing")
    if not timing:
        return
    console.print()
    if not timing.get("meaningful"):
        for name, numbers in timing.get("kernels", {}).items():
            console.print(f"timing: {KERNEL_NAMES.get(name, name)} {numbers['median_us'] / 1e6:.3g} s median per call, "
                          f"{escape(timing['method'])}; no bandwidth figures", soft_wrap=True)
        return
    copy = timing["copy"]
    console.print(f"timing: {timing['method']}, B={timing['rows']} ({timing['live_rows']} live), "
                  f"{timing['bytes_per_call'] / 1e6:.3f} MB per call (docs/kernel-contract.md §11); "
                  f"device-to-device copy {copy['bandwidth_gbps'] / 1e3:.2f} TB/s in this run", soft_wrap=True)
    for name, numbers in timing["kernels"].items():
        console.print(f"  {KERNEL_NAMES.get(name, name)}: {numbers['median_us']:.2f} us median, "
                      f"{numbers['bandwidth_gbps'] / 1e3:.3f} TB/s, {100 * numbers['fraction_of_copy']:.1f}% of copy",
                      soft_wrap=True)


def _summary(result: DryRunResult) -> str:
    tally = diagnostics_tally(result.diagnostics)
    if result.unavailable is not None and result.plan is not None:  # refused after planning, so a plan is set
        return f"dry-run not launched: backend `{result.plan.backend}` is not available; {tally}"
    if result.nothing_to_run is not None:
        return f"dry-run not launched: nothing to run ({result.nothing_to_run.code}); {tally}"
    if not result.launched:
        codes = ", ".join(result.refused_because) or "no per-rank call"
        return (f"dry-run not launched: the deployment has {len(result.refused_because)} error(s) ({codes}); "
                "fix them first")
    steps = len(result.child.get("steps") or [])
    verdict = "passed" if result.ok else "failed"
    return f"dry-run {verdict}: {steps} step(s) verified; {tally}"


def render_subject(result: TargetResult, options: RenderOptions) -> str:
    """A dry run's `full` report (`full.render` comes here for a `dry-run` subject); `--ranks all` has its own."""
    record = cast("DryRunTargetResult", result).record
    if isinstance(record, RanksResult):  # `dry-run --ranks all`
        return neutralise_log(render_ranks(result.target, record, color=options.color, ascii_only=options.ascii_only))
    return neutralise_log(render_full(result.target, record, color=options.color, ascii_only=options.ascii_only))


def render_full(target: str, result: DryRunResult, *, color: bool, ascii_only: bool = False) -> str:

    buffer = io.StringIO()
    console = make_console(buffer, color, ascii_only)
    _header(console, target, result)
    _steps_table(console, result)
    _timing_lines(console, result)
    console.print()
    for diagnostic in result.diagnostics:
        render_diagnostic(console, diagnostic)
    console.print(_summary(result), soft_wrap=True)
    return buffer.getvalue()


def render_ranks(target: str, result: RanksResult, *, color: bool, ascii_only: bool = False) -> str:
    buffer = io.StringIO()
    console = make_console(buffer, color, ascii_only)
    data = result.result
    console.print(f"[bold]{escape(target)}[/bold]  dry-run --ranks all (tp={result.tp})", soft_wrap=True)
    rows: list[tuple[str, str]] = []
    model = result.check.model
    if model is not None:
        rows.append(("model", (f"{model.architecture} ({model.family}), {variant_spec(model.kind).label}: "
                               f"H={model.num_k_heads} HV={model.num_v_heads} "
                               f"K={model.head_k_dim} V={model.head_v_dim}")))
    rows.append(("deployment", f"{result.check.deployment.profile.label}, tp={result.tp}"))
    if data.get("transport"):
        rows.append(("transport", data["transport"]["why"]))
    if data.get("device"):
        env = data["device"]
        rows.append(("device", (f"{env['device_name']} (torch {env['torch']}, triton {env['triton']})"
                                + ("; reduced sizes, timings are not kernel times" if env["interpreter"] else ""))))
    for name, label in (data.get("kernels") or {}).items():
        rows.append(("kernel" if name == "builtin" else "backend", label))
    layer = data.get("layer")
    if layer:
        rows.append(("layer", (f"{layer['layout']}: H={layer['H']} HV={layer['HV']} K={layer['K']} V={layer['V']}, "
                               f"{layer['HV'] // layer['tp']} value heads per rank")))
    if result.weights:
        names = ", ".join(f"`{t['name']}` ({t['dtype']})" for t in result.weights["tensors"].values())
        rows.append(("parameters", f"layer {result.weights['layer']}'s {names}, read from the safetensors bytes"))
    for name, shard in (data.get("sharding") or {}).items():
        rows.append((f"`{name}`", f"from {shard['source']}: {shard['how']}"))
    if rows:
        width = max(len(k) for k, _ in rows)
        for key, value in rows:
            console.print(f"  [dim]{key.ljust(width)}[/dim]  {escape(value)}", soft_wrap=True)
    steps = data.get("steps") or []
    if steps:
        table = Table(title="gathered ranks vs the unsharded float64 layer (errors relative to the largest value)",
                      title_justify="left", show_edge=False, pad_edge=False)
        for column in ("step", "kernel", "out", "state", "per rank: out / state"):
            table.add_column(column)
        for step in steps:
            for name, run in step["kernels"].items():
                per_rank = ", ".join(f"r{r['rank']} {fmt(r['out_error'])}/{fmt(r['state_error'])}"
                                     for r in run["per_rank"])
                table.add_row(str(step["step"]), KERNEL_NAMES.get(name, name), _error(run["output"], None),
                              _error(run["state"], None), per_rank)
        console.print()
        console.print(table)
    ranks = data.get("ranks") or []
    if ranks:
        console.print()
        slowest = result.slowest()
        for entry in ranks:
            times = "; ".join(f"{KERNEL_NAMES.get(k, k)} {sum(v):.3g} s over {len(v)} call(s)"
                              for k, v in entry["seconds"].items())
            timed = "; ".join(f"{KERNEL_NAMES.get(k, k)} {v:.1f} us median of warm calls"
                              for k, v in (entry.get("timed_us") or {}).items())
            memory = entry["memory_bytes"] / 2**20
            mark = "  [bold](slowest)[/bold]" if slowest is not None and entry["rank"] == slowest["rank"] else ""
            console.print(f"  rank {entry['rank']} on {escape(entry['device'])}: {escape(times)}"
                          f"{'; ' + escape(timed) if timed else ''}; peak memory {memory:.1f} MiB{mark}",
                          soft_wrap=True)
    console.print()
    for diagnostic in result.diagnostics:
        render_diagnostic(console, diagnostic)
    errors = sum(d.severity == "error" for d in result.diagnostics)
    tally = diagnostics_tally(result.diagnostics)
    if result.outcome is None and result.unavailable:
        verdict = f"dry-run --ranks all not launched: backend unavailable ({result.unavailable})"
    elif result.nothing_to_run is not None:
        verdict = f"dry-run --ranks all not launched: nothing to run ({result.nothing_to_run.code}); {tally}"
    elif result.outcome is None:
        verdict = f"dry-run --ranks all not launched: the deployment has {errors} error(s); fix them first"
    else:
        verdict = (f"dry-run --ranks all {'passed' if result.ok else 'failed'}: {len(steps)} step(s) on "
                   f"{result.tp} ranks; {tally}; {result.outcome.wall_s:.1f} s")
    console.print(verdict, soft_wrap=True)
    return buffer.getvalue()
