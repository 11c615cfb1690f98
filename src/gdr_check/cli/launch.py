"""`gdr-check launch [OPTIONS] -- ENGINE COMMAND`: whether a vLLM or sglang launch starts, before launching it.

Parsing and rendering only: the command is read by `gdr_check.models.launch_command`, checked by
`gdr_check.launch_check`.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import typer

from ..base.limits import LimitError, SizeError, parse_size
from ..deployment.launch_command import parse_launch, parse_log
from ..deployment.launch_memory import SglangPlan
from ..pipeline.launch_check import LAUNCH_CODES, LaunchResult, check_launch, gpu_for
from .deployment_flags import check_command
from .escape import neutralise_log, text
from .main import app
from .output import LAUNCH_FORMATS, Output
from .run_options import NO_CACHE_HELP

EPILOG = """Examples:

  gdr-check launch --gpu h100 -- vllm serve Qwen/Qwen3-Next-80B-A3B-Instruct --tensor-parallel-size 4

  gdr-check launch --gpu h200 -- python -m sglang.launch_server --model-path ./ckpt --tp 4 --attn-dp-size 2

  gdr-check launch --gpu h100 --from-log server.log
"""



def _size(option: str, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return parse_size(value)
    except LimitError:
        raise
    except SizeError as error:
        raise typer.BadParameter(str(error), param_hint=option) from None


# An engine prints its settings at start-up: the first 16 MiB of a log hold them.
LOG_READ_LIMIT = 16 << 20


def _read_log(path: Path) -> bytes:
    """The start of a log file; a usage error (one line) for a path that is no regular file or cannot be read
    (a FIFO would block, a directory has no text)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise typer.BadParameter(f"{text(path)} is not a regular file", param_hint="--from-log")
        with open(path, "rb") as handle:
            return handle.read(LOG_READ_LIMIT)
    except OSError as error:
        raise typer.BadParameter(f"cannot read {text(path)}: {error.strerror}", param_hint="--from-log") from None


def _gib(count: float) -> str:
    return f"{count / (1 << 30):.2f} GiB"


@app.command("launch", epilog=EPILOG, context_settings={"ignore_unknown_options": True,
                                                        "allow_interspersed_args": False})
def launch_command(
    command: list[str] | None = typer.Argument(
        None, help="The engine command after `--`: `vllm serve MODEL ...`, `python -m "
                   "vllm.entrypoints.openai.api_server ...`, `sglang serve ...`, `python -m "
                   "sglang.launch_server ...`."),
    gpu: str | None = typer.Option(None, "--gpu", help="The GPU: h100 (default), h200, a100-80g or b200."),
    gpu_total_memory: str | None = typer.Option(
        None, "--gpu-total-memory", help="The GPU's total memory as torch reports it, e.g. 79.25GiB (replaces "
                                         "--gpu's; `check --gpu-memory` is a state-pool budget, not this)."),
    weights_per_rank: str | None = typer.Option(
        None, "--weights-per-rank", help="Weight bytes per rank (default: the checkpoint's headers / TP, or an "
                                         "estimate from a built-in model's name)."),
    from_log: Path | None = typer.Option(
        None, "--from-log", help="Read the settings from an engine's startup log (vLLM `non-default args:`, sglang "
                                 "`server_args=ServerArgs(...)`) instead of a command."),
    output_format: str = typer.Option("full", "--output-format", help="full or json."),
    engine_version: str | None = typer.Option(
        None, "--engine-version", help="The engine release the command runs, e.g. 0.5.14 (default: the newest "
                                       "gdr-check knows): its flag spellings and pool rules."),
    no_cache: bool = typer.Option(False, "--no-cache", help=NO_CACHE_HELP),
) -> int:
    """Predict whether an engine launch starts: its flags, its memory arithmetic, the kernel call it makes."""
    if output_format not in LAUNCH_FORMATS:
        raise typer.BadParameter(f"unknown format {output_format!r}; expected one of: {', '.join(LAUNCH_FORMATS)}",
                                 param_hint="--output-format")
    if from_log is not None and command:
        raise typer.BadParameter("give a launch command or --from-log, not both", param_hint="--from-log")
    if from_log is not None:
        raw = _read_log(from_log)
        launch = parse_log(raw.decode("utf-8", "replace"), version=engine_version)
    elif command:
        launch = parse_launch(command, version=engine_version)
    else:
        raise typer.BadParameter("give the engine command after `--` (or --from-log FILE)", param_hint="COMMAND")
    result = check_launch(launch, gpu=gpu_for(gpu, _size("--gpu-total-memory", gpu_total_memory)),
                          weights_per_rank=_size("--weights-per-rank", weights_per_rank),
                          metadata_cache=False if no_cache else None)
    out = Output(output_format, None)
    if output_format == "json":
        out.write(json.dumps(_document(result), indent=2) + "\n")
    else:
        out.write(neutralise_log("\n".join(text(line) for line in render_lines(result))) + "\n")
    return 1 if any(d.severity == "error" for d in result.diagnostics) else 0


def verdict(result: LaunchResult) -> str:
    launch = {d.code: d for d in result.diagnostics if d.code in LAUNCH_CODES}
    engine = result.context.engine
    if any(d.severity == "error" for d in launch.values()):
        return f"{engine} refuses to start"
    model_errors = [d.code for d in result.diagnostics if d.severity == "error" and d.code.startswith("GDR1")]
    if model_errors:
        return f"{engine} stops loading the model ({', '.join(dict.fromkeys(model_errors))}: the model check below)"
    plan = result.context.plan
    may_stop = ("GDR501", "GDR502") + (("GDR511",) if getattr(plan, "mamba_blocks_at_capture", "") == "assert" else ())
    if any(d.severity == "warning" and d.code in may_stop for d in launch.values()):
        return f"{engine} may refuse to start (it depends on the start-up peak it measures)"
    if "GDR503" in launch:
        return f"{engine} starts, capping the running requests"
    if "GDR511" in launch:
        return f"{engine} starts, capping its decode CUDA graphs (larger decode batches run without them)"
    return f"{engine} starts"


def _plan_lines(result: LaunchResult) -> list[str]:
    plan = result.context.plan
    lines = [f"  GPU: {plan.gpu.name}, {_gib(plan.gpu.total_bytes)}; weights {_gib(plan.weights_per_rank)} per rank "
             f"({result.context.weights_note})"]
    lines += [f"  {note}" for note in plan.dtype_notes]
    if isinstance(plan, SglangPlan):
        lines.append(f"  attention TP {plan.attn_tp} (tp {plan.tp} / attn-dp {plan.attn_dp}); strategy "
                     f"{plan.strategy} ({plan.strategy_reason}); {plan.ratio} slots per request")
        lines.append(f"  state pool {plan.pool_size} slots + 1 of {plan.per_slot_bytes / (1 << 20):.2f} MiB; running "
                     f"requests {plan.max_running} per attention-DP group; decode CUDA graphs up to batch "
                     f"{plan.cuda_graph_max_bs}")
    else:
        over = plan.overhead
        lines.append(f"  block {plan.block_size} tokens, {plan.bytes_per_block / (1 << 20):.2f} MiB over {plan.groups} "
                     f"groups; {plan.blocks(over.estimate)} blocks (from {plan.blocks(over.high)} to "
                     f"{plan.blocks(over.low)} for a start-up peak of {_gib(over.high)} to {_gib(over.low)})")
        default = " (the default on this GPU)" if plan.max_num_seqs_default else ""
        lines.append(f"  max_num_seqs {plan.max_num_seqs}{default}; max model length {plan.max_model_len}; FULL "
                     f"decode CUDA graphs {'on' if plan.full_cuda_graphs else 'off'}")
    return lines


def render_lines(result: LaunchResult) -> list[str]:
    launch = result.context.command
    named = launch.flags.get("model", "MODEL")
    model = launch.get("model") if named == "MODEL" else f"{named} {launch.get('model')}"
    lines = [f"{result.context.engine}: {launch.entry} {model}"]
    read = ", ".join(f"{flag} {launch.settings[setting]}" for setting, flag in launch.flags.items()
                     if setting != "model")
    lines.append(f"  read: {read or 'no flag that gdr-check models'}")
    if launch.ignored:
        lines.append(f"  passed over: {' '.join(launch.ignored)}")
    lines += [f"  note: {note}" for note in [*launch.notes, *result.notes]]
    lines += _plan_lines(result)
    deployment = result.deployment
    lines.append(f"  kernel call checked as: tp {deployment.tp}, batch {deployment.batch}, "
                 f"{result.check.num_slots} pool rows, engine {deployment.engine}")
    lines.append(f"  the same deployment in `check`: {check_command(str(launch.get('model')), deployment)}")
    lines.append(f"verdict: {verdict(result)}")
    for diagnostic in result.diagnostics:
        if diagnostic.severity == "info":
            continue
        lines.append(f"{diagnostic.severity}[{diagnostic.code}]: {diagnostic.message}")
        lines += [f"  = note: {note}" for note in diagnostic.notes]
        lines += [f"  = help: {fix}" for fix in diagnostic.fixes]
    return lines


def _document(result: LaunchResult) -> dict[str, Any]:
    launch = result.context.command
    plan = result.context.plan
    numbers = {key: value for key, value in vars(plan).items()
               if isinstance(value, (int, float, str, bool)) or value is None}
    return {
        "engine": launch.engine, "version": launch.table.version, "entry": launch.entry,
        "settings": {key: value for key, value in launch.settings.items() if key != "compilation_config"},
        "passed_over": launch.ignored, "notes": [*launch.notes, *result.notes], "plan": numbers,
        "verdict": verdict(result), "diagnostics": [d.to_dict() for d in result.diagnostics],
    }
