"""Which decode kernel each engine calls for one linear-attention layer, and why.

gdr-check checks the contract of the packed recurrent decode kernels (`fused_recurrent_gated_delta_rule_packed_decode`,
`fused_recurrent_kda_packed_decode`). Not every model reaches them: Jet-Nemotron's JetBlock calls another kernel,
what a KDA layer with a safe-gate lower bound takes depends on the release, vLLM decodes KDA with
`fused_recurrent_kda` (before 0.27) or its own KDA packed op (another API), vLLM's GDN packed decode runs only for
batches without speculative tokens, and sglang from 0.5.11 decodes with flashinfer on SM100+ GPUs with a bfloat16
state. Each of these is a field of the engine release's profile (`gdr_check.engines`), read from the release's
wheel: sglang's `layers/attention/linear/{gdn,kda}_backend.py`, `kernels/{gdn,kda}_triton.py`, its start-up
rule in `server_args.py` / `arg_groups/attention_hook.py`; vLLM's GDN and KDA layers and `envs.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from ..base.records import dataclass
from ..base.variants import variant_spec
from ..engines.profiles import SAFE_GATE_PACKED, EngineProfile, profile_for
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


def decode_path(model: LinearAttentionModel, engine: str | EngineProfile, *, speculative_tokens: int = 0,
                sm: int | None = None, state_dtype: str | None = None) -> DecodePath:
    """The kernel `engine` (a name, `name@version` or a profile) calls for the layers of `model`, and why.

    `speculative_tokens` (draft tokens per step), `sm` (the GPU's compute capability x10, None: unknown) and
    `state_dtype` (the SSM state dtype) are the deployment's, where the release's path depends on them."""
    profile = profile_for(engine)
    name = profile.name
    adapter = model.adapter
    own = adapter.own_decode if adapter is not None else None
    if own is not None:
        reason = (f"the {model.family} layer calls it itself instead of the linear-attention backend's packed decode"
                  if profile.own_decode_verified else
                  f"{profile.display_name} support for {model.family} was not verified; "
                  "the sglang layer calls this kernel")
        return DecodePath(name, own, False, reason)
    rule = profile.gpu_decode_rule
    label, decode = variant_spec(model.kind).label, profile.decode_of(model.kind)
    if rule is not None and rule.applies(sm, state_dtype, speculative_tokens > 0):
        backend = rule.backend
        keep = "`--linear-attn-decode-backend triton` keeps the packed kernel"
        given = (f"on an SM{sm} GPU with a {rule.state_dtype} SSM state and no decode backend given, "
                 f"{profile.label} selects the {backend} decode backend")
        if decode.decode_backends is not None and backend not in decode.decode_backends:
            return DecodePath(name, f"{backend} {label} decode", False,
                              f"{given}, which its {label} layer does not accept (it takes "
                              f"{', '.join(decode.decode_backends)}): the engine stops at start-up", keep)
        return DecodePath(name, f"{backend} {label} decode", False, f"{given}, not the packed Triton kernel", keep)
    return _VARIANT_PATHS[model.kind](model, profile, speculative_tokens)


def _gdn_path(model: LinearAttentionModel, profile: EngineProfile, speculative_tokens: int) -> DecodePath:
    """A GDN layer's decode past the GPU rule: the release's own kernel, else the packed one (vLLM's behind its
    environment switch and only without speculative tokens)."""
    name, decode = profile.name, profile.decode_of(model.kind)
    if decode.kernel is not None:
        return DecodePath(name, decode.kernel, False,
                          f"{profile.label} predates the GDN packed decode: its GDN layers decode with it")
    env = decode.packed_decode_env
    if env is None:
        return DecodePath(name, GDN_PACKED, True, "the GDN backend's Triton decode kernel packs the call")
    if speculative_tokens:
        return DecodePath(name, "GDN decode (speculative path)", False,
                          f"{profile.label} runs the GDN packed decode only for decode batches without "
                          f"speculative tokens; with {speculative_tokens} draft tokens per step every decode "
                          "batch takes its speculative GDN path")
    return DecodePath(name, GDN_PACKED, True,
                      f"{profile.label} runs the GDN packed decode for decode batches without speculative "
                      f"tokens (`{env}` defaults to \"{profile.packed_decode_env_default}\": on)",
                      f"{env}=0 turns it off")


def _kda_path(model: LinearAttentionModel, profile: EngineProfile, speculative_tokens: int) -> DecodePath:
    """A KDA layer's decode past the GPU rule: the release's own kernel or packed op, else the packed kernel or the
    unfused chain, by the layer's safe-gate lower bound and what the release does with one."""
    name, decode = profile.name, profile.decode_of(model.kind)
    bound = model.lower_bound[0] if model.lower_bound is not None else None
    if decode.kernel is not None:
        if decode.grids:  # the engine's own packed op, another argument list
            return DecodePath(name, decode.kernel, False,
                              f"{profile.label}'s KDA layer decodes non-speculative batches with its own KDA packed "
                              "op (another argument list: raw_g, raw_beta, state_indices), not the contract's "
                              "`fused_recurrent_kda_packed_decode`; `fused_recurrent_kda` only for speculative rows")
        return DecodePath(name, decode.kernel, False,
                          f"{profile.label}'s KDA layer runs its decode batches through it")
    if bound is not None and not profile.kda_takes_lower_bound and profile.safe_gate_route == SAFE_GATE_PACKED:
        return DecodePath(name, KDA_PACKED, False,
                          f"the layer has a safe-gate lower bound ({bound}) and {profile.label}'s packed KDA "
                          "decode takes no `lower_bound` (it arrives in sglang 0.5.17): the safe gate is not "
                          "applied, so the call is not the contract's")
    if bound is None or profile.safe_gate_route == SAFE_GATE_PACKED:
        return DecodePath(name, KDA_PACKED, True, "the KDA backend's Triton decode kernel packs the call")
    fused = ("`kda_fused_decode` (Kimi-K3 layers, when its shape conditions hold) or the unfused "
             "conv + recurrent KDA chain") if model.family == "kimi-k3" else "the unfused conv + recurrent KDA chain"
    if profile.safe_gate_packed_switch is None:  # SAFE_GATE_UNFUSED
        return DecodePath(
            name, "kda_fused_decode" if model.family == "kimi-k3" else "KDA decode (unfused)", False,
            f"the layer has a safe-gate lower bound ({bound}); {profile.label} runs the packed decode only for "
            f"layers without one, so it decodes with {fused}")
    return DecodePath(
        name, "kda_fused_decode" if model.family == "kimi-k3" else "KDA decode (unfused)", False,
        f"the layer has a safe-gate lower bound ({bound}); the packed decode runs only when the decode kernel "
        f"supports the safe gate, which the default Triton kernel does not, so it decodes with {fused}",
        f"a decode backend that supports the safe gate in the packed decode (`{profile.safe_gate_packed_switch}`) "
        "takes the packed kernel, with `lower_bound`")


# Each variant's decode path past the GPU rule: a procedure per variant, by `VariantSpec.name`.
_VARIANT_PATHS: dict[str, Callable[[LinearAttentionModel, EngineProfile, int], DecodePath]] = {
    "gdn": _gdn_path, "kda": _kda_path,
}
