"""The checked GDN packed decode: the contract's shape verdict (once per call signature), the device-side slot
checks, then `fused.py`'s launch (`device_guard.checked_launch`)."""

from __future__ import annotations

import torch

from ..device_guard import Context, FaultBuffer, checked_launch
from ..layout import Engine, check_engine
from .fused import launch_packed_decode


def packed_decode(
    mixed_qkv: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    A_log: torch.Tensor,
    dt_bias: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor,
    out: torch.Tensor,
    ssm_state_indices: torch.Tensor,
    use_qk_l2norm_in_kernel: bool = False,
    *,
    engine: Engine = "sglang",
    context: Context = "direct",
    faults: FaultBuffer | None = None,
    label: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One GDN decode step, in place: writes ``out`` and the named slots of ``initial_state``.

    Same arguments as sglang's ``fused_recurrent_gated_delta_rule_packed_decode``; ``engine`` picks the skip sentinel
    and beta rounding of that engine. Shape-level contract errors raise ValueError before anything runs (decided once
    per call signature, then cached). Slot values are checked on the device without a host sync: an
    out-of-range or repeated slot skips its row (``out`` row zero, state untouched) and is recorded in
    ``faults`` (default: the device's buffer), raised as ``PendingFaults`` by
    ``gdr_check.kernel.raise_pending()`` or by a later eager call once the device has reported it. Slot 0
    on a live sglang row is an error only with ``context="engine"``; a direct call gets a note.
    Capture-safe: under CUDA-graph capture nothing touches the host.
    """
    check_engine(engine)
    args = (mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices, use_qk_l2norm_in_kernel)
    return checked_launch("gdn", launch_packed_decode, args, engine, context, faults, label)
