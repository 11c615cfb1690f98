"""A packed-decode kernel call, described by TensorSpecs, and the quantities the wrapper derives from it."""

from __future__ import annotations

from dataclasses import field
from typing import Any, Final, Literal

from ..base.records import dataclass
from ..base.tensor_spec import TensorSpec
from ..base.variants import VariantName, variant_spec
from ..engines import profiles as engines
from ..engines.profiles import ENGINE_NAMES, SGLANG_0_5_23, EngineProfile, profile_for

Variant = VariantName
# An engine as callers name it: "sglang", "vllm", "vllm@0.28", or an EngineProfile.
Engine = str | EngineProfile
Origin = Literal["engine", "direct"]
ENGINES: tuple[str, ...] = ENGINE_NAMES
# CUDA caps grid dimensions 1 and 2 at 65535; sglang's GDN launch puts B*HV there.
GRID_DIM_LIMIT: Final = engines.GRID_DIM_LIMIT
# ... and grid dimension 0 at 2**31 - 1: sglang's CUDA KDA kernel puts B*HV there.
GRID_X_LIMIT: Final = engines.GRID_X_LIMIT
ARGUMENTS: tuple[str, ...] = (
    "mixed_qkv", "a", "b", "A_log", "dt_bias", "scale", "initial_state", "out", "ssm_state_indices",
)
TENSOR_ARGUMENTS: tuple[str, ...] = tuple(a for a in ARGUMENTS if a != "scale")


@dataclass(slots=True, unsafe_hash=True)
class PackedDecodeCall:
    """The arguments of one `fused_recurrent_*_packed_decode` call.

    A value, like `TensorSpec`: never changed after construction; slots and not `frozen` for the same reason
    (the runtime guard builds one per checked call)."""

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

    def tensors(self) -> dict[str, TensorSpec]:
        """The tensor arguments by name, in the API's order (a new dict per call)."""
        return {"mixed_qkv": self.mixed_qkv, "a": self.a, "b": self.b, "A_log": self.A_log,
                "dt_bias": self.dt_bias, "initial_state": self.initial_state, "out": self.out,
                "ssm_state_indices": self.ssm_state_indices}

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"variant": self.variant}
        data.update({name: spec.to_dict() for name, spec in self.tensors().items()})
        data["scale"] = self.scale
        data["use_qk_l2norm_in_kernel"] = self.use_qk_l2norm_in_kernel
        if variant_spec(self.variant).has_lower_bound:
            data["lower_bound"] = self.lower_bound
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PackedDecodeCall:
        tensors = {name: TensorSpec.from_dict(data[name]) for name in TENSOR_ARGUMENTS}
        return cls(
            scale=data.get("scale"),
            use_qk_l2norm_in_kernel=bool(data.get("use_qk_l2norm_in_kernel", False)),
            lower_bound=data.get("lower_bound"),
            variant=data.get("variant", "gdn"),
            **tensors,
        )


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
    engine: str = "sglang"  # the profile's name; `profile` holds the engine's facts
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
    profile: EngineProfile = SGLANG_0_5_23
    # Whose call this is: "engine" (a deployment's expected call, a recorded or guarded engine call), where the
    # engine's pool conventions hold (slot 0 reserved on sglang); "direct" (a user calling the kernel or
    # `check_packed_decode` on a pool of their own), where they are only worth a note.
    origin: Origin = "engine"

    @classmethod
    def build(cls, call: PackedDecodeCall, engine: Engine = "sglang", origin: Origin = "engine") -> CallContext:
        # Built once per guarded call: derive everything into locals and construct once (setting a dozen
        # attributes one by one after `__init__` cost as much again); `_squeezed` only runs for a wrong rank.
        mixed_qkv: TensorSpec | None
        a: TensorSpec | None
        b: TensorSpec | None
        A_log: TensorSpec | None
        dt_bias: TensorSpec | None
        indices: TensorSpec | None
        mixed_qkv, a, b = call.mixed_qkv, call.a, call.b
        A_log, dt_bias, indices = call.A_log, call.dt_bias, call.ssm_state_indices
        if mixed_qkv.ndim != 2:
            mixed_qkv = _squeezed(mixed_qkv, 2)
        if a.ndim != 2:
            a = _squeezed(a, 2)
        if b.ndim != 2:
            b = _squeezed(b, 2)
        if A_log.ndim != 1:
            A_log = _squeezed(A_log, 1)
        if dt_bias.ndim != 1:
            dt_bias = _squeezed(dt_bias, 1)
        if indices.ndim != 1:
            indices = _squeezed(indices, 1)
        B = qkv_dim = HV = V = K = S = None
        if mixed_qkv is not None:
            B, qkv_dim = mixed_qkv.shape
        state = call.initial_state
        if state.ndim >= 3:
            HV, V, K = state.shape[-3:]
        if state.ndim == 4:
            S = state.shape[0]
        elif state.ndim == 5:  # the stacked [layers, slots, HV, V, K] pool: one layer's view has shape[1] slots
            S = state.shape[1]
        profile = profile_for(engine)
        ctx = cls(call, profile.name, mixed_qkv, a, b, A_log, dt_bias, indices, B, HV, V, K, S, qkv_dim,
                  profile=profile, origin=origin)
        ctx.H = ctx.infer_heads(qkv_dim)
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

    def kda_cuda_misses(self) -> list[str] | None:
        """What keeps the engine's CUDA KDA decode kernel from taking this call (sglang 0.5.23's `covered()`):
        [] when it takes it (Triton is skipped), None when the question does not arise (a GDN call, an engine
        whose KDA wrapper always runs Triton, the switch off: `use_qk_l2norm_in_kernel=False`, unknown dims)."""
        fast = self.profile.decode_of(self.variant).fast_path
        if fast is None or self.HV is None or self.V is None or self.K is None:
            return None
        c = self.call
        if fast.requires_l2norm and not c.use_qk_l2norm_in_kernel:
            return None  # only the l2norm path has the switch
        misses = []
        if (self.B or 0) < fast.min_batch:
            misses.append(f"B={self.B} < {fast.min_batch}")
        if (self.K, self.V) != fast.head_dims:
            misses.append(f"K, V = {self.K}, {self.V} (needs {fast.head_dims[0]}, {fast.head_dims[1]})")
        for names, want in ((("mixed_qkv", "a", "b", "out"), fast.activation_dtype),
                            (("A_log", "dt_bias"), fast.param_dtype), (("initial_state",), fast.state_dtype)):
            for name in names:
                if getattr(c, name).dtype != want:
                    misses.append(f"`{name}` is {getattr(c, name).dtype}")
        if c.ssm_state_indices.dtype != fast.index_dtype:
            misses.append(f"`ssm_state_indices` is {c.ssm_state_indices.dtype}")
        if fast.requires_contiguous_indices and not c.ssm_state_indices.is_contiguous():
            misses.append("`ssm_state_indices` is not contiguous")
        if (fast.requires_dense_state and c.initial_state.ndim == 4
                and c.initial_state.stride[1:] != (self.V * self.K, self.K, 1)):
            misses.append("the inner state is not dense")
        return misses

    @property
    def G(self) -> int | None:
        return self.HV // self.H if self.H and self.HV else None

    def bindings(self) -> dict[str, int]:
        named = (("B", self.B), ("H", self.H), ("HV", self.HV), ("K", self.K), ("V", self.V), ("S", self.S))
        return {name: value for name, value in named if value is not None}
