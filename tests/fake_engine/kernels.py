"""Stand-in packed-decode kernels: the engines' function names and signatures, none of their arithmetic.

They reject a non-2-D `mixed_qkv` (so tests can record a call that fails), zero `out`, and return
`(out, initial_state)` as the real wrappers do.
"""

from __future__ import annotations


def _run(mixed_qkv, out, initial_state):
    if mixed_qkv.ndim != 2:
        raise ValueError(f"stand-in kernel: mixed_qkv has {mixed_qkv.ndim} dims, expected 2")
    out.zero_()
    return out, initial_state


def fused_recurrent_gated_delta_rule_packed_decode(
    mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices, use_qk_l2norm_in_kernel=False,
):
    return _run(mixed_qkv, out, initial_state)


def fused_recurrent_kda_packed_decode(
    mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices, use_qk_l2norm_in_kernel=False,
    lower_bound: float | None = None,
):
    return _run(mixed_qkv, out, initial_state)
