"""A packed-decode function with another API (gates named `raw_g`/`raw_beta`, no `out`): not recordable as a
sglang-style call, so a capture must skip it and say why."""


def fused_recurrent_kda_packed_decode(mixed_qkv, raw_g, raw_beta, A_log, dt_bias, lower_bound, initial_state,
                                      state_indices, scale=None):
    return mixed_qkv, initial_state
