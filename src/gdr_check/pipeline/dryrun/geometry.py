"""What the dry-run allocates: the per-rank call and pool as deployed, or reduced for the Triton interpreter.

No torch here: the parent describes reductions before anything runs, and tests check them without a child.
Reductions keep K, V, the group size G = HV/H, the dtypes (bf16 becomes fp16: the interpreter returns NaN
for bf16), the layouts and each axis's stride padding, so the kernel's indexing is exercised as deployed.
"""

from __future__ import annotations

from dataclasses import field, replace
from typing import Any

from ...base.records import dataclass
from ...base.tensor_spec import TensorSpec
from ...base.variants import variant_spec
from ...call.packed_call import PackedDecodeCall

INTERPRETER_MAX_BATCH = 4
INTERPRETER_MAX_SLOTS = 8
# State elements per slot (HV*V*K). The interpreter costs ~15 ms per Triton program, and our kernel launches
# ~V/4 programs per (row, value head) at small batch, so K = V = 128 allows two value heads (~4 s a call).
INTERPRETER_MAX_STATE_ELEMENTS = 1 << 15
# Above this, only three layers of sglang's stacked pool are allocated (same strides; the view keeps a
# neighbouring layer on each side, so writes past it are still caught).
MAX_STACKED_POOL_BYTES = {"interpreter": 64 << 20, "cuda": 2 << 30}


@dataclass(frozen=True)
class Dims:
    B: int
    S: int
    H: int
    HV: int
    K: int
    V: int

    @classmethod
    def of(cls, call: PackedDecodeCall) -> Dims:
        S, HV, V, K = call.initial_state.shape
        B, width = call.mixed_qkv.shape
        return cls(B=B, S=S, H=(width - HV * V) // 2 // K, HV=HV, K=K, V=V)

    def to_dict(self) -> dict[str, int]:
        return {"B": self.B, "S": self.S, "H": self.H, "HV": self.HV, "K": self.K, "V": self.V}


@dataclass(frozen=True)
class Change:
    """One reduced size or substituted dtype, e.g. ("batch B", 8, 4)."""

    what: str
    before: Any
    after: Any

    def text(self) -> str:
        return f"{self.what} {self.before} -> {self.after}"

    def to_dict(self) -> dict[str, Any]:
        return {"what": self.what, "before": self.before, "after": self.after}


@dataclass(frozen=True)
class Geometry:
    """The call to launch, and the stacked pool its `initial_state` is a view of (sglang) or None."""

    call: PackedDecodeCall
    pool: TensorSpec | None
    layer: int  # the pool layer `initial_state` views
    pool_layers: int  # layers of the deployed stacked pool (`pool` may hold fewer)
    dims: Dims
    deployed: Dims
    reductions: tuple[Change, ...] = ()
    substitutions: tuple[Change, ...] = ()
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {
            "dims": self.dims.to_dict(),
            "deployed_dims": self.deployed.to_dict(),
            "call": self.call.to_dict(),
            "pool": None if self.pool is None else self.pool.to_dict(),
            "pool_layer": self.layer if self.pool is not None else None,
            "pool_layers": self.pool_layers,
            "reductions": [c.to_dict() for c in self.reductions],
            "substitutions": [c.to_dict() for c in self.substitutions],
            "notes": list(self.notes),
        }


def restrided(spec: TensorSpec, shape: tuple[int, ...], dtype: str | None = None) -> TensorSpec:
    """`spec` with a new shape, keeping each axis's padding beyond the dense extent of the axes inside it.

    A contiguous spec stays contiguous and a padded slot pitch stays padded by the same number of elements.
    Only row-major-ordered layouts are resized; the contract engine refuses the others (GDR2xx) before a
    dry-run launches.
    """
    dtype = dtype or spec.dtype
    if tuple(shape) == spec.shape:
        return replace(spec, dtype=dtype)
    strides = [0] * len(shape)
    for axis in reversed(range(len(shape))):
        if axis == len(shape) - 1:
            strides[axis] = spec.stride[axis]
            continue
        dense = spec.stride[axis + 1] * spec.shape[axis + 1]
        padding = max(spec.stride[axis] - dense, 0)
        strides[axis] = strides[axis + 1] * shape[axis + 1] + padding
    return TensorSpec(tuple(shape), tuple(strides), dtype, spec.device, None, None, spec.offset)


def stacked_pool(call: PackedDecodeCall, pools: dict[str, TensorSpec]) -> TensorSpec | None:
    """sglang's [layers, S, HV, V, K] pool when `initial_state` is one layer's view of it."""
    pool = pools.get("ssm_pool")
    state = call.initial_state
    if pool is None or pool.ndim != 5 or pool.shape[1:] != state.shape or pool.stride[1:] != state.stride:
        return None
    return pool


def _reduced_heads(dims: Dims) -> tuple[int, int]:
    """(H, HV) with the group size kept and HV*V*K within the interpreter budget (at least one key head)."""
    group = dims.HV // dims.H if dims.H else 1
    per_key_head = group * dims.V * dims.K
    H = max(1, min(dims.H, INTERPRETER_MAX_STATE_ELEMENTS // per_key_head))
    return H, H * group


def _call_with(call: PackedDecodeCall, dims: Dims, substitute: dict[str, str]) -> PackedDecodeCall:
    """The call resized to `dims` (same layouts), with dtypes mapped through `substitute`."""
    B, S, H, HV, K, V = dims.B, dims.S, dims.H, dims.HV, dims.K, dims.V
    gate = variant_spec(call.variant).gate_width(HV, K)
    shapes = {
        "mixed_qkv": (B, 2 * H * K + HV * V),
        "a": (B, gate),
        "b": (B, HV),
        "A_log": (HV,),
        "dt_bias": (gate,),
        "initial_state": (S, HV, V, K),
        "out": (B, 1, HV, V),
        "ssm_state_indices": (B,),
    }

    def resized(name: str) -> TensorSpec:
        spec: TensorSpec = getattr(call, name)
        shape = shapes[name] if spec.ndim == len(shapes[name]) else spec.shape
        return restrided(spec, shape, substitute.get(spec.dtype, spec.dtype))

    return replace(call, mixed_qkv=resized("mixed_qkv"), a=resized("a"), b=resized("b"), A_log=resized("A_log"),
                   dt_bias=resized("dt_bias"), initial_state=resized("initial_state"), out=resized("out"),
                   ssm_state_indices=resized("ssm_state_indices"))


def launch_geometry(call: PackedDecodeCall, pools: dict[str, TensorSpec], *, interpreter: bool) -> Geometry:
    """The call and pool to allocate: as deployed on a GPU; reduced, and bf16 as fp16, under the interpreter."""
    deployed = Dims.of(call)
    dims = deployed
    reductions: list[Change] = []
    substitutions: list[Change] = []
    notes: list[str] = []
    substitute: dict[str, str] = {}
    if interpreter:
        B = min(deployed.B, INTERPRETER_MAX_BATCH)
        S = min(deployed.S, INTERPRETER_MAX_SLOTS)
        H, HV = _reduced_heads(deployed)
        dims = Dims(B=B, S=S, H=H, HV=HV, K=deployed.K, V=deployed.V)
        for what, before, after in (("batch B", deployed.B, B), ("slots S", deployed.S, S),
                                    ("key heads H", deployed.H, H), ("value heads HV", deployed.HV, HV)):
            if before != after:
                reductions.append(Change(what, before, after))
        if (H, HV) != (deployed.H, deployed.HV):
            notes.append(f"the interpreter run is at reduced head count: H {deployed.H} -> {H}, HV {deployed.HV} "
                         f"-> {HV} (G={HV // H}, K={deployed.K}, V={deployed.V} and the layouts kept)")
        substitute = {"bfloat16": "float16"}
        for name, spec in call.tensors().items():
            if spec.dtype in substitute:
                substitutions.append(Change(f"`{name}`", spec.dtype, substitute[spec.dtype]))
    launched = _call_with(call, dims, substitute)

    full_pool = stacked_pool(call, pools)
    pool, layer, layers = None, 0, 0
    if full_pool is not None:
        layers = full_pool.shape[0]
        shape = (layers, dims.S, dims.HV, dims.V, dims.K)
        pool = restrided(full_pool, shape, substitute.get(full_pool.dtype, full_pool.dtype))
        budget = MAX_STACKED_POOL_BYTES["interpreter" if interpreter else "cuda"]
        if layers > 3 and pool.stride[0] * layers * pool.itemsize > budget:
            pool = TensorSpec((3, *pool.shape[1:]), pool.stride, pool.dtype, pool.device)
            layer = 1
            notes.append(f"allocated 3 of the {layers} layers of the stacked pool (same strides); the state is "
                         f"the middle one")
        else:
            layer = layers // 2
        launched = replace(launched, initial_state=replace(launched.initial_state,
                                                           offset=layer * pool.stride[0]))
    return Geometry(call=launched, pool=pool, layer=layer, pool_layers=layers, dims=dims, deployed=deployed,
                    reductions=tuple(reductions), substitutions=tuple(substitutions), notes=tuple(notes))
