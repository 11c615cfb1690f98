"""Which decode kernel each engine calls for one linear-attention layer, and why.

gdr-check checks the contract of the packed recurrent decode kernels (`fused_recurrent_gated_delta_rule_packed_decode`,
`fused_recurrent_kda_packed_decode`). Not every model reaches them: Jet-Nemotron's JetBlock calls another kernel,
a KDA layer with a safe-gate lower bound takes the packed kernel in sglang only with a decode backend that
declares safe-gate support, and vLLM decodes KDA with `fused_recurrent_kda`. Facts from sglang 0.5.23
(`layers/attention/linear/kda_backend.py`, `kernels/kda_triton.py`, `kernels/kda_helion.py`,
`kernels/gdn_triton.py`, `models/jet_nemotron.py`) and vLLM's `gdn_linear_attn.py` / `kda.py`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..engines.profiles import EngineProfile, profile_for
from ..models.description import LinearAttentionModel

GDN_PACKED = "fused_recurrent_gated_delta_rule_packed_decode"
KDA_PACKED = "fused_recurrent_kda_packed_decode"


@dataclass(frozen=True)
class DecodePath:
    """One engine's decode step for one linear-attention layer."""

    engine: str
    kernel: str  # the function the engine calls
    packed: bool  # True when that is the packed kernel whose contract gdr-check checks
    reason: str
    switch: str | None = None  # what would change the path (a flag, an env variable, a backend)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def text(self) -> str:
        return f"{self.engine} decodes with `{self.kernel}`: {self.reason}"


def decode_path(model: LinearAttentionModel, engine: str | EngineProfile) -> DecodePath:
    """The kernel `engine` (a name, `name@version` or a profile) calls for the layers of `model`, and why."""
    profile = profile_for(engine)
    name = profile.name
    adapter = model.adapter
    own = adapter.own_decode if adapter is not None else None
    bound = model.lower_bound[0] if model.lower_bound is not None else None
    if own is not None:
        reason = (f"the {model.family} layer calls it itself instead of the linear-attention backend's packed decode"
                  if profile.own_decode_verified else
                  f"{profile.display_name} support for {model.family} was not verified; "
                  "the sglang layer calls this kernel")
        return DecodePath(name, own, False, reason)
    if model.kind == "kda" and profile.kda_decode_kernel is not None:
        return DecodePath(name, profile.kda_decode_kernel, False,
                          f"{profile.display_name}'s KDA layer runs its decode batches through it")
    if model.kind == "gdn":
        opt_in = profile.packed_decode_opt_in_env
        if opt_in is None:
            return DecodePath(name, GDN_PACKED, True, "the GDN backend's Triton decode kernel packs the call")
        return DecodePath(name, GDN_PACKED, True,
                          f"{profile.display_name} runs the GDN packed decode for pure-decode batches without "
                          f"speculative tokens when `{opt_in}` is on; "
                          "otherwise `fused_sigmoid_gating_delta_rule_update`",
                          f"{opt_in}=1")
    if bound is None or profile.safe_gate_packed_switch is None:
        return DecodePath(name, KDA_PACKED, True, "the KDA backend's Triton decode kernel packs the call")
    fused = ("`kda_fused_decode` (Kimi-K3 layers, when its shape conditions hold) or the unfused "
             "conv + recurrent KDA chain") if model.family == "kimi-k3" else "the unfused conv + recurrent KDA chain"
    return DecodePath(
        name, "kda_fused_decode" if model.family == "kimi-k3" else "KDA decode (unfused)", False,
        f"the layer has a safe-gate lower bound ({bound}); the packed decode runs only when the decode kernel "
        f"supports the safe gate, which the default Triton kernel does not, so it decodes with {fused}",
        f"a decode backend that supports the safe gate in the packed decode (`{profile.safe_gate_packed_switch}`) "
        "takes the packed kernel, with `lower_bound`")
