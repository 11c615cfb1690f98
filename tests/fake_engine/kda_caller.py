"""Stand-in sglang KDA backend: imports the kernel by name and passes every argument by keyword."""

from sglang.kernels.ops.attention.fla.fused_recurrent import fused_recurrent_kda_packed_decode


def forward_decode(mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices, lower_bound=None):
    return fused_recurrent_kda_packed_decode(
        mixed_qkv=mixed_qkv, a=a, b=b, A_log=A_log, dt_bias=dt_bias, scale=scale, initial_state=initial_state,
        out=out, ssm_state_indices=ssm_state_indices, use_qk_l2norm_in_kernel=True, lower_bound=lower_bound,
    )
