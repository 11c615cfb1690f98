"""`gdr-check [check] PATH...`: per-rank kernel shapes and every diagnostic for models and deployments.

Parsing and rendering only: the checks live in `gdr_check.models`, rule selection in `.selection`, the
`[tool.gdr-check]` file in `.config`, the grouping of file names into checkpoints in `.targets`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Optional

import typer

from .config import Config, ConfigError, discover, load_config
from .main import app
from .output import FORMATS, Output
from .results import FAILING_DEFAULT, FAILING_WITH_WARNINGS, FatalError, Run, TargetResult
from .selection import RuleSelection, Selection, SelectorError, known_rules, rule_selection
from .targets import group_targets

_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([kmgt]i?b?|b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
          "t": 10**12, "tb": 10**12, "ki": 2**10, "kib": 2**10, "mi": 2**20, "mib": 2**20, "gi": 2**30,
          "gib": 2**30, "ti": 2**40, "tib": 2**40}
ENGINES = ("sglang", "vllm")
DEFAULT_TP = [1]
DEFAULT_BATCH = 8

EPILOG = """Examples:

  gdr-check ./Qwen3-Next-80B --tp 4

  gdr-check models/* --tp 1,2,4,8                         (one table of which TP sizes pass)

  gdr-check ckpt --output-format sarif -o gdr-check.sarif  (GitHub code scanning)

  gdr-check ckpt --select GDR1,GDR2 --ignore GDR253 --error-on-warning
"""


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


def check_targets(targets: list[str], tp_sizes: list[int], *,
                  selection_for: Callable[[str], Selection] | None = None, **deployment: object) -> list[TargetResult]:
    """Check every (target, tp) pair; unreadable targets become FatalErrors, not exceptions."""
    from ..models import Deployment, check_model
    from ..sources import SourceError

    results: list[TargetResult] = []
    for target in targets:
        selection = selection_for(target) if selection_for is not None else Selection()
        for tp in tp_sizes:
            try:
                dep = Deployment(tp=tp, **deployment)  # type: ignore[arg-type]
            except ValueError as error:
                raise typer.BadParameter(str(error))
            try:
                check = check_model(target, dep)
            except SourceError as error:
                fatal = FatalError(error.code, str(error), error.path, diagnostic=error.diagnostic())
                results.append(TargetResult(target, error=fatal, tp=tp))
                break  # the files are the same for every TP size
            results.append(TargetResult(target, check=check, diagnostics=selection.filter(check.report), tp=tp))
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


def _load_config(targets: list[str], config_file: Optional[Path], isolated: bool) -> Config:
    if isolated:
        return Config()
    if config_file is not None:
        if not config_file.is_file():
            raise ConfigError(config_file, None, "no such file (given with --config)")
        return load_config(config_file)
    found = discover(targets)
    return load_config(found) if found is not None else Config()


def _first(*values):
    return next((value for value in values if value is not None), None)


@app.command("check", epilog=EPILOG)
def check_command(
    targets: Optional[list[str]] = typer.Argument(
        None, help="Checkpoint directories or files (a config.json, shard or index stands for its directory), "
                   "or Hugging Face repo ids. Default: the current directory."),
    tp: Optional[str] = typer.Option(None, "--tp", help="Tensor-parallel size, or a comma-separated list (a matrix); default 1."),
    batch: Optional[int] = typer.Option(None, "--batch", help=f"Largest decode batch B; default {DEFAULT_BATCH}."),
    slots: Optional[int] = typer.Option(None, "--slots", help="State pool rows (default: batch+1, slot 0 reserved)."),
    state_dtype: Optional[str] = typer.Option(None, "--state-dtype", help="float32, bfloat16 or float16 (default: the engine's choice)."),
    engine: Optional[str] = typer.Option(None, "--engine", help="sglang or vllm; default sglang."),
    gpu_memory: Optional[str] = typer.Option(None, "--gpu-memory", help="Per-rank budget for the state pools, e.g. 20GiB."),
    mamba_strategy: str = typer.Option("no_buffer", "--mamba-strategy", help="sglang --mamba-scheduler-strategy: no_buffer or extra_buffer (ping-pong slots)."),
    speculative_tokens: int = typer.Option(0, "--speculative-tokens", help="Draft tokens per speculative verify step (0: none); sizes the verify state."),
    select: Optional[list[str]] = typer.Option(None, "--select", help="Rules to report: codes (GDR213), prefixes (GDR2), names, or ALL; comma-separated or repeated. Replaces the configured selection."),
    extend_select: Optional[list[str]] = typer.Option(None, "--extend-select", help="Rules to report in addition to the selection."),
    ignore: Optional[list[str]] = typer.Option(None, "--ignore", help="Rules not to report (codes, prefixes, names)."),
    exit_zero: Optional[bool] = typer.Option(None, "--exit-zero", help="Exit 0 even when diagnostics fail the run (2 still means the run could not complete)."),
    error_on_warning: Optional[bool] = typer.Option(None, "--error-on-warning", help="Warnings fail the run too (exit 1)."),
    output_format: Optional[str] = typer.Option(None, "--output-format", envvar="GDR_CHECK_OUTPUT_FORMAT", help=f"One of: {', '.join(FORMATS)}; default full."),
    output_file: Optional[Path] = typer.Option(None, "--output-file", "-o", envvar="GDR_CHECK_OUTPUT_FILE", help="Write the report here instead of stdout."),
    config_file: Optional[Path] = typer.Option(None, "--config", help="Read the tool.gdr-check table of this pyproject.toml instead of searching for one."),
    isolated: bool = typer.Option(False, "--isolated", help="Ignore every pyproject.toml."),
    list_models_flag: bool = typer.Option(False, "--list-models", help="List the built-in model geometries and exit."),
) -> int:
    """Check models: per-rank shapes of every kernel argument, and every problem, for each deployment."""
    from .formats import format_module
    from .formats.full import use_color

    if output_format is not None and output_format not in FORMATS:
        raise typer.BadParameter(f"unknown format {output_format!r}; expected one of: {', '.join(FORMATS)}",
                                 param_hint="--output-format")
    if list_models_flag:
        list_models(Output(output_format or "full"), output_format or "full")
        return 0
    paths = group_targets(targets or ["."])
    config = _load_config(paths, config_file, isolated)
    fmt = _first(output_format, config.output_format, "full")
    out = Output(fmt, output_file)

    rules = known_rules()
    for option, values in (("--select", select), ("--extend-select", extend_select), ("--ignore", ignore)):
        try:
            rule_selection(values, rules=rules)
        except SelectorError as error:
            out.fatal("usage", f"{option}: {error}")
            raise typer.Exit(2)
    cli_layer = rule_selection(select, extend_select, ignore, rules=rules)

    chosen_engine = _first(engine, config.engine, "sglang")
    if chosen_engine not in ENGINES:
        raise typer.BadParameter(f"unknown engine {chosen_engine!r}; expected sglang or vllm", param_hint="--engine")
    tp_sizes = parse_tp_list(tp) if tp is not None else (config.tp or DEFAULT_TP)
    budget_text = _first(gpu_memory, config.gpu_memory)
    try:
        budget = parse_size(budget_text) if budget_text else None
    except typer.BadParameter:
        if gpu_memory is not None or config.path is None:
            raise
        raise ConfigError(config.path, "tool.gdr-check.gpu-memory", f"not a size: {budget_text!r} (e.g. \"80GiB\")")

    def selection_for(target: str) -> Selection:
        layers: list[RuleSelection] = [*config.layers_for(target), cli_layer]
        return Selection(tuple(layer for layer in layers if not layer.is_empty))

    results = check_targets(
        paths, tp_sizes, selection_for=selection_for, batch=_first(batch, config.batch, DEFAULT_BATCH),
        slots=_first(slots, config.slots), state_dtype=_first(state_dtype, config.state_dtype),
        engine=chosen_engine, gpu_memory=budget, mamba_strategy=mamba_strategy, speculative_tokens=speculative_tokens,
    )
    run = Run(
        results,
        failing=FAILING_WITH_WARNINGS if _first(error_on_warning, config.error_on_warning) else FAILING_DEFAULT,
        exit_zero=bool(_first(exit_zero, config.exit_zero)),
        color=fmt == "full" and output_file is None and use_color(),
    )
    renderer = format_module(fmt)
    out.write_report(renderer.render(run))
    for result in results:
        if result.error is not None:
            out.error_line(result.error.message)
    if fmt in ("concise", "github"):
        from .formats.common import summary_line

        out.info_line(summary_line(run))
    if fmt == "github":
        out.append_step_summary(renderer.step_summary(run))
    return run.exit_code
