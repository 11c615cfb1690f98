# mypy: disable-error-code="untyped-decorator, no-untyped-def"
# (Triton kernels: `triton.jit` is untyped and kernel parameters take pointers, ints or constexprs.)
"""GDN packed recurrent decode: Triton kernel and its launcher (checked wrapper in checked.py, float64 reference
in naive.py).

Per (row n, value head j), with G = HV // H and key head i = j // G (contract section 6.1):
    decay = exp(-exp(A_log[j]) * softplus(a[n, j] + dt_bias[j])),  beta = sigmoid(b[n, j])
    u = beta * (v - decay * S k);  S' = decay * S + u k^T;  o = S' q = decay * (S q) + u (k . q)
The last identity lets one pass over the loaded state tile give both reductions, so the tile is read
once and written once and nothing waits on the updated state.
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
def gdn_packed_decode_kernel(
    mixed_qkv, a, b, A_log, dt_bias, out, state, slots, scale,
    stride_qkv, stride_a, stride_b, stride_slot, stride_index,
    pool_slots, batch, fault_counter, fault_records, fault_flag, fault_tag_cell,  # the guard's (unused without GUARD)
    H: tl.constexpr, HV: tl.constexpr,  # head counts as constants: see _triton_common.locate_program
    K: tl.constexpr, V: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, TILES: tl.constexpr,
    STATE_EVICTION: tl.constexpr, STORE_EVICTION: tl.constexpr, INPUT_EVICTION: tl.constexpr,
    PREFETCH: tl.constexpr, LOOP_STAGES: tl.constexpr,
    USE_L2NORM: tl.constexpr, ROUND_BETA: tl.constexpr, SKIP_AT_OR_BELOW: tl.constexpr,
    PROGRAMMATIC: tl.constexpr,
    GUARD: tl.constexpr, RESERVED_ZERO: tl.constexpr, SCAN_BLOCK: tl.constexpr, SCAN_LOOP: tl.constexpr,
    MAX_RECORDS: tl.constexpr,
):
    slots, i_n, i_hv, v_start, head_row, live, given_slot, head_state, state_rows, next_tile, scan, row, q, k, \
        k_dot_q = start_program(
            slots, state, mixed_qkv, scale, stride_qkv, stride_slot, stride_index, pool_slots, batch, H, HV, K, V,
            BK, BV, TILES, STATE_EVICTION, INPUT_EVICTION, PREFETCH, USE_L2NORM, SKIP_AT_OR_BELOW, PROGRAMMATIC,
            GUARD, RESERVED_ZERO, SCAN_BLOCK, SCAN_LOOP)

    z = tl.load(a + i_n * stride_a + i_hv).to(tl.float32) + tl.load(dt_bias + i_hv).to(tl.float32)
    decay = tl.exp(-tl.exp(tl.load(A_log + i_hv).to(tl.float32)) * softplus(z, 20.0))
    beta = tl.sigmoid(tl.load(b + i_n * stride_b + i_hv).to(tl.float32))
    if ROUND_BETA:  # EngineProfile.gdn_beta_rounding (sglang 0.5.23, vLLM before 0.29): via b's dtype
        beta = beta.to(b.dtype.element_ty).to(tl.float32)

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
        if PREFETCH and TILES > 1:
            # Issue the next tile's load before this tile's store: a load cannot be moved above an
            # earlier store that may alias it, so otherwise the loop waits one full latency per tile.
            next_limit = tl.where(t + 1 < TILES, state_rows, 0)
            next_tile = load_state_tile(head_state, rows + BV, next_limit, K, BK, STATE_EVICTION)
        v = tl.load(v_row + rows, mask=rows < V, other=0.0).to(tl.float32)
        predicted = tl.sum(S * k[None, :], axis=1)
        read = tl.sum(S * q[None, :], axis=1)
        u = beta * (v - decay * predicted)
        o = decay * read + u * k_dot_q
        tl.store(out_row + rows, tl.where(computed, o, 0.0).to(out.dtype.element_ty), mask=rows < V)
        store_state_tile(head_state, rows, stored_rows, S * decay + u[:, None] * k[None, :], K, BK, STORE_EVICTION)
    if GUARD:
        # The row's first program records the fault, last: the record is a branch holding an atomic, which no
        # load may be moved above, so anywhere earlier it would hold the `v` loads back until the scan is done.
        record_fault(fault_counter, fault_records, fault_flag, tl.where((i_hv == 0) & (v_start == 0), fault, 0), i_n,
                     given_slot, fault_tag_cell, slots, stride_index, MAX_RECORDS, SCAN_BLOCK, True)


_LAUNCHER = DirectLauncher(gdn_packed_decode_kernel)


def launch_packed_decode(
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
    config: TileConfig | None = None,
    guard: GuardLaunch | None = None,
    programmatic: bool | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Launch without the contract checks (for callers that ran them, e.g. before CUDA-graph capture).

    With ``guard`` the kernel checks every row's slot on the device (device_guard.py): faulty rows are
    skipped and recorded, so no index can reach memory outside the pool. ``programmatic``: launch
    programmatically after the stream's previous grid (PDL, sm_90+): the programs become resident while that
    grid ends and wait for its writes before they read anything, and they let the next grid launch at once (as
    sglang's conv1d and gated-norm kernels around the decode do). After the slot check
    (`device_guard.slot_guard_kernel`), which releases its successor at once, the check's launch gap is hidden
    too. None: up to `tiling.PROGRAMMATIC_MAX_PAIRS` (row, value head) pairs; only where the device has it
    (`_triton_common.launches_programmatically`)."""
    B = mixed_qkv.shape[0]
    HV, V, K = initial_state.shape[-3:]
    key = launch_key(engine, (bool(use_qk_l2norm_in_kernel), programmatic), config, guard, mixed_qkv,
                     a, b, A_log, dt_bias, initial_state, out, ssm_state_indices)
    args = (mixed_qkv, a, b, A_log, dt_bias, out, initial_state, ssm_state_indices, float(scale),
            mixed_qkv.stride(0), a.stride(0), b.stride(0), initial_state.stride(0), ssm_state_indices.stride(0),
            *guard_arguments(guard, B))
    if B and _LAUNCHER.run_cached(key, args):
        return out, initial_state
    profile = check_engine(engine)
    tiling = (config.fitted(V, K) if config is not None
              else choose_config("gdn", device_name(mixed_qkv.device), B * HV, V, K, initial_state.element_size(),
                                 has_duplicate_scan(guard, B), INTERPRETED, guard is not None))
    if B == 0:
        return out, initial_state
    (grid,) = tiling.grid(B, HV, V)
    programmatic = launches_programmatically(programmatic, B * HV, mixed_qkv.device)
    constants = dict(
        tiling.constexprs(K, V), H=infer_heads(mixed_qkv.shape[1], HV, V, K), HV=HV,
        USE_L2NORM=bool(use_qk_l2norm_in_kernel), ROUND_BETA=profile.gdn_beta_rounding is not None,
        SKIP_AT_OR_BELOW=profile.skip_at_or_below, PROGRAMMATIC=programmatic,
        **guard_constants(guard, profile, B),
    )
    plain = None if guard is None else plain_variant(args, constants, profile, B)
    _LAUNCHER.launch(key, grid, mixed_qkv.device.index if mixed_qkv.is_cuda else None, args, constants,
                     tiling.launch_options(programmatic), plain, tiling.lift_registers)
    return out, initial_state
