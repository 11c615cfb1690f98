"""Builders and assertions shared by the kernel tests (GDN, KDA, and the comparison with sglang).

Calls are built with the awkward layouts real engines produce: strided rows, gate views of one fused
buffer, page-padded state pools and strided index tensors. The kernels run on the CPU through the Triton
interpreter unless GDR_CHECK_TEST_GPU=1 (then on CUDA).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import torch

from gdr_check.engines.profiles import profile_for

DEVICE = "cuda" if os.environ.get("GDR_CHECK_TEST_GPU") else "cpu"


@dataclass
class Call:
    """The arguments of one packed-decode call, plus the buffers the views were cut from."""

    mixed_qkv: torch.Tensor
    a: torch.Tensor
    b: torch.Tensor
    A_log: torch.Tensor
    dt_bias: torch.Tensor
    scale: float
    initial_state: torch.Tensor
    out: torch.Tensor
    ssm_state_indices: torch.Tensor
    use_qk_l2norm_in_kernel: bool = True
    lower_bound: float | None = None
    kda: bool = False
    pool_backing: torch.Tensor = field(default=None, repr=False)

    def args(self) -> tuple:
        base = (self.mixed_qkv, self.a, self.b, self.A_log, self.dt_bias, self.scale, self.initial_state,
                self.out, self.ssm_state_indices, self.use_qk_l2norm_in_kernel)
        return base + (self.lower_bound,) if self.kda else base

    def clone(self) -> Call:
        """A copy with its own pool (and pool backing) and `out`, so two runs cannot see each other."""
        backing = self.pool_backing.clone()
        offset = self.initial_state.storage_offset() - self.pool_backing.storage_offset()
        pool = backing.as_strided(self.initial_state.shape, self.initial_state.stride(),
                                  backing.storage_offset() + offset)
        fields = dict(self.__dict__, initial_state=pool, pool_backing=backing, out=self.out.clone())
        return Call(**fields)


def make_call(
    *,
    B: int,
    H: int,
    HV: int,
    K: int,
    V: int,
    slots: list[int],
    pool_slots: int,
    kda: bool = False,
    act: torch.dtype = torch.float32,
    state: torch.dtype = torch.float32,
    index_dtype: torch.dtype = torch.int32,
    index_stride: int = 1,
    qkv_row_pad: int = 0,
    fused_gates: bool = False,
    pool_layout: str = "dense",
    l2norm: bool = True,
    lower_bound: float | None = None,
    seed: int = 0,
) -> Call:
    """A seeded call. pool_layout: "dense", "head_slice" (backing[:, :HV] of a wider pool: a page-padded
    slot pitch) or "every_other" (backing[::2])."""
    assert len(slots) == B
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape, scale=1.0, dtype=torch.float32):
        # Drawn on the CPU (seeded the same everywhere), then moved; views are cut after the move.
        return (torch.randn(*shape, generator=gen) * scale).to(dtype).to(DEVICE)

    width = 2 * H * K + HV * V
    mixed_qkv = randn(B, width + qkv_row_pad, dtype=act)[:, :width]  # row stride > width when padded
    gate_width = HV * K if kda else HV
    if fused_gates:  # a and b as views of one [B, gate_width + HV] projection output: row-strided views
        fused = randn(B, gate_width + HV, dtype=act)
        a, b = fused[:, :gate_width], fused[:, gate_width:]
    else:
        a, b = randn(B, gate_width, dtype=act), randn(B, HV, dtype=act)
    A_log = randn(HV, scale=0.5)
    dt_bias = randn(gate_width, scale=0.5)

    if pool_layout == "dense":
        backing = randn(pool_slots, HV, V, K, scale=0.5, dtype=state)
        pool = backing
    elif pool_layout == "head_slice":
        backing = randn(pool_slots, HV + 1, V, K, scale=0.5, dtype=state)
        pool = backing[:, :HV]
    elif pool_layout == "every_other":
        backing = randn(2 * pool_slots, HV, V, K, scale=0.5, dtype=state)
        pool = backing[::2]
    else:
        raise ValueError(pool_layout)

    index_backing = torch.full((B * index_stride,), -7, dtype=index_dtype, device=DEVICE)
    index_backing[::index_stride] = torch.tensor(slots, dtype=index_dtype)
    indices = index_backing[::index_stride]
    # Poisoned: every element must be written.
    out = torch.full((B, 1, HV, V), float("nan"), dtype=act, device=DEVICE)
    return Call(mixed_qkv, a, b, A_log, dt_bias, K**-0.5, pool, out, indices, l2norm, lower_bound, kda, backing)


def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """max |actual - expected| / max |expected| (expected float64)."""
    scale = expected.abs().max().item() or 1.0
    return (actual.double() - expected).abs().max().item() / scale


def live_rows(call: Call, engine: str) -> torch.Tensor:
    slots = call.ssm_state_indices.long()
    return slots > profile_for(engine).skip_at_or_below


def assert_step_matches(call: Call, run, reference, *, engine: str, state_tol: float, out_tol: float) -> Call:
    """Run ``run`` on a clone of ``call`` and compare with the float64 ``reference``; return the clone.

    Checks: live slots within state_tol, `out` within out_tol, skipped rows exactly zero, every output
    element written (no NaN left), and every other byte of the pool's backing bitwise unchanged.
    """
    ran = call.clone()
    ref_out, ref_pool = reference(*call.args(), engine=engine)
    result = run(*ran.args(), engine=engine)
    assert result[0] is ran.out and result[1] is ran.initial_state, "returns the caller's out and pool"

    live = live_rows(call, engine)
    live_slots = call.ssm_state_indices.long()[live]
    assert torch.isfinite(ran.out).all(), "some output elements were never written"
    assert relative_error(ran.out, ref_out) <= out_tol
    assert torch.equal(ran.out[~live], torch.zeros_like(ran.out[~live])), "skipped rows must be zero"
    if live_slots.numel():
        assert relative_error(ran.initial_state[live_slots], ref_pool[live_slots]) <= state_tol

    # Everything else in the backing buffer: other slots, pitch padding, interleaved rows.
    touched = torch.zeros_like(call.pool_backing, dtype=torch.bool)
    touched_view = touched.as_strided(call.initial_state.shape, call.initial_state.stride(),
                                      call.initial_state.storage_offset() - call.pool_backing.storage_offset())
    touched_view[live_slots] = True
    assert torch.equal(ran.pool_backing[~touched], call.pool_backing[~touched]), "untouched state changed"
    return ran
