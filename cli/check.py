"""`gdr-check [check] PATH...`: per-rank kernel shapes and every diagnostic for a model and a deployment."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

import typer

from .main import app
from .output import FORMATS, Output
from .results import FatalError, TargetResult, exit_code

_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([kmgt]i?b?|b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
          "t": 10**12, "tb": 10**12, "ki": 2**10, "kib": 2**10, "mi": 2**20, "mib": 2**20, "gi": 2**30,
          "gib": 2**30, "ti": 2**40, "tib": 2**40}


def parse_size(text: str) -> int:
    """'80GiB', '141GB', '1.5e10' -> bytes."""
    found = _SIZE.match(text)
    if not found:
        raise typer.BadParameter(f"not a size: {text!r} (e.g. 80GiB, 141GB or a byte count)", param_hint="--gpu-memory")
    number, unit = found.groups()
    return int(float(number) * _UNITS[(unit or "").lower()])


def parse_tp_list(text: str) -> list[int]:
    """'4' or '1,2,4,8' -> TP sizes."""
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise typer.BadParameter(f"expected an integer or a comma-separated list, got {text!r}", param_hint="--tp")
    if not sizes or any(size < 1 for size in sizes):
        raise typer.BadParameter(f"TP sizes must be >= 1, got {text!r}", param_hint="--tp")
    return sizes


def check_targets(targets: list[str], tp_sizes: list[int], **deployment: object) -> list[TargetResult]:
    """Check every (target, tp) pair; unreadable targets become FatalErrors, not exceptions."""
    from ..models import Deployment, check_model
    from ..sources import SourceError

    results: list[TargetResult] = []
    for target in targets:
        for tp in tp_sizes:
            try:
                dep = Deployment(tp=tp, **deployment)  # type: ignore[arg-type]
            except ValueError as error:
                raise typer.BadParameter(str(error))
            try:
                check = check_model(target, dep)
            except SourceError as error:
                results.append(TargetResult(target, error=FatalError(error.code, str(error), error.path)))
                break
            results.append(TargetResult(target, check=check, diagnostics=list(check.report.diagnostics)))
    return results


def list_models(out: Output, output_format: str) -> None:
    import json

    from ..models import list_builtin

    models = list_builtin()
    if output_format == "json":
        out.write(json.dumps([{"repo_id": m.repo_id, "architecture": m.architecture, "confidence": m.confidence}
                              for m in models], indent=2))
        return
    width = max(len(m.repo_id) for m in models)
    out.write("\n".join(f"{m.repo_id.ljust(width)}  {m.architecture}  ({m.confidence})" for m in models))


@app.command("check")
def check_command(
    targets: Optional[list[str]] = typer.Argument(None, help="Checkpoint files or directories, config.json, or Hugging Face repo ids."),
    tp: str = typer.Option("1", "--tp", help="Tensor-parallel size, or a comma-separated list (a matrix)."),
    batch: int = typer.Option(8, "--batch", help="Largest decode batch B."),
    slots: Optional[int] = typer.Option(None, "--slots", help="State pool rows (default: batch+1, slot 0 reserved)."),
    state_dtype: Optional[str] = typer.Option(None, "--state-dtype", help="float32, bfloat16 or float16 (default: the engine's choice)."),
    engine: str = typer.Option("sglang", "--engine", help="sglang or vllm."),
    gpu_memory: Optional[str] = typer.Option(None, "--gpu-memory", help="Per-rank budget for the state pools, e.g. 20GiB."),
    list_models_flag: bool = typer.Option(False, "--list-models", help="List the built-in model geometries and exit."),
    output_format: str = typer.Option("full", "--output-format", envvar="GDR_CHECK_OUTPUT_FORMAT", help=f"One of: {', '.join(FORMATS)}."),
    output_file: Optional[Path] = typer.Option(None, "--output-file", "-o", envvar="GDR_CHECK_OUTPUT_FILE", help="Write the report here instead of stdout."),
) -> int:
    """Check a model: per-rank shapes of every kernel argument, and every problem, for one deployment."""
    from .formats import renderer
    from .formats.full import use_color

    if output_format not in FORMATS:
        raise typer.BadParameter(f"unknown format {output_format!r}; expected one of: {', '.join(FORMATS)}",
                                 param_hint="--output-format")
    if engine not in ("sglang", "vllm"):
        raise typer.BadParameter(f"unknown engine {engine!r}; expected sglang or vllm", param_hint="--engine")
    out = Output(output_format)
    if list_models_flag:
        list_models(out, output_format)
        return 0
    results = check_targets(
        targets or ["."], parse_tp_list(tp), batch=batch, slots=slots, state_dtype=state_dtype, engine=engine,
        gpu_memory=parse_size(gpu_memory) if gpu_memory else None,
    )
    render = renderer(output_format)
    text = render(results, color=use_color() and output_file is None) if output_format == "full" else render(results)
    if output_file is not None:
        output_file.write_text(text, encoding="utf-8")
    elif text:
        out.write(text)
    for result in results:
        if result.error is not None:
            out.error_line(result.error.message)
    return exit_code(results)
