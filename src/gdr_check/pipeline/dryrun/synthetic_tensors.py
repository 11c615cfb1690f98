"""Synthetic tensors with exactly the geometry's shapes, dtypes, strides and offsets (child process only).

Every tensor is a strided view of its own flat allocation, so padding between rows exists in memory as it
would in the engine. The state is a view of the stacked pool when there is one (sglang), at the chosen layer.
Values are random and never zero; slot indices give distinct live slots and some padding rows.
"""

from __future__ import annotations

from typing import Any

import torch

from ...base.records import dataclass
from ...base.tensor_spec import TensorSpec
from ...base.variants import variant_spec
from ...call.packed_call import PackedDecodeCall
from ...engines.profiles import profile_for
from ...kernel.layout import row_is_live
from .geometry import Geometry


def torch_dtype(name: str) -> torch.dtype:
    dtype: torch.dtype = getattr(torch, name)  # a canonical dtype name is the torch attribute's name
    return dtype


def extent(spec: TensorSpec) -> int:
    """Elements of the flat allocation a strided view of `spec` needs, from element 0."""
    if spec.numel() == 0:
        return spec.offset
    return spec.offset + sum((size - 1) * step for size, step in zip(spec.shape, spec.stride, strict=True)) + 1


def strided_view(storage: torch.Tensor, spec: TensorSpec) -> torch.Tensor:
    return torch.as_strided(storage, spec.shape, spec.stride, spec.offset)


def nonzero_random(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, generator: torch.Generator,
                   *, scale: float = 1.0) -> torch.Tensor:
    """Standard normal values times `scale`, in `dtype`, with no exact zero even after rounding."""
    values = torch.randn(shape, generator=generator, device=device, dtype=torch.float32).mul_(scale).to(dtype)
    return values.masked_fill_(values == 0, scale)


@dataclass
class CallTensors:
    """One set of kernel arguments. `pool_storage` is the whole allocation the state views."""

    mixed_qkv: torch.Tensor
    a: torch.Tensor
    b: torch.Tensor
    A_log: torch.Tensor
    dt_bias: torch.Tensor
    initial_state: torch.Tensor
    out: torch.Tensor
    ssm_state_indices: torch.Tensor
    pool_storage: torch.Tensor
    call: PackedDecodeCall

    def args(self) -> tuple[Any, ...]:
        """Positional arguments in the wrappers' order (KDA appends lower_bound)."""
        args = (self.mixed_qkv, self.a, self.b, self.A_log, self.dt_bias, float(self.call.scale),
                self.initial_state, self.out, self.ssm_state_indices, self.call.use_qk_l2norm_in_kernel)
        return args + variant_spec(self.call.variant).call_extras(self.call.lower_bound)

    def with_pool(self, pool_storage: torch.Tensor, out_storage: torch.Tensor) -> CallTensors:
        """The same inputs over another pool allocation and output (a second kernel on copies)."""
        return CallTensors(
            self.mixed_qkv, self.a, self.b, self.A_log, self.dt_bias,
            strided_view(pool_storage, self.call.initial_state), strided_view(out_storage, self.call.out),
            self.ssm_state_indices, pool_storage, self.call,
        )


def allocate(spec: TensorSpec, device: torch.device) -> torch.Tensor:
    return torch.empty(extent(spec), dtype=torch_dtype(spec.dtype), device=device)


def _filled(spec: TensorSpec, device: torch.device, generator: torch.Generator, *, scale: float = 1.0) -> torch.Tensor:
    """A strided view over an allocation that is random everywhere, padding included."""
    storage = nonzero_random((extent(spec),), torch_dtype(spec.dtype), device, generator, scale=scale)
    return strided_view(storage, spec)


def pool_allocation(geometry: Geometry) -> TensorSpec:
    """The allocation the state views: the stacked pool, or the state itself."""
    return geometry.pool if geometry.pool is not None else geometry.call.initial_state


def build_tensors(geometry: Geometry, device: torch.device, generator: torch.Generator) -> CallTensors:
    """All kernel arguments for the geometry, with random parameters and pool; per-step inputs come later."""
    call = geometry.call
    pool_spec = pool_allocation(geometry)
    pool_storage = nonzero_random((extent(pool_spec),), torch_dtype(pool_spec.dtype), device, generator, scale=0.5)
    state = strided_view(pool_storage, call.initial_state)
    # A_log as real models hold it (log of 1..16), so decays range from ~0 to ~1 across heads and rows.
    A_log = _filled(call.A_log, device, generator)
    A_log.copy_(torch.empty(A_log.shape, device=device).uniform_(0.05, 2.77, generator=generator).to(A_log.dtype))
    tensors = CallTensors(
        mixed_qkv=_filled(call.mixed_qkv, device, generator),
        a=_filled(call.a, device, generator),
        b=_filled(call.b, device, generator),
        A_log=A_log,
        dt_bias=_filled(call.dt_bias, device, generator, scale=0.5),
        initial_state=state,
        out=strided_view(allocate(call.out, device), call.out),
        ssm_state_indices=strided_view(allocate(call.ssm_state_indices, device), call.ssm_state_indices),
        pool_storage=pool_storage,
        call=call,
    )
    return tensors


def refresh_inputs(tensors: CallTensors, generator: torch.Generator) -> None:
    """New random per-token inputs (q/k/v and gates), written in place so the layouts never change."""
    for view in (tensors.mixed_qkv, tensors.a, tensors.b):
        view.copy_(nonzero_random(tuple(view.shape), view.dtype, view.device, generator))


def step_indices(batch: int, slots: int, engine: str, step: int, generator: torch.Generator) -> list[int]:
    """Slot indices for one step: distinct live slots from 1..S-1 (slot 0 is reserved) and padding rows.

    About a quarter of the rows are padding (at least one when B >= 2; with B = 1 every other step), at
    random positions. sglang pads with -1; vLLM skips 0 too, so its padding alternates 0 and -1.
    """
    skip_at_or_below = profile_for(engine).skip_at_or_below
    padding = max(1, batch // 4) if batch >= 2 else step % 2
    live = min(batch - padding, slots - 1)
    padding = batch - live
    order = torch.randperm(batch, generator=generator).tolist()
    live_slots = (torch.randperm(max(slots - 1, 0), generator=generator)[:live] + 1).tolist()
    values = [0] * batch
    for position, row in enumerate(order):
        if position < live:
            values[row] = live_slots[position]
        else:
            pad_number = position - live + step
            # Every other padding row uses the highest skipped index (vLLM's null slot 0); sglang's is -1.
            values[row] = skip_at_or_below if pad_number % 2 == 1 else -1
    return values


def timing_indices(batch: int, slots: int) -> list[int]:
    """As many live rows as the pool allows (slots 1..), the rest -1: the bytes of section 11 are all moved."""
    return [row + 1 if row + 1 < slots else -1 for row in range(batch)]


def live_rows(indices: list[int], engine: str) -> list[int]:
    return [row for row, slot in enumerate(indices) if row_is_live(slot, engine)]
