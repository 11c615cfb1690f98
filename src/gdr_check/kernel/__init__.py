"""Triton GDN/KDA packed-decode kernels, their float64 references and reference-engine loaders.

Importing this package does not import torch or triton; the names below load their module on first use.
"""

from ..base.lazy import lazy_dir, lazy_getattr

_EXPORTS = {
    "packed_decode": ".gdn.checked",
    "launch_packed_decode": ".gdn.fused",
    "kda_packed_decode": ".kda.checked",
    "launch_kda_packed_decode": ".kda.fused",
    "naive_packed_decode": ".gdn.naive",
    "naive_kda_packed_decode": ".kda.naive",
    "load_sglang_packed_decode": ".engine_kernels",
    "load_vllm_packed_decode": ".engine_kernels",
    "TileConfig": ".tiling",
    "raise_pending": ".device_guard",
    "FaultBuffer": ".device_guard",
    "PendingFaults": ".device_guard",
    "pick_config": ".tiling",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())
__dir__ = lazy_dir(_EXPORTS, globals())
