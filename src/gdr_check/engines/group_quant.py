"""How each engine release loads a group-quantized (AWQ, GPTQ, compressed-tensors WNA16) or NVFP4 linear layer
whose per-rank slice is narrow: data, one `GroupQuantFacts` per release epoch, held by the release's launch-flag
table (`launch_flags.FlagTable.group_quant`); `models.quant_groups` applies it to the GDN and KDA projections.

A `WidthCheck` is one test the release makes of a layer's per-rank width at load: the output columns of a
column-parallel layer (the sum of a merged layer's outputs) or the input columns of a row-parallel one, against a
multiple (a number, the checkpoint's group size, or the pack factor 32 / bits), with what the release then does:
"warning" (it falls back to a slower kernel and says so; the checks marked `after_fallback` are then those of the
fallback kernel) or "error" (it stops loading). `says` is the release's own message ({prefix}: the layer's module
path, {width}, {multiple}).

Read in the wheels:
- sglang 0.5.9-0.5.23 (every release the same): AWQ goes through Marlin when the layer passes
  `check_marlin_supports_layer` (output % 64, input % 128, and input % group where the group is smaller than the
  layer's whole input: `srt/layers/quantization/marlin_utils.py:161-193` in 0.5.23), otherwise it warns and takes the
  unoptimized AWQ kernel (`awq/awq.py:367-375`), which refuses an input slice that splits a group and an output slice
  that is not whole int32 words (`awq/schemes/awq_linear.py:39-53`). GPTQ (converted to gptq_marlin) and
  compressed-tensors WNA16 compute the same Marlin check and drop its answer (`hardware_backend/gpu/quantization/
  gptq_kernels.py:89-94`, `compressed_tensors/schemes/compressed_tensors_wNa16.py:221-226`); the weight repack then
  refuses an output slice that is not a multiple of 64 or an input slice not a multiple of 16
  (`kernels/jit/csrc/gemm/marlin/gptq_marlin_repack.cuh:305-316`; the same JIT kernel under `jit_kernel/csrc/` in
  0.5.9, `:303-316`). ModelOpt NVFP4 pads the weight to the GEMM's alignment (`modelopt_quant.py:197-240`):
  nothing to check.
- vLLM 0.17-0.23: AWQ as sglang's (`awq_marlin.py:294-300`, `awq.py:198-212` in 0.22.0); Qwen3.5's `in_proj_ba` is
  replicated, not split, under AWQ, GPTQ and AutoRound from 0.22 (`mamba/gdn/qwen_gdn_linear_attn.py:620-632`).
- vLLM 0.24 onwards: Marlin zero-pads tiles (`marlin_utils.py:306-323`, `allow_tile_padding`); AWQ falls back only
  for an input slice that splits a group (`auto_awq.py:313-333` in 0.33.0), and the fallback refuses that slice
  (`auto_awq.py:818-832`).
- vLLM's AWQ `modules_to_not_convert` against a fused layer (Qwen3.5's `in_proj_qkvz`, `in_proj_ba`): its shard
  names, all or none, else it stops (`quant_utils.py:500-505` in 0.22.0); from 0.24 the fused name is tried first
  (`quant_utils.py:664-683` in 0.33.0).
- vLLM, every release: ModelOpt NVFP4 refuses an input slice that is not a multiple of 16 (`modelopt.py:2026-2029`
  in 0.33.0, `:1087-1089` in 0.17.0). GPTQ and compressed-tensors WNA16 go through a kernel picked per GPU among
  several (Machete, Marlin, ...; `model_executor/kernels/linear/__init__.py:887-955` in 0.33.0): not modelled.
"""

from __future__ import annotations

from dataclasses import replace

from ..base.records import dataclass

GROUP = "group"  # the multiple is the checkpoint's group size (checked only where it is below the layer's input)
PACK = "pack"  # the multiple is the pack factor, 32 / bits


@dataclass(frozen=True)
class WidthCheck:
    scheme: str  # "awq" | "gptq" | "wna16" | "nvfp4"
    side: str  # "output" | "input"
    multiple: int | str  # a number, GROUP or PACK
    outcome: str  # "warning" (falls back) | "error" (stops loading)
    says: str
    source: str
    after_fallback: bool = False


@dataclass(frozen=True)
class GroupQuantFacts:
    """One release epoch's group-quantization loading, as data."""

    checks: tuple[WidthCheck, ...] = ()
    # The schemes under which a non-interleaved `in_proj_ba` (Qwen3.5) is replicated on every rank.
    ba_replicated: tuple[str, ...] = ()
    # AWQ's `modules_to_not_convert` is read against a fused layer's shard names too (vLLM's packed-module mapping);
    # sglang reads it against the fused layer's own name only.
    awq_matches_shards: bool = True
    # KDA's q/k/v: one merged `qkv_proj` (sglang) or three column-parallel layers (vLLM).
    kda_merged_qkv: bool = False
    # The schemes this release's facts cover; the others are not predicted.
    modelled: tuple[str, ...] = ()
    # AWQ's `modules_to_not_convert` against a fused layer: the fused name first (vLLM 0.24 on), then its shards,
    # which must all agree, or the release stops with `awq_shards_disagree` (vLLM `quant_utils.py`, is_layer_skipped).
    awq_fused_name_first: bool = True
    awq_shards_disagree: str = ""
    awq_shards_source: str = ""


# The engines' own messages (`explain` matches them too: checks/rules_pasted_launch.py), `{prefix}` the layer.
AWQ_FALLBACK = "Layer '{prefix}' is not supported by {kernel}. Falling back to unoptimized AWQ kernels."
_AWQ_FALLBACK_SG = AWQ_FALLBACK.format(prefix="{prefix}", kernel="AWQMarlin")
IN_ALIGN = ("The input size is not aligned with the quantized weight shape. This can be caused by too large tensor "
            "parallel size.")
_OUT_ALIGN = ("The output size is not aligned with the quantized weight shape. This can be caused by too large "
              "tensor parallel size.")
REPACK_N = "size_n = {width} is not divisible by tile_n_size = {multiple}"
_REPACK_K = "size_k = {width} is not divisible by tile_k_size = {multiple}"
_NVFP4_IN = "Unsupported model when in features size is not multiple of 16"


def _awq_marlin_unpadded(says: str, source: str, plain: str) -> tuple[WidthCheck, ...]:
    """AWQ through an unpadded Marlin check, then the plain AWQ kernel's own refusals."""
    return (
        WidthCheck("awq", "output", 64, "warning", says, source),
        WidthCheck("awq", "input", 128, "warning", says, source),
        WidthCheck("awq", "input", GROUP, "warning", says, source),
        WidthCheck("awq", "input", GROUP, "error", IN_ALIGN, plain, after_fallback=True),
        WidthCheck("awq", "output", PACK, "error", _OUT_ALIGN, plain, after_fallback=True),
    )


SGLANG_GROUPS = GroupQuantFacts(
    checks=_awq_marlin_unpadded(_AWQ_FALLBACK_SG, "sglang 0.5.23 srt/layers/quantization/awq/awq.py:367-375",
                                "sglang 0.5.23 srt/layers/quantization/awq/schemes/awq_linear.py:39-53") + tuple(
        WidthCheck(scheme, side, multiple, "error", says,
                   "sglang 0.5.23 kernels/jit/csrc/gemm/marlin/gptq_marlin_repack.cuh:305-316")
        for scheme in ("gptq", "wna16") for side, multiple, says in (("output", 64, REPACK_N),
                                                                      ("input", 16, _REPACK_K))),
    awq_matches_shards=False, kda_merged_qkv=True, modelled=("awq", "gptq", "wna16", "nvfp4"),
)

_NVFP4 = WidthCheck("nvfp4", "input", 16, "error", _NVFP4_IN, "vLLM 0.33.0 vllm/model_executor/layers/quantization/"
                    "modelopt.py:2026-2029")

_SHARDS = ("Detected some but not all shards of {prefix} are quantized. All shards of fused layers to have the same "
           "precision.")
VLLM_GROUPS_0_17 = GroupQuantFacts(
    awq_fused_name_first=False, awq_shards_disagree=_SHARDS,
    awq_shards_source="vLLM 0.22.0 vllm/model_executor/layers/quantization/utils/quant_utils.py:500-505",
    checks=_awq_marlin_unpadded(
        _AWQ_FALLBACK_SG,
        "vLLM 0.22.0 vllm/model_executor/layers/quantization/awq_marlin.py:294-300",
        "vLLM 0.22.0 vllm/model_executor/layers/quantization/awq.py:198-212") + (_NVFP4,),
    modelled=("awq", "nvfp4"),
)
VLLM_GROUPS_0_22 = replace(VLLM_GROUPS_0_17, ba_replicated=("awq", "gptq"))
_AUTO_AWQ = "vLLM 0.33.0 vllm/model_executor/layers/quantization/auto_awq.py"
VLLM_GROUPS_0_24 = GroupQuantFacts(
    checks=(
        WidthCheck("awq", "input", GROUP, "warning", "Layer '{prefix}' is not supported by AutoAWQMarlin. Falling "
                   "back to unoptimized AWQ kernels.", _AUTO_AWQ + ":313-333"),
        WidthCheck("awq", "input", GROUP, "error", IN_ALIGN, _AUTO_AWQ + ":818-832", after_fallback=True),
        _NVFP4,
    ),
    ba_replicated=("awq", "gptq"), modelled=("awq", "nvfp4"), awq_shards_disagree=_SHARDS,
    awq_shards_source="vLLM 0.33.0 vllm/model_executor/layers/quantization/utils/quant_utils.py:664-683",
)

# vLLM: the first release of each epoch and its facts (the release a table is for takes the last epoch it reaches).
VLLM_GROUP_EPOCHS: tuple[tuple[tuple[int, ...], GroupQuantFacts], ...] = (
    ((0, 17), VLLM_GROUPS_0_17), ((0, 22), VLLM_GROUPS_0_22), ((0, 24), VLLM_GROUPS_0_24))


def facts_for(epochs: tuple[tuple[tuple[int, ...], GroupQuantFacts], ...], version: tuple[int, ...]) -> \
        GroupQuantFacts:
    found = epochs[0][1]
    for first, facts in epochs:
        if version >= first:
            found = facts
    return found
