# mypy: disable-error-code="untyped-decorator, no-untyped-def"
# (Triton kernels: `triton.jit` is untyped and kernel parameters take pointers, ints or constexprs.)
"""KDA packed recurrent decode: Triton kernel and its launcher (checked wrapper in checked.py, float64 reference
in naive.py).

Like GDN (gdn.py) but the decay is per key channel (contract section 6.2):
    g_k = -exp(A_log[j]) * softplus(a[n, j*K + k] + dt_bias[j*K + k])   or, with ``lower_bound``,
    g_k = lower_bound * sigmoid(exp(A_log[j]) * (a + dt_bias)),          d = exp(g)
    u = beta * (v - S (d * k));  S' = S diag(d) + u k^T;  o = S' q = S (d * q) + u (k . q)
beta = sigmoid(b) stays fp32 in every engine profile.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._triton_common import (
    INTERPRETED,
    DirectLauncher,
    device_name,
    guard_row,
    launches_programmatically,
    load_state_tile,
    record_fault,
    softplus,
    start_program,
    store_state_tile,
)
from ..layout import Engine, check_engine, infer_heads
from ..tiling import (
    GuardLaunch,
    TileConfig,
    choose_config,
    guard_arguments,
    guard_constants,
    has_duplicate_scan,
    launch_key,
    plain_variant,
)


# The guard's ints as plain ints whatever their values (no specialization on 1 or multiples of 16): one binary
# for every call site and pool (see tiling.GuardLaunch.tag_cell).
@triton.jit(do_not_specialize=["pool_slots", "batch"])
def kda_packed_decode_kernel(
    mixed_qkv, a, b, A_log, dt_bias, out, state, slots, scale, lower_bound,
    stride_qkv, stride_a, stride_b, stride_slot, stride_index,
    pool_slots, batch, fault_counter, fault_records, fault_flag, fault_tag_cell,  # the guard's (unused without GUARD)
    H: tl.constexpr, HV: tl.constexpr,  # head counts as constants: see _triton_common.locate_program
    K: tl.constexpr, V: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, TILES: tl.constexpr,
    STATE_EVICTION: tl.constexpr, STORE_EVICTION: tl.constexpr, INPUT_EVICTION: tl.constexpr,
    PREFETCH: tl.constexpr, LOOP_STAGES: tl.constexpr,
    USE_L2NORM: tl.constexpr, USE_LOWER_BOUND: tl.constexpr, SKIP_AT_OR_BELOW: tl.constexpr,
    PROGRAMMATIC: tl.constexpr,
    GUARD: tl.constexpr, RESERVED_ZERO: tl.constexpr, SCAN_BLOCK: tl.constexpr, SCAN_LOOP: tl.constexpr,
    MAX_RECORDS: tl.constexpr,
):
    slots, i_n, i_hv, v_start, head_row, live, given_slot, head_state, state_rows, next_tile, scan, row, q, k, \
        k_dot_q = start_program(
            slots, state, mixed_qkv, scale, stride_qkv, stride_slot, stride_index, pool_slots, batch, H, HV, K, V,
            BK, BV, TILES, STATE_EVICTION, INPUT_EVICTION, PREFETCH, USE_L2NORM, SKIP_AT_OR_BELOW, PROGRAMMATIC,
            GUARD, RESERVED_ZERO, SCAN_BLOCK, SCAN_LOOP)

    o_k = tl.arange(0, BK)
    mask_k = o_k < K
    z = tl.load(a + i_n * stride_a + i_hv * K + o_k, mask=mask_k, other=0.0, eviction_policy=INPUT_EVICTION
                ).to(tl.float32)
    z += tl.load(dt_bias + i_hv * K + o_k, mask=mask_k, other=0.0, eviction_policy=INPUT_EVICTION).to(tl.float32)
    A = tl.exp(tl.load(A_log + i_hv).to(tl.float32))
    if USE_LOWER_BOUND:
        g = lower_bound * tl.sigmoid(A * z)  # the bounded "safe gate"
    else:
        g = -A * softplus(z, 20.0)
    decay = tl.exp(g)  # [BK], scales state column k
    decayed_k = decay * k
    decayed_q = decay * q
    beta = tl.sigmoid(tl.load(b + i_n * stride_b + i_hv).to(tl.float32))

    if not PREFETCH:
        if TILES == 1:  # after the gates, before the guard's verdict (at one row: no scan; with a scan
            # `tiling.choose_config` keeps the tile first, measured faster)
            next_tile = load_state_tile(head_state, v_start + tl.arange(0, BV), state_rows, K, BK, STATE_EVICTION)
    if GUARD:  # after the loads are issued: out-of-range and repeated slots store nothing
        computed, fault = guard_row(slots, given_slot, i_n, batch, stride_index, pool_slots, scan, SKIP_AT_OR_BELOW,
                                    RESERVED_ZERO, SCAN_BLOCK, SCAN_LOOP)
    else:
        computed = live
    stored_rows = tl.where(computed, V, 0)
    v_row = row + 2 * H * K + i_hv * V
    out_row = out + head_row * V
    for t in tl.range(TILES, num_stages=LOOP_STAGES):
        rows = v_start + t * BV + tl.arange(0, BV)  # affine in t: lets the compiler tell tiles apart
        if not (PREFETCH or TILES == 1):
            S = load_state_tile(head_state, rows, state_rows, K, BK, STATE_EVICTION).to(tl.float32)
        else:
            S = next_tile.to(tl.float32)
        if PREFETCH and TILES > 1:  # prefetch before this tile's store (see gdn.py)
            next_limit = tl.where(t + 1 < TILES, state_rows, 0)
            next_tile = load_state_tile(head_state, rows + BV, next_limit, K, BK, STATE_EVICTION)
        v = tl.load(v_row + rows, mask=rows < V, other=0.0).to(tl.float32)
        u = beta * (v - tl.sum(S * decayed_k[None, :], axis=1))
        o = tl.sum(S * decayed_q[None, :], axis=1) + u * k_dot_q
        tl.store(out_row + rows, tl.where(computed, o, 0.0).to(out.dtype.element_ty), mask=rows < V)
        store_state_tile(head_state, rows, stored_rows, S * decay[None, :] + u[:, None] * k[None, :], K, BK,
                         STORE_EVICTION)
    if GUARD:
        # The row's first program records the fault, last: the record is a branch holding an atomic, which no
        # load may be moved above, so anywhere earlier it would hold the `v` loads back until the scan is done.
        record_fault(fault_counter, fault_records, fault_flag, tl.where((i_hv == 0) & (v_start == 0), fault, 0), i_n,
                     given_slot, fault_tag_cell, slots, stride_index, MAX_RECORDS, SCAN_BLOCK, True)


_LAUNCHER = DirectLauncher(kda_packed_decode_kernel)


def launch_kda_packed_decode(
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
    config: TileConfig | None = None,
    guard: GuardLaunch | None = None,
    programmatic: bool | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Launch the KDA kernel without the contract checks (for callers that ran them, e.g. before CUDA-graph
    capture); ``guard`` and ``programmatic`` as for GDN (`gdn.launch_packed_decode`)."""
    B = mixed_qkv.shape[0]
    HV, V, K = initial_state.shape[-3:]
    key = launch_key(engine, (bool(use_qk_l2norm_in_kernel), lower_bound is None, programmatic), config,
                     guard, mixed_qkv, a, b, A_log, dt_bias, initial_state, out, ssm_state_indices)
    args = (mixed_qkv, a, b, A_log, dt_bias, out, initial_state, ssm_state_indices, float(scale),
            float(lower_bound) if lower_bound is not None else 0.0,
            mixed_qkv.stride(0), a.stride(0), b.stride(0), initial_state.stride(0), ssm_state_indices.stride(0),
            *guard_arguments(guard, B))
    if B and _LAUNCHER.run_cached(key, args):
        return out, initial_state
    profile = check_engine(engine)
    tiling = (config.fitted(V, K) if config is not None
              else choose_config("kda", device_name(mixed_qkv.device), B * HV, V, K, initial_state.element_size(),
                                 has_duplicate_scan(guard, B), INTERPRETED, guard is not None))
    if B == 0:
        return out, initial_state
    (grid,) = tiling.grid(B, HV, V)
    programmatic = launches_programmatically(programmatic, B * HV, mixed_qkv.device)
    constants = dict(
        tiling.constexprs(K, V), H=infer_heads(mixed_qkv.shape[1], HV, V, K), HV=HV,
        USE_L2NORM=bool(use_qk_l2norm_in_kernel), USE_LOWER_BOUND=lower_bound is not None,
        SKIP_AT_OR_BELOW=profile.skip_at_or_below, PROGRAMMATIC=programmatic,
        **guard_constants(guard, profile, B),
    )
    plain = None if guard is None else plain_variant(args, constants, profile, B)
    _LAUNCHER.launch(key, grid, mixed_qkv.device.index if mixed_qkv.is_cuda else None, args, constants,
                     tiling.launch_options(programmatic), plain, tiling.lift_registers)
    return out, initial_state
