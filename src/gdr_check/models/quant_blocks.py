"""Block-quantized GDN projections at tensor parallelism: each rank's slice against the quantization block.

vLLM 0.33.0 loads an FP8 checkpoint with `weight_block_size` [block_n, block_k] only when every TP-split output
slice of a column-parallel layer is a multiple of block_n and every row-parallel input slice a multiple of block_k
(`vllm/model_executor/layers/quantization/utils/fp8_utils.py:1296-1345`, `validate_fp8_block_shape`); otherwise it
stops with `ValueError: Weight output_partition_size = N is not divisible by weight quantization block_n = B.` A
layer named in the config's `ignored_layers` / `modules_to_not_convert` stays unquantized
(`quantization/fp8.py:160-190`, exact module names; a fused layer is skipped when all its shards are).

The GDN layers of vLLM 0.33.0 (`model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py:600-870`):
- `in_proj_qkvz`, column-parallel: Qwen3-Next one output of 2 x key_dim + 2 x value_dim (interleaved by head
  group), Qwen3.5 four outputs (key_dim, key_dim, value_dim, value_dim) from the shards `in_proj_qkv`, `in_proj_z`;
- `in_proj_ba`, column-parallel: Qwen3-Next one output of 2 x num_v_heads, Qwen3.5 two of num_v_heads (shards
  `in_proj_b`, `in_proj_a`);
- `out_proj`, row-parallel over value_dim.

sglang 0.5.23 checks the same way (`srt/layers/quantization/fp8.py:570-610`, `validate_block_quant_shapes`) but
every output of a merged layer, whether split or not, over the attention-TP group; its GDN layers
(`srt/models/qwen3_next.py:168-184, 355-362`) keep four outputs for `in_proj_qkvz` (key_dim, key_dim, value_dim,
value_dim) and two for `in_proj_ba` (num_v_heads each) for every family.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..base.records import dataclass
from .description import LinearAttentionModel

TP_SIZES = (1, 2, 4, 8, 16)


class Fp8Checks(Protocol):
    """How a release checks FP8 blocks at load (an engine release's launch-flag table holds these)."""

    @property
    def fp8_checks_every_merged_output(self) -> bool: ...

    @property
    def fp8_interleaved_families(self) -> tuple[str, ...]: ...

    @property
    def gdn_separate_families(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class BlockProblem:
    layer: str  # the fused module, as vLLM names it
    kind: str  # "output" (column-parallel, block_n) or "input" (row-parallel, block_k)
    width: int  # the per-rank width
    block: int


def fp8_block(config: dict[str, Any]) -> tuple[tuple[int, int], list[str]] | None:
    """([block_n, block_k], the layers kept unquantized) of an FP8 block-quantized config; None otherwise."""
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else None
    quant = config.get("quantization_config") or (text or {}).get("quantization_config")
    if not isinstance(quant, dict) or str(quant.get("quant_method", "")).lower() != "fp8":
        return None
    block = quant.get("weight_block_size")
    if not (isinstance(block, list) and len(block) == 2 and all(isinstance(b, int) and b > 0 for b in block)):
        return None
    ignored = quant.get("ignored_layers") or quant.get("modules_to_not_convert") or []
    return (block[0], block[1]), [str(name) for name in ignored if isinstance(name, str)]


def _skipped(module: str, shards: tuple[str, ...], layer: int, ignored: list[str]) -> bool:
    def listed(name: str) -> bool:
        suffix = f"layers.{layer}.linear_attn.{name}"
        return any(entry == suffix or entry.endswith("." + suffix) for entry in ignored)

    return listed(module) or (bool(shards) and all(listed(shard) for shard in shards))


def block_problems(model: LinearAttentionModel, config: dict[str, Any], tp: int,
                   release: Fp8Checks) -> list[BlockProblem]:
    """The GDN projections whose per-rank slices at `tp` (the attention TP) are not multiples of the FP8 block,
    as vLLM 0.33.0 or sglang 0.5.23 checks them at load."""
    found = fp8_block(config)
    if found is None or model.kind != "gdn" or None in (model.num_k_heads, model.num_v_heads, model.head_k_dim,
                                                        model.head_v_dim):
        return []
    (block_n, block_k), ignored = found
    key_dim = (model.num_k_heads or 0) * (model.head_k_dim or 0)
    value_dim = (model.num_v_heads or 0) * (model.head_v_dim or 0)
    heads = model.num_v_heads or 0
    interleaved = model.family in release.fp8_interleaved_families
    layers: list[tuple[str, tuple[str, ...], list[int]]] = [
        ("in_proj_qkvz", () if interleaved else ("in_proj_qkv", "in_proj_z"),
         [2 * key_dim + 2 * value_dim] if interleaved else [key_dim, key_dim, value_dim, value_dim]),
        ("in_proj_ba", () if interleaved else ("in_proj_b", "in_proj_a"),
         [2 * heads] if interleaved else [heads, heads]),
    ]
    if model.family in release.gdn_separate_families:  # four layers, not two merged ones
        layers = [("in_proj_qkv", (), [key_dim, key_dim, value_dim]), ("in_proj_z", (), [value_dim]),
                  ("in_proj_b", (), [heads]), ("in_proj_a", (), [heads])]
    problems: dict[tuple[str, str], BlockProblem] = {}
    for layer in model.linear_layers:
        for module, shards, outputs in layers:
            if _skipped(module, shards, layer, ignored):
                continue
            split = tp > 1
            merged = len(outputs) > 1
            if not (split or merged):
                continue
            # vLLM (fp8_utils.py:1330-1337) lets the last output of an unsplit merged layer be any width
            checked = outputs if split or release.fp8_checks_every_merged_output else outputs[:-1]
            for width in checked:
                if (width // tp) % block_n:
                    problems.setdefault((module, "output"), BlockProblem(module, "output", width // tp, block_n))
                    break
        if tp > 1 and not _skipped("out_proj", (), layer, ignored) and (value_dim // tp) % block_k:
            problems.setdefault(("out_proj", "input"), BlockProblem("out_proj", "input", value_dim // tp, block_k))
    return list(problems.values())


def working_tp_sizes(model: LinearAttentionModel, config: dict[str, Any], release: Fp8Checks) -> list[int]:
    """The TP sizes (of 1, 2, 4, 8, 16) that split the heads and meet the FP8 block."""
    heads = [h for h in (model.num_k_heads, model.num_v_heads) if h]
    return [tp for tp in TP_SIZES
            if all(h % tp == 0 for h in heads) and not block_problems(model, config, tp, release)]
