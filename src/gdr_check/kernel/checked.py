"""The checked GDN and KDA packed-decode kernels: the contract's shape verdict, the device-side slot checks,
then the launch.

`gdn.py` and `kda.py` hold the Triton kernels and their launchers (`launch_packed_decode`,
`launch_kda_packed_decode`), which take a `GuardLaunch` and know nothing of the rules. The checked entry points
run the contract (the rules layer) once per call signature through `device_guard.checked_launch`, so they sit
above the rules, here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .device_guard import Context, FaultBuffer, checked_launch
from .gdn import launch_packed_decode
from .kda import launch_kda_packed_decode
from .layout import Engine, check_engine


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


# Each variant's checked kernel (the contract's shape verdict, then the launch), by `VariantSpec.name`.
CHECKED: dict[str, Callable[..., Any]] = {"gdn": packed_decode, "kda": kda_packed_decode}
# And its unchecked launcher (the kernel alone, as the benchmarks time it).
LAUNCHERS: dict[str, Callable[..., Any]] = {"gdn": launch_packed_decode, "kda": launch_kda_packed_decode}
