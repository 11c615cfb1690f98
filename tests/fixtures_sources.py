"""Writers for test checkpoints: real safetensors headers with sparse data, indexes, configs, HF cache layouts.

No numpy or torch: headers are written by hand (8-byte little-endian length, JSON, then the data region),
and the data region is left sparse with `truncate`, so full-size geometries cost no disk.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ITEMSIZE = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "U16": 2, "I16": 2, "F16": 2, "BF16": 2,
    "U32": 4, "I32": 4, "F32": 4, "U64": 8, "I64": 8, "F64": 8, "C64": 8,
}
INDEX_NAME = "model.safetensors.index.json"

TensorSpecs = Mapping[str, tuple[str, Sequence[int]]]


def header_for(tensors: TensorSpecs, metadata: Mapping[str, str] | None = None) -> tuple[dict[str, Any], int]:
    """(header dict, data size) laying `tensors` out back to back in the given order."""
    header: dict[str, Any] = {}
    if metadata is not None:
        header["__metadata__"] = dict(metadata)
    offset = 0
    for name, (dtype, shape) in tensors.items():
        size = math.prod(shape) * ITEMSIZE[dtype]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    return header, offset


def write_raw_safetensors(
    path: Path, header: bytes, data_size: int, *, length: int | None = None, total_size: int | None = None
) -> Path:
    """A file of 8-byte length (default len(header)), `header`, then a sparse data region.

    `total_size` overrides the file size (to truncate or extend it); `length` overrides the length prefix.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", len(header) if length is None else length))
        handle.write(header)
        handle.truncate(8 + len(header) + data_size if total_size is None else total_size)
    return path


def write_safetensors(path: Path, tensors: TensorSpecs, *, metadata: Mapping[str, str] | None = None) -> Path:
    header, data_size = header_for(tensors, metadata)
    return write_raw_safetensors(path, json.dumps(header).encode(), data_size)


def write_json(path: Path, value: Any, *, indent: int | None = 2) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=indent) + "\n", encoding="utf-8")
    return path


def write_sharded(
    directory: Path, shards: Mapping[str, TensorSpecs], *, config: Mapping[str, Any] | None = None,
    weight_map: Mapping[str, str] | None = None,
) -> Path:
    """Shards, their index (from the shards unless `weight_map` is given) and optionally config.json."""
    mapping: dict[str, str] = {}
    for shard, tensors in shards.items():
        write_safetensors(directory / shard, tensors)
        mapping.update({name: shard for name in tensors})
    total = sum(header_for(t)[1] for t in shards.values())
    index = {"metadata": {"total_size": total}, "weight_map": dict(weight_map if weight_map is not None else mapping)}
    if config is not None:
        write_json(directory / "config.json", config)
    return write_json(directory / INDEX_NAME, index)


def make_hf_cache_repo(
    cache: Path, repo_id: str, files: Mapping[str, bytes | Path], *, commit: str = "1a2b3c4d" * 5,
    write_ref: bool = True,
) -> Path:
    """A `models--org--name` entry: blobs/<hash>, snapshots/<commit>/<file> -> ../../blobs/<hash> and
    refs/main. A `Path` value is moved into blobs (keeps sparse safetensors sparse). Returns the repo dir."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    blobs, snapshot = repo / "blobs", repo / "snapshots" / commit
    blobs.mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        blob = blobs / hashlib.sha256(f"{commit}/{name}".encode()).hexdigest()
        if isinstance(content, Path):
            os.replace(content, blob)
        else:
            blob.write_bytes(content)
        os.symlink(os.path.join("..", "..", "blobs", blob.name), snapshot / name)
    if write_ref:
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / "main").write_text(commit)
    return repo


def qwen3_next_config(layers: int = 4, *, H: int = 2, HV: int = 4, K: int = 8, V: int = 8, hidden: int = 16,
                      W: int = 4) -> dict[str, Any]:
    return {
        "architectures": ["Qwen3NextForCausalLM"],
        "model_type": "qwen3_next",
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "full_attention_interval": 4,
        "linear_num_key_heads": H,
        "linear_num_value_heads": HV,
        "linear_key_head_dim": K,
        "linear_value_head_dim": V,
        "linear_conv_kernel_dim": W,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "torch_dtype": "bfloat16",
    }


def qwen3_next_layer(i: int, *, H: int = 2, HV: int = 4, K: int = 8, V: int = 8, hidden: int = 16,
                     W: int = 4) -> dict[str, tuple[str, list[int]]]:
    """The tensors of one Qwen3-Next linear-attention layer (docs/models.md §5.1), bf16."""
    p = f"model.layers.{i}.linear_attn."
    return {
        p + "in_proj_qkvz.weight": ("BF16", [2 * H * K + 2 * HV * V, hidden]),
        p + "in_proj_ba.weight": ("BF16", [2 * HV, hidden]),
        p + "conv1d.weight": ("BF16", [2 * H * K + HV * V, 1, W]),
        p + "A_log": ("BF16", [HV]),
        p + "dt_bias": ("BF16", [HV]),
        p + "norm.weight": ("BF16", [V]),
        p + "out_proj.weight": ("BF16", [hidden, HV * V]),
    }
