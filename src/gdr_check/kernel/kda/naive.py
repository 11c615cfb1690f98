"""The float64 reference of the KDA packed decode step (`fused.py`'s kernel): a decay per key channel, the
safe gate under `lower_bound`, beta never rounded. docs/kernel-contract.md §6 gives the formulas."""

from __future__ import annotations

import torch

from ..delta_rule import delta_rule_step, softplus
from ..layout import Engine


def naive_kda_packed_decode(
    mixed_qkv: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    A_log: torch.Tensor,
    dt_bias: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor,
    out: torch.Tensor | None,
    ssm_state_indices: torch.Tensor,
    use_qk_l2norm_in_kernel: bool = False,
    lower_bound: float | None = None,
    *,
    engine: Engine = "sglang",
) -> tuple[torch.Tensor, torch.Tensor]:
    """KDA step in float64: per-key-channel decay, beta never rounded."""
    del out
    f64 = torch.float64
    HV, _, K = initial_state.shape[-3:]
    B = mixed_qkv.shape[0]
    z = (a.to(f64) + dt_bias.to(f64)).reshape(B, HV, K)
    A = torch.exp(A_log.to(f64))[None, :, None]
    if lower_bound is not None:
        g = lower_bound * torch.sigmoid(A * z)  # the "safe gate"
    else:
        g = -A * softplus(z)
    beta = torch.sigmoid(b.to(f64))
    decay = torch.exp(g)[:, :, None, :]  # scales state column k (key channel)
    return delta_rule_step(
        mixed_qkv, decay, beta, scale, initial_state, ssm_state_indices, use_qk_l2norm_in_kernel, engine
    )
