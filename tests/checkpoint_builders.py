"""Write small or full-size checkpoints of each GDN/KDA family, header only.

A safetensors file is an 8-byte little-endian header length, the JSON header, then the data. The data region
is left sparse (`truncate`), so a full-size geometry (Qwen3-Next-80B, Kimi-Linear-48B) costs nothing on disk:
the checker reads only headers. Tensor names are the real ones (docs/models.md §5).
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

Tensors = dict[str, tuple[str, tuple[int, ...]]]  # name -> (safetensors dtype, shape)

_ITEMSIZE = {"F64": 8, "F32": 4, "BF16": 2, "F16": 2, "I64": 8, "I32": 4, "I8": 1, "U8": 1, "BOOL": 1, "F8_E4M3": 1}


def write_safetensors(path: Path, tensors: Mapping[str, tuple[str, tuple[int, ...]]]) -> Path:
    header: dict[str, Any] = {}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        size = math.prod(shape) * _ITEMSIZE[dtype]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        f.truncate(8 + len(blob) + offset)  # sparse data region
    return path


def write_json(path: Path, value: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2) + "\n")
    return path


def write_checkpoint(directory: Path, config: Mapping[str, Any] | None, tensors: Tensors, *, shards: int = 1) -> Path:
    """A model directory: config.json and one `model.safetensors`, or `shards` shards plus the index."""
    directory.mkdir(parents=True, exist_ok=True)
    if config is not None:
        write_json(directory / "config.json", config)
    if shards == 1:
        write_safetensors(directory / "model.safetensors", tensors)
        return directory
    names = list(tensors)
    per_shard = math.ceil(len(names) / shards)
    weight_map: dict[str, str] = {}
    for index in range(shards):
        shard = f"model-{index + 1:05d}-of-{shards:05d}.safetensors"
        chunk = names[index * per_shard:(index + 1) * per_shard]
        write_safetensors(directory / shard, {name: tensors[name] for name in chunk})
        weight_map.update({name: shard for name in chunk})
    total = sum(math.prod(shape) * _ITEMSIZE[dtype] for dtype, shape in tensors.values())
    write_json(directory / "model.safetensors.index.json",
               {"metadata": {"total_size": total}, "weight_map": weight_map})
    return directory


# -- configs -------------------------------------------------------------------------------------------------
def interval_layer_types(layers: int, interval: int = 4) -> list[str]:
    return ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(layers)]


def qwen3_next_config(*, hidden: int = 64, layers: int = 8, H: int = 2, HV: int = 4, K: int = 16, V: int = 16,
                      W: int = 4, heads: int = 4, kv_heads: int = 2, **extra: Any) -> dict[str, Any]:
    config = {
        "architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next",
        "hidden_size": hidden, "num_hidden_layers": layers, "full_attention_interval": 4,
        "linear_num_key_heads": H, "linear_num_value_heads": HV, "linear_key_head_dim": K,
        "linear_value_head_dim": V, "linear_conv_kernel_dim": W,
        "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": 256,
        "torch_dtype": "bfloat16",
    }
    config.update(extra)
    return config


def qwen3_5_config(*, moe: bool = False, text_only: bool = False, hidden: int = 64, layers: int = 8, H: int = 2,
                   HV: int = 4, K: int = 16, V: int = 16, W: int = 4, heads: int = 4, kv_heads: int = 2,
                   **extra: Any) -> dict[str, Any]:
    model_type = "qwen3_5_moe" if moe else "qwen3_5"
    text = {
        "model_type": f"{model_type}_text", "hidden_size": hidden, "num_hidden_layers": layers,
        "layer_types": interval_layer_types(layers), "full_attention_interval": 4,
        "linear_num_key_heads": H, "linear_num_value_heads": HV, "linear_key_head_dim": K,
        "linear_value_head_dim": V, "linear_conv_kernel_dim": W,
        "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": 256,
        "mamba_ssm_dtype": "float32", "dtype": "bfloat16",
    }
    text.update(extra)
    if text_only:
        arch = "Qwen3_5MoeForCausalLM" if moe else "Qwen3_5ForCausalLM"
        return {"architectures": [arch], **text}
    arch = "Qwen3_5MoeForConditionalGeneration" if moe else "Qwen3_5ForConditionalGeneration"
    return {"architectures": [arch], "model_type": model_type, "text_config": text,
            "vision_config": {"depth": 2, "hidden_size": 32}}


def kimi_config(*, hidden: int = 64, layers: int = 8, H: int = 4, D: int = 16, W: int = 4, heads: int = 4,
                kda_layers: list[int] | None = None, **extra: Any) -> dict[str, Any]:
    kda = kda_layers if kda_layers is not None else [i + 1 for i in range(layers) if (i + 1) % 4 != 0]
    full = [i + 1 for i in range(layers) if i + 1 not in kda]
    config = {
        "architectures": ["KimiLinearForCausalLM"], "model_type": "kimi_linear",
        "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
        "head_dim": 72, "num_key_value_heads": heads,  # legacy fields KDA ignores
        "linear_attn_config": {"num_heads": H, "head_dim": D, "short_conv_kernel_size": W,
                               "kda_layers": kda, "full_attn_layers": full},
        "kv_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16,
        "torch_dtype": "bfloat16",
    }
    config.update(extra)
    return config


# -- tensors of each family ------------------------------------------------------------------------------------
def _text(config: Mapping[str, Any]) -> Mapping[str, Any]:
    return config.get("text_config", config)


def _full_attention(prefix: str, hidden: int, heads: int, kv_heads: int, head_dim: int) -> Tensors:
    return {
        f"{prefix}self_attn.q_proj.weight": ("BF16", (2 * heads * head_dim, hidden)),
        f"{prefix}self_attn.k_proj.weight": ("BF16", (kv_heads * head_dim, hidden)),
        f"{prefix}self_attn.v_proj.weight": ("BF16", (kv_heads * head_dim, hidden)),
        f"{prefix}self_attn.o_proj.weight": ("BF16", (hidden, heads * head_dim)),
        f"{prefix}self_attn.q_norm.weight": ("BF16", (head_dim,)),
        f"{prefix}self_attn.k_norm.weight": ("BF16", (head_dim,)),
    }


def _norms(prefix: str, hidden: int) -> Tensors:
    return {f"{prefix}input_layernorm.weight": ("BF16", (hidden,)),
            f"{prefix}post_attention_layernorm.weight": ("BF16", (hidden,))}


def qwen3_next_layer(prefix: str, c: Mapping[str, Any]) -> Tensors:
    H, HV, K, V, W, hidden = (c["linear_num_key_heads"], c["linear_num_value_heads"], c["linear_key_head_dim"],
                              c["linear_value_head_dim"], c["linear_conv_kernel_dim"], c["hidden_size"])
    p = f"{prefix}linear_attn."
    return {
        f"{p}in_proj_qkvz.weight": ("BF16", (2 * H * K + 2 * HV * V, hidden)),
        f"{p}in_proj_ba.weight": ("BF16", (2 * HV, hidden)),
        f"{p}conv1d.weight": ("BF16", (2 * H * K + HV * V, 1, W)),
        f"{p}A_log": ("BF16", (HV,)),
        f"{p}dt_bias": ("BF16", (HV,)),
        f"{p}norm.weight": ("BF16", (V,)),
        f"{p}out_proj.weight": ("BF16", (hidden, HV * V)),
    }


def qwen3_5_layer(prefix: str, c: Mapping[str, Any]) -> Tensors:
    H, HV, K, V, W, hidden = (c["linear_num_key_heads"], c["linear_num_value_heads"], c["linear_key_head_dim"],
                              c["linear_value_head_dim"], c["linear_conv_kernel_dim"], c["hidden_size"])
    p = f"{prefix}linear_attn."
    return {
        f"{p}in_proj_qkv.weight": ("BF16", (2 * H * K + HV * V, hidden)),
        f"{p}in_proj_z.weight": ("BF16", (HV * V, hidden)),
        f"{p}in_proj_b.weight": ("BF16", (HV, hidden)),
        f"{p}in_proj_a.weight": ("BF16", (HV, hidden)),
        f"{p}conv1d.weight": ("BF16", (2 * H * K + HV * V, 1, W)),
        f"{p}A_log": ("F32", (HV,)),
        f"{p}dt_bias": ("BF16", (HV,)),
        f"{p}norm.weight": ("F32", (V,)),
        f"{p}out_proj.weight": ("BF16", (hidden, HV * V)),
    }


def qwen_tensors(config: Mapping[str, Any], *, namespace: str = "model.", linear: Iterable[int] | None = None,
                 experts: int = 0, expert_dim: int = 0) -> Tensors:
    """Every decoder layer of a Qwen3-Next (fused) or Qwen3.5/3.6 (split) checkpoint."""
    c = _text(config)
    fused = "Qwen3Next" in config["architectures"][0]
    layers = c["num_hidden_layers"]
    linear_set = set(linear) if linear is not None else {i for i in range(layers) if (i + 1) % 4}
    tensors: Tensors = {f"{namespace}embed_tokens.weight": ("BF16", (1024, c["hidden_size"]))}
    for i in range(layers):
        prefix = f"{namespace}layers.{i}."
        tensors.update(_norms(prefix, c["hidden_size"]))
        if i in linear_set:
            tensors.update((qwen3_next_layer if fused else qwen3_5_layer)(prefix, c))
        else:
            tensors.update(_full_attention(prefix, c["hidden_size"], c["num_attention_heads"],
                                           c["num_key_value_heads"], c.get("head_dim", 256)))
        if experts:
            tensors[f"{prefix}mlp.experts.gate_up_proj"] = ("BF16", (experts, 2 * expert_dim, c["hidden_size"]))
            tensors[f"{prefix}mlp.experts.down_proj"] = ("BF16", (experts, c["hidden_size"], expert_dim))
            tensors[f"{prefix}mlp.gate.weight"] = ("BF16", (experts, c["hidden_size"]))
    tensors[f"{namespace}norm.weight"] = ("BF16", (c["hidden_size"],))
    # MTP holds full-attention layers only: no linear-attention state.
    tensors.update(_full_attention("mtp.layers.0.", c["hidden_size"], c["num_attention_heads"],
                                   c["num_key_value_heads"], c.get("head_dim", 256)))
    if "text_config" in config:
        tensors["model.visual.blocks.0.attn.qkv.weight"] = ("BF16", (96, 32))
    return tensors


def kda_layer(prefix: str, hidden: int, H: int, D: int, W: int, *, conv_rank: int = 3) -> Tensors:
    P = H * D
    p = f"{prefix}self_attn."
    conv = (P, 1, W) if conv_rank == 3 else (P, W)
    return {
        f"{p}q_proj.weight": ("BF16", (P, hidden)),
        f"{p}k_proj.weight": ("BF16", (P, hidden)),
        f"{p}v_proj.weight": ("BF16", (P, hidden)),
        f"{p}q_conv1d.weight": ("BF16", conv),
        f"{p}k_conv1d.weight": ("BF16", conv),
        f"{p}v_conv1d.weight": ("BF16", conv),
        f"{p}f_a_proj.weight": ("BF16", (D, hidden)),
        f"{p}f_b_proj.weight": ("BF16", (P, D)),
        f"{p}g_a_proj.weight": ("BF16", (D, hidden)),
        f"{p}g_b_proj.weight": ("BF16", (P, D)),
        f"{p}b_proj.weight": ("BF16", (H, hidden)),
        f"{p}A_log": ("F32", (1, 1, H, 1)),
        f"{p}dt_bias": ("F32", (P,)),
        f"{p}o_norm.weight": ("BF16", (D,)),
        f"{p}o_proj.weight": ("BF16", (hidden, P)),
    }


def mla_layer(prefix: str, config: Mapping[str, Any]) -> Tensors:
    hidden, heads = config["hidden_size"], config["num_attention_heads"]
    rank, nope, rope, v = (config["kv_lora_rank"], config["qk_nope_head_dim"], config["qk_rope_head_dim"],
                           config["v_head_dim"])
    p = f"{prefix}self_attn."
    return {
        f"{p}q_proj.weight": ("BF16", (heads * (nope + rope), hidden)),
        f"{p}kv_a_proj_with_mqa.weight": ("BF16", (rank + rope, hidden)),
        f"{p}kv_a_layernorm.weight": ("BF16", (rank,)),
        f"{p}kv_b_proj.weight": ("BF16", (heads * (nope + v), rank)),
        f"{p}o_proj.weight": ("BF16", (hidden, heads * v)),
    }


def kimi_tensors(config: Mapping[str, Any], *, conv_rank: int = 3, kda_layers: Iterable[int] | None = None) -> Tensors:
    """Every decoder layer of a Kimi-Linear checkpoint; `kda_layers` (0-based) overrides the config's map."""
    lac = config["linear_attn_config"]
    kda = set(kda_layers) if kda_layers is not None else {n - 1 for n in lac["kda_layers"]}
    tensors: Tensors = {"model.embed_tokens.weight": ("BF16", (1024, config["hidden_size"]))}
    for i in range(config["num_hidden_layers"]):
        prefix = f"model.layers.{i}."
        tensors.update(_norms(prefix, config["hidden_size"]))
        if i in kda:
            tensors.update(kda_layer(prefix, config["hidden_size"], lac["num_heads"], lac["head_dim"],
                                     lac["short_conv_kernel_size"], conv_rank=conv_rank))
        else:
            tensors.update(mla_layer(prefix, config))
    tensors["model.norm.weight"] = ("BF16", (config["hidden_size"],))
    return tensors


def olmo_hybrid_layer(prefix: str, hidden: int, H: int, HV: int, K: int, V: int, W: int) -> Tensors:
    p = f"{prefix}linear_attn."
    return {
        f"{p}q_proj.weight": ("BF16", (H * K, hidden)),
        f"{p}k_proj.weight": ("BF16", (H * K, hidden)),
        f"{p}v_proj.weight": ("BF16", (HV * V, hidden)),
        f"{p}a_proj.weight": ("BF16", (HV, hidden)),
        f"{p}b_proj.weight": ("BF16", (HV, hidden)),
        f"{p}g_proj.weight": ("BF16", (HV * V, hidden)),
        f"{p}o_proj.weight": ("BF16", (hidden, HV * V)),
        f"{p}q_conv1d.weight": ("BF16", (H * K, 1, W)),
        f"{p}k_conv1d.weight": ("BF16", (H * K, 1, W)),
        f"{p}v_conv1d.weight": ("BF16", (HV * V, 1, W)),
        f"{p}A_log": ("F32", (HV,)),
        f"{p}dt_bias": ("F32", (HV,)),
        f"{p}o_norm.weight": ("BF16", (V,)),
    }
