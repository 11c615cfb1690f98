"""Compare a recorded packed-decode call with the call the engine makes for a model, and name each cause.

The contract (GDR2xx) says whether the kernel accepts a call; this comparison says whether the call is the
one the model needs. Some wrong calls pass every wrapper check (docs/kernel-contract.md §7.1): `qkvz` passed as
`mixed_qkv` on a G = 2 model is read as H = 2·H_l heads and runs. Differences are explained from the numbers:
each per-head argument is matched to the TP size at which a rank holds that many heads, the majority gives
the TP the call was sized for, and the odd ones out are named.

Rules GDR160-GDR171 (scope "model"; reported by `gdr-check call --model`):
    GDR160  any other difference          GDR166  state dtype vs the engine default
    GDR161  arguments sharded by two TPs  GDR167  other dtypes vs the engine
    GDR162  an argument not sharded       GDR168  `use_qk_l2norm_in_kernel` off
    GDR163  the whole call for another TP GDR169  `scale` is not K**-0.5
    GDR164  qkvz passed as qkv            GDR170  GDN kernel for a KDA model (or back)
    GDR165  an argument in another rank   GDR171  pool stored [HV, K, V]
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import field
from typing import TYPE_CHECKING, Any

from ..base.records import dataclass
from ..base.registry import RULE_SET, Finding, Rule, declare
from ..base.report import Diagnostic, Location, Severity
from ..base.tensor_spec import TensorSpec, contiguous_strides
from ..base.variants import variant_spec
from ..call.packed_call import TENSOR_ARGUMENTS, CallContext, PackedDecodeCall
from ..engines.profiles import STATE_DTYPES, profile_for
from .examples import CompareExample, qwen3_next_config, tensor

if TYPE_CHECKING:
    from ..models.description import LinearAttentionModel

MODEL = "model"
COMPARE_ENGINES = "sglang 0.5.23 and vLLM (what each passes for the model, docs/models.md §6-7)."
_PER_ROW = ("mixed_qkv", "a", "b", "out", "ssm_state_indices")


# -- rules ---------------------------------------------------------------------------------------------------------
ARGUMENT_DIFFERS = declare(
    "GDR160", "arguments-differing-from-model", scope=MODEL,
    summary="a recorded argument differs from what the model needs",
    message="`{argument}` is {recorded}, but `{model}` at tp={tp} expects {expected}",
    explanation=(
        "The recorded call was compared argument by argument with the call the engine makes for this model "
        "and TP size (batch and slot count taken from the recording). This argument differs in a way none of "
        "the more specific rules (GDR161-GDR171) explains; the notes list what the numbers fit."
    ),
    causes=("a tensor built from another model's config", "a hand-written call with a transposed or padded view"),
    fixes=("build the argument from the model's config (per-rank heads: H/tp, HV/tp)",),
    engines=COMPARE_ENGINES,
    example=CompareExample({"initial_state": tensor(9, 2, 8, 16)}, "a pool with V=8 for a V=16 model",
                           also=("GDR216", "GDR218")),
)

SHARDED_BY_OTHER_TP = declare(
    "GDR161", "arguments-sharded-by-different-tp", scope=MODEL,
    summary="per-head arguments were sharded for different TP sizes",
    message="`{arguments}` sharded by a different TP than {reference} ({group_fits} tp={group_tp}, "
            "{reference_fits} tp={reference_tp})",
    explanation=(
        "Every per-head argument of one call must hold the same rank's heads: `a`, `b`, `A_log`, `dt_bias`, "
        "`out` and the pool HV/tp value heads, `mixed_qkv` the width 2·H/tp·K + HV/tp·V. Here one group "
        "holds the head count of another TP size. The wrapper derives HV from the pool, so it reports the "
        "gates or the decay parameters as the wrong size (GDR214/GDR215) when it notices at all; the cause is "
        "a projection or parameter sharded with another TP group (e.g. attention TP vs a data-parallel "
        "attention layout), or a replicated projection sliced by hand."
    ),
    causes=("the `ba` projection sharded over a different process group than the state pool",
            "a pool sized with the global TP while the layer runs with the attention TP"),
    fixes=("shard every per-head argument with the TP size the layer runs at",),
    engines=COMPARE_ENGINES,
    example=CompareExample({"mixed_qkv": tensor(8, 192)}, "`mixed_qkv` of tp=2, the rest of tp=4",
                           config=qwen3_next_config(linear_num_key_heads=4, linear_num_value_heads=16), tp=4),
)

NOT_SHARDED = declare(
    "GDR162", "unsharded-arguments", scope=MODEL,
    summary="an argument has the global (unsharded) size while the rest are per-rank",
    message="`{arguments}` not sharded ({detail})",
    explanation=(
        "With tensor parallelism each rank holds H/tp key heads and HV/tp value heads. This argument has the "
        "global count, so it was built from an unsharded projection or parameter, or sized from the config "
        "without dividing by tp. A global-width `mixed_qkv` with a per-rank pool makes the wrapper infer a "
        "wrong H (Qwen3-Next tp=2 reports H=24, HV=16); a global `A_log` fails the size check."
    ),
    causes=("a replicated projection used as if it were column-parallel", "parameters loaded without the TP shard"),
    fixes=("slice this rank's heads, or shard the projection/parameter that produces the argument",),
    engines=COMPARE_ENGINES,
    example=CompareExample({"mixed_qkv": tensor(8, 192)}, "the global `mixed_qkv` of a G=4 model",
                           config=qwen3_next_config(linear_num_value_heads=8)),
)

CALL_FOR_OTHER_TP = declare(
    "GDR163", "calls-sized-for-other-tp", scope=MODEL,
    summary="the recorded call is sized for another TP size",
    message="the call is sized for tp={call_tp}, not tp={tp}",
    explanation=(
        "The per-head arguments agree with each other but not with the TP size given for the comparison. "
        "Either the engine ran at another TP size than the deployment under check, or the layer was built "
        "with a TP size that differs from the one the engine runs at."
    ),
    fixes=("compare with the TP size the engine actually ran at (`--tp`)",),
    engines=COMPARE_ENGINES,
    example=CompareExample({"mixed_qkv": tensor(8, 128), "a": tensor(8, 4), "b": tensor(8, 4), "A_log": tensor(4),
                            "dt_bias": tensor(4), "initial_state": tensor(9, 4, 16, 16), "out": tensor(8, 1, 4, 16)},
                           "every argument sized for tp=1"),
)

QKVZ_AS_QKV = declare(
    "GDR164", "qkvz-passed-as-qkv", scope=MODEL,
    summary="`mixed_qkv` holds the qkvz projection (z included)",
    message="qkvz passed instead of qkv (width {width} includes z; {inference})",
    explanation=(
        "The kernel takes the conv1d output of [q | k | v], width 2·H·K + HV·V per rank, and infers H from "
        "that width. The `in_proj_qkvz` output adds HV·V channels of z, so the kernel infers H' = "
        "(width − HV·V)/2/K = H + HV·V/(2K). On a model with G = HV/H = 2 and K = V (Qwen3-Next, Qwen3.5-4B/9B/"
        "35B-A3B) that is exactly 2·H, and HV % 2H == 0, so every wrapper check passes: the kernel reads q, k "
        "and v at wrong offsets and returns garbage (docs/kernel-contract.md §7.1). Only a comparison with the "
        "model's H catches it. Reported when the width is [q | k | v] plus z of the TP the call's other "
        "arguments are sized for; the qkvz width of another TP is that TP's shard, reported as GDR161 (or GDR162) "
        "with a note that it includes z."
    ),
    causes=("the projection output passed to the kernel instead of the conv output",
            "z not split off before the conv (Qwen3-Next's fused, interleaved qkvz)"),
    fixes=("pass the conv1d output of [q | k | v] only; split z off the qkvz projection first",),
    engines=COMPARE_ENGINES,
    example=CompareExample({"mixed_qkv": tensor(8, 96)}, "the qkvz projection, z included"),
)

OTHER_RANK = declare(
    "GDR165", "arguments-with-other-ranks", scope=MODEL,
    summary="an argument has another number of dimensions than the kernel takes",
    message="`{argument}` has shape {recorded} instead of {expected} ({how})",
    explanation=(
        "The elements may be right, but the kernel reads each argument with a fixed rank: `A_log` and "
        "`dt_bias` 1-D, the gates and `mixed_qkv` 2-D, `out` [B, 1, HV, V], the pool [S, HV, V, K]. Kimi "
        "stores `A_log` as [1, 1, H, 1] in its checkpoint; the engines flatten it."
    ),
    fixes=("reshape the argument to the kernel's layout (a view, no copy, when it is contiguous)",),
    engines=COMPARE_ENGINES,
    example=CompareExample({"A_log": tensor(1, 1, 2, 1)}, "`A_log` in its checkpoint shape", also=("GDR205",)),
)

STATE_DTYPE = declare(
    "GDR166", "state-dtypes-differing-from-engine-default", severity="warning", scope=MODEL,
    summary="the state pool's dtype is not the engine's default for this model",
    message="`initial_state` is {recorded} where {engine} keeps the state of `{model}` in {expected}",
    explanation=(
        "sglang keeps the GDN/KDA state in float32 unless `mamba_ssm_dtype` (config) or "
        "`SGLANG_MAMBA_SSM_DTYPE` says otherwise; vLLM follows the model dtype for Qwen3-Next, the config's "
        "`mamba_ssm_dtype` for Qwen3.5/3.6 and float32 for KDA (docs/models.md §7). A 16-bit state rounds every "
        "step (GSM8K 0.955 fp32 vs 0.945 bf16 reported on Qwen3-Next). Reported as a note when the recorded "
        "state is more precise than the default."
    ),
    fixes=(("serve with the engine's state dtype flag (sglang `--mamba-ssm-dtype`, vLLM "
            "`--mamba-ssm-cache-dtype`) set to the expected dtype"),
           "if the dtype is deliberate, compare with `--state-dtype`"),
    engines=COMPARE_ENGINES,
    example=CompareExample({"initial_state": tensor(9, 2, 16, 16, dtype="bfloat16")}),
)

OTHER_DTYPES = declare(
    "GDR167", "dtypes-differing-from-engine", severity="warning", scope=MODEL,
    summary="arguments have other dtypes than the engine passes",
    message="`{arguments}` {verb} {recorded} where {engine} passes {expected}",
    explanation=(
        "The engines pass bf16 activations for these models, `A_log` as an fp32 parameter, `dt_bias` in the "
        "parameter dtype (bf16 for Qwen GDN, fp32 for KDA) and int32 slot indices. The kernel converts what "
        "it reads to fp32, so another dtype runs, but it means the tensor came from somewhere else than the "
        "engine's usual path (a model served in fp16, a parameter that was cast)."
    ),
    fixes=("check where the argument is produced; serve the model in its checkpoint dtype",),
    engines=COMPARE_ENGINES,
    example=CompareExample({"out": tensor(8, 1, 2, 16, dtype="float32")}),
)

L2NORM_OFF = declare(
    "GDR168", "qk-l2norm-flags-differing-from-model", scope=MODEL,
    summary="`use_qk_l2norm_in_kernel` is not what the engine passes for the model",
    message="`use_qk_l2norm_in_kernel` is {recorded}, but {engine} decodes `{model}` with {expected}",
    explanation=(
        "GDN and KDA models normalise q and k per head; the engines do it inside the kernel by passing "
        "`use_qk_l2norm_in_kernel=True`. The flag defaults to False, and the wrong value gives silently "
        "wrong output (magnitude about 7.6 instead of 0.05 in one test, docs/kernel-contract.md U15)."
    ),
    fixes=("pass `use_qk_l2norm_in_kernel=True`",),
    engines=COMPARE_ENGINES,
    example=CompareExample({"use_qk_l2norm_in_kernel": False}),
    supersedes=("GDR250",),  # the contract's generic version of the same cause
)

SCALE_DIFFERS = declare(
    "GDR169", "scales-differing-from-model", scope=MODEL,
    summary="`scale` is not the model's K**-0.5",
    message="`scale` is {recorded} instead of K**-0.5 = {expected} ({cause})",
    explanation=(
        "The engines pass `head_k_dim ** -0.5` as the query scale. Another value runs and silently changes "
        "every output; the usual mistakes are the full-attention `head_dim`, the value head dim, or no "
        "scaling at all."
    ),
    fixes=("pass `scale = linear_key_head_dim ** -0.5`",),
    engines=COMPARE_ENGINES,
    example=CompareExample({"scale": 0.5}),
    supersedes=("GDR255",),  # the contract's generic version of the same cause
)

KERNEL_VARIANT = declare(
    "GDR170", "kernel-variants-differing-from-model", scope=MODEL,
    summary="the GDN kernel was called for a KDA model, or the KDA kernel for a GDN model",
    message="the {recorded} kernel was called for `{model}`, a {expected} model",
    explanation=(
        "GDN (Qwen3-Next, Qwen3.5/3.6) has one decay gate per value head; KDA (Kimi-Linear) has one per key "
        "channel, so `a` is [B, HV·K] and `dt_bias` [HV·K]. The two kernels take the same argument names but "
        "read the gates differently."
    ),
    fixes=("call `fused_recurrent_kda_packed_decode` for KDA models and "
           "`fused_recurrent_gated_delta_rule_packed_decode` for GDN models",),
    engines=COMPARE_ENGINES,
    example=CompareExample({"variant": "kda"}, "the KDA kernel for a GDN model", also=("GDR221", "GDR224")),
)

POOL_KV_ORDER = declare(
    "GDR171", "state-pools-in-kv-order", scope=MODEL,
    summary="the state pool is laid out [HV, K, V] instead of [HV, V, K]",
    message="`initial_state` is laid out [S, HV, K, V] {recorded}; the kernel reads [S, HV, V, K] {expected}",
    explanation=(
        "FLA's default state layout and older vLLM are [HV, K, V]; the packed kernel reads [HV, V, K]. When "
        "K == V the shapes agree and nothing can tell them apart from metadata (docs/kernel-contract.md §7.1); "
        "here K != V, so the swapped head dims show it."
    ),
    fixes=("allocate the pool as [S, HV, V, K] (FLA `state_v_first=True`)",),
    engines=COMPARE_ENGINES,
    example=CompareExample({"initial_state": tensor(9, 2, 16, 32)}, "a [S, HV, K, V] pool for K=16, V=32",
                           config=qwen3_next_config(linear_value_head_dim=32), also=("GDR216",)),
)


# -- the model side ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelGeometry:
    """What the comparison needs from a model: global head counts and dims, and how to name it."""

    name: str
    kind: str  # "gdn" or "kda"
    H: int
    HV: int
    K: int
    V: int
    attention_head_dim: int | None = None  # the full-attention head_dim, a common wrong scale source

    @classmethod
    def from_model(cls, model: LinearAttentionModel, name: str, attention_head_dim: int | None = None
                   ) -> ModelGeometry:
        """The geometry of a described model whose head counts and dims are known (one with an expected call)."""
        H, HV, K, V = model.num_k_heads, model.num_v_heads, model.head_k_dim, model.head_v_dim
        if H is None or HV is None or K is None or V is None:
            raise ValueError(f"{name}: the model's head counts and dims are not all known")
        return cls(name=name, kind=model.kind, H=H, HV=HV, K=K, V=V, attention_head_dim=attention_head_dim)

    def tp_sizes(self) -> list[int]:
        common = math.gcd(self.H, self.HV)
        return [t for t in range(1, common + 1) if common % t == 0]

    def tp_of(self, value_heads: int | None) -> int | None:
        """The TP size at which one rank holds `value_heads` value heads, if there is one."""
        if not value_heads or value_heads <= 0 or self.HV % value_heads:
            return None
        tp = self.HV // value_heads
        return tp if self.H % tp == 0 else None

    def width(self, tp: int, *, with_z: bool = False) -> int:
        H_l, HV_l = self.H // tp, self.HV // tp
        return 2 * H_l * self.K + HV_l * self.V + (HV_l * self.V if with_z else 0)


# -- the result ----------------------------------------------------------------------------------------------------
@dataclass
class ArgumentRow:
    """One argument, recorded against expected; `differences` names what differs (shape, dtype, layout, value)."""

    argument: str
    recorded: Any
    expected: Any
    differences: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        def plain(value: Any) -> Any:
            return value.to_dict() if isinstance(value, TensorSpec) else value

        return {"argument": self.argument, "recorded": plain(self.recorded), "expected": plain(self.expected),
                "differences": list(self.differences)}


@dataclass
class Comparison:
    rows: list[ArgumentRow]
    diagnostics: list[Diagnostic] = field(default_factory=list)
    causes: dict[str, list[str]] = field(default_factory=dict)  # argument -> codes that name its cause

    @property
    def explained(self) -> set[str]:
        return set(self.causes)

    @property
    def supersedes(self) -> set[str]:
        """Contract codes that a finding here replaces (same cause, said with the model's numbers)."""
        return {old for d in self.diagnostics for old in RULE_SET.rules[d.code].supersedes}

    def to_dict(self) -> dict[str, Any]:
        return {"arguments": [row.to_dict() for row in self.rows],
                "diagnostics": [d.to_dict() for d in self.diagnostics]}


# -- helpers -------------------------------------------------------------------------------------------------------
def _shape(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(map(str, shape)) + "]"


def _inner_dense(spec: TensorSpec) -> bool:
    """Everything but the leading (row or slot) axis is dense: the pitch of axis 0 is free."""
    if spec.ndim <= 1:
        return spec.ndim == 0 or spec.shape[0] <= 1 or spec.stride[0] == 1
    inner = TensorSpec(spec.shape[1:], spec.stride[1:], spec.dtype, spec.device)
    return inner.is_contiguous()


def _expected_here(expected: PackedDecodeCall, ctx: CallContext) -> dict[str, TensorSpec]:
    """The expected tensors with the recording's batch and slot count (runtime sizes, not model properties)."""
    tensors = dict(expected.tensors())
    for name, spec in tensors.items():
        size = ctx.B if name in _PER_ROW else ctx.S if name == "initial_state" else None
        if size is not None and spec.ndim:
            shape = (size, *spec.shape[1:])
            tensors[name] = TensorSpec(shape, contiguous_strides(shape), spec.dtype, spec.device)
    return tensors


def _precision(dtype: str) -> int:
    return {"float64": 3, "float32": 2, "bfloat16": 1, "float16": 1}.get(dtype, 0)


def _names(names: list[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)


class _Comparer:
    def __init__(self, recorded: PackedDecodeCall, expected: PackedDecodeCall, model: ModelGeometry, tp: int,
                 engine: str, state_dtype_reason: str | None, contract_flagged: frozenset[str]) -> None:
        self.profile = profile_for(engine)
        self.recorded, self.model, self.tp, self.engine = recorded, model, tp, self.profile.name
        self.expected_call = expected
        self.ctx = CallContext.build(recorded, self.profile)
        self.expected = _expected_here(expected, self.ctx)
        self.state_dtype_reason = state_dtype_reason
        self.contract_flagged = contract_flagged
        self.diagnostics: list[Diagnostic] = []
        self.explained: set[str] = set()
        self.width_with_z = False  # `mixed_qkv` is another TP's qkvz: its GDR161/GDR162 says so
        self.causes: dict[str, list[str]] = {}

    # -- output helpers ------------------------------------------------------------------------------------------
    def emit(self, rule: Rule, values: dict[str, Any], *, argument: str | None = None,
             notes: list[str] | None = None, fixes: list[str] | None = None, severity: Severity | None = None,
             covers: list[str] | tuple[str, ...] | None = None) -> None:
        for name in covers or ():  # shape causes only: a dtype or flag finding explains no shape error
            self.causes.setdefault(name, []).append(rule.code)
        finding = Finding(values, fixes=fixes or [], notes=notes or [], argument=argument, severity=severity)
        diagnostic = rule.diagnostic(finding)
        diagnostic.bindings = {"tp": self.tp, **diagnostic.bindings}
        self.diagnostics.append(diagnostic)

    def rows(self) -> list[ArgumentRow]:
        rows: list[ArgumentRow] = []
        for name in TENSOR_ARGUMENTS:
            got, want = self.recorded.tensors()[name], self.expected[name]
            differences = []
            if got.shape != want.shape:
                differences.append("shape")
            if got.dtype != want.dtype:
                differences.append("dtype")
            if _inner_dense(want) and not _inner_dense(got):
                differences.append("layout")
            rows.append(ArgumentRow(name, got, want, tuple(differences)))
        scalars: list[tuple[str, Any, Any]] = [
            ("scale", self.recorded.scale, self.expected_call.scale),
            ("use_qk_l2norm_in_kernel", self.recorded.use_qk_l2norm_in_kernel,
             self.expected_call.use_qk_l2norm_in_kernel),
            ("variant", self.recorded.variant, self.expected_call.variant),
        ]
        for name, got, want in scalars:
            same = got == want or (name == "scale" and self._scale_matches(got, want))
            rows.append(ArgumentRow(name, got, want, () if same else ("value",)))
        return rows

    @staticmethod
    def _scale_matches(got: Any, want: Any) -> bool:
        return (isinstance(got, (int, float)) and not isinstance(got, bool) and isinstance(want, float)
                and math.isclose(got, want, rel_tol=1e-5))

    # -- per-head arithmetic -------------------------------------------------------------------------------------
    def value_heads(self, name: str) -> int | None:
        """How many value heads the recorded argument carries (its leading axis aside), or None."""
        ctx, model, call = self.ctx, self.model, self.recorded
        per_key = variant_spec(model.kind).gate_per_key  # KDA gates and dt_bias hold one value per key channel
        if name == "initial_state":
            return call.initial_state.shape[-3] if call.initial_state.ndim >= 3 else None
        if name in ("a", "b"):
            spec = ctx.a if name == "a" else ctx.b
            if spec is None:
                return None
            columns = spec.shape[1]
            if name == "a" and per_key:
                return columns // model.K if columns % model.K == 0 else None
            return columns
        if name in ("A_log", "dt_bias"):
            spec = ctx.A_log if name == "A_log" else ctx.dt_bias
            if spec is None:
                return None
            count = spec.numel()
            if name == "dt_bias" and per_key:
                return count // model.K if count % model.K == 0 else None
            return count
        if name == "out":
            out = call.out
            if out.ndim == 4:
                return out.shape[2]
            rows = ctx.B or 0
            return out.numel() // (rows * model.V) if rows and out.numel() % (rows * model.V) == 0 else None
        return None

    def interpret_width(self, width: int, reference: int) -> tuple[str, int] | None:
        """("qkv" | "qkvz" | "v", tp) that explains a `mixed_qkv` width, preferring the reference TP (then [q | k | v]
        of another TP before its qkvz)."""
        model = self.model
        forms = ["qkv", "qkvz"] if variant_spec(model.kind).fused_z_projection else ["qkv"]
        others = [t for t in model.tp_sizes() if t != reference]
        candidates = [(form, reference) for form in forms] + [(form, t) for form in forms for t in others]
        for form, t in candidates:
            if model.H % t == 0 and model.HV % t == 0 and width == model.width(t, with_z=form == "qkvz"):
                return form, t
        if width == model.HV // reference * model.V:
            return "v", reference
        return None

    # -- analyses --------------------------------------------------------------------------------------------------
    def variant(self) -> bool:
        """False when the wrong kernel was called (the gates are then read with the other kernel's shapes)."""
        if self.recorded.variant == self.model.kind:
            return True
        self.emit(KERNEL_VARIANT, {"recorded": variant_spec(self.recorded.variant).label, "model": self.model.name,
                                   "expected": variant_spec(self.model.kind).label},
                  argument="a", covers=("a", "dt_bias"))
        self.explained.update(("a", "dt_bias"))
        return False

    def ranks(self) -> None:
        for name in TENSOR_ARGUMENTS:
            got, want = self.recorded.tensors()[name], self.expected[name]
            if got.ndim == want.ndim:
                continue
            squeezed_got = tuple(s for s in got.shape if s != 1)
            squeezed_want = tuple(s for s in want.shape if s != 1)
            if name == "A_log" and got.ndim == 4 and got.shape[:2] == (1, 1) and got.shape[3] == 1:
                how = "the checkpoint shape [1, 1, H, 1] of Kimi's `A_log`, not flattened"
            elif squeezed_got == squeezed_want:
                how = "extra size-1 axes" if got.ndim > want.ndim else "a size-1 axis dropped"
            elif got.ndim == 1 and got.numel() == want.numel():
                how = "flattened"
            else:
                how = f"{got.ndim}-D where the kernel takes {want.ndim}-D"
            self.emit(OTHER_RANK, {"argument": name, "recorded": _shape(got.shape), "expected": _shape(want.shape),
                                   "how": how}, argument=name, covers=[name])
            self.explained.add(name)

    def pool_head_dims(self) -> None:
        pool, model = self.recorded.initial_state, self.model
        if pool.ndim < 3:
            return
        dims = tuple(pool.shape[-2:])
        if dims == (model.V, model.K):
            return
        if dims == (model.K, model.V):
            self.emit(POOL_KV_ORDER, {"recorded": _shape(pool.shape), "expected": _shape(self.expected[
                "initial_state"].shape)}, argument="initial_state", covers=["initial_state"],
                notes=[f"`{model.name}` has K={model.K}, V={model.V}: the pool's last two axes are (K, V)"])
        else:
            self.generic("initial_state", [f"the pool's head dims (V, K) = {dims}; `{model.name}` has "
                                           f"(V, K) = ({model.V}, {model.K})"])
        self.explained.add("initial_state")

    def sharding(self, check_gates: bool) -> None:
        model, tp = self.model, self.tp
        names = ["initial_state", "a", "b", "A_log", "dt_bias", "out"]
        if not check_gates:
            names = [n for n in names if n not in ("a", "dt_bias")]
        heads = {name: self.value_heads(name) for name in names}
        fits = {name: model.tp_of(n) for name, n in heads.items() if n is not None}
        votes = Counter(t for t in fits.values() if t is not None)
        reference = tp
        if votes:
            best = max(votes.values())
            leaders = [t for t, count in votes.items() if count == best]
            pool_tp = fits.get("initial_state")
            reference = pool_tp if pool_tp in leaders else tp if tp in leaders else min(leaders)

        width = self.ctx.qkv_dim
        meaning = self.interpret_width(width, reference) if width is not None else None
        if width is not None and meaning is None:
            self.generic("mixed_qkv", self.width_notes(width, reference))
        elif meaning is not None and meaning[0] == "v":
            self.generic("mixed_qkv", [f"width {width} = HV_l*V = {model.HV // reference}*{model.V}: only the v "
                                       f"(or z) block, without q and k"])
        elif meaning is not None and width is not None:  # a meaning is only found for a known width
            form, t = meaning
            if form == "qkvz" and t == reference:  # z included, and nothing else: GDR164
                self.qkvz(width, reference)
            elif form == "qkvz":  # another TP's shard (GDR161/GDR162), which that rank's z widens: said there
                self.width_with_z = True
            fits["mixed_qkv"] = t  # the width still tells which rank's heads it holds
            heads["mixed_qkv"] = model.HV // t

        if (variant_spec(model.kind).fused_ba_projection and heads.get("a") == 2 * (model.HV // reference)
                and fits.get("b") == reference and fits.get("a") != reference):
            fits["a"] = None  # twice the heads of `b`: the fused ba output, not another TP's shard
        for name, count in heads.items():
            if count is not None and fits.get(name) is None and name not in self.explained:
                self.generic(name, self.head_notes(name, count, reference))

        self.report_groups(fits, heads, reference)
        if reference != tp:
            agree = [n for n, t in fits.items() if t == tp]
            notes = [f"every per-head argument fits tp={reference}: H_l={model.H // reference}, "
                     f"HV_l={model.HV // reference} (at tp={tp}: H_l={model.H // tp}, HV_l={model.HV // tp})"]
            if agree:
                notes.append(f"{_names(agree)} fit tp={tp}")
            self.emit(CALL_FOR_OTHER_TP, {"call_tp": reference, "tp": tp}, argument="initial_state", notes=notes,
                      covers=list(fits),
                      fixes=[f"if the engine runs this layer at tp={reference}, compare with `--tp {reference}`; "
                             f"otherwise the layer was built for the wrong TP size"])
            self.explained.update(fits)

    def report_groups(self, fits: dict[str, int | None], heads: dict[str, int | None], reference: int) -> None:
        model = self.model
        odd = {name: t for name, t in fits.items() if t is not None and t != reference}
        groups: list[tuple[list[str], str]] = []  # (arguments, what they fit, as a subject)
        for pair, plural in ((("a", "b"), "gates fit"), (("A_log", "dt_bias"), "decay parameters fit")):
            if all(n in odd for n in pair) and odd[pair[0]] == odd[pair[1]]:
                groups.append((list(pair), plural))
            else:
                groups += [([n], "it fits") for n in pair if n in odd]
        groups += [([name], "it fits") for name in ("mixed_qkv", "out") if name in odd]
        if "initial_state" in odd:
            groups.append((["initial_state"], "pool fits"))
        pool_is_reference = fits.get("initial_state") == reference
        ref_label, ref_fits = ("the pool", "pool fits") if pool_is_reference else ("the other arguments",
                                                                                   "the others fit")
        at_reference = f"at tp={reference} a rank holds HV_l={model.HV // reference}"
        for members, plural in groups:
            arguments = "`/`".join(members)  # inside the template's backticks: `a`/`b`
            t = odd[members[0]]
            notes = [self.carry_note(n, heads[n], t) for n in members]
            if not pool_is_reference or "initial_state" in members:
                notes.append(f"the other per-head arguments fit tp={reference}")
            elif fits.get("initial_state") is not None:
                notes.append(self.carry_note("initial_state", heads["initial_state"], reference))
            fixes = [f"size every per-head argument for the TP the layer runs at (tp={self.tp}: "
                     f"H_l={model.H // self.tp}, HV_l={model.HV // self.tp})"]
            if members == ["mixed_qkv"] and self.width_with_z:
                fixes.append(f"pass the conv1d output of [q | k | v] only, z split off: width "
                             f"{model.width(self.tp)} at tp={self.tp}")
            if t == 1 and reference != 1:
                self.emit(NOT_SHARDED, {"arguments": arguments,
                                        "detail": self.unsharded_detail(members, heads, reference, at_reference)},
                          argument=members[0], notes=notes[len(members):], fixes=fixes, covers=members)
            else:
                self.emit(SHARDED_BY_OTHER_TP, {"arguments": arguments, "reference": ref_label, "group_fits": plural,
                                                "group_tp": t, "reference_fits": ref_fits,
                                                "reference_tp": reference},
                          argument=members[0], notes=notes, fixes=fixes, covers=members)
            self.explained.update(members)

    def carry_note(self, name: str, count: int | None, t: int) -> str:
        if name == "mixed_qkv" and self.width_with_z:
            return (f"`mixed_qkv` has width {self.ctx.qkv_dim} = 2*H_l*K + 2*HV_l*V at tp={t}: q, k, v and z of "
                    f"tp={t} (its [q | k | v] is {self.model.width(t)})")
        if name == "mixed_qkv":
            note = f"`mixed_qkv` has width {self.ctx.qkv_dim} = 2*H_l*K + HV_l*V at tp={t}"
            pool_heads = self.value_heads("initial_state")
            if pool_heads and self.ctx.qkv_dim == pool_heads * self.model.V:
                note += f", or HV_l*V: only the v block of the pool's {pool_heads} heads"
            return note
        return f"`{name}` carries {count} value heads = HV/{t} = {self.model.HV}/{t}"

    def unsharded_detail(self, members: list[str], heads: dict[str, int | None], reference: int,
                         at_reference: str) -> str:
        model = self.model
        if members == ["mixed_qkv"]:
            what = "the global width of q, k, v and z" if self.width_with_z else "the global width"
            return (f"width {self.ctx.qkv_dim} is {what}; at tp={reference} a rank's width is "
                    f"{model.width(reference)}")
        return f"{heads[members[0]]} value heads, the global HV; {at_reference}"

    def width_notes(self, width: int, reference: int) -> list[str]:
        model = self.model
        notes = [f"at tp={reference} `{model.name}` needs width 2*H_l*K + HV_l*V = 2*{model.H // reference}*"
                 f"{model.K} + {model.HV // reference}*{model.V} = {model.width(reference)}"]
        extra = width - model.width(reference)
        if extra > 0:
            notes.append(f"{extra} channels too many: padding, or another projection's block")
        return notes

    def head_notes(self, name: str, count: int, reference: int) -> list[str]:
        model = self.model
        H_l, HV_l = model.H // reference, model.HV // reference
        notes = [f"`{name}` carries {count} value heads; at tp={reference} a rank holds HV_l={HV_l}"]
        if name == "a" and variant_spec(model.kind).fused_ba_projection and count == 2 * HV_l:
            notes.append(f"{count} = 2*HV_l: the fused `ba` projection passed unsplit (b and a together)")
        elif count == H_l and H_l != HV_l:
            notes.append(f"{count} = H_l: sized with the key-head count (`num_k_heads`) instead of the value heads")
        elif name == "a" and not variant_spec(model.kind).gate_per_key and count == HV_l * model.K:
            notes.append("HV_l*K columns: a KDA per-channel gate")
        return notes

    def qkvz(self, width: int, t: int) -> None:
        """GDR164: `width` is [q | k | v] plus z of tp=`t`, the TP the call's other arguments fit."""
        model = self.model
        H_l, HV_l = model.H // t, model.HV // t
        inferred = self.ctx.H
        pool_hv = self.ctx.HV
        if inferred is not None and inferred == 2 * H_l:
            inference = f"inferred H = {inferred} = 2*H_l"
        elif inferred is not None:
            inference = f"inferred H = {inferred}, not H_l = {H_l}"
        else:
            inference = "the wrapper rejects the width"
        notes = [f"width {width} = 2*{H_l}*{model.K} + 2*{HV_l}*{model.V}: q, k, v and z of tp={t}; the kernel "
                 f"needs [q | k | v], width {model.width(t)}"]
        if inferred is not None and pool_hv and pool_hv % inferred == 0:
            notes.append(f"HV={pool_hv} is a multiple of the inferred H={inferred}, so every wrapper check passes "
                         f"and q, k, v are read at wrong offsets (docs/kernel-contract.md §7.1)")
        self.emit(QKVZ_AS_QKV, {"width": width, "inference": inference}, argument="mixed_qkv", notes=notes,
                  covers=["mixed_qkv"])
        self.explained.add("mixed_qkv")

    def generic(self, name: str, notes: list[str]) -> None:
        got, want = self.recorded.tensors()[name], self.expected[name]
        self.emit(ARGUMENT_DIFFERS, {"argument": name, "recorded": got.describe(), "model": self.model.name,
                                     "tp": self.tp, "expected": want.describe()}, argument=name, notes=notes,
                  covers=[name])
        self.explained.add(name)

    def dtypes(self) -> None:
        state_got, state_want = self.recorded.initial_state.dtype, self.expected["initial_state"].dtype
        if state_got != state_want:
            less = _precision(state_got) < _precision(state_want)
            notes = [f"expected {state_want}: {self.state_dtype_reason}"] if self.state_dtype_reason else []
            fixes = [f"if the dtype is deliberate, compare with `--state-dtype {state_got}`"]
            setting = self.profile.state_dtype_setting(state_want) if state_want in STATE_DTYPES else None
            if setting is not None:  # a choice the release's flag has
                fixes.insert(0, f"serve with `{setting}` to get the engine's {state_want} state")
            self.emit(STATE_DTYPE, {"recorded": state_got, "engine": self.engine, "model": self.model.name,
                                    "expected": state_want}, argument="initial_state", notes=notes,
                      fixes=fixes, severity=None if less else "info")
        pairs: dict[tuple[str, str], list[str]] = {}
        for name in TENSOR_ARGUMENTS:
            if name == "initial_state":
                continue
            got, want = self.recorded.tensors()[name].dtype, self.expected[name].dtype
            if got != want:
                pairs.setdefault((got, want), []).append(name)
        for (got, want), names in pairs.items():
            only_indices = names == ["ssm_state_indices"]
            self.emit(OTHER_DTYPES, {"arguments": "`, `".join(names), "verb": "is" if len(names) == 1 else "are",
                                     "recorded": got, "engine": self.engine, "expected": want},
                      argument=names[0], severity="info" if only_indices else None)

    def flags(self) -> None:
        call, model = self.recorded, self.model
        if call.use_qk_l2norm_in_kernel != self.expected_call.use_qk_l2norm_in_kernel:
            self.emit(L2NORM_OFF, {"recorded": call.use_qk_l2norm_in_kernel, "engine": self.engine,
                                   "model": model.name, "expected": self.expected_call.use_qk_l2norm_in_kernel},
                      argument="use_qk_l2norm_in_kernel")
        scale, expected = call.scale, self.expected_call.scale
        if (isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale)
                or scale <= 0 or self._scale_matches(scale, expected)):
            return  # missing or invalid scales are the contract's (GDR245)
        self.emit(SCALE_DIFFERS, {"recorded": f"{scale:.6g}", "expected": f"{expected:.6g}",
                                  "cause": self.scale_cause(float(scale))}, argument="scale")

    def scale_cause(self, scale: float) -> str:
        model = self.model

        def close(value: float) -> bool:
            return math.isclose(scale, value, rel_tol=1e-5)

        if model.V != model.K and close(model.V ** -0.5):
            return f"V**-0.5: the value head dim {model.V}"
        if model.attention_head_dim and model.attention_head_dim != model.K and close(model.attention_head_dim ** -0.5):
            return f"head_dim**-0.5: the full-attention `head_dim` {model.attention_head_dim}"
        if close(1.0):
            return "no scaling"
        if close(1 / model.K):
            return f"K**-1 instead of K**-0.5 (K={model.K})"
        if close(model.K ** 0.5):
            return f"K**0.5: the inverse of the scale (K={model.K})"
        return f"{scale / model.K ** -0.5:.4g} times the expected value"

    def leftovers(self, rows: list[ArgumentRow]) -> None:
        """Differences no cause explains, unless the contract already reports that argument."""
        for row in rows:
            if row.argument not in TENSOR_ARGUMENTS or row.argument in self.explained:
                continue
            if row.argument in self.contract_flagged:
                continue
            if "shape" in row.differences or "layout" in row.differences:
                self.generic(row.argument, [])


def compare_call(recorded: PackedDecodeCall, expected: PackedDecodeCall, model: ModelGeometry, *, tp: int,
                 engine: str = "sglang", state_dtype_reason: str | None = None,
                 contract_flagged: frozenset[str] | set[str] = frozenset()) -> Comparison:
    """Every difference between a recorded call and the call the engine makes for `model` at `tp`.

    `expected` is that call for one rank (`models.check_model(...).call`); batch and slot count are taken from
    the recording. `contract_flagged` names arguments the contract already reports, so that a difference with
    no cause of its own is not reported twice.
    """
    comparer = _Comparer(recorded, expected, model, tp, engine, state_dtype_reason, frozenset(contract_flagged))
    rows = comparer.rows()
    same_kernel = comparer.variant()
    comparer.ranks()
    comparer.pool_head_dims()
    comparer.sharding(check_gates=same_kernel)
    comparer.dtypes()
    comparer.flags()
    comparer.leftovers(rows)
    return Comparison(rows=rows, diagnostics=comparer.diagnostics, causes=comparer.causes)


def contract_arguments(diagnostics: list[Diagnostic]) -> set[str]:
    """Arguments that the contract's error diagnostics point at."""
    return {d.location.argument for d in diagnostics
            if d.severity == "error" and isinstance(d.location, Location) and d.location.argument}


__all__ = ["ArgumentRow", "Comparison", "ModelGeometry", "compare_call", "contract_arguments"]
