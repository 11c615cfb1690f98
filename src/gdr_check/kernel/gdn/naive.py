"""The float64 reference of the GDN packed decode step (`fused.py`'s kernel): a scalar decay per value head,
sigmoid(b) rounded where the engine rounds it. docs/kernel-contract.md §6 gives the formulas."""

from __future__ import annotations

import torch

from ...engines.profiles import profile_for
from ..delta_rule import delta_rule_step, softplus
from ..layout import Engine


def naive_packed_decode(
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
    *,
    engine: Engine = "sglang",
) -> tuple[torch.Tensor, torch.Tensor]:
    """GDN step in float64. ``out`` is accepted for signature parity and left untouched."""
    del out
    f64 = torch.float64
    z = a.to(f64) + dt_bias.to(f64)
    g = -torch.exp(A_log.to(f64)) * softplus(z)  # [B, HV]
    if profile_for(engine).gdn_beta_rounding is not None:
        # sglang 0.5.23 and vLLM before 0.29 round sigmoid(b) to b's dtype before using it.
        beta = torch.sigmoid(b.to(torch.float32)).to(b.dtype).to(f64)
    else:
        beta = torch.sigmoid(b.to(f64))
    decay = torch.exp(g)[:, :, None, None]
    return delta_rule_step(
        mixed_qkv, decay, beta, scale, initial_state, ssm_state_indices, use_qk_l2norm_in_kernel, engine
    )
