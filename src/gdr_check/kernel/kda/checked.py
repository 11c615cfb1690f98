"""The checked KDA packed decode: the contract's shape verdict (once per call signature), the device-side slot
checks, then `fused.py`'s launch (`device_guard.checked_launch`)."""

from __future__ import annotations

import torch

from ..device_guard import Context, FaultBuffer, checked_launch
from ..layout import Engine, check_engine
from .fused import launch_kda_packed_decode


def kda_packed_decode(
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
    lower_bound: float | None = None,
    *,
    engine: Engine = "sglang",
    context: Context = "direct",
    faults: FaultBuffer | None = None,
    label: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One KDA decode step, in place: writes ``out`` and the named slots of ``initial_state``.

    Same arguments as sglang's ``fused_recurrent_kda_packed_decode``; ``engine`` picks the skip sentinel of that
    engine. Contract errors, device-side slot checks, faults and capture-safety as in `packed_decode`.
    """
    check_engine(engine)
    args = (mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices, use_qk_l2norm_in_kernel,
            lower_bound)
    return checked_launch("kda", launch_kda_packed_decode, args, engine, context, faults, label)
