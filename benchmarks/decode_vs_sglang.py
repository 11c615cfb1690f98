"""GDN and KDA packed decode on a CUDA GPU: gdr-check's kernels against every sglang 0.5.23 path, one process.

For the linear-attention geometry of each model per TP rank (head counts from the built-in model descriptions),
B = 1, 8, 32, 128, 512, 1024, fp32 and bf16 state, this times under CUDA-graph replay and eagerly:

- ``ours``: gdr-check's unchecked launch (``launch_packed_decode`` / ``launch_kda_packed_decode``);
- ``checked``: the checked kernel (``packed_decode`` / ``kda_packed_decode``, context="engine": the runtime
  guard's slot checks run in the kernel's prologue, or past 128 rows and from 4096 (row, value head) pairs in
  a separate check before it, captured in the graph);
- ``sglang``: sglang's Triton wrapper (``fla/fused_recurrent.py``, loaded by ``gdr_check.kernel.engine_kernels``);
- ``sglang_cuda`` (KDA, fp32 state): sglang's CUDA kernel ``kda_packed_decode.cuh``, built here with nvcc
  (``sglang_cuda_kda.py``); sglang's dispatcher takes it for B >= 8;
- ``sglang_helion`` (KDA): sglang's Helion KDA decode (``helion/kda_decode.py``, the "helion" KDA decode
  backend: fixed compiled configurations, no autotuning), loaded by ``sglang_helion_kda.py`` when the ``helion``
  package imports, and called as that backend calls it (``a``/``b`` 2-D, ``A_log``/``dt_bias`` flattened, the
  l2 norm in the kernel, ``lower_bound`` passed on); otherwise the run's ``paths`` say why it was not run;
- ``cute`` (with ``--cute``): sglang's CuTe-DSL kernels (``cutedsl_gdn.py`` / ``cutedsl_kda.py``) when ``cutlass``
  imports, called as sglang's backends call them where the kernel backend has no packed decode: q, k, v as
  views split from the packed row (see ``cute_impl``);
- ``copy``: a device-to-device copy that reads and writes as many bytes as the kernel (state rows read and
  written, plus the inputs and the output): the practical limit.
- ``slot_copy``: the state rows alone, read and written back in place at the slots the kernel is given, each
  program loading its row's slot first: the floor for any kernel that updates the rows where the slots put
  them (``slot_placement.py``: the slots' scattered placement, more than the dependent load, is what a plain
  copy does not pay). Launched as ours is (programmatically, PDL, up to ``tiling.PROGRAMMATIC_MAX_PAIRS``
  pairs where the device has it: waiting for the previous grid and releasing the next); ``slot_copy_plain``:
  the same kernel launched plainly.

Before timing, every implementation is run once on fresh random inputs at every point and compared with the
float64 reference (``gdr_check.kernel.gdn.naive``, ``kda.naive``): state and ``out`` relative to the largest
reference value, slots not named left bitwise unchanged, ``out`` of live rows written (NaN-poisoned first).

Graph replay follows ``decode_bandwidth.py``: one graph launches the implementation once per slot set, over
disjoint slot sets that hold at least 256 MB of state (over 4x the 60 MB L2), so every launch streams its
state from HBM. Each figure is the median over ``--repeats`` rounds (each the median of 15 replays); the
spread is (max - min) / median over the rounds. Eager: wall time per call over back-to-back calls rotating
over the slot sets, then one synchronisation (host and device overlap, as an engine's eager decode).

    GDR_CHECK_SGLANG_PATH=<sglang wheel> PYTHONPATH=src python benchmarks/decode_vs_sglang.py [--tune]

For the Helion column, install helion 1.4.0 first (offline, from carried wheels: helion and filecheck, the one
dependency a CUDA image with torch often lacks):
``python3 -m pip install --no-index --find-links <wheel folder> helion==1.4.0``.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import math
import os
import statistics
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import triton
import triton.language as tl

# Same graph method as the bandwidth benchmark (run from this folder, as `python benchmarks/...`).
from decode_bandwidth import capture, config_label, copy_roofline_tbps, replay_us

from gdr_check.kernel import kda_packed_decode, naive_kda_packed_decode, naive_packed_decode, packed_decode
from gdr_check.kernel._triton_common import launches_programmatically, release_dependents, wait_for_previous_grid
from gdr_check.kernel.device_guard import FaultBuffer
from gdr_check.kernel.gdn.fused import launch_packed_decode
from gdr_check.kernel.kda.fused import launch_kda_packed_decode
from gdr_check.kernel.tiling import TileConfig, choose_config, record_tuning, tuning_cache_path
from gdr_check.models.builtin import get_builtin

BATCHES = (1, 8, 32, 128, 512, 1024)
STATE_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
ACTIVATION = torch.bfloat16
DEVICE = "cuda"  # the smoke test on a CPU sets "cpu" (Triton interpreter)
# (model, tp): Qwen3-Next at tp 1 and 4, Qwen3.5-397B at tp 8, Kimi-Linear at tp 4 and 1.
GEOMETRIES = (
    ("Qwen/Qwen3-Next-80B-A3B-Instruct", 1),
    ("Qwen/Qwen3-Next-80B-A3B-Instruct", 4),
    ("Qwen/Qwen3.5-397B-A17B", 8),
    ("moonshotai/Kimi-Linear-48B-A3B-Instruct", 4),
    ("moonshotai/Kimi-Linear-48B-A3B-Instruct", 1),
)
ROTATION_BYTES = 256 << 20
MAX_SETS = 512
EAGER_CALLS = 200
STATE_TOLERANCE = {"fp32": 1e-5, "bf16": 1e-2}
OUT_TOLERANCE = 2e-2

_T = TileConfig
# Tilings timed by --tune (kernel/tiling.py has the fields).
CANDIDATES = (
    _T(2), _T(4), _T(8), _T(16), _T(8, evict_first=True), _T(16, evict_first=True), _T(32, evict_first=True),
    _T(16, 2, num_stages=2, prefetch=False), _T(16, 2, num_stages=2, prefetch=False, evict_first=True),
    _T(32, num_warps=2, evict_first=True), _T(64, num_warps=4, evict_first=True),
    _T(32, 2, num_warps=2, num_stages=2, prefetch=False, evict_first=True),
    _T(16, 2, evict_first=True), _T(32, 2, num_warps=2, evict_first=True),
    # Register caps: more resident single-warp programs per SM, so more state bytes in flight (the bf16 points
    # ran at ~23 % warps active with 128 registers per thread).
    _T(16, evict_first=True, max_registers=96), _T(16, evict_first=True, max_registers=80),
    _T(16, evict_first=True, max_registers=64), _T(16, max_registers=80), _T(8, evict_first=True, max_registers=64),
    _T(16, 2, num_stages=2, prefetch=False, evict_first=True, max_registers=96),
    # The tile loop software-pipelined through shared memory (loop_stages: cp.async), so a program keeps
    # several tiles in flight without holding them in registers.
    _T(16, 2, prefetch=False, loop_stages=2, evict_first=True), _T(16, 4, prefetch=False, loop_stages=3),
    _T(16, 4, prefetch=False, loop_stages=3, evict_first=True),
    _T(16, 8, prefetch=False, loop_stages=4, evict_first=True), _T(16, 8, prefetch=False, loop_stages=3),
    _T(8, 8, prefetch=False, loop_stages=3, evict_first=True),
    _T(8, 16, prefetch=False, loop_stages=4, evict_first=True),
    _T(32, 4, num_warps=2, prefetch=False, loop_stages=3, evict_first=True), _T(16, 4, evict_first=True),
    # L2 hints as sglang's Helion bf16 KDA configuration sets them: the state's evict-first on its loads only
    # (/Lo), and q, k and the gate rows kept (/K: evict-last), since every V block of a head reads them.
    _T(16, evict_first=True, hint_stores=False), _T(16, evict_first=True, keep_inputs=True),
    _T(16, evict_first=True, hint_stores=False, keep_inputs=True), _T(16, keep_inputs=True),
    _T(8, evict_first=True, hint_stores=False, keep_inputs=True), _T(8, evict_first=True, keep_inputs=True),
    _T(32, evict_first=True, hint_stores=False, keep_inputs=True), _T(4, keep_inputs=True),
    _T(16, 8, prefetch=False, loop_stages=3, keep_inputs=True),
    _T(16, 8, prefetch=False, loop_stages=3, evict_first=True, hint_stores=False, keep_inputs=True),
    _T(16, 2, num_stages=2, prefetch=False, keep_inputs=True),
    # Helion's fp32 KDA shape: 8 rows of one warp (64 registers, twice the resident warps of a 16-row tile).
    # Tried on the H200 (2026-12-01): within 1 % of the 16-row tile with an fp32 state (no win), 2-15 % slower
    # with a bf16 one; the 64-register cap 1-25 % slower.
    _T(8, keep_inputs=True), _T(8, max_registers=64), _T(8, keep_inputs=True, max_registers=64),
    # One row per program, and one tile loaded after the gate arithmetic (np with one tile): the latter faster at
    # small B (2026-12-01, docs/data/tuning/small_b_kernel_variants.json).
    _T(1), _T(2, prefetch=False), _T(4, prefetch=False), _T(8, prefetch=False), _T(16, prefetch=False),
    _T(8, evict_first=True, prefetch=False), _T(16, evict_first=True, prefetch=False),
    _T(4, keep_inputs=True, prefetch=False),
    # ptxas's register target lifted for one-wave launches, as the guarded kernel's are
    # (`tiling.one_wave_register_cap`): at B = 1 the checked kernel ran 4-9 % faster than the unchecked one with an
    # fp32 state (the 2026-12-03 01:57 run).
    _T(2, prefetch=False, max_registers=255), _T(4, prefetch=False, max_registers=255), _T(2, max_registers=255),
    _T(4, max_registers=255), _T(4, keep_inputs=True, max_registers=255),
    # The same at 64-128 pairs, where a one-wave launch's cap is 128 (the checked kernel's 8-row bf16 tile, loaded
    # first, ran 4-5 % faster than the unchecked one at HV = 8, B = 8).
    _T(8, evict_first=True, max_registers=128), _T(8, evict_first=True, prefetch=False, max_registers=128),
    _T(4, max_registers=128), _T(4, prefetch=False, max_registers=128), _T(4, keep_inputs=True, max_registers=128),
    # The built-in table's one-wave rows: the register target each launch's size allows (`TileConfig.lift_registers`).
    _T(2, prefetch=False, lift_registers=True), _T(2, lift_registers=True),
    _T(8, evict_first=True, prefetch=False, lift_registers=True), _T(8, evict_first=True, lift_registers=True),
    # Guarded launches (--guarded) lift the target anyway; these set it by hand or change the tile.
    _T(8, evict_first=True, max_registers=96), _T(8, evict_first=True, max_registers=168),
    _T(8, evict_first=True, max_registers=255), _T(4, lift_registers=True), _T(2, max_registers=128),
    _T(4, keep_inputs=True, lift_registers=True), _T(16, evict_first=True, lift_registers=True),
)


@dataclass(frozen=True)
class Geometry:
    model: str
    tp: int
    variant: str  # "gdn" or "kda"
    H: int
    HV: int
    K: int
    V: int

    @property
    def label(self) -> str:
        return f"{self.model.split('/')[-1]} tp{self.tp} ({self.variant.upper()} H={self.H} HV={self.HV})"


def geometry(model: str, tp: int) -> Geometry:
    built = get_builtin(model)
    if built is None:
        raise SystemExit(f"{model}: not a built-in model")
    config = built.config_copy()
    text = config.get("text_config", config)
    if "linear_attn_config" in text:  # Kimi-Linear: KDA, one head count for q/k and v
        heads, dim = text["linear_attn_config"]["num_heads"], text["linear_attn_config"]["head_dim"]
        return Geometry(model, tp, "kda", heads // tp, heads // tp, dim, dim)
    return Geometry(model, tp, "gdn", text["linear_num_key_heads"] // tp, text["linear_num_value_heads"] // tp,
                    text["linear_key_head_dim"], text["linear_value_head_dim"])


def bytes_per_call(g: Geometry, B: int, state_itemsize: int, act: int = 2) -> int:
    """State rows read and written, mixed_qkv, a, b and out read or written once (A_log/dt_bias ignored)."""
    gate = g.HV * g.K if g.variant == "kda" else g.HV
    state = g.HV * g.V * g.K * state_itemsize
    return B * (2 * state + (2 * g.H * g.K + g.HV * g.V) * act + (gate + g.HV) * act + g.HV * g.V * act)


@dataclass
class Inputs:
    g: Geometry
    B: int
    state: str
    mixed_qkv: torch.Tensor
    a: torch.Tensor
    b: torch.Tensor
    A_log: torch.Tensor
    dt_bias: torch.Tensor
    pool: torch.Tensor
    out: torch.Tensor
    index_sets: list[torch.Tensor]

    @property
    def scale(self) -> float:
        return float(self.g.K) ** -0.5

    def args(self, indices: torch.Tensor, pool: torch.Tensor | None = None, out: torch.Tensor | None = None
             ) -> tuple:
        args = (self.mixed_qkv, self.a, self.b, self.A_log, self.dt_bias, self.scale,
                self.pool if pool is None else pool, self.out if out is None else out, indices, True)
        return args + ((None,) if self.g.variant == "kda" else ())


def make_inputs(g: Geometry, B: int, state: str, slots: int, sets: int, seed: int) -> Inputs:
    torch.manual_seed(seed)
    dev = DEVICE
    gate = g.HV * g.K if g.variant == "kda" else g.HV
    pool = torch.empty(slots, g.HV, g.V, g.K, device=dev, dtype=STATE_DTYPES[state])
    for chunk in pool.split(max(1, (64 << 20) // max(1, pool[0].numel())), dim=0):  # bounded temporaries
        chunk.copy_(torch.randn(chunk.shape, device=dev).mul_(0.1))
    order = (torch.randperm(slots - 1, device=dev)[: sets * B] + 1).to(torch.int32).view(sets, B)
    inputs = Inputs(
        g, B, state,
        mixed_qkv=torch.randn(B, 2 * g.H * g.K + g.HV * g.V, device=dev).to(ACTIVATION),
        a=torch.randn(B, gate, device=dev).to(ACTIVATION),
        b=torch.randn(B, g.HV, device=dev).to(ACTIVATION),
        A_log=torch.empty(g.HV, device=dev).uniform_(0.0, 2.5) if g.variant == "gdn"
        else torch.empty(g.HV, device=dev).uniform_(-1.0, 1.0),
        dt_bias=torch.randn(gate, device=dev) * 0.5,
        pool=pool,
        out=torch.empty(B, 1, g.HV, g.V, device=dev, dtype=ACTIVATION),
        index_sets=[s.contiguous() for s in order],
    )
    return inputs


# -- implementations: each is (inputs, indices, pool, out) -> out --------------------------------------------
Impl = Callable[[Inputs, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def ours_impl(config: TileConfig | None, guarded: bool = False) -> Impl:
    """Our launch with `config` (None: `tiling.choose_config`'s); `guarded`: with the runtime guard's slot checks in
    the kernel, as the checked kernel launches it at up to 128 rows (`--tune --guarded` passes each candidate as
    `config`, in place of the guarded launch's own choice)."""
    buffers: dict[torch.device, FaultBuffer] = {}

    def run(x: Inputs, indices: torch.Tensor, pool: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        launch = launch_packed_decode if x.g.variant == "gdn" else launch_kda_packed_decode
        guard = None
        if guarded:
            # One buffer, made at the first (warm-up) call: a buffer made inside the graph's capture would put its
            # zero-fills in the graph (the reverted first form of this option took 6-7 us more per launch so).
            buffer = buffers.get(pool.device)
            if buffer is None:
                buffer = buffers[pool.device] = FaultBuffer(pool.device)
            guard = buffer.guard_launch("tune", pool.shape[0], "engine")
        launch(*x.args(indices, pool, out), engine="sglang", config=config, guard=guard)
        return out
    return run


def checked_impl(x: Inputs, indices: torch.Tensor, pool: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    checked = packed_decode if x.g.variant == "gdn" else kda_packed_decode
    checked(*x.args(indices, pool, out), engine="sglang", context="engine")
    return out


def sglang_impl(gdn: Callable, kda: Callable) -> Impl:
    def run(x: Inputs, indices: torch.Tensor, pool: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        (gdn if x.g.variant == "gdn" else kda)(*x.args(indices, pool, out))
        return out
    return run


def cuda_impl(kernel: Any) -> Impl:
    def run(x: Inputs, indices: torch.Tensor, pool: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        kernel(*x.args(indices, pool, out))
        return out
    return run


def helion_impl(decode: Callable) -> Impl:
    """sglang's Helion KDA decode, called as its backend's ``packed_decode`` calls it."""
    def run(x: Inputs, indices: torch.Tensor, pool: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        B = x.mixed_qkv.shape[0]
        a = x.a if x.a.ndim == 2 else x.a.reshape(B, -1)
        b = x.b if x.b.ndim == 2 else x.b.reshape(B, -1)
        lower_bound = x.args(indices, pool, out)[10]  # the point's bound (None: the softplus gate, Kimi-Linear)
        decode(mixed_qkv=x.mixed_qkv, a=a, b=b, A_log=x.A_log.reshape(-1), dt_bias=x.dt_bias.reshape(-1),
               scale=x.scale, initial_state=pool, out=out, ssm_state_indices=indices, use_qk_l2norm_in_kernel=True,
               lower_bound=lower_bound)
        return out
    return run


def cute_impl(gdn: Callable, kda: Callable, compile_caches: list[dict[Any, Any]]) -> Impl:
    """sglang's CuTe-DSL decode, called as its GDN and KDA backends' ``decode`` calls it (sglang 0.5.23,
    ``gdn_backend.py`` / ``kda_backend.py`` when the kernel backend has no packed decode): q, k and v split from
    the packed row as ``[1, N, heads, dim]`` views, not copies (the wrapper makes them contiguous, inside the
    timed call), ``a`` and ``b`` as the layer has them (2-D), ``cu_seqlens`` the batch's ``query_start_loc``
    (0..N: one token per request), the l2 norm in the kernel, softplus beta 1 and threshold 20. The wrapper
    returns a new ``out``. Its compiled kernels are cached by shape and pool size but not by the state's dtype,
    so `compile_caches` are emptied whenever the dtype changes: otherwise an fp32 binary would run on a bf16
    pool."""
    compiled_for: list[torch.dtype | None] = [None]
    query_start: dict[int, torch.Tensor] = {}

    def run(x: Inputs, indices: torch.Tensor, pool: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        if compiled_for[0] != pool.dtype:
            for cache in compile_caches:
                cache.clear()
            compiled_for[0] = pool.dtype
        g, B = x.g, x.B
        if B not in query_start:  # made by the first (uncaptured) call, as the engine's metadata is
            query_start[B] = torch.arange(B + 1, dtype=torch.int32, device=x.mixed_qkv.device)
        q, k, v = x.mixed_qkv.split([g.H * g.K, g.H * g.K, g.HV * g.V], dim=-1)
        q, k = (t.unflatten(-1, (g.H, g.K)).unsqueeze(0) for t in (q, k))
        v = v.unflatten(-1, (g.HV, g.V)).unsqueeze(0)
        decode = gdn if g.variant == "gdn" else kda
        return decode(A_log=x.A_log, dt_bias=x.dt_bias, q=q, k=k, v=v, a=x.a, b=x.b, initial_state_source=pool,
                      initial_state_indices=indices, cu_seqlens=query_start[B], scale=x.scale,
                      use_qk_l2norm_in_kernel=True, softplus_beta=1.0, softplus_threshold=20.0)
    return run


# -- correctness -----------------------------------------------------------------------------------------------
def verify(x: Inputs, impl: Impl) -> dict[str, Any]:
    """One step on a fresh compact pool (B + 2 slots, one -1 padding row when B > 1) against float64."""
    g, B = x.g, x.B
    pool = torch.randn(B + 2, g.HV, g.V, g.K, device=DEVICE).mul_(0.1).to(STATE_DTYPES[x.state])
    indices = (torch.randperm(B + 1, device=DEVICE)[:B] + 1).to(torch.int32)
    if B > 1:
        indices[B // 2] = -1
    live = indices >= 0
    touched = indices[live].long()
    naive = naive_packed_decode if g.variant == "gdn" else naive_kda_packed_decode
    ref_out, ref_pool = naive(*x.args(indices, pool, x.out), engine="sglang")
    ref_out = ref_out.reshape(B, g.HV, g.V)
    new_pool, out = pool.clone(), torch.full_like(x.out, float("nan"))
    result_out = impl(x, indices, new_pool, out)
    torch.cuda.synchronize()
    got = result_out.reshape(B, g.HV, g.V).double()
    ref_state = ref_pool[touched]
    state_rel = ((new_pool[touched].double() - ref_state).abs().max() / ref_state.abs().max()).item()
    out_rel = ((got[live] - ref_out[live]).abs().max() / ref_out[live].abs().max()).item()
    untouched = torch.ones(B + 2, dtype=torch.bool, device=DEVICE)
    untouched[touched] = False
    intact = torch.equal(new_pool[untouched], pool[untouched])
    written = bool(torch.isfinite(got[live]).all())
    ok = state_rel <= STATE_TOLERANCE[x.state] and out_rel <= OUT_TOLERANCE and intact and written
    return {"state_rel": state_rel, "out_rel": out_rel, "untouched_intact": intact, "out_written": written,
            "ok": ok}


# -- timing ------------------------------------------------------------------------------------------------------
def eager_us(launch: Callable[[torch.Tensor], object], index_sets: list[torch.Tensor]) -> float:
    for indices in index_sets[:3]:
        launch(indices)
    torch.cuda.synchronize()
    calls = max(EAGER_CALLS, len(index_sets))
    start = time.perf_counter()
    for i in range(calls):
        launch(index_sets[i % len(index_sets)])
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


@triton.jit
def _copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(dst + offsets, tl.load(src + offsets, mask=mask, eviction_policy="evict_first"), mask=mask,
             eviction_policy="evict_first")


@triton.jit
def _slot_copy_kernel(pool, slots, one, stride_slot, row_elems, BLOCK: tl.constexpr, PROGRAMMATIC: tl.constexpr):
    """One block of one row's state at the row's slot, read and written back in place (times a run-time 1.0,
    which no compiler folds away), after a dependent load of the slot: the floor for any kernel that must look
    the slot up before it can stream the state. PROGRAMMATIC: launched as our decode kernels are where the device
    has it (PDL: wait for the previous grid, then release the next one at once)."""
    if PROGRAMMATIC:
        slots += wait_for_previous_grid()
        release_dependents()
    chunks = tl.cdiv(row_elems, BLOCK)
    pid = tl.program_id(0)
    offsets = (pid % chunks).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    slot = tl.load(slots + pid // chunks).to(tl.int64)
    mask = offsets < tl.where(slot >= 0, row_elems, 0)  # a skipped row (-1) touches nothing
    row = pool + slot * stride_slot
    state = tl.load(row + offsets, mask=mask, eviction_policy="evict_first")
    tl.store(row + offsets, (state.to(tl.float32) * one).to(state.dtype), mask=mask, eviction_policy="evict_first")


SLOT_COPY_SHAPES = ((2048, 4), (8192, 8))  # (elements per program, warps): the faster is the floor


def slot_copy_launch(x: Inputs, block: int, warps: int, programmatic: bool = False) -> Callable[[torch.Tensor], None]:
    row_elems = x.g.HV * x.g.V * x.g.K
    options = {"launch_pdl": True} if programmatic else {}

    def launch(indices: torch.Tensor) -> None:
        grid = (x.B * triton.cdiv(row_elems, block),)
        _slot_copy_kernel[grid](x.pool, indices, 1.0, x.pool.stride(0), row_elems, BLOCK=block,
                                PROGRAMMATIC=programmatic, num_warps=warps, **options)
    return launch


class CopyTarget:
    """The same bytes moved by a device-to-device copy, rotated over as many buffers as the kernel's sets.

    Two copies: torch's `copy_` (cudaMemcpyAsync; a memcpy node in a graph) and a plain Triton copy kernel
    (16-byte accesses, evict-first); the faster is the practical limit."""

    def __init__(self, total_bytes: int, sets: int) -> None:
        self.words = max(1, total_bytes // 2 // 4)
        self.src = torch.randn(sets, self.words, device=DEVICE)
        self.dst = torch.empty_like(self.src)
        self.sets = [torch.tensor(i) for i in range(sets)]

    def launch(self, i: torch.Tensor) -> None:
        self.dst[int(i)].copy_(self.src[int(i)])

    def launch_kernel(self, i: torch.Tensor) -> None:
        block = 4096
        _copy_kernel[(triton.cdiv(self.words, block),)](self.src[int(i)], self.dst[int(i)], self.words, BLOCK=block,
                                                         num_warps=8)


# -- loading the reference paths -------------------------------------------------------------------------------
def load_references(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, str]]:
    refs: dict[str, Any] = {}
    notes: dict[str, str] = {}
    try:
        from gdr_check.kernel.engine_kernels import load_sglang_packed_decode

        gdn, kda = load_sglang_packed_decode()
        refs["sglang"] = sglang_impl(gdn, kda)
        notes["sglang"] = f"Triton, {gdn.source_path}"
    except (FileNotFoundError, ImportError) as exc:
        notes["sglang"] = f"not run: {exc}"
    source = os.environ.get("GDR_CHECK_SGLANG_PATH")
    if source and not args.no_cuda:
        try:
            sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
            from sglang_cuda_kda import SglangCudaKda

            started = time.perf_counter()
            kernel = SglangCudaKda(source, pdl=True)
            refs["sglang_cuda"] = (cuda_impl(kernel), kernel)
            regs = [line.strip() for line in kernel.build_log.splitlines() if "registers" in line]
            notes["sglang_cuda"] = (f"kda_packed_decode.cuh built with nvcc for sm_90a in "
                                    f"{time.perf_counter() - started:.1f} s; PDL on; {'; '.join(regs)}")
        except Exception as exc:  # noqa: BLE001 - an nvcc build of third-party code: report, carry on without it
            notes["sglang_cuda"] = f"not run: {type(exc).__name__}: {str(exc)[-600:]}"
    else:
        notes["sglang_cuda"] = "not run: no GDR_CHECK_SGLANG_PATH" if not source else "not run: --no-cuda"
    notes["sglang_helion"] = load_helion(source, args, refs)
    if args.cute:
        notes["cute"] = load_cute(source, refs)
    else:
        notes["cute"] = "not run: --cute not given"
    return refs, notes


def load_helion(source: str | None, args: argparse.Namespace, refs: dict[str, Any]) -> str:
    """sglang's Helion KDA decode (``refs["sglang_helion"]``) when ``helion`` imports; the note for the run."""
    if args.no_helion:
        return "not run: --no-helion"
    if not source:
        return "not run: no GDR_CHECK_SGLANG_PATH"
    try:
        from sglang_helion_kda import load_helion_kda_decode

        decode, where = load_helion_kda_decode(source)
    except ImportError as exc:
        return f"not run: helion does not import ({type(exc).__name__}: {exc})"
    except Exception as exc:  # noqa: BLE001 - third-party module: any load failure is reported
        return f"not run: kda_decode.py does not load ({type(exc).__name__}: {str(exc)[-600:]})"
    import helion

    refs["sglang_helion"] = helion_impl(decode)
    return f"Helion {getattr(helion, '__version__', '?')}, {where} (sglang's fixed configurations, no autotuning)"


def load_cute(source: str | None, refs: dict[str, Any]) -> str:
    """sglang's CuTe-DSL decode kernels, loaded from the wheel's files when `cutlass` imports."""
    try:
        import importlib.util
        import zipfile

        import cutlass  # the DSL itself: nvidia-cutlass-dsl
    except Exception as exc:  # noqa: BLE001 - any import failure of the optional DSL: report it
        return f"not run: the CuTe DSL does not import ({type(exc).__name__}: {exc})"
    if not source:
        return "not run: no GDR_CHECK_SGLANG_PATH"
    loaded = {}
    directory = os.path.join(os.environ.get("TMPDIR", "/tmp"), "gdr_cute")
    for name in ("cutedsl_gdn", "cutedsl_kda"):
        member = f"sglang/kernels/ops/attention/{name}.py"
        if source.endswith(".whl"):
            with zipfile.ZipFile(source) as archive:
                archive.extract(member, directory)
            where = os.path.join(directory, member)
        else:
            where = os.path.join(source, member)
        spec = importlib.util.spec_from_file_location(f"gdr_bench_{name}", where)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # noqa: BLE001 - third-party module: any load failure is reported
            return f"not run: {name}.py does not load ({type(exc).__name__}: {exc})"
        loaded[name] = module
    refs["cute"] = cute_impl(loaded["cutedsl_gdn"].cutedsl_fused_sigmoid_gating_delta_rule_update,
                             loaded["cutedsl_kda"].cutedsl_fused_sigmoid_gating_kda_update,
                             [module._compiled_kernels for module in loaded.values()])
    return f"CuTe DSL {getattr(cutlass, '__version__', '?')}, sglang's cutedsl_gdn.py / cutedsl_kda.py"


# -- one point -------------------------------------------------------------------------------------------------
def run_point(g: Geometry, B: int, state: str, refs: dict[str, Any], args: argparse.Namespace,
              cute_budget: list[float]) -> dict[str, Any]:
    itemsize = STATE_DTYPES[state].itemsize
    row_bytes = g.HV * g.V * g.K * itemsize
    sets = max(2, min(MAX_SETS, math.ceil(ROTATION_BYTES / (B * row_bytes))))
    x = make_inputs(g, B, state, sets * B + 1, sets, seed=B * 1000 + g.HV + (7 if state == "bf16" else 0))
    total = bytes_per_call(g, B, itemsize)
    chosen = choose_config(g.variant, torch.cuda.get_device_name(), B * g.HV, g.V, g.K, itemsize)
    impls: dict[str, Impl] = {"ours": ours_impl(None), "checked": checked_impl}
    if "sglang" in refs:
        impls["sglang"] = refs["sglang"]
    if "sglang_cuda" in refs and g.variant == "kda":
        kernel_impl, kernel = refs["sglang_cuda"]
        if kernel.covered(x.mixed_qkv, x.a, x.pool):
            impls["sglang_cuda"] = kernel_impl
    if "sglang_helion" in refs and g.variant == "kda":
        impls["sglang_helion"] = refs["sglang_helion"]
    if "cute" in refs and cute_budget[0] > 0:
        impls["cute"] = refs["cute"]
    point: dict[str, Any] = {"model": g.model, "tp": g.tp, "variant": g.variant, "H": g.H, "HV": g.HV, "K": g.K,
                             "V": g.V, "B": B, "state": state, "sets": sets, "bytes": total,
                             "config": config_label(chosen), "verify": {}, "graph_us": {}, "graph_spread": {},
                             "eager_us": {}, "errors": {}}
    for name, impl in list(impls.items()):
        started = time.perf_counter()
        try:
            point["verify"][name] = verify(x, impl)
        except Exception as exc:  # noqa: BLE001 - one implementation failing is recorded, not fatal
            point["errors"][name] = f"{type(exc).__name__}: {str(exc)[-300:]}"
            del impls[name]
        if name == "cute":
            cute_budget[0] -= time.perf_counter() - started
    for name in [n for n, v in point["verify"].items() if not v["ok"]]:
        impls.pop(name, None)  # a wrong result is reported, not timed
    launches = {name: (lambda idx, impl=impl: impl(x, idx, x.pool, x.out)) for name, impl in impls.items()}
    graphs = {}
    for name, launch in launches.items():
        started = time.perf_counter()
        try:
            graphs[name] = capture(launch, x.index_sets)
        except Exception as exc:  # noqa: BLE001 - one implementation failing is recorded, not fatal
            point["errors"][name] = f"capture: {type(exc).__name__}: {str(exc)[-300:]}"
        if name == "cute":
            cute_budget[0] -= time.perf_counter() - started
    rounds: dict[str, list[float]] = {name: [] for name in graphs}
    for _ in range(args.repeats):  # interleaved, so drift hits every implementation alike
        for name, graph in graphs.items():
            rounds[name].append(replay_us(graph, len(x.index_sets)))
    del graphs
    # The slot-indexed floor: the state rows alone, read and written in place after the slot's load, launched as
    # ours is (programmatically where the device has it: `slot_copy`) and plainly (`slot_copy_plain`).
    programmatic = launches_programmatically(None, B * g.HV, x.pool.device)
    for column, launched_as_ours in (("slot_copy", programmatic), ("slot_copy_plain", False)):
        slot_copies = []
        for block, warps in SLOT_COPY_SHAPES:
            graph = capture(slot_copy_launch(x, block, warps, launched_as_ours), x.index_sets)
            slot_copies.append(statistics.median(replay_us(graph, len(x.index_sets)) for _ in range(args.repeats)))
            del graph
        point["graph_us"][column] = min(slot_copies)
    if args.tune:
        # Every candidate captured first, then timed in interleaved rounds (median of --repeats), like the
        # implementations above: a candidate is judged against the others under the same drift.
        tuned, tune_graphs = {}, {}
        for config in CANDIDATES:
            label = config_label(config)
            if config.fitted(g.V, g.K) != config or (args.candidates and label not in args.candidates):
                continue
            try:
                impl = ours_impl(config, guarded=args.guarded)
                tune_graphs[label] = capture(lambda idx, impl=impl: impl(x, idx, x.pool, x.out), x.index_sets)
            except Exception as exc:  # noqa: BLE001 - a candidate tiling failing is recorded as NaN
                tuned[label] = float("nan")
                point["errors"][f"tune {label}"] = str(exc)[-200:]
        tune_rounds: dict[str, list[float]] = {label: [] for label in tune_graphs}
        for _ in range(args.repeats):
            for label, graph in tune_graphs.items():
                tune_rounds[label].append(replay_us(graph, len(x.index_sets)))
        del tune_graphs
        tuned.update({label: statistics.median(values) for label, values in tune_rounds.items()})
        point["tune_us"] = tuned
        finite = {k: v for k, v in tuned.items() if v == v}
        if finite:
            point["best"], point["best_us"] = min(finite.items(), key=lambda kv: kv[1])
            best = next(c for c in CANDIDATES if config_label(c) == point["best"])
            point["tuning_record"] = {"variant": g.variant, "device": torch.cuda.get_device_name(), "K": g.K,
                                      "V": g.V, "state_bytes": itemsize, "guarded": args.guarded,
                                      "head_rows": B * g.HV, "config": best.__dict__.copy(),
                                      "us": point["best_us"], "geometry": [g.H, g.HV, B]}
    for name, values in rounds.items():
        median = statistics.median(values)
        point["graph_us"][name] = median
        point["graph_spread"][name] = (max(values) - min(values)) / median
    if not args.no_eager:
        for name, launch in launches.items():
            try:
                point["eager_us"][name] = eager_us(launch, x.index_sets)
            except Exception as exc:  # noqa: BLE001 - recorded per implementation
                point["errors"][f"eager {name}"] = str(exc)[-200:]
    launches = {}
    x = None  # type: ignore[assignment]  # frees the pool before the copy allocates
    gc.collect()
    torch.cuda.empty_cache()
    copy = CopyTarget(total, sets)  # last: it allocates as much again
    for name, launch_copy in (("copy_memcpy", copy.launch), ("copy_kernel", copy.launch_kernel)):
        graph = capture(launch_copy, copy.sets)
        values = [replay_us(graph, sets) for _ in range(args.repeats)]
        point["graph_us"][name] = statistics.median(values)
        point["graph_spread"][name] = (max(values) - min(values)) / statistics.median(values)
        del graph
    fastest = min(("copy_memcpy", "copy_kernel"), key=lambda n: point["graph_us"][n])
    point["graph_us"]["copy"] = point["graph_us"][fastest]
    point["graph_spread"]["copy"] = point["graph_spread"][fastest]
    point["copy_kind"] = fastest
    del copy
    gc.collect()
    torch.cuda.empty_cache()
    return point


def environment(notes: dict[str, str]) -> dict[str, Any]:
    props = torch.cuda.get_device_properties(0)
    return {"device": props.name, "sms": props.multi_processor_count, "torch": torch.__version__,
            "triton": triton.__version__, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
                timespec="seconds"), "paths": notes}


def summary_line(p: dict[str, Any], roofline: float) -> str:
    t = p["graph_us"]
    rivals = {k: v for k, v in t.items() if k.startswith(("sglang", "cute"))}
    fastest = min(rivals.items(), key=lambda kv: kv[1]) if rivals else ("-", float("nan"))
    ours = t.get("ours", float("nan"))
    tbps = p["bytes"] / (ours * 1e-6) / 1e12
    return (f"{p['variant']} H={p['H']:>2} HV={p['HV']:>2} {p['state']} B={p['B']:>4} | ours {ours:8.2f} "
            f"chk {t.get('checked', float('nan')):8.2f} | " + " ".join(f"{k} {v:8.2f}" for k, v in rivals.items())
            + f" | copy {t.get('copy', float('nan')):8.2f} | vs fastest({fastest[0]}) {fastest[1] / ours:5.2f}x"
            f" | /copy {ours / t.get('copy', float('nan')):5.2f}"
            f" | /slot copy {ours / t.get('slot_copy', float('nan')):5.2f}"
            f" (plain {ours / t.get('slot_copy_plain', float('nan')):5.2f})"
            f" | roof {tbps / roofline:5.1%} | {p['config']}"
            + (f" | best {p['best']} {p['best_us']:.2f}" if "best" in p else "")
            + ("" if all(v["ok"] for v in p["verify"].values()) else " | VERIFY FAILED")
            + (f" | errors {p['errors']}" if p["errors"] else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tune", action="store_true", help="also time every candidate tiling of ours per point")
    parser.add_argument("--guarded", action="store_true",
                        help="with --tune, time the candidates as guarded launches (as the checked kernel launches "
                             "at up to 128 rows), recorded as the guarded launch's tiling")
    parser.add_argument("--candidates", nargs="*", default=[],
                        help="with --tune, only these candidates (labels as printed, e.g. 16x1/w1/s1/E/Lo/K)")
    parser.add_argument("--cute", action="store_true", help="also run sglang's CuTe-DSL kernels (needs cutlass)")
    parser.add_argument("--cute-budget", type=float, default=150.0, help="seconds of CuTe compile+check in all")
    parser.add_argument("--no-cuda", action="store_true", help="skip building sglang's CUDA KDA kernel")
    parser.add_argument("--no-helion", action="store_true", help="skip sglang's Helion KDA decode")
    parser.add_argument("--no-eager", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batches", type=int, nargs="*", default=list(BATCHES))
    parser.add_argument("--states", nargs="*", default=list(STATE_DTYPES))
    parser.add_argument("--geometries", nargs="*", default=[f"{m}@{tp}" for m, tp in GEOMETRIES],
                        help="MODEL@TP entries")
    parser.add_argument("--json", default=os.path.join(os.environ["OUT"], "decode_vs_sglang.json")
                        if os.environ.get("OUT") else None)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("decode_vs_sglang: no CUDA device", file=sys.stderr)
        return 2
    refs, notes = load_references(args)
    env = environment(notes)
    env["copy_roofline_tbps"] = roofline = copy_roofline_tbps()
    print(json.dumps(env), flush=True)
    geometries = [geometry(entry.rsplit("@", 1)[0], int(entry.rsplit("@", 1)[1])) for entry in args.geometries]
    points, failures = [], 0
    cute_budget = [args.cute_budget]
    results = {"environment": env, "points": points}
    for g in geometries:
        for state in args.states:
            for B in args.batches:
                try:
                    point = run_point(g, B, state, refs, args, cute_budget)
                except Exception:  # noqa: BLE001 - report the point and carry on: device time is scarce
                    print(f"FAILED {g.label} {state} B={B}:\n{traceback.format_exc()}", flush=True)
                    failures += 1
                    gc.collect()
                    torch.cuda.empty_cache()
                    continue
                points.append(point)
                print(summary_line(point, roofline), flush=True)
                if args.json:  # keep what is done if the run is cut short
                    with open(args.json, "w") as handle:
                        json.dump(results, handle, indent=1)
    env["cute_budget_left_s"] = cute_budget[0]
    records = [p["tuning_record"] for p in points if "tuning_record" in p]
    if records:
        path = record_tuning(records)
        print(f"tuned configs recorded in {path}", flush=True)
        if os.environ.get("OUT"):
            record_tuning(records, path=Path(os.environ["OUT"]) / "tiling.json")
    env["tiling_cache"] = str(tuning_cache_path())
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=1)
    ok = all(v["ok"] for p in points for k, v in p["verify"].items() if k in ("ours", "checked"))
    return 0 if ok and not failures else 1


if __name__ == "__main__":
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sys.exit(main())
