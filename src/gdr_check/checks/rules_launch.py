"""GDR5xx (engine launch): what an engine does at start-up with a launch command, from its arithmetic.

The numbers come from `models.launch_memory` (vLLM 0.33.0 and sglang 0.5.23 formulas, cited there); each rule
decides whether the engine refuses to start (an error) or serves less than asked (a warning), and says the largest
setting that fits. The memory an engine profiles at start (activation peak, CUDA graphs, NCCL) is estimated with a
low and a high end (`Overhead`): a prediction that depends on where in that range the engine lands is a warning.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import field
from typing import Any

from ..base.records import dataclass
from ..base.registry import RULE_SET, Finding, RuleSet
from ..base.report import Diagnostic
from ..deployment.launch_command import LaunchCommand, attention_tp, parse_launch, split_command
from ..deployment.launch_memory import (
    DEFAULT_OVERHEAD,
    GPUS,
    PLANNERS,
    GiB,
    Gpu,
    Overhead,
    SglangPlan,
    VllmPlan,
    derived_length,
    max_position,
)
from ..engines.profiles import profile_for
from ..models import quant_groups
from ..models.adapters import select_adapter
from ..models.builtin import get_builtin
from ..models.description import LinearAttentionModel, describe
from ..models.quant_blocks import block_problems, fp8_block, working_tp_sizes
from .examples import config_checkpoint
from .rules_model import format_bytes

LAUNCH = "launch"


@dataclass
class LaunchContext:
    """A launch command read, the model it names, and the engine's numbers for it."""

    command: LaunchCommand
    model: LinearAttentionModel
    gpu: Gpu
    plan: VllmPlan | SglangPlan
    weights_note: str = ""
    notes: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def engine(self) -> str:
        return f"{self.command.table.display} {self.command.table.version}"


def launch_context(command: LaunchCommand, model: LinearAttentionModel, config: dict[str, Any], gpu: Gpu,
                   weights_per_rank: int, *, overhead: Overhead = DEFAULT_OVERHEAD,
                   weights_note: str = "") -> LaunchContext:
    plan: VllmPlan | SglangPlan
    plan = PLANNERS[command.table.memory_model](model, config, command, gpu, weights_per_rank, overhead)
    return LaunchContext(command, model, gpu, plan, weights_note, config=config)


def run_launch_rules(ctx: LaunchContext, rules: RuleSet = RULE_SET) -> list[Diagnostic]:
    diagnostics = []
    for rule in rules.in_scope(LAUNCH):
        if rule.check is None:
            continue
        found = rule.check(ctx)
        for finding in [found] if isinstance(found, Finding) else list(found or ()):
            diagnostics.append(rule.diagnostic(finding))
    return diagnostics


@dataclass(frozen=True)
class LaunchExample:
    """A launch command for a model config on a GPU, with the weights per rank given (GiB)."""

    command: str
    gpu: str = "h100"
    weights_gib: float = 40.0
    model: str = "Qwen/Qwen3-Next-80B-A3B-Instruct"  # a built-in model's config
    config_changes: dict[str, Any] = field(default_factory=dict)  # keys replaced in that config
    note: str = ""
    engine_version: str | None = None  # the release (`launch --engine-version`); None: the newest

    @property
    def text(self) -> str:
        lines = [f"# {self.note}"] if self.note else []
        command = self.command
        if self.config_changes:  # a folder whose config.json is the built-in model's published one, changed
            lines.append(f"# ./model/config.json: {self.model}'s, with {json.dumps(self.config_changes)}")
            command = command.replace(self.model, "./model")
        release = f" --engine-version {self.engine_version}" if self.engine_version else ""
        lines.append(f"gdr-check launch --gpu {self.gpu} --weights-per-rank {self.weights_gib:g}GiB{release} -- "
                     f"{command}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text

    def diagnostics(self, rules: RuleSet) -> list[Diagnostic]:
        builtin = get_builtin(self.model)
        if builtin is None:
            raise ValueError(f"{self.model} is not a built-in model")
        config = {**builtin.config_copy(), **self.config_changes}
        checkpoint = config_checkpoint(config)
        selection = select_adapter(checkpoint.config, checkpoint.tensors)
        if selection.adapter is None:
            raise ValueError("the example config has no GDN/KDA layers")
        model = describe(checkpoint, selection.adapter, selection.identity)
        if model is None:
            raise ValueError("the example config describes no model")
        command = parse_launch(split_command(self.command), version=self.engine_version)
        ctx = launch_context(command, model, config, GPUS[self.gpu], int(self.weights_gib * GiB))
        return run_launch_rules(ctx, rules)


def _gib(count: int | float) -> str:
    return f"{count / GiB:.2f} GiB"


def _vllm_lines(plan: VllmPlan, overhead: int) -> Iterator[str]:
    g = plan.geometry
    yield (f"one layer's state per request: conv {format_bytes(g.conv_bytes)} + SSM {format_bytes(g.ssm_bytes)} "
           f"({g.conv_dtype}/{g.state_dtype}); one attention token {format_bytes(g.kv_bytes_per_token)} per layer")
    yield (f"attention block raised to {plan.block_size} tokens so one page ({format_bytes(plan.page_bytes)}) holds "
           f"a layer's state; {plan.groups} groups of {plan.group_size} layers: {format_bytes(plan.bytes_per_block)} "
           "per block")
    if plan.kv_cache_memory_bytes is None:
        yield (f"{plan.gpu.name}: {_gib(plan.gpu.total_bytes)} x {plan.memory_fraction:g} - weights "
               f"{_gib(plan.weights_per_rank)} - start-up peak {_gib(overhead)} (estimated) = "
               f"{_gib(plan.available(overhead))} for blocks: {plan.blocks(overhead)} blocks")


@RULE_SET.rule(
    "GDR501", "vllm-max-num-seqs-exceeds-mamba-blocks", scope=LAUNCH,
    summary="vLLM refuses to start: max_num_seqs exceeds the Mamba cache blocks",
    message="max_num_seqs ({seqs}) exceeds the {blocks} Mamba cache blocks {engine} allocates {when} (max_num_seqs "
            "<= {blocks})",
    explanation=(
        "vLLM keeps attention KV and the linear-attention state in one pool of blocks. Under FULL decode CUDA "
        "graphs (the default for these models) every decoding sequence needs one state block, and vLLM 0.33.0 "
        "stops before capture when `max_num_seqs` exceeds the pool's blocks: `ValueError: max_num_seqs (N) exceeds "
        "available Mamba cache blocks (M)` (`vllm/config/compilation.py:1510-1531`). The blocks are the memory left "
        "under `--gpu-memory-utilization` after the weights and the start-up peak, divided by the bytes of one "
        "block over every layer group (`vllm/v1/core/kv_cache_planning.py:642-690`). The default `max_num_seqs` "
        "is 1024 on H100, H200 and B200 and 256 on A100 (`vllm/engine/arg_utils.py:2940-3010`).\n\n"
        "The start-up peak (activations of the profile run, CUDA graphs, NCCL) is measured by vLLM and estimated "
        "here between 2 and 8 GiB per rank: an error when the sequences exceed the blocks even at 2 GiB, a "
        "warning when only the higher estimates refuse."
    ),
    causes=("the default max_num_seqs of 1024 on an H100 with a large model at high TP memory use",
            "a low --gpu-memory-utilization"),
    fixes=("lower `--max-num-seqs` to the blocks shown", "raise `--gpu-memory-utilization`",
           "raise `--tensor-parallel-size` (less weight per rank)"),
    example=LaunchExample("vllm serve Qwen/Qwen3-Next-80B-A3B-Instruct --tensor-parallel-size 2 "
                          "--max-model-len 4096 --gpu-memory-utilization 0.6 --max-num-seqs 1024",
                          weights_gib=40.0, note="1024 sequences and the blocks of 0.6 x 79.25 GiB"),
    engines="vLLM 0.33.0.",
)
def vllm_mamba_blocks(ctx: LaunchContext) -> Finding | None:
    plan = ctx.plan
    if not isinstance(plan, VllmPlan) or not plan.full_cuda_graphs or not plan.fits_one_request(plan.overhead.low):
        return None  # (one request that does not fit stops vLLM first: GDR502)
    if plan.mamba_blocks_at_capture != "refuse":
        return None  # before vLLM 0.20.0 the capture sizes meet the blocks instead (GDR511)
    over = plan.overhead
    most, expected, fewest = plan.blocks(over.low), plan.blocks(over.estimate), plan.blocks(over.high)
    if plan.max_num_seqs <= fewest:
        return None
    certain = plan.max_num_seqs > most
    notes = list(_vllm_lines(plan, over.estimate))
    default = " (vLLM's default on this GPU)" if plan.max_num_seqs_default else ""
    notes.append(f"max_num_seqs {plan.max_num_seqs}{default}; blocks {fewest} to {most} for a start-up peak of "
                 f"{_gib(over.high)} to {_gib(over.low)}")
    notes.append(f"vLLM stops with `ValueError: max_num_seqs ({plan.max_num_seqs}) exceeds available Mamba cache "
                 f"blocks ({expected}). ...`" if certain else
                 "whether vLLM starts depends on the peak it measures: a larger peak leaves fewer blocks")
    fixes = [f"`--max-num-seqs {fewest}` fits at every estimate (vLLM would take up to {expected} at "
             f"{_gib(over.estimate)})"]
    util = plan.utilization_for(plan.max_num_seqs, over.high)
    if util <= 0.98 and plan.kv_cache_memory_bytes is None and plan.num_gpu_blocks_override is None:
        fixes.append(f"`--gpu-memory-utilization {util:.2f}` gives {plan.max_num_seqs} blocks at every estimate")
    when = "at any start-up peak" if certain else f"if its start-up peak reaches {_gib(over.high)}"
    return Finding({"seqs": plan.max_num_seqs, "blocks": expected if certain else fewest, "engine": ctx.engine,
                    "when": when}, fixes=fixes, notes=notes, severity="error" if certain else "warning")


@RULE_SET.rule(
    "GDR511", "vllm-capture-sizes-exceed-mamba-blocks", scope=LAUNCH,
    summary="vLLM before 0.20 captures decode CUDA graphs larger than its Mamba cache blocks",
    message="{engine} {what}: its largest decode CUDA-graph batch, {capture}, exceeds the {blocks} Mamba cache blocks",
    explanation=(
        "Before vLLM 0.20.0 nothing refuses `max_num_seqs` above the Mamba cache blocks (GDR501 from 0.20.0). "
        "Under FULL decode CUDA graphs each captured decode batch reads one state block per sequence, and the "
        "largest capture size defaults to min(max_num_seqs x 2, 512). vLLM 0.17.x captures it anyway and stops at "
        "capture with `AssertionError` at `assert num_cache_lines >= batch` in `causal_conv1d_update` "
        "(vllm/model_executor/layers/mamba/ops/causal_conv1d.py:1162; reported as vllm-project/vllm#34094). vLLM "
        "0.18.x and 0.19.x cap the capture sizes to the blocks with a warning (`Capping cudagraph capture sizes "
        "from max X to Y to fit Mamba cache blocks (N blocks available)`, config/compilation.py:1198-1245 in "
        "0.18.0): the server starts, and larger decode batches run without CUDA graphs."
    ),
    causes=("the default max_num_seqs (1024 on H100) with a pool of fewer blocks",),
    fixes=("lower `--max-num-seqs` or `--max-cudagraph-capture-size` to the blocks shown",
           "raise `--gpu-memory-utilization`"),
    example=LaunchExample("vllm serve Qwen/Qwen3-Next-80B-A3B-Instruct --tensor-parallel-size 2 "
                          "--max-model-len 4096 --gpu-memory-utilization 0.58 --max-num-seqs 1024",
                          weights_gib=42.0, note="vLLM 0.17.1: capture sizes to 512 and fewer blocks",
                          engine_version="0.17.1"),
    engines="vLLM 0.17.x-0.19.x.",
)
def vllm_capture_blocks(ctx: LaunchContext) -> Finding | None:
    plan = ctx.plan
    if (not isinstance(plan, VllmPlan) or not plan.full_cuda_graphs or plan.mamba_blocks_at_capture == "refuse"
            or not plan.fits_one_request(plan.overhead.low)):
        return None
    over = plan.overhead
    most, expected, fewest = plan.blocks(over.low), plan.blocks(over.estimate), plan.blocks(over.high)
    if plan.capture_max <= fewest:
        return None
    certain = plan.capture_max > most
    blocks = expected if certain else fewest
    notes = list(_vllm_lines(plan, over.estimate))
    notes.append(f"largest capture size {plan.capture_max}; blocks {fewest} to {most} for a start-up peak of "
                 f"{_gib(over.high)} to {_gib(over.low)}")
    fatal = plan.mamba_blocks_at_capture == "assert" and certain
    if plan.mamba_blocks_at_capture == "assert":
        what = "stops at CUDA-graph capture" if certain else "may stop at CUDA-graph capture"
        notes.append("vLLM stops with `AssertionError` at `assert num_cache_lines >= batch` (causal_conv1d_update)")
    else:
        what = "caps its decode CUDA graphs"
        notes.append(f"vLLM logs `Capping cudagraph capture sizes from max {plan.capture_max} to ... to fit Mamba "
                     f"cache blocks ({blocks} blocks available)` and runs larger decode batches without CUDA graphs")
    fixes = ([f"`--max-cudagraph-capture-size {fewest}` (or `--max-num-seqs {max(fewest // 2, 1)}`) fits at every "
              "estimate"] if fewest else ["raise `--gpu-memory-utilization` or `--tensor-parallel-size`"])
    if not certain:
        notes.append("whether it does depends on the peak vLLM measures: a larger peak leaves fewer blocks")
    return Finding({"engine": ctx.engine, "what": what, "capture": plan.capture_max, "blocks": blocks},
                   fixes=fixes, notes=notes, severity="error" if fatal else "warning")


@RULE_SET.rule(
    "GDR512", "max-model-len-above-the-model", scope=LAUNCH,
    summary="the engine refuses a maximum length above the model's own",
    message="{flag} {length} is above the model's {derived} ({key}{scaled}): {engine} {outcome}",
    explanation=(
        "Both engines derive the longest length a model serves from its config, `max_position_embeddings` times the "
        "RoPE scaling factor (not for the RoPE types whose position count is already scaled), and refuse a longer "
        "`--max-model-len` (vLLM: `vllm/config/model.py:2545-2700` in 0.33.0, the same words from 0.17.1) or "
        "`--context-length` (sglang: `srt/configs/model_config.py:1296-1316`, the length from "
        "`srt/utils/hf_transformers/common.py:677-694` in 0.5.23) with a ValueError while the model config is "
        "built, unless `VLLM_ALLOW_LONG_MAX_MODEL_LEN=1` / `SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1` is set. "
        "vLLM also takes a tokenizer's smaller `model_max_length`; gdr-check reads the config only."),
    causes=("a length copied from a model with a longer context", "a RoPE scaling the checkpoint's config lacks"),
    fixes=("lower the maximum length to the model's", "set the engine's override variable, knowing that positions "
           "past the trained length give wrong outputs"),
    example=LaunchExample("vllm serve Qwen/Qwen3-Next-80B-A3B-Instruct -tp 4 --max-model-len 1048576",
                          weights_gib=40.0, note="four times the model's 262144 positions"),
    engines="vLLM 0.17.1 - 0.33.0; sglang 0.5.23",
    supersedes=("GDR502",),
)
def max_model_len_above_model(ctx: LaunchContext) -> Finding | None:
    length, table = ctx.command.get("max_model_len"), ctx.command.table
    derived = derived_length(ctx.config, table)
    if (not isinstance(length, int) or length < 1 or derived is None or length <= derived[0]
            or not table.long_context_env):
        return None
    allowed = ctx.command.env.get(table.long_context_env, "").lower() in ("1", "true")
    positions = max_position(ctx.config)
    scaled = f" {positions} x the RoPE factor" if positions is not None and positions != derived[0] else ""
    error = table.long_context_error.format(length=length, key=derived[1], derived=derived[0])
    flag = ctx.command.flags.get("max_model_len", "--max-model-len")
    if allowed:
        return Finding({"flag": flag, "length": length, "derived": derived[0], "key": derived[1], "scaled": scaled,
                        "engine": ctx.engine, "outcome": f"serves it, as {table.long_context_env} is set"},
                       severity="warning",
                       notes=[f"{table.long_context_env} is set: {table.display} logs a warning and serves the longer "
                              "length; positions past the model's give wrong outputs or CUDA errors"])
    return Finding({"flag": flag, "length": length, "derived": derived[0], "key": derived[1], "scaled": scaled,
                    "engine": ctx.engine, "outcome": "stops at start-up"},
                   notes=[f"{table.display} stops with `{error}`"],
                   fixes=[f"`{flag} {derived[0]}`", f"`{table.long_context_env}=1` in the environment, if the model "
                          "was trained for the longer length"])


@RULE_SET.rule(
    "GDR502", "vllm-max-model-len-does-not-fit", scope=LAUNCH,
    summary="vLLM refuses to start: one request at the max model length does not fit",
    message="one request at --max-model-len {length} needs {needed} per rank, more than the {available} {engine} "
            "has for its cache ({fits})",
    explanation=(
        "vLLM 0.33.0 checks at start that the cache holds one request of the maximum model length: every "
        "full-attention group's blocks for that many tokens and every state group's blocks "
        "(`vllm/v1/core/kv_cache_planning.py:50-87, 1253-1285`), less the null block; otherwise it stops with "
        "`ValueError: To serve at least one request with the model's max seq len (N), (X GiB KV cache is needed, "
        "which is larger than the available KV cache memory (Y GiB).` and names the longest length that fits."
    ),
    fixes=("lower `--max-model-len`", "raise `--gpu-memory-utilization` or `--tensor-parallel-size`"),
    example=LaunchExample("vllm serve Qwen/Qwen3-Next-80B-A3B-Instruct -tp 2 --max-model-len 262144 "
                          "--gpu-memory-utilization 0.56 --max-num-seqs 8",
                          weights_gib=40.0, note="262144 tokens with 0.56 x 79.25 GiB and 40 GiB of weights"),
    engines="vLLM 0.33.0.",
)
def vllm_model_len(ctx: LaunchContext) -> Finding | None:
    plan = ctx.plan
    if not isinstance(plan, VllmPlan) or plan.fits_one_request(plan.overhead.high):
        return None
    certain = not plan.fits_one_request(plan.overhead.low)
    over = plan.overhead.estimate if certain else plan.overhead.high
    largest = plan.largest_model_len(over)
    notes = list(_vllm_lines(plan, over))
    notes.append(f"one request: {plan.blocks_per_request} blocks of {format_bytes(plan.bytes_per_block)}")
    if not certain:
        notes.append(f"it fits with a start-up peak of {_gib(plan.overhead.low)}: whether vLLM starts depends on the "
                     "peak it measures")
    if plan.available(over) <= 0:
        notes.append("vLLM stops before sizing the cache: `ValueError: No available memory for the cache blocks. Try "
                     "increasing `gpu_memory_utilization` when initializing the engine ...`")
    fixes = [f"`--max-model-len {largest}`"] if largest else ["raise `--tensor-parallel-size` (less weight per rank) "
                                                              "or `--gpu-memory-utilization`"]
    fits = f"--max-model-len <= {largest}" if largest else "no length fits: the weights leave no room"
    return Finding({"length": plan.max_model_len, "needed": _gib(plan.request_bytes),
                    "available": _gib(max(plan.available(over), 0)), "engine": ctx.engine, "fits": fits},
                   fixes=fixes, notes=notes, severity="error" if certain else "warning")


def _sglang_lines(plan: SglangPlan) -> Iterator[str]:
    dp = f" (attention DP {plan.attn_dp}: GDN heads split by {plan.attn_tp})" if plan.attn_dp > 1 else ""
    yield (f"one state slot: {format_bytes(plan.per_slot_bytes)} over {plan.geometry.linear_layers} linear layers "
           f"at attention TP {plan.attn_tp}{dp}")
    yield (f"{plan.gpu.name}: {_gib(plan.gpu.total_bytes)} x {plan.memory_fraction:g} - weights "
           f"{_gib(plan.weights_per_rank)} = {_gib(plan.rest_bytes)} rest memory")
    yield f"state pool: {plan.pool_size} slots + 1 padding row ({plan.pool_from})"
    yield f"strategy {plan.strategy}: {plan.ratio} slots per running request ({plan.strategy_reason})"


@RULE_SET.rule(
    "GDR503", "sglang-running-requests-capped-by-state-pool", severity="warning", scope=LAUNCH,
    summary="sglang caps the running requests to what the state pool holds",
    message="{engine} caps running requests at {cap} per attention-DP group: {pool} state slots, {ratio} per request "
            "({strategy}), fewer than the {wanted} it would run",
    explanation=(
        "sglang 0.5.23 sizes the linear-attention state pool from the memory left after the weights "
        "(`max_mamba_cache_size`, `srt/mem_cache/kv_cache_configurator.py:3229-3391`) and lets each running "
        "request count 3 slots with the radix cache (prefill-to-decode peak), plus 2 ping-pong tracking slots "
        "under `extra_buffer` with the overlap schedule (1 without it or lazily), or 1 with "
        "`--disable-radix-cache` (`:3062-3090`). It caps `max_running_requests` at `max_mamba_cache_size // "
        "ratio` with a warning (`max_running_requests is capped to N by the mamba state cache ...`) and stops only "
        "when the cap is 0 (`:3119-3160`). The `auto` strategy becomes `extra_buffer` for Qwen3-Next, Qwen3.5 and "
        "Kimi-Linear under the default overlap schedule (`srt/arg_groups/overrides.py:438-486`)."
    ),
    fixes=("`--mamba-ssm-dtype bfloat16` halves an fp32 state", "raise `--mamba-full-memory-ratio`",
           "`--mamba-radix-cache-strategy no_buffer` (3 slots per request) or `--disable-radix-cache` (1)"),
    example=LaunchExample("python -m sglang.launch_server --model-path Qwen/Qwen3-Next-80B-A3B-Instruct --tp 4 "
                          "--attn-dp-size 2 --context-length 131072", weights_gib=40.0,
                          note="attention DP 2: the GDN heads split by 2, fp32 state, extra_buffer"),
    engines="sglang 0.5.23.",
)
def sglang_running_cap(ctx: LaunchContext) -> Finding | None:
    plan = ctx.plan
    if not isinstance(plan, SglangPlan) or plan.pool_size <= 0 or plan.rest_bytes <= 0:
        return None
    if plan.cap >= plan.max_running_before_cap:
        return None
    notes = list(_sglang_lines(plan))
    notes.append(plan.running.warning(profile_for(ctx.command.engine_spec)))
    fixes = []
    if plan.geometry.state_dtype == "float32":
        fixes.append("`--mamba-ssm-dtype bfloat16`: about twice the slots (the SSM state is most of a slot)")
    if plan.ratio > 3:
        fixes.append(f"`--mamba-radix-cache-strategy no_buffer --disable-overlap-schedule`: {plan.pool_size // 3} "
                     "requests (3 slots each)")
    if plan.radix_cache:
        fixes.append("`--disable-radix-cache`: one slot per request (with `--max-running-requests N` the pool "
                     "is sized to N)")
    fixes.append("raise `--mamba-full-memory-ratio` (default 0.9) to give the state pool more of the rest memory")
    return Finding({"engine": ctx.engine, "cap": plan.cap, "pool": plan.pool_size, "ratio": plan.ratio,
                    "strategy": plan.strategy, "wanted": plan.max_running_before_cap},
                   notes=notes, fixes=fixes, severity="error" if plan.cap == 0 else None)


@RULE_SET.rule(
    "GDR504", "sglang-state-pool-does-not-fit", scope=LAUNCH,
    summary="sglang refuses to start: no memory for the state pool",
    message="{engine} stops at start: {why}",
    explanation=(
        "sglang 0.5.23 stops when the weights leave no memory under `--mem-fraction-static` (`Loaded weights leave "
        "no GPU memory for the KV cache`, `srt/mem_cache/kv_cache_configurator.py:3040-3055`) or when the state "
        "pool comes out empty (`Not enough GPU memory for hybrid (mamba/linear-attention) state cache`, "
        "`:3393-3402`)."
    ),
    fixes=("raise `--mem-fraction-static` or the TP size", "lower the state dtype to bfloat16"),
    example=LaunchExample("sglang serve --model-path Qwen/Qwen3-Next-80B-A3B-Instruct --tp-size 2 "
                          "--mem-fraction-static 0.5", weights_gib=40.0,
                          note="40 GiB of weights under half of 79.25 GiB"),
    engines="sglang 0.5.23.",
)
def sglang_pool_fits(ctx: LaunchContext) -> Finding | None:
    plan = ctx.plan
    if not isinstance(plan, SglangPlan):
        return None
    notes = list(_sglang_lines(plan))
    if plan.refusal is not None:  # the strategy itself: an explicit no_buffer with the overlap schedule on
        return Finding({"engine": ctx.engine, "why": plan.refusal}, notes=notes,
                       fixes=["add `--disable-overlap-schedule`, or leave the strategy at `auto`"])
    if plan.rest_bytes <= 0:
        need = (plan.weights_per_rank + plan.per_slot_bytes * 2) / plan.gpu.total_bytes
        return Finding({"engine": ctx.engine, "why": f"the weights ({_gib(plan.weights_per_rank)}) fill "
                        f"--mem-fraction-static {plan.memory_fraction:g} of {_gib(plan.gpu.total_bytes)}"},
                       notes=notes, fixes=[f"`--mem-fraction-static` above {need:.3f}"])
    if plan.pool_size <= 0:
        return Finding({"engine": ctx.engine, "why": f"the state pool gets {plan.pool_size} slots of "
                        f"{format_bytes(plan.per_slot_bytes)}"}, notes=notes)
    return None


@RULE_SET.rule(
    "GDR505", "fp8-block-not-divisible-at-tp", scope=LAUNCH,
    summary="the engine cannot load the FP8 block-quantized GDN projections at this TP size",
    message="`{layer}` is {width} {kind} per rank at TP {tp}, not a multiple of the FP8 block {block}: {engine} stops "
            "loading the checkpoint (TP sizes that work: {working})",
    explanation=(
        "An FP8 checkpoint with `weight_block_size` [block_n, block_k] loads in vLLM 0.33.0 only when every "
        "tensor-parallel output slice of a column-parallel layer is a multiple of block_n and every input slice of "
        "a row-parallel layer a multiple of block_k (`validate_fp8_block_shape`, "
        "`vllm/model_executor/layers/quantization/utils/fp8_utils.py:1296-1345`): `ValueError: Weight "
        "output_partition_size = N is not divisible by weight quantization block_n = B.` The GDN projections' "
        "slices shrink with TP: `in_proj_ba` holds two values per value head, so a few heads per rank are far "
        "below a 128 block. sglang 0.5.23 checks every output of a merged layer at any TP, over the attention-TP "
        "group (`srt/layers/quantization/fp8.py:570-610`): its `in_proj_ba` has two outputs of num_v_heads, so "
        "it fails even at TP 1 unless kept unquantized. Layers the config names in `ignored_layers` / "
        "`modules_to_not_convert` stay unquantized and are not checked."
    ),
    fixes=("serve at one of the TP sizes shown", "keep the small projections unquantized (`modules_to_not_convert`)"),
    example=LaunchExample("vllm serve Qwen/Qwen3-Next-80B-A3B-Instruct -tp 4 --max-model-len 4096",
                          config_changes={"quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic",
                                                                  "weight_block_size": [128, 128]}},
                          note="an FP8 config that quantizes in_proj_ba too"),
    engines="vLLM 0.33.0; sglang 0.5.23.",
)
def fp8_block_at_tp(ctx: LaunchContext) -> list[Finding]:
    if fp8_block(ctx.config) is None:
        return []
    table = ctx.command.table
    tp = attention_tp(ctx.command)
    problems = block_problems(ctx.model, ctx.config, tp, table)
    if not problems:
        return []
    working = ", ".join(map(str, working_tp_sizes(ctx.model, ctx.config, table))) or "none"
    findings = []
    for problem in problems:
        what = "output columns" if problem.kind == "output" else "input columns"
        noun = "block_n" if problem.kind == "output" else "block_k"
        size = "output_partition_size" if problem.kind == "output" else "input_size_per_partition"
        findings.append(Finding(
            {"layer": problem.layer, "width": problem.width, "kind": what, "tp": tp, "block": problem.block,
             "engine": ctx.engine, "working": working},
            notes=[f"{table.display} stops with `ValueError: Weight {size} = "
                   f"{problem.width} is not divisible by weight quantization {noun} = {problem.block}.`"],
            fixes=[f"TP {working.split(', ')[-1]} (the largest that loads)" if working != "none" else
                   f"keep `{problem.layer}` unquantized in the checkpoint (`modules_to_not_convert`)"]))
    return findings


_GROUP_CONFIG = {"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True,
                                         "desc_act": False}}


def _group_findings(ctx: LaunchContext, outcome: str) -> list[Finding]:
    scheme = quant_groups.group_scheme(ctx.config)
    if scheme is None:
        return []
    table = ctx.command.table
    tp = attention_tp(ctx.command)
    problems = [p for p in quant_groups.width_problems(ctx.model, ctx.config, tp, table) if p.outcome == outcome]
    if not problems:
        return []
    sizes = (quant_groups.working_tp_sizes if outcome == "error" else quant_groups.quiet_tp_sizes)(
        ctx.model, ctx.config, table)
    working = ", ".join(map(str, sizes)) or "none"
    findings = []
    for problem in problems:
        layers = f"{problem.layers} linear-attention layer{'s' if problem.layers != 1 else ''}"
        notes = [f"{table.display} says: `{problem.says}` ({problem.source})",
                 f"`{problem.layer}` in {layers}, first `{problem.prefix}`"]
        largest = "loads" if outcome == "error" else "needs no fallback"
        fixes = [f"TP {working.split(', ')[-1]} (the largest that {largest})"] if working != "none" else []
        fixes.append(f"keep `{problem.layer}` unquantized in the checkpoint")
        findings.append(Finding(
            {"layer": problem.layer, "width": problem.width, "side": problem.side, "tp": tp,
             "multiple": problem.multiple, "scheme": scheme.label, "engine": ctx.engine, "working": working},
            notes=notes, fixes=fixes))
    return findings


@RULE_SET.rule(
    "GDR508", "group-quant-refused-at-tp", scope=LAUNCH,
    summary="the engine cannot load a group-quantized (AWQ, GPTQ, WNA16) or NVFP4 GDN/KDA projection at this TP size",
    message="`{layer}` is {width} {side} columns per rank at TP {tp}, not a multiple of {multiple} ({scheme}): "
            "{engine} stops loading the checkpoint (TP sizes that work: {working})",
    explanation=(
        "Each engine release loads a 4-bit group-quantized layer only when its per-rank slice suits the kernel "
        "(`engines/group_quant.py` holds each release's checks). sglang 0.5.9-0.5.23 repacks GPTQ and "
        "compressed-tensors WNA16 weights for Marlin, which refuses an output slice that is not a multiple of 64 "
        "(`kernels/jit/csrc/gemm/marlin/gptq_marlin_repack.cuh:305-316` in 0.5.23: `size_n = N is not divisible by "
        "tile_n_size = 64`): a GDN `in_proj_ba` holds two columns per value head and a KDA `b_proj` one, so a few "
        "heads per rank are too narrow, for KDA even at TP 1. Its AWQ falls back to the unoptimized kernel (GDR509), "
        "which still refuses an input slice that splits a quantization group. vLLM pads Marlin's tiles from 0.24 "
        "and refuses only an input slice that splits a group (AWQ), and an NVFP4 input slice that is not a "
        "multiple of 16 (ModelOpt). Layers the config keeps unquantized (`modules_to_not_convert`, `ignore`, "
        "`exclude_modules`, GPTQ `dynamic` `-:` entries, AutoRound `extra_config` with 16 bits) are not checked."
    ),
    fixes=("serve at one of the TP sizes shown", "keep the narrow projections unquantized in the checkpoint"),
    example=LaunchExample("python -m sglang.launch_server --model-path Qwen/Qwen3-Next-80B-A3B-Instruct --tp 2 "
                          "--context-length 4096", weights_gib=25.0, config_changes=_GROUP_CONFIG,
                          note="a GPTQ config that quantizes in_proj_ba too"),
    engines="sglang 0.5.9-0.5.23; vLLM 0.17-0.33 (AWQ, ModelOpt NVFP4).",
)
def group_quant_refused(ctx: LaunchContext) -> list[Finding]:
    return _group_findings(ctx, "error")


@RULE_SET.rule(
    "GDR509", "group-quant-fallback-at-tp", severity="warning", scope=LAUNCH,
    summary="the engine loads a group-quantized GDN/KDA projection on its slow fallback kernel at this TP size",
    message="`{layer}` is {width} {side} columns per rank at TP {tp}, not a multiple of {multiple} ({scheme}): "
            "{engine} falls back to its unoptimized kernel for it (TP sizes without a fallback: {working})",
    explanation=(
        "AWQ layers run on Marlin only when the per-rank slice suits it; otherwise the engine logs a warning and "
        "uses the plain AWQ kernel for that layer (sglang 0.5.23 `srt/layers/quantization/awq/awq.py:367-375`, "
        "`Layer '...' is not supported by AWQMarlin. Falling back to unoptimized AWQ kernels.`; vLLM before 0.24 "
        "the same, `awq_marlin.py:294-300`). sglang's Marlin needs 64 output and 128 input columns per rank and no "
        "quantization group split across ranks (`marlin_utils.py:161-193`); vLLM pads tiles from 0.24 and falls "
        "back only for a split group (`auto_awq.py:313-333` in 0.33.0). The model loads, and the layer is slower."
    ),
    fixes=("serve at one of the TP sizes shown", "keep the narrow projections unquantized in the checkpoint"),
    example=LaunchExample("python -m sglang.launch_server --model-path Qwen/Qwen3-Next-80B-A3B-Instruct --tp 2 "
                          "--context-length 4096", weights_gib=25.0,
                          config_changes={"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128,
                                                                  "zero_point": True, "version": "gemm"}},
                          note="an AWQ config that quantizes in_proj_ba too"),
    engines="sglang 0.5.9-0.5.23; vLLM 0.17-0.33.",
)
def group_quant_fallback(ctx: LaunchContext) -> list[Finding]:
    return _group_findings(ctx, "warning")


@RULE_SET.rule(
    "GDR510", "awq-fused-shards-disagree", scope=LAUNCH,
    summary="the config keeps only some shards of a fused GDN projection unquantized: vLLM refuses the layer",
    message="`{layer}` fuses {shards}, and `modules_to_not_convert` keeps only {kept} unquantized: {engine} stops "
            "loading the checkpoint (all shards of a fused layer must have one precision)",
    explanation=(
        "vLLM loads Qwen3.5's `in_proj_qkvz` (from `in_proj_qkv`, `in_proj_z`) and `in_proj_ba` (from `in_proj_b`, "
        "`in_proj_a`) as one layer each and reads AWQ's `modules_to_not_convert` against the shard names, as "
        "substrings of the layer path: all shards named keeps the layer unquantized, none quantizes it, some of them "
        "stops the load (`Detected some but not all shards of ... are quantized.`, `quantization/utils/"
        "quant_utils.py:500-505` in 0.22.0). From 0.24 the fused name is tried first (`quant_utils.py:664-683` in "
        "0.33.0), so an entry that is a substring of it (`in_proj_b` is one of `in_proj_ba`) keeps the whole layer. "
        "sglang reads the entries against the fused layer's own path only (`awq/awq.py:61-62` in 0.5.23) and does "
        "not refuse."
    ),
    fixes=("name every shard of the fused layer in `modules_to_not_convert` (or none)",
           "name the fused layer (`in_proj_ba`), which vLLM 0.24 and later match first"),
    example=LaunchExample("vllm serve Qwen/Qwen3.5-35B-A3B -tp 2 --max-model-len 4096", model="Qwen/Qwen3.5-35B-A3B",
                          weights_gib=20.0,
                          config_changes={"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128,
                                                                  "zero_point": True, "version": "gemm",
                                                                  "modules_to_not_convert": ["in_proj_a"]}},
                          note="an AWQ config that keeps in_proj_a but not in_proj_b in 16 bits"),
    engines="vLLM 0.17-0.33.",
)
def awq_fused_shards_disagree(ctx: LaunchContext) -> list[Finding]:
    findings = []
    for conflict in quant_groups.shard_conflicts(ctx.model, ctx.config, ctx.command.table):
        layers = f"{conflict.layers} linear-attention layer{'s' if conflict.layers != 1 else ''}"
        findings.append(Finding(
            {"layer": conflict.layer, "shards": " and ".join(f"`{s}`" for s in conflict.shards),
             "kept": " and ".join(f"`{s}`" for s in conflict.kept), "engine": ctx.engine},
            notes=[f"{ctx.command.table.display} says: `{conflict.says}` ({conflict.source})",
                   f"`{conflict.layer}` in {layers}, first `{conflict.prefix}`"]))
    return findings
