"""`gdr-check dry-run PATH`: run the deployment's exact per-rank kernel call on synthetic tensors and verify it.

The kernel runs in a child process (`gdr_check.runner`); this process never imports torch or triton.
Exit codes: 0 passed, 1 refused (the deployment has errors) or a GDR3xx error, 2 usage, unreadable input or
a broken environment (torch/triton missing, `--device cuda` without a device).
"""

from __future__ import annotations

import io
import json
import os
import sys
from typing import Any, Optional

import typer
from rich.console import Console
from rich.table import Table

from ..limits import LIMITS, shorten
from ..engines import DEFAULT_ENGINE, profile_for
from .engine_option import engine_help, engine_option
from .escape import markup as escape
from .main import app
from .output import Output, tool_info

DRYRUN_FORMATS = ("full", "json")
EPILOG = (
    "Examples:  gdr-check dry-run ./Qwen3-Next-80B-A3B-Instruct --tp 4 --batch 32  |  "
    "gdr-check dry-run ./Kimi-Linear-48B-A3B --device cpu --steps 2  |  "
    "GDR_CHECK_SGLANG_PATH=sglang-0.5.23.whl gdr-check dry-run ./Qwen3.5-4B --backend sglang"
)


def _validate(output_format: str, backend: str, device: str, engine: Optional[str], steps: int, batch: int) -> str:
    """The engine profile to use; usage errors (exit 2) for bad combinations."""
    from ..runner.plan import BACKENDS, DEVICES

    if output_format not in DRYRUN_FORMATS:
        raise typer.BadParameter(f"dry-run writes {' or '.join(DRYRUN_FORMATS)}, not {output_format!r}",
                                 param_hint="--output-format")
    if backend not in BACKENDS:
        raise typer.BadParameter(f"expected one of {', '.join(BACKENDS)}, got {backend!r}", param_hint="--backend")
    if device not in DEVICES:
        raise typer.BadParameter(f"expected one of {', '.join(DEVICES)}, got {device!r}", param_hint="--device")
    if engine is not None:
        engine_option(engine)
    if backend != "builtin" and engine is not None and profile_for(engine).name != backend:
        raise typer.BadParameter(f"--backend {backend} runs {backend}'s kernel, which has {backend}'s semantics: "
                                 f"use --engine {backend} (or leave --engine out)", param_hint="--engine")
    if steps < 1:
        raise typer.BadParameter("at least one step", param_hint="--steps")
    if batch < 1:
        raise typer.BadParameter("a dry-run needs at least one row (B = 0 launches nothing)", param_hint="--batch")
    return engine or (backend if backend != "builtin" else DEFAULT_ENGINE)


# -- the human report ------------------------------------------------------------------------------------------------
def _dims(dims: dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in dims.items())


def _spec(spec: dict[str, Any]) -> str:
    from ..tensors import short_dtype

    return f"{spec['shape']} {short_dtype(spec['dtype'])} strides {spec['stride']}"


def _device_line(env: dict[str, Any]) -> str:
    versions = f"torch {env.get('torch')}, triton {env.get('triton')}"
    if env.get("interpreter"):
        return (f"{env.get('reason')}: Triton interpreter on CPU (TRITON_INTERPRET=1) at reduced sizes; timings are "
                f"not kernel times ({versions})")
    return f"{env.get('device_name')} (CUDA; {versions})"


def _header(console: Console, target: str, result: Any) -> None:
    check = result.check
    rows: list[tuple[str, str]] = []
    model = check.model
    if model is not None:
        rows.append(("model", f"{model.architecture} ({model.family}), {model.kind.upper()}: H={model.num_k_heads} "
                              f"HV={model.num_v_heads} K={model.head_k_dim} V={model.head_v_dim}"))
    dep = check.deployment
    state = check.settings.state_dtype if check.settings else (dep.state_dtype or "default")
    rows.append(("deployment", f"{dep.profile.label}, tp={dep.tp}, batch={dep.batch}, {dep.num_slots} slots, state {state}"))
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
    from ..runner.diagnose import fmt, number

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
    from ..runner.diagnose import number

    for step in steps:
        for run in step["kernels"].values():
            if key in run:
                return number(run[key]["tolerance"])
    return None


def _steps_table(console: Console, result: Any) -> None:
    from ..runner.diagnose import KERNEL_NAMES, fmt

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
                cells.append(f"{_error(agree['out'], None, 'difference')} / "
                             f"{_error(agree['initial_state'], None, 'difference')}" if agree and name == "builtin" else "")
            table.add_row(*cells)
    console.print()
    console.print(table)
    console.print("checks: untouched slots bitwise equal / skipped rows zero / no NaN left in `out`", soft_wrap=True)


def _timing_lines(console: Console, result: Any) -> None:
    from ..runner.diagnose import KERNEL_NAMES

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


def _summary(result: Any) -> str:
    counts = {level: sum(d.severity == level for d in result.diagnostics) for level in ("error", "warning", "info")}
    tally = f"{counts['error']} error(s), {counts['warning']} warning(s), {counts['info']} note(s)"
    if result.unavailable is not None:
        return f"dry-run not launched: backend `{result.plan.backend}` is not available; {tally}"
    if not result.launched and not result.refused_because:
        check = result.check
        if check.model is None:
            return "dry-run not launched: the model has no GDN or KDA layers: nothing to run"
        if check.decode is not None and not check.decode.packed:
            return f"dry-run not launched: {check.decode.text()}"
    if not result.launched:
        codes = ", ".join(result.refused_because) or "no per-rank call"
        return f"dry-run not launched: the deployment has {len(result.refused_because)} error(s) ({codes}); fix them first"
    steps = len(result.child.get("steps") or [])
    verdict = "passed" if result.ok else "failed"
    return f"dry-run {verdict}: {steps} step(s) verified; {tally}"


def render_full(target: str, result: Any, *, color: bool) -> str:
    from .formats.full import make_console, render_diagnostic

    buffer = io.StringIO()
    console = make_console(buffer, color)
    _header(console, target, result)
    _steps_table(console, result)
    _timing_lines(console, result)
    console.print()
    for diagnostic in result.diagnostics:
        render_diagnostic(console, diagnostic)
    console.print(_summary(result), soft_wrap=True)
    return buffer.getvalue()


def render_json(result: Any) -> str:
    document = {"schema_version": 1, "tool": tool_info()}
    document.update(result.to_dict())
    return json.dumps(document, indent=2) + "\n"


@app.command("dry-run", epilog=EPILOG)
def dry_run_command(
    target: str = typer.Argument(..., help="Checkpoint file or directory, config.json, or Hugging Face repo id."),
    tp: int = typer.Option(1, "--tp", help="Tensor-parallel size: the call of one rank runs."),
    batch: int = typer.Option(8, "--batch", help="Decode batch B (rows of the call)."),
    slots: Optional[int] = typer.Option(None, "--slots", help="State pool rows (default: batch+1, slot 0 reserved)."),
    state_dtype: Optional[str] = typer.Option(None, "--state-dtype", help="float32, bfloat16 or float16 (default: the engine's choice)."),
    steps: int = typer.Option(3, "--steps", help="Decode steps to run and verify."),
    backend: str = typer.Option("builtin", "--backend", help="builtin (gdr-check's kernel), sglang or vllm (the installed engine's kernel, compared with ours)."),
    device: str = typer.Option("auto", "--device", help="auto, cuda or cpu (cpu: the Triton interpreter at reduced sizes)."),
    engine: Optional[str] = typer.Option(None, "--engine", help=engine_help("the backend's, else sglang")),
    seed: int = typer.Option(0, "--seed", help="Seed of the random inputs, state and slot choices."),
    timeout: float = typer.Option(1800.0, "--timeout", help="Seconds before the child process is killed."),
    output_format: str = typer.Option("full", "--output-format", envvar="GDR_CHECK_OUTPUT_FORMAT", help="full or json."),
) -> int:
    """Run the deployment's per-rank kernel call on synthetic tensors in a child process and verify every step."""
    from ..models import Deployment, check_model
    from ..runner.api import DryRunEnvironmentError, dry_run_check
    from ..sources import SourceError
    from .formats.full import use_color

    profile = _validate(output_format, backend, device, engine, steps, batch)
    for name, value in (("steps", steps), ("seed", seed), ("timeout", timeout)):
        if not LIMITS[name].allows(value):  # NaN, inf, negative, or a number of thousands of digits
            raise typer.BadParameter(f"{shorten(value)} is outside {LIMITS[name].range_text} ({LIMITS[name].what})",
                                     param_hint=f"--{name}")
    out = Output(output_format)
    try:
        deployment = Deployment(tp=tp, batch=batch, slots=slots, state_dtype=state_dtype, engine=profile)
    except ValueError as error:
        raise typer.BadParameter(str(error))
    try:
        check = check_model(target, deployment)
    except SourceError as error:
        out.fatal(error.code, str(error), path=error.path)
        return 2
    try:
        result = dry_run_check(check, backend=backend, device=device, steps=steps, seed=seed, timeout=timeout)
    except DryRunEnvironmentError as error:
        out.fatal("environment", str(error))
        return 2
    if output_format == "json":
        out.write(render_json(result))
    else:
        out.write(render_full(target, result, color=use_color()))
    outcome = result.outcome
    if outcome is not None and os.environ.get("GDR_CHECK_DEBUG") and (outcome.crashed or result.child.get("status") != "ok"):
        out.error_line("the dry-run child's stderr follows")
        from .escape import lines

        sys.stderr.write(lines(outcome.stderr))
    return 0 if result.ok and result.launched else 1  # nothing ran: not a pass
