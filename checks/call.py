"""A packed-decode kernel call, described by TensorSpecs, and the quantities the wrapper derives from it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from ..tensors import TensorSpec

Variant = Literal["gdn", "kda"]
Engine = Literal["sglang", "vllm"]
ENGINES: tuple[str, ...] = ("sglang", "vllm")
ARGUMENTS: tuple[str, ...] = (
    "mixed_qkv", "a", "b", "A_log", "dt_bias", "scale", "initial_state", "out", "ssm_state_indices",
)
TENSOR_ARGUMENTS: tuple[str, ...] = tuple(a for a in ARGUMENTS if a != "scale")
# CUDA caps grid dimensions 1 and 2 at 65535; sglang's GDN launch puts B*HV there.
GRID_DIM_LIMIT = 65535


@dataclass(frozen=True)
class PackedDecodeCall:
    """The arguments of one `fused_recurrent_*_packed_decode` call."""

    mixed_qkv: TensorSpec
    a: TensorSpec
    b: TensorSpec
    A_log: TensorSpec
    dt_bias: TensorSpec
    scale: Any
    initial_state: TensorSpec
    out: TensorSpec
    ssm_state_indices: TensorSpec
    use_qk_l2norm_in_kernel: bool = False
    lower_bound: float | None = None
    variant: Variant = "gdn"

    @classmethod
    def of_specs(cls, **fields: Any) -> "PackedDecodeCall":
        """`PackedDecodeCall(**fields)` with every field given, minus the frozen dataclass's per-field
        `object.__setattr__` (the runtime guard builds one call per checked kernel launch)."""
        if fields.keys() != _FIELD_NAMES:
            return cls(**fields)  # the regular constructor reports what is missing or unknown
        call = cls.__new__(cls)
        call.__dict__.update(fields)
        return call

    def tensors(self) -> dict[str, TensorSpec]:
        # Several rules ask for this on every guarded call: build it once per (immutable) call, hand out copies.
        cached = self.__dict__.get("_tensors")
        if cached is None:
            cached = self.__dict__["_tensors"] = {name: getattr(self, name) for name in TENSOR_ARGUMENTS}
        return dict(cached)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"variant": self.variant}
        data.update({name: spec.to_dict() for name, spec in self.tensors().items()})
        data["scale"] = self.scale
        data["use_qk_l2norm_in_kernel"] = self.use_qk_l2norm_in_kernel
        if self.variant == "kda":
            data["lower_bound"] = self.lower_bound
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PackedDecodeCall":
        tensors = {name: TensorSpec.from_dict(data[name]) for name in TENSOR_ARGUMENTS}
        return cls(
            scale=data.get("scale"),
            use_qk_l2norm_in_kernel=bool(data.get("use_qk_l2norm_in_kernel", False)),
            lower_bound=data.get("lower_bound"),
            variant=data.get("variant", "gdn"),
            **tensors,
        )


_FIELD_NAMES = frozenset(f.name for f in dataclasses.fields(PackedDecodeCall))


def next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def _squeezed(spec: TensorSpec, ndim: int) -> TensorSpec | None:
    """The tensor as the usual fix would present it: size-1 axes dropped, or flattened to 1-D."""
    if spec.ndim == ndim:
        return spec
    kept = [i for i, size in enumerate(spec.shape) if size != 1]
    if len(kept) == ndim:
        return TensorSpec(tuple(spec.shape[i] for i in kept), tuple(spec.stride[i] for i in kept),
                          spec.dtype, spec.device, spec.values, spec.storage, spec.offset)
    if ndim == 1 and spec.is_contiguous():
        return spec.with_shape((spec.numel(),))
    return None


@dataclass
class CallContext:
    """A call plus what the wrapper derives from it (B, HV, V, K, H, ...), None where not derivable.

    Checks after a failed rank check reason about the tensor as the obvious fix would present it (a
    [B, 1, D] `mixed_qkv` is read as [B, D], a [1, 1, H, 1] `A_log` as [H]), so one cause gives one
    diagnostic rather than a cascade.
    """

    call: PackedDecodeCall
    engine: Engine = "sglang"
    mixed_qkv: TensorSpec | None = None
    a: TensorSpec | None = None
    b: TensorSpec | None = None
    A_log: TensorSpec | None = None
    dt_bias: TensorSpec | None = None
    indices: TensorSpec | None = None
    B: int | None = None
    HV: int | None = None
    V: int | None = None
    K: int | None = None
    S: int | None = None
    qkv_dim: int | None = None
    H: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def build(cls, call: PackedDecodeCall, engine: Engine = "sglang") -> "CallContext":
        ctx = cls(call=call, engine=engine)
        ctx.mixed_qkv = _squeezed(call.mixed_qkv, 2)
        ctx.a = _squeezed(call.a, 2)
        ctx.b = _squeezed(call.b, 2)
        ctx.A_log = _squeezed(call.A_log, 1)
        ctx.dt_bias = _squeezed(call.dt_bias, 1)
        ctx.indices = _squeezed(call.ssm_state_indices, 1)
        if ctx.mixed_qkv is not None:
            ctx.B = ctx.mixed_qkv.shape[0]
            ctx.qkv_dim = ctx.mixed_qkv.shape[1]
        state = call.initial_state
        if state.ndim >= 3:
            ctx.HV, ctx.V, ctx.K = state.shape[-3:]
        if state.ndim == 4:
            ctx.S = state.shape[0]
        elif state.ndim == 5:  # the stacked [layers, slots, HV, V, K] pool: one layer's view has shape[1] slots
            ctx.S = state.shape[1]
        ctx.H = ctx.infer_heads(ctx.qkv_dim)
        return ctx

    @property
    def variant(self) -> Variant:
        return self.call.variant

    @property
    def state(self) -> TensorSpec:
        return self.call.initial_state

    def infer_heads(self, width: int | None, value_heads: int | None = None) -> int | None:
        """H as the wrapper infers it from a `mixed_qkv` width (and the pool's HV unless given), or None."""
        hv = self.HV if value_heads is None else value_heads
        if width is None or hv is None or self.V is None or not self.K:
            return None
        qk_dim = width - hv * self.V
        if qk_dim <= 0 or qk_dim % 2 or (qk_dim // 2) % self.K:
            return None
        heads = qk_dim // 2 // self.K
        return heads if heads > 0 and hv % heads == 0 else None

    @property
    def G(self) -> int | None:
        return self.HV // self.H if self.H and self.HV else None

    def bindings(self) -> dict[str, int]:
        names = ("B", "H", "HV", "K", "V", "S")
        return {n: getattr(self, n) for n in names if getattr(self, n) is not None}
