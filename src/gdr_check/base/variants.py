"""The two packed-decode variants as data: Gated DeltaNet (GDN) and Kimi Delta Attention (KDA).

What differs between the two kernels' calls, per rank, is a field here: the width of the gate arguments, the
extra `lower_bound` argument, whether checkpoints fuse z into the qkv projection. Code reads the spec
(`variant_spec(call.variant).gate_width(HV, K)`) instead of testing the variant's name, so a third variant is
one more record. The wrapper's order of checks is the one tuple per variant in `checks/rules_wrapper.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

VariantName = Literal["gdn", "kda"]


@dataclass(frozen=True)
class VariantSpec:
    """What a packed-decode call of one variant looks like."""

    name: VariantName
    # The gate arguments `a` and `dt_bias` hold one value per (value head, key channel): HV*K wide (KDA's
    # per-channel decay); else one per value head: HV wide (GDN's scalar decay per head).
    gate_per_key: bool
    # The kernel takes `lower_bound` (KDA's safe-gate clamp); GDN's signature has no such argument.
    has_lower_bound: bool
    # Checkpoints may fuse the output gate z into the qkv projection (`in_proj_qkvz`): Qwen3-Next's GDN.
    fused_z_projection: bool

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
    name="gdn", gate_per_key=False, has_lower_bound=False, fused_z_projection=True,
)
KDA = VariantSpec(
    name="kda", gate_per_key=True, has_lower_bound=True, fused_z_projection=False,
)
VARIANTS: dict[str, VariantSpec] = {spec.name: spec for spec in (GDN, KDA)}


def variant_spec(name: str) -> VariantSpec:
    """The spec of `name` ("gdn" or "kda"); KeyError for anything else (callers validate names from data)."""
    return VARIANTS[name]
