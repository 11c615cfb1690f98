"""Each packed-decode op's pieces, by variant (`VariantSpec.name`), as flash-linear-attention keeps them per op:
`<op>/fused.py` (the Triton kernel and its launcher, which knows nothing of the rules), `<op>/naive.py` (its
float64 reference) and `<op>/checked.py` (the contract's verdict and the device-side slot checks, then the
launch). What both ops share is written once: `_triton_common` (the kernels' common Triton code), `tiling`
(launch shapes and the guard's launch arguments), `layout` (engines' skip sentinels and head counts),
`delta_rule` (the references' common step) and `device_guard` (the slot checks and fault records)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .gdn.checked import packed_decode
from .gdn.fused import launch_packed_decode
from .gdn.naive import naive_packed_decode
from .kda.checked import kda_packed_decode
from .kda.fused import launch_kda_packed_decode
from .kda.naive import naive_kda_packed_decode

# Each variant's checked kernel (the contract's shape verdict, then the launch).
CHECKED: dict[str, Callable[..., Any]] = {"gdn": packed_decode, "kda": kda_packed_decode}
# Its unchecked launcher (the kernel alone, as the benchmarks time it).
LAUNCHERS: dict[str, Callable[..., Any]] = {"gdn": launch_packed_decode, "kda": launch_kda_packed_decode}
# Its float64 reference.
REFERENCES: dict[str, Callable[..., tuple[torch.Tensor, torch.Tensor]]] = {
    "gdn": naive_packed_decode, "kda": naive_kda_packed_decode,
}
