"""`gdr-check dry-run PATH`: run the deployment's exact per-rank kernel call on synthetic tensors and verify it.

The kernel runs in a child process (`gdr_check.pipeline.dryrun`); this process never imports torch or triton.
Exit codes: 0 passed, 1 refused (the deployment has errors) or a GDR3xx error, 2 usage, unreadable input or
a broken environment (torch/triton missing, `--device cuda` without a device, the engine `--backend` names not
installed: `pipeline.dryrun.backends`). Every output format renders the
`Run` that `gdr_check.pipeline.dryrun.entry.dry_run` returns; `full` adds the step table and timing
(`cli/formats/dryrun_sections.py`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from ..base.limits import checked
from ..engines.profiles import DEFAULT_ENGINE, profile_for
from ..pipeline.dryrun.entry import DryRunTargetResult, dry_run, ranks_problem, weights_problem
from ..pipeline.dryrun.plan import BACKENDS, DEVICES
from ..pipeline.dryrun.rank_run import RanksResult
from .engine_option import engine_help, engine_option, state_dtype_option
from .escape import lines
from .formats.options import render_options
from .main import app
from .numbers import decimal_number, whole_number
from .output import Output, report_path
from .run_options import (
    ERROR_ON_WARNING_HELP,
    EXIT_ZERO_HELP,
    EXTEND_SELECT_HELP,
    FORMAT_HELP,
    IGNORE_HELP,
    ISOLATED_HELP,
    NO_CACHE_HELP,
    OUTPUT_FILE_HELP,
    QUIET_HELP,
    SELECT_HELP,
    RunOptions,
    check_format,
    write_run,
)

EPILOG = (
    "Examples:  gdr-check dry-run ./Qwen3-Next-80B-A3B-Instruct --tp 4 --batch 32  |  "
    "gdr-check dry-run ./Kimi-Linear-48B-A3B --device cpu --steps 2  |  "
    "GDR_CHECK_SGLANG_PATH=sglang-0.5.23.whl gdr-check dry-run ./Qwen3.5-4B --backend sglang"
)


def _validate(backend: str, device: str, engine: str | None, batch: int) -> str:
    """The engine profile to use; usage errors (exit 2) for bad combinations."""

    if backend not in BACKENDS:
        raise typer.BadParameter(f"expected one of {', '.join(BACKENDS)}, got {backend!r}", param_hint="--backend")
    if device not in DEVICES:
        raise typer.BadParameter(f"expected one of {', '.join(DEVICES)}, got {device!r}", param_hint="--device")
    if engine is not None:
        engine_option(engine)
    if backend != "builtin" and engine is not None and profile_for(engine).name != backend:
        raise typer.BadParameter(f"--backend {backend} runs {backend}'s kernel, which has {backend}'s semantics: "
                                 f"use --engine {backend} (or leave --engine out)", param_hint="--engine")
    if batch < 1:
        raise typer.BadParameter(f"a dry-run needs at least one row, got {batch}"
                                 + (" (B = 0 launches nothing)" if batch == 0 else ""), param_hint="--batch")
    return engine or (backend if backend != "builtin" else DEFAULT_ENGINE)


@app.command("dry-run", epilog=EPILOG)
def dry_run_command(
    target: str = typer.Argument(..., metavar="TARGET",
                                 help="Checkpoint file or directory, config.json, or Hugging Face repo id."),
    tp: int = typer.Option(1, "--tp", parser=whole_number("--tp"),
                           help="Tensor-parallel size: the call of one rank runs."),
    batch: int = typer.Option(8, "--batch", parser=whole_number("--batch"), help="Decode batch B (rows of the call)."),
    slots: int | None = typer.Option(None, "--slots", parser=whole_number("--slots"),
                                     help="State pool rows (default: batch + 1, slot 0 reserved; batch x 3 + 1 "
                                          "under sglang's extra_buffer)."),
    state_dtype: str | None = typer.Option(
        None, "--state-dtype", help="float32, bfloat16 or float16 (default: the engine's choice)."),
    steps: int = typer.Option(3, "--steps", parser=whole_number("--steps"), help="Decode steps to run and verify."),
    backend: str = typer.Option(
        "builtin", "--backend", help="builtin (gdr-check's kernel), sglang or vllm (the installed engine's kernel, "
                                     "compared with ours)."),
    device: str = typer.Option(
        "auto", "--device", help="auto, cuda or cpu (cpu: the Triton interpreter at reduced sizes)."),
    engine: str | None = typer.Option(None, "--engine", help=engine_help("the backend's, else sglang")),
    seed: int = typer.Option(0, "--seed", parser=whole_number("--seed"),
                             help="Seed of the random inputs, state and slot choices."),
    timeout: float = typer.Option(1800.0, "--timeout", parser=decimal_number("--timeout"),
                                  help="Seconds before the child process is killed."),
    select: list[str] | None = typer.Option(None, "--select", help=SELECT_HELP),
    extend_select: list[str] | None = typer.Option(None, "--extend-select", help=EXTEND_SELECT_HELP),
    ignore: list[str] | None = typer.Option(None, "--ignore", help=IGNORE_HELP),
    exit_zero: bool | None = typer.Option(None, "--exit-zero", help=EXIT_ZERO_HELP),
    error_on_warning: bool | None = typer.Option(None, "--error-on-warning", help=ERROR_ON_WARNING_HELP),
    isolated: bool = typer.Option(False, "--isolated", help=ISOLATED_HELP),
    no_cache: bool = typer.Option(False, "--no-cache", help=NO_CACHE_HELP),
    quiet: bool = typer.Option(False, "--quiet", "-q", help=QUIET_HELP),
    output_format: str | None = typer.Option(None, "--output-format", envvar="GDR_CHECK_OUTPUT_FORMAT",
                                             help=FORMAT_HELP),
    output_file: Path | None = typer.Option(None, "--output-file", "-o", envvar="GDR_CHECK_OUTPUT_FILE",
                                            parser=report_path, metavar="PATH", help=OUTPUT_FILE_HELP),
    weights: bool = typer.Option(False, "--weights", help="With --ranks all: one layer's real A_log and dt_bias, read "
                                                          "from the safetensors bytes (header offsets, no pickle)."),
    ranks: str = typer.Option("one", "--ranks", help="one (one rank's call) or all (one process per TP rank through "
                                                     "torch.distributed, compared with the unsharded layer)."),
) -> int:
    """Run the deployment's per-rank kernel call on synthetic tensors in a child process and verify every step."""

    fmt = check_format(output_format)
    profile = _validate(backend, device, engine, batch)
    if state_dtype is not None:
        state_dtype_option(state_dtype)
    for name, value in (("steps", steps), ("seed", seed), ("timeout", timeout)):
        checked(name, value)  # negative, inf, or a number of thousands of digits
    problem = ranks_problem(ranks)
    if problem is not None:
        raise typer.BadParameter(problem, param_hint="--ranks")
    problem = weights_problem(weights, ranks)
    if problem is not None:
        raise typer.BadParameter(problem, param_hint="--weights")
    out = Output(fmt, output_file)
    out.check_destination()  # before the run (minutes on a GPU), not after it
    options = RunOptions(target, out, select=select, extend_select=extend_select, ignore=ignore,
                         exit_zero=exit_zero, error_on_warning=error_on_warning, isolated=isolated)
    run = dry_run(target, tp=tp, batch=batch, slots=slots, state_dtype=state_dtype, engine=profile, backend=backend,
                  device=device, steps=steps, seed=seed, timeout=timeout, selection=options.selection,
                  failing=options.failing, exit_zero=options.exit_zero, ranks=ranks, weights=weights,
                  engine_reason="default" if engine is None and backend == "builtin" else "flag",
                  metadata_cache=False if no_cache else None)  # None: on unless GDR_CHECK_NO_CACHE turns it off
    code = write_run(run, out, render_options(fmt, output_file, quiet=quiet))
    result = run.results[0]
    record = result.record if isinstance(result, DryRunTargetResult) else None
    if not os.environ.get("GDR_CHECK_DEBUG") or record is None or record.outcome is None:
        return code
    if isinstance(record, RanksResult):
        if not record.ok:
            for rank in record.outcome.ranks:
                out.error_line(f"rank {rank.rank} stderr follows")
                sys.stderr.write(lines(rank.stderr))
        return code
    outcome = record.outcome
    if outcome.crashed or outcome.result is None or outcome.result.get("status") != "ok":
        out.error_line("the dry-run child's stderr follows")
        sys.stderr.write(lines(outcome.stderr))
    return code
