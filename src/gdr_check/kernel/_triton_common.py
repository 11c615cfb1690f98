"""Triton helpers shared by the GDN and KDA decode kernels."""

import triton
import triton.language as tl


@triton.jit
def softplus(z, THRESHOLD: tl.constexpr):
    # log(1 + exp(z)), not log1p, to match the reference kernels; linear above the threshold.
    return tl.where(z <= THRESHOLD, tl.log(1.0 + tl.exp(z)), z)


@triton.jit
def load_query_key(row, i_h, key_heads, K: tl.constexpr, BK: tl.constexpr, USE_L2NORM: tl.constexpr):
    """q and k of key head i_h from one packed [q | k | v] row, as fp32 [BK] (lanes >= K are zero)."""
    o_k = tl.arange(0, BK)
    mask_k = o_k < K
    q = tl.load(row + i_h * K + o_k, mask=mask_k, other=0.0).to(tl.float32)
    k = tl.load(row + key_heads * K + i_h * K + o_k, mask=mask_k, other=0.0).to(tl.float32)
    if USE_L2NORM:
        # eps inside the square root; the zero padding lanes add nothing to the sums.
        q = q / tl.sqrt(tl.sum(q * q) + 1e-6)
        k = k / tl.sqrt(tl.sum(k * k) + 1e-6)
    return q, k


@triton.jit
def locate_program(V: tl.constexpr, BV: tl.constexpr, TILES: tl.constexpr, value_heads, key_heads):
    """Decode the 1-D program id into (row n as int64, value head j, key head i, first V row, head_row)."""
    V_PER_PROGRAM: tl.constexpr = BV * TILES
    PROGRAMS_PER_HEAD: tl.constexpr = (V + V_PER_PROGRAM - 1) // V_PER_PROGRAM
    pid = tl.program_id(0)
    head_row = pid // PROGRAMS_PER_HEAD  # n * HV + j, the row of `out` viewed as [B*HV, V]
    v_start = (pid % PROGRAMS_PER_HEAD) * V_PER_PROGRAM
    i_hv = head_row % value_heads
    i_n = (head_row // value_heads).to(tl.int64)
    i_h = i_hv // (value_heads // key_heads)  # consecutive value heads share a key head
    return i_n, i_hv, i_h, v_start, head_row.to(tl.int64)


@triton.jit
def load_slot(slots, i_n, stride_index, SKIP_AT_OR_BELOW: tl.constexpr):
    """The row's slot (int64) and whether the row is live: above the profile's skip sentinel
    (`EngineProfile.skip_at_or_below`: sglang skips idx < 0, vLLM idx <= 0)."""
    slot = tl.load(slots + i_n * stride_index).to(tl.int64)
    live = slot > SKIP_AT_OR_BELOW
    return slot, live


@triton.jit
def load_state_tile(head_state, rows, row_limit, K: tl.constexpr, BK: tl.constexpr, EVICTION: tl.constexpr):
    """State rows ``rows`` of one head as a [BV, BK] tile in the pool's dtype; rows >= row_limit read 0."""
    o_k = tl.arange(0, BK)
    mask = (rows < row_limit)[:, None] & (o_k < K)[None, :]
    return tl.load(head_state + rows[:, None] * K + o_k[None, :], mask=mask, other=0.0, eviction_policy=EVICTION)


@triton.jit
def store_state_tile(head_state, rows, row_limit, tile, K: tl.constexpr, BK: tl.constexpr, EVICTION: tl.constexpr):
    o_k = tl.arange(0, BK)
    mask = (rows < row_limit)[:, None] & (o_k < K)[None, :]
    tl.store(head_state + rows[:, None] * K + o_k[None, :], tile.to(head_state.dtype.element_ty), mask=mask,
             eviction_policy=EVICTION)
