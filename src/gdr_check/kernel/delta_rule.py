"""The float64 delta-rule step that the GDN and KDA references share (`gdn/naive.py`, `kda/naive.py`).

Written from the formulas of docs/kernel-contract.md §6, one step per row:
    S <- decay * S;  u = beta * (v - S k);  S <- S + u k^T;  o = S q   (o reads the updated state)
They take the kernels' arguments, never modify them, and return
``(out [B, 1, HV, V] float64, new pool float64)``; slots that no live row names keep their old values.
"""

from __future__ import annotations

import torch

from .layout import Engine, infer_heads, row_is_live

SOFTPLUS_THRESHOLD = 20.0
L2NORM_EPS = 1e-6


def softplus(z: torch.Tensor) -> torch.Tensor:
    # log(1 + exp(z)) rather than log1p, as the reference kernel computes it; linear above the threshold.
    return torch.where(z <= SOFTPLUS_THRESHOLD, torch.log(1.0 + torch.exp(z)), z)


def _l2norm(x: torch.Tensor) -> torch.Tensor:
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + L2NORM_EPS)


def _split_qkv(mixed_qkv: torch.Tensor, H: int, HV: int, K: int, V: int
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, k as [B, HV, K] (key head j // G for value head j) and v as [B, HV, V], all float64."""
    x = mixed_qkv.to(torch.float64)
    B = x.shape[0]
    q = x[:, : H * K].reshape(B, H, K)
    k = x[:, H * K : 2 * H * K].reshape(B, H, K)
    v = x[:, 2 * H * K : 2 * H * K + HV * V].reshape(B, HV, V)
    group = HV // H
    return q.repeat_interleave(group, dim=1), k.repeat_interleave(group, dim=1), v


def delta_rule_step(
    mixed_qkv: torch.Tensor,
    decay: torch.Tensor,
    beta: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor,
    ssm_state_indices: torch.Tensor,
    use_qk_l2norm_in_kernel: bool,
    engine: Engine,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Shared step. decay: [B, HV, 1, 1] (GDN) or [B, HV, 1, K] (KDA); beta: [B, HV]."""
    HV, V, K = initial_state.shape[-3:]
    B = mixed_qkv.shape[0]
    H = infer_heads(mixed_qkv.shape[1], HV, V, K)
    q, k, v = _split_qkv(mixed_qkv, H, HV, K, V)
    if use_qk_l2norm_in_kernel:
        q, k = _l2norm(q), _l2norm(k)
    q = q * scale

    pool = initial_state.to(torch.float64).clone()
    out = torch.zeros(B, 1, HV, V, dtype=torch.float64, device=mixed_qkv.device)
    slots = ssm_state_indices.to(torch.int64)
    live = row_is_live(slots, engine)
    rows = torch.nonzero(live).flatten()
    if rows.numel() == 0:
        return out, pool
    live_slots = slots[rows]
    if torch.unique(live_slots).numel() != live_slots.numel():
        raise ValueError("duplicate live slots have no defined result (the kernels race on them)")

    S = pool[live_slots] * decay[rows]  # [R, HV, V, K]
    k_r, q_r = k[rows], q[rows]
    predicted = torch.einsum("rhvk,rhk->rhv", S, k_r)
    u = beta[rows].unsqueeze(-1) * (v[rows] - predicted)
    S = S + u.unsqueeze(-1) * k_r.unsqueeze(-2)
    out[rows, 0] = torch.einsum("rhvk,rhk->rhv", S, q_r)
    pool[live_slots] = S
    return out, pool
