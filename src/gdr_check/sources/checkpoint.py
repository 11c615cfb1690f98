"""What the readers produce: a checkpoint's config, tensor metadata and where each came from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from pathlib import Path
from typing import Any

from ..base.records import dataclass
from ..base.report import KeyLocation


@dataclass(slots=True, unsafe_hash=True)
class TensorInfo:
    """One tensor as its safetensors header describes it (no data is ever read).

    A value: never changed after construction. Slots and not `frozen`: a frozen dataclass's `__init__` sets each
    field through `object.__setattr__`, and a 41-shard checkpoint makes ~76k of these."""

    name: str
    dtype: str  # canonical torch name: "bfloat16", "float32", ...
    shape: tuple[int, ...]
    shard: str  # file name relative to the checkpoint root


@dataclass
class Checkpoint:
    target: str
    root: Path | None
    kind: str  # "safetensors-file" | "sharded" | "directory" | "hf-cache" | "config-only"
    config: dict[str, Any] | None = None
    config_file: str | None = None
    config_keys: Mapping[str, KeyLocation] = field(default_factory=dict)
    tensors: dict[str, TensorInfo] = field(default_factory=dict)
    index_file: str | None = None
    index_lines: dict[str, KeyLocation] = field(default_factory=dict)
    files_read: list[str] = field(default_factory=list)
    bytes_read: int = 0
    notes: list[str] = field(default_factory=list)
    # Info diagnostics of the reading itself (GDR013: an index whose shards were not downloaded).
    diagnostics: list[Any] = field(default_factory=list)
    # The index's tensor names when its shards are absent (the tensors above then stay empty: no shapes).
    index_tensors: list[str] = field(default_factory=list)
