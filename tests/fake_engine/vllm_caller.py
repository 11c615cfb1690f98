"""Stand-in vLLM GDN layer: imports the kernel by name from vLLM's FLA ops."""

from vllm.third_party.flash_linear_attention.ops.fused_recurrent import fused_recurrent_gated_delta_rule_packed_decode


def forward_decode(mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices):
    fused_recurrent_gated_delta_rule_packed_decode(
        mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices, True,
    )
    return out
