"""The two packed-decode variants as data: Gated DeltaNet (GDN) and Kimi Delta Attention (KDA).

What differs between the two kernels' calls, per rank, is a field here: the width of the gate arguments, the
extra `lower_bound` argument, whether checkpoints fuse z into the qkv projection, the layer's module name, the
`dt_bias` dtype. Code reads the spec (`variant_spec(call.variant).gate_width(HV, K)`) instead of testing the
variant's name, so a third variant is one more record. What an engine release does with each variant (decode
kernel, grids, state dtype, ...) is `EngineProfile.decode_of(name)`. What is a different procedure per variant,
not a value, is a table keyed by the name beside the procedures (the kernels in `kernel/ops.py`, the wrapper's
order of checks in `checks/rules_wrapper.py`, ...); tests/test_variants.py lists each of them and fails on any
other branch on the name.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from .records import dataclass

VariantName = Literal["gdn", "kda"]


@dataclass(frozen=True)
class VariantSpec:
    """What a packed-decode call of one variant looks like."""

    name: VariantName
    # How messages, tables and docs write the variant: the abbreviation the engines' layers and backends use
    # (Gated DeltaNet: GDN; Kimi Delta Attention: KDA).
    label: str
    # The gate arguments `a` and `dt_bias` hold one value per (value head, key channel): HV*K wide (KDA's
    # per-channel decay); else one per value head: HV wide (GDN's scalar decay per head).
    gate_per_key: bool
    # The kernel takes `lower_bound` (KDA's safe-gate clamp); GDN's signature has no such argument.
    has_lower_bound: bool
    # Checkpoints may fuse the output gate z into the qkv projection (`in_proj_qkvz`): Qwen3-Next's GDN.
    fused_z_projection: bool
    # Checkpoints may fuse `b` and `a` into one projection (`in_proj_ba`, [b | a] per key head): Qwen3-Next's GDN.
    fused_ba_projection: bool
    # The kernel takes H = HV heads of K = V channels (KDA: the packed decode infers H from `mixed_qkv` and
    # requires num_q_heads == num_k_heads); the configs then hold one head count (Kimi-Linear's `num_heads`).
    symmetric_heads: bool
    # The models' full-attention layers are grouped-query attention, whose `num_key_value_heads` TP splits or
    # replicates (the GDN hybrids: Qwen3-Next, Qwen3.5, OLMo-Hybrid); Kimi-Linear's (KDA) are MLA, with none.
    attention_kv_heads: bool
    # The one weight layout of the variant's checkpoints (`models.sharding`); None: read from the checkpoint's
    # projections or its architecture.
    weight_layout: str | None
    # The module that holds a layer's linear attention in the engines' models, `model.layers.<i>.<mixer>`: what
    # quantization configs' module paths name (Qwen3-Next's `linear_attn`; Kimi-Linear's `self_attn`, sglang 0.5.23
    # srt/models/kimi_linear.py:559-564).
    mixer: str
    # The dtype the engines give the `dt_bias` parameter; None: the model's activation dtype (GDN layers create it
    # without a dtype). KDA's is float32 whatever the checkpoint stores (vLLM 0.33
    # model_executor/layers/mamba/gdn/kimi_gdn_linear_attn.py:237-239, sglang 0.5.23 srt/models/kimi_linear.py:385-389).
    dt_bias_dtype: str | None
    # The engines' layer checks that TP divides its head count before any projection is split (sglang 0.5.23
    # srt/models/kimi_linear.py:60-64 raises ValueError; vLLM asserts); False: the first sharded width that does not
    # split fails in the shared linear layers' `divide()`.
    layer_checks_heads: bool

    def gate_width(self, HV: int, K: int) -> int:
        """Elements of `a` per row, and of `dt_bias`, on one rank with HV value heads of K key channels."""
        return HV * K if self.gate_per_key else HV

    def gate_width_text(self) -> str:
        """The gate width as a formula, for messages."""
        return "HV*K" if self.gate_per_key else "HV"

    def call_extras(self, lower_bound: float | None) -> tuple[float | None, ...]:
        """The arguments the variant's kernel takes after the shared ones."""
        return (lower_bound,) if self.has_lower_bound else ()


GDN = VariantSpec(
    name="gdn", label="GDN", gate_per_key=False, has_lower_bound=False, fused_z_projection=True,
    fused_ba_projection=True, symmetric_heads=False, attention_kv_heads=True, weight_layout=None,
    mixer="linear_attn", dt_bias_dtype=None, layer_checks_heads=False,
)
KDA = VariantSpec(
    name="kda", label="KDA", gate_per_key=True, has_lower_bound=True, fused_z_projection=False,
    fused_ba_projection=False, symmetric_heads=True, attention_kv_heads=False, weight_layout="kda",
    mixer="self_attn", dt_bias_dtype="float32", layer_checks_heads=True,
)
VARIANTS: dict[str, VariantSpec] = {spec.name: spec for spec in (GDN, KDA)}
DEFAULT_VARIANT = GDN  # a kernel whose name and parameters match no other variant's


def kernel_variant(function_name: str, parameters: Iterable[str] = ()) -> VariantSpec:
    """The variant of an engine's decode function: the one whose name it contains ("..._kda_packed_decode") or
    whose extra argument it takes (`lower_bound`); else GDN's."""
    name, taken = function_name.lower(), set(parameters)
    for spec in VARIANTS.values():
        if spec is not DEFAULT_VARIANT and (spec.name in name or (spec.has_lower_bound and "lower_bound" in taken)):
            return spec
    return DEFAULT_VARIANT


def variant_spec(name: str) -> VariantSpec:
    """The spec of `name` ("gdn" or "kda"); KeyError for anything else (callers validate names from data)."""
    return VARIANTS[name]
