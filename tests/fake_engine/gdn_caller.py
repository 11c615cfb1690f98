"""Stand-in sglang GDN backend: imports the kernel by name, as the engine's backend modules do."""

from sglang.kernels.ops.attention.fla.fused_recurrent import fused_recurrent_gated_delta_rule_packed_decode


def forward_decode(mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices):
    fused_recurrent_gated_delta_rule_packed_decode(
        mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices,
        use_qk_l2norm_in_kernel=True,
    )
    return out.transpose(0, 1)
