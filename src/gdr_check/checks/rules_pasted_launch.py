"""GDR412-GDR422: what engines print when a GDN/KDA model launch is refused or capped (`explain`).

The engines' own messages (vLLM 0.33.0, sglang 0.5.23, quoted from their source), declared so that `gdr-check
explain` recognises them in a log, a traceback or a wrapper's message, and connects them to the launch rules that
predict them before launch (GDR501, GDR503, GDR505, GDR508, GDR509: `gdr-check launch`).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..base.registry import declare
from ..engines.group_quant import AWQ_FALLBACK, IN_ALIGN, REPACK_N
from ..engines.profiles import profile_for
from .explanations import V_WIDTH, Context, reasoner
from .rules_pasted import PastedExample

_MAMBA_BLOCKS = ("max_num_seqs ({seqs}) exceeds available Mamba cache blocks ({blocks}). Each decode sequence "
                 "requires one Mamba cache block, so CUDA graph capture cannot proceed. Please lower max_num_seqs to "
                 "at most {blocks} or increase gpu_memory_utilization.")

declare(
    "GDR412", "vllm-mamba-cache-blocks-below-max-num-seqs",
    summary="vLLM refused to start: max_num_seqs exceeds the Mamba cache blocks its memory gives",
    message=_MAMBA_BLOCKS,
    explanation=(
        "vLLM 0.33.0 raises this before CUDA-graph capture when the hybrid model's block pool (attention KV and "
        "the linear-attention state share it) has fewer blocks than `max_num_seqs`: every decoding sequence holds "
        "one state block under FULL decode CUDA graphs (`vllm/config/compilation.py:1510-1531`). The default "
        "`max_num_seqs` is 1024 on GPUs of 70 GiB and more (256 on A100 and smaller ones), "
        "`engine/arg_utils.py:2940-3010`. `gdr-check launch -- <command>` computes the blocks before launch "
        "(GDR501)."),
    causes=("the default max_num_seqs (1024) with a large model per rank",
            "a low --gpu-memory-utilization, or a long --max-model-len with little memory left"),
    fixes=("`--max-num-seqs` at most the blocks in the message", "raise `--gpu-memory-utilization` or the TP size"),
    example=PastedExample(
        "ValueError: max_num_seqs (1024) exceeds available Mamba cache blocks (512). Each decode sequence requires "
        "one Mamba cache block, so CUDA graph capture cannot proceed. Please lower max_num_seqs to at most 512 or "
        "increase gpu_memory_utilization."),
    engines="vLLM 0.33.0 (since the check replaced the silent cap)",
    scope="pasted",
)


@reasoner("GDR412", numeric=("seqs", "blocks"))
def _mamba_blocks(values: Mapping[str, str], context: Context) -> list[str]:
    seqs, blocks = int(values["seqs"]), int(values["blocks"])
    out = [f"{seqs} sequences need {seqs} state blocks and the pool has {blocks}: {seqs - blocks} short; "
           f"`--max-num-seqs {blocks}` starts the same deployment"]
    if seqs in (1024, 2048, 256, 512):
        out.append(f"{seqs} is vLLM's default (1024 on GPUs of 70 GiB and more, 256 on A100 and smaller ones, "
                   "doubled by `--performance-mode throughput`) when --max-num-seqs is not given")
    out.append("`gdr-check launch -- <the command>` computes the blocks before launch (GDR501)")
    return out


_CAPPED = ("max_running_requests is capped to {cap} by the mamba state cache (max_mamba_cache_size={pool}, {ratio} "
           "state slots per request). To raise it: increase --mamba-full-memory-ratio or --max-mamba-cache-size, or "
           "halve the state size with --mamba-ssm-dtype bfloat16.")

declare(
    "GDR413", "sglang-running-requests-capped",
    severity="warning",
    summary="sglang serves fewer running requests than asked: its state pool caps them",
    message=_CAPPED,
    explanation=(
        "sglang 0.5.23 sizes the GDN/KDA state pool (`max_mamba_cache_size`) from memory and counts several slots "
        "per running request: 3 with the radix cache, plus 2 tracking slots under `extra_buffer` with the overlap "
        "schedule (1 without it or lazily), 1 with `--disable-radix-cache` "
        "(`srt/mem_cache/kv_cache_configurator.py:3062-3160`). It logs this warning and serves at most the cap; "
        "`--max-running-requests` above it only queues. `gdr-check launch` predicts it (GDR503)."),
    causes=("`auto` resolving to extra_buffer (5 slots per request) for Qwen3-Next, Qwen3.5 and Kimi-Linear",
            "an fp32 SSM state (sglang's default) on a small GPU"),
    fixes=("`--mamba-ssm-dtype bfloat16`", "`--mamba-radix-cache-strategy no_buffer` or `--disable-radix-cache`",
           "raise `--mamba-full-memory-ratio` or `--max-mamba-cache-size`"),
    example=PastedExample(f"[2026-01-01 10:00:00] {_CAPPED.format(cap=9, pool=47, ratio=5)}"),
    engines="sglang 0.5.23",
    scope="pasted",
)

_RATIOS = {5: "the radix cache's 3 and 2 ping-pong tracking slots (extra_buffer with the overlap schedule)",
           4: "the radix cache's 3 and 1 tracking slot (extra_buffer without the overlap schedule, or "
              "extra_buffer_lazy)",
           3: "the radix cache's 3 (no_buffer)", 1: "one (the radix cache off)"}


@reasoner("GDR413", numeric=("cap", "pool", "ratio"))
def _capped(values: Mapping[str, str], context: Context) -> list[str]:
    cap, pool, ratio = int(values["cap"]), int(values["pool"]), int(values["ratio"])
    out = [f"{pool} state slots // {ratio} per request = {pool // ratio} running requests"
           + (f"; {ratio} is {_RATIOS[ratio]}" if ratio in _RATIOS else "")]
    if ratio > 3:
        out.append(f"`--mamba-radix-cache-strategy no_buffer` would let {pool // 3} run (3 slots each)")
    if ratio > 1:
        out.append(f"`--disable-radix-cache` would let {pool} run (one slot each; no prefix caching)")
    if context.batch and context.batch > cap:
        out.append(f"--batch {context.batch} > {cap}: the rest of the batch queues")
    return out


_BLOCK = "Weight {partition} = {width} is not divisible by weight quantization {block_name} = {block}."

declare(
    "GDR414", "fp8-block-not-divisible-at-load",
    summary="a block-quantized FP8 layer's per-rank slice is not a multiple of the quantization block",
    message=_BLOCK,
    explanation=(
        "vLLM 0.33.0 (and sglang's FP8 loader, which words it the same) checks that each tensor-parallel slice of "
        "a block-quantized FP8 layer is a multiple of the block: output slices of column-parallel layers against "
        "block_n, input slices of row-parallel ones against block_k "
        "(`vllm/model_executor/layers/quantization/utils/fp8_utils.py:1296-1345`). At high TP the GDN "
        "projections' slices are small (`in_proj_ba` holds two columns per value head). `gdr-check launch` "
        "predicts it for the GDN projections and lists the TP sizes that work (GDR505)."),
    causes=("a TP size that leaves a projection fewer columns than the block",),
    fixes=("a smaller TP size", "keep the small projections unquantized in the checkpoint (`modules_to_not_convert`)"),
    example=PastedExample("ValueError: Weight output_partition_size = 2112 is not divisible by weight quantization "
                          "block_n = 128."),
    engines="vLLM 0.33.0; sglang 0.5.23",
    scope="pasted",
)


@reasoner("GDR414", numeric=("width", "block"))
def _fp8_block(values: Mapping[str, str], context: Context) -> list[str]:
    width, block = int(values["width"]), int(values["block"])
    out = [f"{width} = {block} x {width // block} + {width % block}: the slice is not whole blocks"]
    for name, full in context.widths.items():
        if context.tp and full // context.tp == width and full % context.tp == 0:
            working = [tp for tp in (1, 2, 4, 8, 16) if full % tp == 0 and (full // tp) % block == 0]
            out.append(f"that is {name} = {full} over tp={context.tp}; TP sizes whose slice is whole blocks: "
                       f"{', '.join(map(str, working)) or 'none'}")
    return out


def _slices(width: int, multiple: int, context: Context) -> list[str]:
    """Which of the model's widths `width` is a TP slice of, and the TP sizes whose slice is a multiple of
    `multiple` (with --model and --tp)."""
    out = []
    for name, full in context.widths.items():
        if context.tp and full % context.tp == 0 and full // context.tp == width:
            working = [tp for tp in (1, 2, 4, 8, 16) if full % tp == 0 and (full // tp) % multiple == 0]
            out.append(f"that is {name} = {full} over tp={context.tp}; TP sizes whose slice is a multiple of "
                       f"{multiple}: {', '.join(map(str, working)) or 'none'}")
    return out


_MARLIN_SHAPE = ("Weight {partition} = {width} is not divisible by {thread} = {multiple}. Consider reducing "
                 "tensor_parallel_size or running with --quantization gptq.")

declare(
    "GDR418", "marlin-shape-not-divisible-at-load",
    summary="a Marlin (AWQ/GPTQ 4-bit) layer's per-rank slice is narrower than Marlin's tile",
    message=_MARLIN_SHAPE,
    explanation=(
        "Marlin, the 4-bit kernel both engines run AWQ and GPTQ layers with, needs each rank's output slice to be "
        "a multiple of 64 (`min_thread_n`), its input slice a multiple of 128 (`min_thread_k`) and no quantization "
        "group split across ranks (sglang 0.5.23 `srt/layers/quantization/marlin_utils.py:161-193`; vLLM before "
        "0.24, `quantization/utils/marlin_utils.py`; vLLM 0.24 on pads the tiles and checks only the group). The "
        "GDN `in_proj_ba` (two columns per value head) and the KDA `b_proj` (one per head) are narrow: a few heads "
        "per rank are fewer than 64 columns. Where the engine only asks (AWQ) it falls back to a slower kernel "
        "(GDR420); where this is raised the load stops. `gdr-check launch` predicts both (GDR508, GDR509)."),
    causes=("a TP size that leaves a projection fewer columns than Marlin's tile",
            "a checkpoint that quantizes the small gate projections (`in_proj_ba`, `in_proj_a`/`in_proj_b`, `b_proj`)"),
    fixes=("a smaller TP size", "keep the small projections unquantized in the checkpoint",
           "vLLM 0.24 or later, whose Marlin pads the tiles"),
    example=PastedExample("ValueError: Weight output_size_per_partition = 32 is not divisible by  min_thread_n = 64. "
                          "Consider reducing tensor_parallel_size or running with --quantization gptq."),
    engines="sglang 0.5.9-0.5.23; vLLM 0.17-0.23",
    scope="pasted",
)


@reasoner("GDR418", numeric=("width", "multiple"))
def _marlin_shape(values: Mapping[str, str], context: Context) -> list[str]:
    width, multiple = int(values["width"]), int(values["multiple"])
    side = "output" if "output" in values["partition"] else "input"
    out = [f"{width} {side} columns per rank = {multiple} x {width // multiple} + {width % multiple}: not whole "
           f"Marlin tiles"]
    return out + _slices(width, multiple, context)


declare(
    "GDR419", "marlin-repack-not-divisible",
    summary="the Marlin weight repack refused a GPTQ/WNA16 layer whose per-rank output is not whole 64-column tiles",
    message=REPACK_N,
    explanation=(
        "sglang loads GPTQ (and AutoRound's GPTQ packing) and compressed-tensors WNA16 checkpoints through Marlin "
        "without acting on Marlin's shape check (`hardware_backend/gpu/quantization/gptq_kernels.py:89-94`, "
        "`compressed_tensors/schemes/compressed_tensors_wNa16.py:221-226` in 0.5.23); the repack of the weights "
        "then stops on an output slice that is not a multiple of 64 (`kernels/jit/csrc/gemm/marlin/"
        "gptq_marlin_repack.cuh:305-316`, under `jit_kernel/csrc/` in 0.5.9). A GDN `in_proj_ba` at TP 2 and "
        "up, or a Kimi-Linear `b_proj` (32 heads) at any TP, is narrower. `gdr-check launch` predicts it (GDR508)."),
    causes=("a TP size that leaves `in_proj_ba` fewer than 64 columns per rank",
            "a checkpoint that quantizes the small gate projections"),
    fixes=("a smaller TP size", "keep the small projections unquantized in the checkpoint "
                                "(GPTQModel `dynamic` `-:` entries, AutoRound `extra_config` with 16 bits)"),
    example=PastedExample("RuntimeError: size_n = 32 is not divisible by tile_n_size = 64"),
    engines="sglang 0.5.9-0.5.23",
    scope="pasted",
)


@reasoner("GDR419", numeric=("width", "multiple"))
def _repack(values: Mapping[str, str], context: Context) -> list[str]:
    width, multiple = int(values["width"]), int(values["multiple"])
    return [f"{width} output columns per rank = {multiple} x {width // multiple} + {width % multiple}: not whole "
            f"repack tiles"] + _slices(width, multiple, context)


declare(
    "GDR420", "awq-marlin-fallback",
    severity="warning",
    summary="an AWQ layer runs on the slow unoptimized kernel: its per-rank slice does not suit Marlin",
    message=AWQ_FALLBACK,
    explanation=(
        "Both engines run AWQ layers on Marlin when each rank's slice suits it and log this for each layer that "
        "does not (sglang 0.5.23 `srt/layers/quantization/awq/awq.py:367-375`, 64 output and 128 input columns, no "
        "group split; vLLM 0.33.0 `auto_awq.py:313-333`, only a group split, its Marlin padding the tiles). The "
        "layer then runs the unoptimized AWQ kernel, which loads but is slower; it stops only where an input slice "
        "splits a group. `gdr-check launch` predicts it (GDR509)."),
    causes=("a GDN `in_proj_ba` or KDA `b_proj` slice of fewer than 64 columns (sglang, vLLM before 0.24)",),
    fixes=("a smaller TP size", "keep the small projections unquantized (`modules_to_not_convert`)"),
    example=PastedExample("[2026-01-01 10:00:00 TP0] Layer 'model.layers.0.linear_attn.in_proj_ba' is not supported by "
                          "AWQMarlin. Falling back to unoptimized AWQ kernels."),
    engines="sglang 0.5.9-0.5.23; vLLM 0.17-0.33",
    scope="pasted",
)


@reasoner("GDR420")
def _awq_fallback(values: Mapping[str, str], context: Context) -> list[str]:
    module = values["prefix"].rsplit(".", 1)[-1]
    out = [f"`{module}` runs on the unoptimized AWQ kernel ({values['kernel']} refused its per-rank shape)"]
    if values["kernel"] == "AutoAWQMarlin":  # vLLM 0.24 on: tiles padded, only a split group falls back
        return out + ["vLLM's AutoAWQMarlin (0.24 on) pads its tiles: it falls back only where the layer's input "
                      "slice splits a quantization group (auto_awq.py:313-333 in 0.33.0)"]
    if context.tp and module in ("in_proj_ba", "b_proj"):
        for name, full in context.widths.items():
            if name.startswith(("in_proj_ba", "num_heads")) and full % context.tp == 0:
                fits = [str(tp) for tp in (1, 2, 4, 8, 16) if full % tp == 0 and (full // tp) % 64 == 0]
                out.append(f"{name} = {full} over tp={context.tp}: {full // context.tp} output columns per rank; "
                           f"Marlin takes multiples of 64 (TP sizes that give one: {', '.join(fits) or 'none'})")
    return out


declare(
    "GDR421", "group-split-across-ranks-at-load",
    summary="a 4-bit group-quantized layer's per-rank input slice splits a quantization group",
    message=IN_ALIGN,
    explanation=(
        "The plain AWQ and GPTQ kernels (sglang 0.5.23 `srt/layers/quantization/awq/schemes/awq_linear.py:39-45`, "
        "`gptq/schemes/gptq_linear.py:47-52`; vLLM 0.33.0 `quantization/auto_awq.py:818-824`) need each rank's "
        "input slice of a row-parallel layer to hold whole quantization groups. Both engines reach them for a layer "
        "Marlin does not take: AWQ falls back to them (GDR420), and vLLM 0.24 on falls back for exactly this case. "
        "For the GDN `out_proj` the slice is value_dim / TP, for the KDA `o_proj` heads x head_dim / TP, whole "
        "groups of 128 at every TP that splits the heads; a model whose other row-parallel layers (MLP down "
        "projections) are narrower per rank meets it first. `gdr-check launch` predicts it for the GDN/KDA "
        "projections (GDR508)."),
    causes=("a TP size that leaves a row-parallel layer an input slice that is not whole groups",),
    fixes=("a smaller TP size", "a checkpoint quantized with a smaller group size"),
    example=PastedExample("ValueError: The input size is not aligned with the quantized weight shape. This can be "
                          "caused by too large tensor parallel size."),
    engines="sglang 0.5.9-0.5.23; vLLM 0.17-0.33",
    scope="pasted",
)


@reasoner("GDR421")
def _group_split(values: Mapping[str, str], context: Context) -> list[str]:
    out = []
    for name, full in context.widths.items():
        if context.tp and name == V_WIDTH and full % context.tp == 0:
            per = full // context.tp
            whole = [str(g) for g in (32, 64, 128) if per % g == 0]
            out.append(f"{name} = {full} over tp={context.tp}: {per} input columns per rank for `out_proj`/`o_proj`, "
                       f"whole groups of {', '.join(whole) or 'none of 32, 64, 128'}")
    return out


_KDA_STATE = (profile_for("vllm@0.30").kda_state_dtype_refusal or "").removeprefix("ValueError: ")

declare(
    "GDR415", "vllm-kda-state-dtype-refused",
    summary="vLLM refused to start: the KDA recurrent state dtype requested is not one it keeps a KDA state in",
    message=_KDA_STATE,
    explanation=(
        "From vLLM 0.30.0 a KDA model's (Kimi-Linear's) recurrent state follows `--mamba-ssm-cache-dtype`, and "
        "vLLM takes only auto (float32), float32 and bfloat16 for it: any other value raises this ValueError "
        "while the configuration is built, before a weight is loaded "
        "(`vllm/model_executor/layers/mamba/mamba_utils.py:133-148` in 0.33.0). The flag itself offers float16, "
        "which a GDN model takes. `gdr-check check --state-dtype float16` and `gdr-check launch` report it "
        "before launch (GDR138)."),
    causes=("`--mamba-ssm-cache-dtype float16` kept from a GDN model's deployment",),
    fixes=("`--mamba-ssm-cache-dtype bfloat16` (half the state) or float32, or leave it at auto",),
    example=PastedExample("ValueError: KDA recurrent state supports only auto, float32, and bfloat16; got float16"),
    engines="vLLM 0.30.0 and later",
    scope="pasted",
)


@reasoner("GDR415", names=("dtype",))
def _kda_state(values: Mapping[str, str], context: Context) -> list[str]:
    dtype = values["dtype"].strip()
    if dtype != "float16":  # not a state dtype at all for KDA: nothing to halve, and `check` takes no such dtype
        return [f"`--mamba-ssm-cache-dtype {dtype}` is the cause: vLLM keeps a KDA state in float32 (auto) or "
                "bfloat16 only"]
    return [f"`--mamba-ssm-cache-dtype {dtype}` is the cause: `bfloat16` halves the float32 state as {dtype} "
            "would have, and vLLM takes it for KDA",
            "`gdr-check check MODEL --engine vllm --state-dtype " + dtype + "` reports this before launch (GDR138)"]


_CAPPING = ("Capping cudagraph capture sizes from max {capture} to {capped} to fit Mamba cache blocks ({blocks} "
            "blocks available). This limits the maximum batch size that can use CUDA graphs. To increase this "
            "limit, reduce max_num_seqs or increase available GPU memory.")

declare(
    "GDR416", "vllm-capture-sizes-capped-to-mamba-blocks",
    severity="warning",
    summary="vLLM 0.18-0.19 captured fewer decode CUDA graphs than configured: its Mamba cache blocks cap them",
    message=_CAPPING,
    explanation=(
        "vLLM 0.18.x and 0.19.x cap the CUDA-graph capture sizes to the Mamba cache blocks when a hybrid model's "
        "block pool has fewer blocks than the largest capture size, under FULL decode graphs "
        "(`adjust_cudagraph_sizes_for_mamba_cache`, `vllm/config/compilation.py:1198-1245` in 0.18.0): each "
        "decode sequence in a captured batch reads one state block. The server starts; decode batches above the "
        "cap run without CUDA graphs. From 0.20.0 vLLM refuses instead when `max_num_seqs` exceeds the blocks "
        "(GDR412). `gdr-check launch --engine-version 0.19.0` predicts it (GDR511)."),
    causes=("the default max_num_seqs (1024 on H100, so capture sizes to 512) with few blocks left",),
    fixes=("`--max-num-seqs` (or `--max-cudagraph-capture-size`) at most the blocks available",
           "raise `--gpu-memory-utilization`"),
    example=PastedExample(
        "WARNING 03-01 10:00:00 [compilation.py:1236] " + _CAPPING.format(capture=512, capped=400, blocks=411)),
    engines="vLLM 0.18.x-0.19.x",
    scope="pasted",
)


@reasoner("GDR416", numeric=("capture", "capped", "blocks"))
def _capture_capped(values: Mapping[str, str], context: Context) -> list[str]:
    capture, capped, blocks = int(values["capture"]), int(values["capped"]), int(values["blocks"])
    ran = (f"decode batches of {capped + 1} to {capture} sequences run without CUDA graphs ({blocks} blocks: one "
           "per decoding sequence)")
    if blocks < 1:  # no sequence count keeps a graph: the memory is what is missing
        return [ran, "no `--max-num-seqs` helps with no block at all: raise `--gpu-memory-utilization` or lower "
                     "`--max-model-len`; vLLM 0.20.0 and later refuse to start instead (GDR412)"]
    return [ran, f"`--max-num-seqs {blocks}` keeps every decode batch captured; vLLM 0.20.0 and later refuse to "
                 "start instead of capping (GDR412)"]


_CONV_LINES = "assert num_cache_lines >= batch"

declare(
    "GDR417", "vllm-capture-batch-above-mamba-blocks",
    summary="vLLM 0.17 failed at CUDA-graph capture: a captured decode batch has more sequences than state blocks",
    message=_CONV_LINES,
    explanation=(
        "vLLM 0.17.x captures FULL decode CUDA graphs up to the largest capture size without checking the Mamba "
        "cache blocks; a capture batch larger than the blocks fails the assertion in `causal_conv1d_update` "
        "(`vllm/model_executor/layers/mamba/ops/causal_conv1d.py:1162` in 0.17.1), the number of conv-state rows "
        "against the batch (vllm-project/vllm#34094). 0.18 caps the capture sizes instead (GDR416), 0.20 refuses "
        "`max_num_seqs` above the blocks (GDR412). `gdr-check launch --engine-version 0.17.1` predicts it (GDR511)."),
    causes=("the default max_num_seqs (capture sizes to 512) with a large model per rank or a long max length",),
    fixes=("`--max-cudagraph-capture-size` or `--max-num-seqs` at most the blocks", "raise `--gpu-memory-utilization`",
           "a vLLM release from 0.20.0, which names the blocks"),
    example=PastedExample("    assert num_cache_lines >= batch\nAssertionError"),
    engines="vLLM 0.17.x",
    scope="pasted",
)


@reasoner("GDR417")
def _capture_assert(values: Mapping[str, str], context: Context) -> list[str]:
    return ["`gdr-check launch --engine-version 0.17.1 -- <the command>` computes the blocks and the largest capture "
            "size before launch (GDR511)"]


_LONG = ("User-specified max_model_len ({length}) is greater than the derived max_model_len ({key}={derived} or "
         "model_max_length={model_max_length} in model's config.json).")

declare(
    "GDR422", "vllm-max-model-len-above-the-model",
    summary="vLLM refused to start: --max-model-len is above the length the model's config gives",
    message=_LONG,
    explanation=(
        "vLLM derives the longest length a model serves from its config (`max_position_embeddings` or another "
        "length key, times the RoPE factor for RoPE types that do not already scale it, at most a tokenizer's "
        "`model_max_length`) and raises this ValueError for a longer `--max-model-len` unless "
        "`VLLM_ALLOW_LONG_MAX_MODEL_LEN=1` is set (`vllm/config/model.py:2545-2700` in 0.33.0; the same words from "
        "0.17.1). `gdr-check launch` predicts it from the config (GDR512)."),
    causes=("a length copied from another model, or from the model card's extended-context recipe without its RoPE "
            "scaling",),
    fixes=("`--max-model-len` at most the derived length", "add the RoPE scaling the model card gives for longer "
           "contexts (`--hf-overrides`), or set VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 knowingly"),
    example=PastedExample("ValueError: User-specified max_model_len (1048576) is greater than the derived "
                          "max_model_len (max_position_embeddings=262144 or model_max_length=None in model's "
                          "config.json)."),
    engines="vLLM 0.17.1 - 0.33.0 (and earlier)",
    scope="pasted",
)


@reasoner("GDR422", numeric=("length", "derived"))
def _long_length(values: Mapping[str, str], context: Context) -> list[str]:
    length, derived, key = int(values["length"]), int(values["derived"]), values["key"].strip()
    out = [f"{length} asked, {derived} derived from `{key}`"
           + (f": {length / derived:g}x the model's length" if derived else ""),
           f"`--max-model-len {derived}` starts; a longer one needs the model's RoPE scaling for it, or "
           "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (positions past the trained length give wrong outputs)"]
    return out
