"""`gdr-check launch`: a launch command (or an engine's startup log) checked before the engine starts.

The command is read with gdr-check's flag tables (`models.launch_command`); the model it names is opened as `check`
opens a target (a local checkpoint, the Hugging Face cache, else a built-in description); the engine's start-up
arithmetic (`models.launch_memory`) and its rules (`checks.rules_launch`, GDR501-GDR504) predict whether it starts;
and the deployment the command implies (attention TP, the decode batch, the pool rows, the state dtype, the pool
strategy, draft tokens) is checked as `gdr-check check` checks one, so both commands report the same kernel-call
findings for the same deployment.
"""

from __future__ import annotations

import re
from dataclasses import field
from typing import Any

from ..base.errors import InputError
from ..base.records import dataclass
from ..base.registry import RULES, without_superseded
from ..base.report import Diagnostic
from ..checks.rules_launch import LAUNCH, LaunchContext, launch_context, run_launch_rules
from ..deployment.launch_command import LaunchCommand, attention_tp
from ..deployment.launch_memory import (
    DEFAULT_OVERHEAD,
    GPUS,
    GiB,
    Gpu,
    LaunchModelError,
    Overhead,
    SglangPlan,
    weights_from_tensors,
)
from ..deployment.settings import MAMBA_STRATEGIES, Deployment
from ..models.adapters import select_adapter
from ..models.builtin import BuiltinModel
from ..models.description import describe
from ..models.quant_groups import group_scheme
from ..sources import SourceError
from .model_check import ModelCheck, check_checkpoint, open_target


class LaunchTargetError(InputError):
    """The model of a launch command cannot be opened or described (one line)."""

    code = "input"


@dataclass
class LaunchResult:
    context: LaunchContext
    check: ModelCheck
    deployment: Deployment
    diagnostics: list[Diagnostic] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def refused(self) -> bool:
        return any(d.severity == "error" and d.code in LAUNCH_CODES for d in self.diagnostics)


# The launch rules (scope "launch", `checks.rules_launch`): the engine's start-up, as against the model check.
LAUNCH_CODES = frozenset(code for code, rule in RULES.items() if rule.scope == LAUNCH)
_SIZE_IN_NAME = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)B(?![a-z])")


def gpu_for(name: str | None, memory: int | None) -> Gpu:
    """The GPU named by `--gpu` (default h100), its total memory replaced by `--gpu-memory` when given."""
    key = (name or "h100").lower()
    if key not in GPUS:
        raise LaunchTargetError(f"unknown GPU {name!r}; expected one of: {', '.join(GPUS)}")
    gpu = GPUS[key]
    if memory is not None:
        gpu = Gpu(gpu.key, gpu.name, memory, gpu.sm)
    return gpu


def _weights(checkpoint: Any, builtin: BuiltinModel | None, tp: int, given: int | None,
             dtype: str) -> tuple[int, str]:
    if given is not None:
        return given, "given with --weights-per-rank"
    tensors = getattr(checkpoint, "tensors", None) or {}
    if tensors:
        total = weights_from_tensors(tensors)
        return total // tp, (f"{total / GiB:.2f} GiB in the checkpoint's headers / TP {tp} (replicated norms and "
                             "embeddings not counted apart)")
    name = builtin.repo_id if builtin is not None else str(getattr(checkpoint, "target", ""))
    match = _SIZE_IN_NAME.search(name.rsplit("/", 1)[-1])
    if match is None:
        raise LaunchTargetError(f"no weights to size: {name} has no tensors here and no parameter count in its "
                                "name; give --weights-per-rank")
    itemsize = 1 if "fp8" in name.lower() else 2
    total = int(float(match.group(1)) * 1e9 * itemsize)
    return total // tp, (f"estimated: {match.group(1)}B parameters (the model's name) x {itemsize} bytes / TP {tp}; "
                         "give --weights-per-rank or a local checkpoint for exact sizes")


def _decode_batch(ctx: LaunchContext) -> tuple[int, int | None]:
    """The decode batch the kernel sees and the pool rows, as the engine sizes them."""
    plan = ctx.plan
    if isinstance(plan, SglangPlan):
        batch = max(min(plan.max_running, plan.cuda_graph_max_bs), 1)
        rows = plan.pool_size + 1 if plan.pool_size > 0 else None
        return batch, rows
    blocks = plan.blocks(plan.overhead.estimate)
    batch = max(min(plan.max_num_seqs, blocks) if blocks else plan.max_num_seqs, 1)
    return batch, (blocks if blocks > batch else None)


def check_launch(command: LaunchCommand, *, gpu: Gpu, weights_per_rank: int | None = None,
                 overhead: Overhead = DEFAULT_OVERHEAD, cache_dir: str | None = None,
                 metadata_cache: bool | None = None) -> LaunchResult:
    """Open the command's model, run the engine's arithmetic and rules, and check the deployment it implies
    (`metadata_cache`: as `open_checkpoint` takes it)."""
    target = str(command.get("model"))
    try:
        checkpoint, builtin = open_target(target, cache_dir=cache_dir, metadata_cache=metadata_cache)
    except SourceError as error:
        raise LaunchTargetError(str(error)) from None
    config = checkpoint.config or {}
    selection = select_adapter(checkpoint.config, checkpoint.tensors)
    if selection.adapter is None:
        raise LaunchTargetError(f"{target}: no GDN/KDA layers to check ({selection.reason or 'not a GDN/KDA model'})")
    model = describe(checkpoint, selection.adapter, selection.identity)
    if model is None:
        raise LaunchTargetError(f"{target}: no GDN/KDA layers to check")
    tp = int(command.get("tp", 1))
    weights, weights_note = _weights(checkpoint, builtin, tp, weights_per_rank, model.dtypes.activation)
    try:
        ctx = launch_context(command, model, config, gpu, weights, overhead=overhead, weights_note=weights_note)
    except LaunchModelError as error:
        raise LaunchTargetError(f"{target}: {error}") from None
    batch, rows = _decode_batch(ctx)
    state = command.get("state_dtype")
    strategy = command.get("mamba_strategy") if isinstance(ctx.plan, SglangPlan) else None
    deployment = Deployment(
        tp=attention_tp(command), batch=batch, slots=rows, engine=command.engine_spec,
        state_dtype=None if state in (None, "auto") else str(state),
        mamba_strategy=str(strategy) if strategy in MAMBA_STRATEGIES else "auto",
        speculative_tokens=int(command.get("speculative_tokens", 0) or 0),
        overlap_schedule=not command.get("disable_overlap_schedule", False),
        radix_cache=command.get("prefix_caching", True) is not False,
    )
    check = check_checkpoint(checkpoint, deployment, builtin=builtin)
    diagnostics = without_superseded(run_launch_rules(ctx) + list(check.report.diagnostics))
    notes = list(checkpoint.notes)
    scheme = group_scheme(config)
    if scheme is not None:
        covered = scheme.scheme in command.table.group_quant.modelled
        notes.append(f"quantization: {scheme.label}: " + (
            "the GDN/KDA projections' per-rank widths checked as this release loads them (GDR508, GDR509)" if covered
            else f"the per-rank widths are not checked: how {ctx.engine} picks this scheme's kernel (per layer and "
                 "GPU, or outside Marlin) is not modelled"))
    return LaunchResult(ctx, check, deployment, diagnostics, notes)
