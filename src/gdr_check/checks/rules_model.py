"""GDR1xx: model-level rules: family, config fields, layer map, config vs weights, tensor parallelism, state memory.

They examine a `ModelContext` (the model description, the deployment and the engine's choices); the kernel
call built from them is checked separately by the contract engine (GDR2xx), which also reports the launch
grid limit (GDR244) and pool bounds (GDR241) for the chosen batch and slot count.

Numbering, stable once released:
    GDR101-GDR106  family, config fields and layer map
    GDR111-GDR116  config vs weights
    GDR121-GDR125  tensor parallelism and head grouping
    GDR131-GDR137  state memory, engine support and the pool under sglang's strategy
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from ..base.limits import counted
from ..base.records import dataclass
from ..base.registry import RULES, Finding, Violation, declare, findings_of, rule, rules_in_scope
from ..base.report import Diagnostic, Location
from ..base.variants import variant_spec
from ..call.pools import plan_pool
from ..deployment.decode_path import decode_path
from ..deployment.state_pool import RunningCap, pool_from_budget
from ..engines.profiles import STATE_DTYPES
from ..models.adapters import QUANTITIES, Selection, adapter_serving
from ..models.description import Locator, shown_value, why_undescribed
from .config_weights import TensorFindings, tensor_findings
from .examples import ModelExample, kimi_linear_config, qwen3_next_config

if TYPE_CHECKING:
    from ..call.expected import RankHeads, StateMemory
    from ..call.pools import PoolPlan
    from ..deployment.settings import Deployment, EngineSettings
    from ..models.adapters import Selection
    from ..models.description import InvalidValue, LinearAttentionModel, Source
    from ..sources.checkpoint import Checkpoint

MODEL = "model"


@dataclass
class ModelContext:
    """What the model-level rules examine."""

    model: LinearAttentionModel
    deployment: Deployment
    settings: EngineSettings
    heads: RankHeads | None = None
    memory: StateMemory | None = None

    @functools.cached_property
    def found(self) -> TensorFindings:
        """The config's fields and layer map against the tensors (GDR103, GDR111-GDR115), found once."""
        return tensor_findings(self.model)


# -- helpers ---------------------------------------------------------------------------------------------------
def format_bytes(count: int) -> str:
    """1536 -> "1.5 KiB"; 75497472 -> "72 MiB"."""
    value, unit = float(count), "B"
    for next_unit in ("KiB", "MiB", "GiB", "TiB"):
        if value < 1024:
            break
        value, unit = value / 1024, next_unit
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return f"{text} {unit}"


def format_layers(layers: Iterable[int]) -> str:
    """[0, 1, 2, 4, 5] -> "0-2, 4-5"."""
    items = sorted(set(layers))
    runs: list[str] = []
    start = prev = None
    for item in items + [None]:
        if item is not None and prev is not None and item == prev + 1:
            prev = item
            continue
        if start is not None:
            runs.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = item
    return ", ".join(runs)


def layer_word(layers: Iterable[int] | int) -> str:
    """"layer" for one layer (a list of one, or a count of 1), "layers" otherwise: a message's noun for its
    `layers` value, which stays the plain list or count."""
    count = layers if isinstance(layers, int) else len(set(layers))
    return "layer" if count == 1 else "layers"


def _where(source: Source | None) -> Location | None:
    return source.location if source is not None else None


def _source_note(source: Source) -> str:
    location = source.location
    if source.kind == "config":
        where = f" ({location})" if location is not None and location.file else ""
        return f"from config key `{source.key}`{where}"
    if source.kind == "tensor":
        shard = f" in `{source.shard}`" if source.shard else ""
        return f"from tensor `{source.tensor}` {source.detail or ''}{shard}".replace("  ", " ")
    if source.kind == "assumed":  # the detail says what was assumed: "assumed equal to ..."
        return f"({source.detail or 'assumed'})"
    return f"from {source.detail or source.kind}"


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def working_tp_sizes(model: LinearAttentionModel) -> list[int]:
    """TP sizes that split the linear-attention heads and the full-attention heads evenly."""
    H, HV = model.num_k_heads, model.num_v_heads
    if not H or not HV:
        return []
    sizes = _divisors(math.gcd(H, HV))
    if model.num_attention_heads:
        sizes = [t for t in sizes if model.num_attention_heads % t == 0]
    kv = model.num_key_value_heads if variant_spec(model.kind).attention_kv_heads else None
    if kv:
        sizes = [t for t in sizes if kv % t == 0 or t % kv == 0]
    return sizes


def _sizes_text(sizes: list[int]) -> str:
    return ", ".join(map(str, sizes)) if sizes else "none"


def run_model_rules(ctx: ModelContext) -> list[Diagnostic]:
    """Every model-scope rule with a check function, in code order."""
    diagnostics: list[Diagnostic] = []
    bindings = {"tp": ctx.deployment.tp, "B": ctx.deployment.batch}
    model = ctx.model
    for name, symbol in (("num_k_heads", "H"), ("num_v_heads", "HV"), ("head_k_dim", "K"), ("head_v_dim", "V")):
        if getattr(model, name):
            bindings[symbol] = getattr(model, name)
    for model_rule in rules_in_scope(MODEL):
        if model_rule.check is None:
            continue
        for finding in findings_of(model_rule.check(ctx)):
            diagnostic = model_rule.diagnostic(finding)
            diagnostic.bindings = {**bindings, **diagnostic.bindings}
            diagnostics.append(diagnostic)
    return diagnostics


# Small configs of the families the examples need beside Qwen3-Next (GDR125, GDR126, GDR134).
_KIMI_LINEAR = kimi_linear_config()
_JET_NEMOTRON = {"architectures": ["JetNemotronForCausalLM"], "model_type": "jet_nemotron", "hidden_size": 64,
                 "num_hidden_layers": 4, "layer_types": ["attn", "jet", "swa", "jet"], "num_attention_heads": 4,
                 "num_key_value_heads": 2, "intermediate_size": 128, "torch_dtype": "bfloat16",
                 "efficient_attention_config": {"jet": {"mode": "jet", "expand_v": 2.0, "num_heads": 4, "head_dim": 8,
                                                        "conv_size": 4, "dconv_generator_reduction": 8}}}


# -- GDR101-GDR106: family, config fields, layer map -------------------------------------------------------------
class NoLinearLayers(Violation):
    rule = declare(
        "GDR101", "models-without-linear-attention", severity="info", scope=MODEL,
        summary="the model has no GDN or KDA layers",
        message="{subject} has no GDN or KDA layers: nothing to check",
        explanation=(
            "gdr-check checks the packed recurrent decode kernels of Gated DeltaNet (GDN) and Kimi Delta "
            "Attention (KDA) layers. This model has none: its config names no linear-attention layers and its "
            "tensors hold no GDN/KDA parameters (`A_log`, `dt_bias`, the short convolutions).\n\n"
            "Ring/Ling-linear (`bailing_moe_linear`), a Bailing hybrid config without `short_conv_kernel_size` "
            "and MiniMax-Text-01/M1 use lightning attention and MiniCPM-SALA uses simple GLA, so they are out of "
            "scope. A config with any linear-attention marker that cannot be described is GDR107, an error, "
            "never this note. `gdr-check dry-run` of such a model has nothing to run: GDR314, an error."
        ),
        causes=("a plain transformer checkpoint", "a lightning-attention hybrid (MiniMax, Ring/Ling-linear)"),
        fixes=("point gdr-check at a Qwen3-Next, Qwen3.5/3.6, Kimi-Linear or other GDN/KDA checkpoint",),
        example=ModelExample({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
                              "num_hidden_layers": 2, "num_attention_heads": 4}, "a model without linear attention"),
    )

    subject: object  # the architecture in backticks, or what the config lacks where it names none


@rule(
    "GDR102", "unknown-architectures", severity="warning", scope=MODEL,
    summary="unknown architecture: geometry inferred from tensors",
    message="{subject} is not a known GDN/KDA architecture: its geometry is inferred from tensor shapes",
    explanation=(
        "The checkpoint carries GDN or KDA parameters under a layer namespace gdr-check recognises, but its "
        "architecture has no adapter. The head counts and dims are read off the tensor shapes (`A_log` gives "
        "the value heads, the norm weight the value head dim, the conv weight the [q | k | v] width). The "
        "key head dim cannot be separated from the key head count by shapes alone; without a config field "
        "it is assumed equal to the value head dim.\n\n"
        "How the engine builds the model (which layers are linear, the field names it reads) is unknown, so "
        "the per-rank shapes are a best guess."
    ),
    causes=("a new or renamed model family", "a safetensors file without its config.json"),
    fixes=("check the inferred numbers against the model card", "pass the checkpoint with its config.json"),
    example=ModelExample(qwen3_next_config(architectures=["MyHybridForCausalLM"], model_type="my_hybrid"),
                         "Qwen3-Next fields under an unknown architecture"),
)
def unknown_architecture(ctx: ModelContext) -> Finding | None:
    model = ctx.model
    if model.known_architecture:
        return None
    notes = [f"{name} = {getattr(model, name)} {_source_note(model.sources[name])}"
             for name in ("num_k_heads", "num_v_heads", "head_k_dim", "head_v_dim", "conv_kernel")
             if name in model.sources]
    subject = model.identity.subject if model.identity is not None else f"`{model.architecture}`"
    return Finding({"architecture": model.architecture, "subject": subject}, notes=notes,
                   fixes=["if the engine serves this architecture, check which config fields it reads for "
                          "the linear-attention heads"])


@rule(
    "GDR103", "missing-config-fields", scope=MODEL,
    summary="a linear-attention field is missing from the config",
    message="the config has no `{key}`",
    explanation=(
        "Each family keeps its linear-attention geometry in fixed config fields (Qwen: "
        "`linear_num_key_heads`, `linear_num_value_heads`, `linear_key_head_dim`, `linear_value_head_dim`, "
        "`linear_conv_kernel_dim`; Kimi-Linear: `linear_attn_config.num_heads`, `head_dim`, "
        "`short_conv_kernel_size`). An engine that does not find a field uses its config class default, "
        "which need not match the weights.\n\n"
        "When a tensor measures the value, gdr-check uses it and reports a warning; otherwise the geometry "
        "is incomplete and no per-rank shapes can be computed (error)."
    ),
    causes=("a hand-edited or truncated config.json", "a config exported by another tool"),
    fixes=("add the field with the value the weights hold",),
    example=ModelExample(qwen3_next_config(linear_num_value_heads=None), "no `linear_num_value_heads`"),
)
def missing_fields(ctx: ModelContext) -> list[Finding]:
    findings = []
    for missing in ctx.found.missing_fields:
        key = missing.keys[0]
        if missing.inferred is not None:
            value = getattr(ctx.model, missing.field)
            findings.append(Finding(
                {"key": key}, severity="warning",
                notes=[f"{missing.field} = {value} {_source_note(missing.inferred)}"],
                fixes=[f"add `\"{key.rsplit('.', 1)[-1]}\": {value}` to the config"]))
        else:
            findings.append(Finding(
                {"key": key}, notes=[f"no tensor measures {missing.field} either: per-rank shapes cannot be computed"],
                fixes=[f"add `{key.rsplit('.', 1)[-1]}` to the config"]))
    return findings


@rule(
    "GDR104", "malformed-layer-maps", scope=MODEL,
    summary="the config's layer map is inconsistent",
    message="`{key}` {problem}",
    explanation=(
        "The layer map says which decoder layers are linear attention: `layer_types` (Qwen3.5/3.6, "
        "GigaChat 3.5, OLMo-Hybrid), `full_attention_interval` (Qwen3-Next), 1-based "
        "`linear_attn_config.kda_layers` (Kimi-Linear) or 0-based `full_attention_layers` (GigaChat 3.5). "
        "A list of the wrong length, an index outside the model, or a layer named both linear and full "
        "makes the engines build a different model than the weights describe, or fail at load time. "
        "sglang 0.5.23 asserts, without a message, that Kimi's `kda_layers` and `full_attn_layers` are both set."
    ),
    causes=("`layer_types` copied from a model with another depth", "0-based indices in a 1-based list"),
    fixes=("make the layer map cover exactly `num_hidden_layers` layers",),
    example=ModelExample(qwen3_next_config(full_attention_interval=None, layer_types=["linear_attention"] * 6),
                         "6 layer types for 8 layers"),
)
def malformed_layer_maps(ctx: ModelContext) -> list[Finding]:
    locate = _config_location(ctx)
    return [Finding({"key": key, "problem": problem}, location=locate(key),
                    fixes=["fix the list so that every layer index is in range and named once"])
            for key, problem in ctx.model.layer_map.problems]


def _config_location(ctx: ModelContext) -> Callable[[str], Location]:
    """A function from a dotted config key to its Location, using any config source's file."""
    locations = [s.location for s in ctx.model.sources.values() if s.kind == "config" and s.location is not None]
    file = locations[0].file if locations else None

    def locate(key: str) -> Location:
        for source in ctx.model.sources.values():
            if source.key == key and source.location is not None:
                return source.location
        return Location(file=file, json_key=key)

    return locate


@rule(
    "GDR105", "layer-types-disagreeing-with-interval", severity="warning", scope=MODEL,
    summary="`layer_types` and `full_attention_interval` disagree",
    message="`layer_types` and `full_attention_interval`={interval} disagree on {layer_word} {layers}",
    explanation=(
        "The checkpoint lists its layer kinds explicitly, and transformers (and gdr-check) follow that list. "
        "sglang 0.5.23 ignores `layer_types` for Qwen3-Next and Qwen3.5/3.6: its config classes discard it "
        "and make layer i full attention iff (i+1) % `full_attention_interval` == 0. Where the two disagree, "
        "sglang builds a different model than the weights hold: it looks for `linear_attn` weights in a "
        "full-attention layer or the reverse, and the state pool has a different number of layers. "
        "vLLM's rule was not verified. Only the layers both name are compared: the rest of a `layer_types` of "
        "another length than `num_hidden_layers` is that length's error (GDR104)."
    ),
    causes=("a checkpoint with a custom layer pattern served by sglang",),
    fixes=("make `layer_types` follow the interval rule, or serve with an engine that reads `layer_types`",),
    engines="sglang 0.5.23 (Qwen3NextConfig, Qwen3_5TextConfig).",
    example=ModelExample(qwen3_next_config(layer_types=["linear_attention", "full_attention"] * 4),
                         "every 2nd layer full attention by `layer_types`, every 4th by the interval"),
)
def layer_types_vs_interval(ctx: ModelContext) -> Finding | None:
    model = ctx.model
    layer_map = model.layer_map
    adapter = model.adapter
    if adapter is None or not adapter.sglang_uses_interval or layer_map.interval_linear is None:
        return None
    if layer_map.key is None or layer_map.key == layer_map.interval_key or layer_map.linear is None:
        return None
    by_types, by_interval = set(layer_map.linear), set(layer_map.interval_linear)
    differ = sorted(by_types ^ by_interval)
    listed, count = layer_map.listed, model.num_hidden_layers
    length = None  # a list of another length than the model: the layers only one of the two names are GDR104's
    if listed is not None and count is not None and listed != count:
        differ = [layer for layer in differ if layer < min(listed, count)]
        beyond = range(listed, count) if listed < count else range(count, listed)
        noun = layer_word(beyond) if listed < count else ("entry" if len(beyond) == 1 else "entries")
        length = (f"`layer_types` has {listed} {'entry' if listed == 1 else 'entries'} for {count} "
                  f"{layer_word(count)} (GDR104): {noun} {format_layers(beyond)} "
                  f"{'is' if len(beyond) == 1 else 'are'} not compared")
    if not differ:
        return None
    notes = [
        f"`layer_types` makes {layer_word(by_types)} {format_layers(by_types)} linear attention "
        f"({len(by_types)} {layer_word(by_types)})",
        f"the interval rule makes {layer_word(by_interval)} {format_layers(by_interval)} linear attention "
        f"({len(by_interval)} {layer_word(by_interval)})",
        "sglang 0.5.23 follows the interval rule; transformers and this report follow `layer_types`",
    ]
    if length is not None:
        notes.append(length)
    profile = ctx.deployment.profile
    if profile.layer_kinds_follow_interval is None:
        notes.append(f"how {profile.display_name} derives the layer kinds was not verified")
    return Finding({"interval": layer_map.interval, "layer_word": layer_word(differ), "layers": format_layers(differ)},
                   location=_config_location(ctx)(layer_map.key), notes=notes,
                   fixes=["set `full_attention_interval` and `layer_types` so that they agree, or check the "
                          "model under an engine that reads `layer_types`"])


@rule(
    "GDR106", "negative-eigenvalue-betas", severity="warning", scope=MODEL,
    summary="the model doubles beta, which the packed kernel does not",
    message="`linear_allow_neg_eigval` is true: the model scales beta by 2, which the packed decode kernel does not do",
    explanation=(
        "OLMo-Hybrid lets the delta-rule coefficient reach [0, 2] by multiplying sigmoid(b) by 2 "
        "(`linear_allow_neg_eigval`, true by default). The packed decode kernels apply sigmoid(b) and nothing "
        "else, so decoding such a model with them silently changes every state update."
    ),
    causes=("an OLMo-Hybrid checkpoint",),
    fixes=("decode with a kernel that takes beta directly, or fold the factor into the kernel call",),
    example=ModelExample(qwen3_next_config(architectures=["OlmoHybridForCausalLM"], model_type="olmo_hybrid",
                                           linear_allow_neg_eigval=True), "an OLMo-Hybrid style config"),
)
def negative_eigenvalues(ctx: ModelContext) -> Finding | None:
    flag = ctx.model.beta_scale_flag
    if flag is None or not flag[0]:
        return None
    return Finding({}, location=_where(flag[1]), notes=[f"the flag is {_source_note(flag[1])}"],
                   fixes=["use a decode path that scales beta by 2 (the packed kernels compute beta = sigmoid(b))"])


# -- GDR111-GDR115: config vs weights ------------------------------------------------------------------------
def _quantity(field: str) -> str:
    return QUANTITIES.get(field, field)


def _mismatch_location(config_source: Source, tensor_source: Source) -> Location:
    """The config key's position, carrying the tensor and shard too."""
    base = config_source.location or Location()
    return Location(file=base.file, json_key=base.json_key, line=base.line, column=base.column,
                    end_line=base.end_line, end_column=base.end_column,
                    tensor=tensor_source.tensor, shard=tensor_source.shard)


def _layers_note(layers: tuple[int, ...], total: int) -> str:
    if len(layers) == total and total > 1:
        return f"every linear-attention layer ({total}) shows the same"
    if len(layers) > 1:
        return f"the same in layers {format_layers(layers)}"
    return f"only in layer {layers[0]}"


@rule(
    "GDR111", "config-weight-mismatches", scope=MODEL,
    summary="the config and the weights disagree",
    message="config says {expected} {quantity} but `{tensor}` holds {actual}",
    explanation=(
        "Engines size every buffer from the config and then load the weights into it. When a tensor "
        "measures a different head count or head dim than the config declares, loading fails with a shape "
        "error, or worse, a tensor of the same size is read with the wrong layout. Each tensor axis is "
        "solved for the field it measures (`A_log` holds the value heads, the norm weight the value head "
        "dim, the conv weight the [q | k | v] width), so the diagnostic names the field that disagrees and "
        "the first tensor that shows it."
    ),
    causes=("a config.json from another model size", "weights resharded or pruned without updating the config",
            "a quantised export that changed a projection's layout"),
    fixes=("use the config.json that belongs to these weights",),
    example=ModelExample(qwen3_next_config(linear_num_value_heads=8), "the weights have 4 value heads",
                         weights=qwen3_next_config()),
)
def config_weight_mismatches(ctx: ModelContext) -> list[Finding]:
    findings = []
    total = len(ctx.model.linear_layers)
    for item in ctx.found.disagreements:
        if item.expected_source.kind not in ("config", "default"):
            continue
        notes = [
            f"{item.field} = {item.expected} {_source_note(item.expected_source)}",
            f"{item.field} = {item.actual} {_source_note(item.actual_source)}",
            _layers_note(item.layers, total),
        ]
        key = item.expected_source.leaf or item.field
        if 2 * len(item.layers) <= len(ctx.model.layer_layouts):
            # At most half the layers that hold tensors: the rest agree with the config, which is then not what to
            # change (a config set to these layers' value would break the others, and then say the reverse).
            shards = ", ".join(f"`{shard}`" for shard in item.shards if shard) or "the shards"
            layers = f"{layer_word(item.layers)} {format_layers(item.layers)}"
            fixes = [f"re-download or re-export {shards} ({layers}): the other layers hold {item.expected}, as the "
                     "config says"]
        else:
            fixes = [f"if the weights are right, set `{key}` to {item.actual}; otherwise use weights made for "
                     f"`{key}` = {item.expected}"]
        findings.append(Finding(
            {"expected": item.expected, "quantity": _quantity(item.field), "tensor": item.actual_source.tensor,
             "actual": item.actual},
            location=_mismatch_location(item.expected_source, item.actual_source), notes=notes, fixes=fixes))
    return findings


@rule(
    "GDR112", "layer-weight-mismatches", scope=MODEL,
    summary="linear-attention layers disagree with each other",
    message="`{tensor}` holds {actual} {quantity} but `{other}` holds {expected}",
    explanation=(
        "Every linear-attention layer of a model has the same geometry: the engines allocate one state pool "
        "shape for all of them. When the config does not give a field, gdr-check takes it from the tensors; "
        "a layer whose tensors measure another value cannot be served with that pool."
    ),
    causes=("shards from two different checkpoints mixed in one directory", "a partially converted checkpoint"),
    fixes=("re-download or re-export the shards that hold the odd layers",),
    example=ModelExample({"architectures": ["Mystery"], "num_hidden_layers": 8}, "layer 6 differs from layer 0",
                         weights=qwen3_next_config(),
                         tensor_changes={"model.layers.6.linear_attn.A_log": ("F32", (8,))}),
)
def layer_weight_mismatches(ctx: ModelContext) -> list[Finding]:
    findings = []
    for item in ctx.found.disagreements:
        if item.expected_source.kind != "tensor":
            continue
        findings.append(Finding(
            {"tensor": item.actual_source.tensor, "actual": item.actual, "quantity": _quantity(item.field),
             "other": item.expected_source.tensor, "expected": item.expected},
            location=item.actual_source.location,
            notes=[f"{layer_word(item.layers)} {format_layers(item.layers)} "
                   f"{'holds' if layer_word(item.layers) == 'layer' else 'hold'} {item.actual}",
                   f"{item.field} = {item.expected} {_source_note(item.expected_source)}"],
            fixes=["make every linear-attention layer come from the same checkpoint"]))
    return findings


@rule(
    "GDR113", "unexpected-tensor-shapes", scope=MODEL,
    summary="a tensor's shape fits no geometry",
    message="`{tensor}` has shape {actual}, expected {expected}",
    explanation=(
        "The tensor's shape is not what the layer's geometry gives, and no single head count or head dim "
        "explains the difference (a wrong rank, a padded projection, an extra block)."
    ),
    causes=("a padded or quantised projection", "a tensor saved with an extra axis"),
    fixes=("re-export the tensor in the layout the architecture uses",),
    example=ModelExample(qwen3_next_config(), weights=qwen3_next_config(),
                         tensor_changes={"model.layers.1.linear_attn.in_proj_qkvz.weight": ("BF16", (193, 64))}),
)
def unexpected_shapes(ctx: ModelContext) -> list[Finding]:
    findings = []
    for item in ctx.found.shape_mismatches:
        expected = list(item.expected) if item.expected is not None else "another rank"
        findings.append(Finding(
            {"tensor": item.source.tensor, "actual": list(item.actual), "expected": expected},
            location=item.source.location,
            notes=[f"{layer_word(item.layers)} {format_layers(item.layers)}",
                   f"in `{item.source.shard}`" if item.source.shard else "",
                   # a packed weight's shape is its unpacked one: the source says how it is stored
                   f"read as {item.source.detail}" if "unpacked" in (item.source.detail or "") else ""],
            fixes=["compare with the same tensor in a released checkpoint of this architecture"]))
    for finding in findings:
        finding.notes = [n for n in finding.notes if n]
    return findings


@rule(
    "GDR114", "layer-kind-mismatches", scope=MODEL,
    summary="the config's layer map and the tensors disagree",
    message="`{key}` makes {layer_word} {layers} {config_kind}, but {their} tensors are {tensor_kind}",
    explanation=(
        "The engines build each decoder layer as the config's layer map says and then load its weights. A "
        "layer the config calls linear attention must hold the linear-attention tensors (Qwen: "
        "`linear_attn.*`; Kimi: `self_attn.A_log`, `self_attn.q_conv1d`, ...), and a full-attention layer "
        "must not. Otherwise loading fails, or the state pool is sized for the wrong number of layers."
    ),
    causes=("a layer map copied from another model", "0-based indices in Kimi's 1-based `kda_layers`"),
    fixes=("make the layer map match the weights",),
    example=ModelExample(qwen3_next_config(), "layer 3 is full attention by the interval", weights=qwen3_next_config(),
                         tensor_changes={"model.layers.3.linear_attn.A_log": ("BF16", (4,))}),
)
def layer_kind_mismatches(ctx: ModelContext) -> list[Finding]:
    findings = []
    for item in ctx.found.layer_kind_mismatches:
        key = item.source.key if item.source is not None and item.source.key else "linear_layers"
        notes = [f"for example `{item.example}`"] if item.example else []
        if ctx.model.family == "kimi-linear":
            notes.append("Kimi's `kda_layers` is 1-based: layer i is a KDA layer iff i+1 is listed")
        word, layers = layer_word(item.layers), format_layers(item.layers)
        one = word == "layer"
        findings.append(Finding(
            {"key": key, "layer_word": word, "layers": layers, "config_kind": item.config_kind,
             "their": "its" if one else "their", "tensor_kind": item.tensor_kind},
            location=_where(item.source), notes=notes,
            fixes=[f"fix `{key}` so that {word} {layers} {'is' if one else 'are'} {item.tensor_kind}"]))
    return findings


@rule(
    "GDR115", "missing-layer-tensors", scope=MODEL,
    summary="a linear-attention layer lacks a tensor",
    message="linear-attention {layer_word} {layers} {verb} `{tensor}`",
    explanation=(
        "Every linear-attention layer needs all of its parameters: the projections, the short convolution, "
        "`A_log`, `dt_bias` and the output norm. A missing one fails the engine's weight loading, or leaves "
        "a parameter at its initial value."
    ),
    causes=("a missing shard", "an export that dropped parameters", "tensors renamed by a conversion tool"),
    fixes=("re-download or re-export the checkpoint",),
    example=ModelExample(qwen3_next_config(), weights=qwen3_next_config(),
                         tensor_changes={"model.layers.4.linear_attn.dt_bias": None}),
)
def missing_tensors(ctx: ModelContext) -> list[Finding]:
    findings = []
    for item in ctx.found.missing_tensors:
        # a layer with no tensor at all: its namespace, `model.layers.<n>.*` (the example names layer n)
        tensor = item.suffix if item.suffix != "*" or not item.example else item.example.rsplit(".", 2)[0] + ".<n>.*"
        findings.append(Finding(
            {"layer_word": layer_word(item.layers), "layers": format_layers(item.layers),
             "verb": "lacks" if layer_word(item.layers) == "layer" else "lack", "tensor": tensor},
            location=Location(file=item.file, tensor=item.example),
            notes=[f"expected `{item.example}`"],
            fixes=["check that every shard of the index is present and complete"]))
    return findings


@rule(
    "GDR116", "unrecognized-tensor-names", scope=MODEL,
    summary="the weights hold no tensor under the names the model's layers use",
    message="the weights hold {count}, none under the layer names `{architecture}` loads (`{expected}`)",
    explanation=(
        "The engines load a checkpoint by tensor name: each linear-attention layer's parameters are looked up "
        "under the family's layer names (Qwen: `model.layers.<i>.linear_attn.*`, or the language model's "
        "namespace of a multimodal checkpoint; Kimi: `model.layers.<i>.self_attn.*`). The tensors here lie "
        "under other names, so no layer's weights can be found: the engine fails to load them or leaves the "
        "parameters uninitialised, and gdr-check cannot compare the config with the weights (the shapes "
        "below come from the config alone)."
    ),
    causes=("tensors renamed by a conversion or training framework (`transformer.`, `backbone.`, `module.`)",
            "a safetensors file that holds another model's or an adapter's tensors"),
    fixes=("rename the tensors as the architecture names them, or check the checkpoint the engine will load",),
    example=ModelExample(qwen3_next_config(), "the tensors stored under `transformer.` instead of `model.`",
                         weights=qwen3_next_config(), weights_namespace="transformer."),
)
def unrecognized_tensor_names(ctx: ModelContext) -> Finding | None:
    model = ctx.model
    if not model.unplaced_tensors or model.adapter is None:
        return None
    layout = model.adapter.layouts[0]
    expected = f"{model.adapter.namespaces[0]}layers.<i>.{layout.prefix}*"
    return Finding(
        {"count": counted(model.unplaced_tensors, "tensor"), "architecture": model.architecture,
         "expected": expected},
        notes=["for example " + ", ".join(f"`{name}`" for name in model.unplaced_examples)],
        fixes=[f"rename the tensors to `{expected}` as the engines load them"])


# -- GDR121-GDR125: tensor parallelism and head grouping --------------------------------------------------------
@rule(
    "GDR121", "tp-not-dividing-linear-heads", scope=MODEL,
    summary="the TP size does not divide the linear-attention heads",
    message="tp={tp} does not divide `{key}`={value}; TP sizes that work: {working}",
    explanation=(
        "Both engines shard the linear-attention layers by head: each rank holds H/tp key heads, HV/tp "
        "value heads, their slice of every projection and conv channel block, and a state pool of "
        "[slots, HV/tp, V, K]. A TP size that does not divide H and HV cannot be loaded: sglang and vLLM "
        "stop in `divide()` with `AssertionError: <n> is not divisible by <tp>`; sglang's Kimi-Linear raises "
        "`ValueError: KDA num_heads (<H>) must be divisible by shard tp_size (<tp>)`.\n\n"
        "Every Qwen GDN model has 16 key heads, so TP is at most 16; Kimi-Linear has 32 KDA heads. The TP "
        "sizes listed also divide the full-attention heads (GDR122)."
    ),
    causes=("TP 3 or 6 for a model with 16 or 32 heads", "TP 32 for a Qwen GDN model"),
    fixes=("pick a TP size from the list; use data or pipeline parallelism for more GPUs",),
    engines="sglang 0.5.23 and vLLM.",
    example=ModelExample(qwen3_next_config(), "H=2 key heads at TP 4", deployment={"tp": 4}),
)
def tp_linear_heads(ctx: ModelContext) -> Finding | None:
    model, tp = ctx.model, ctx.deployment.tp
    H, HV, K, V = model.num_k_heads, model.num_v_heads, model.head_k_dim, model.head_v_dim
    if not H or not HV or tp == 1:
        return None
    candidates = [("num_k_heads", H), ("num_v_heads", HV)]
    if K and V:
        candidates += [("key width H*K", H * K), ("value width HV*V", HV * V),
                       ("conv width 2*H*K+HV*V", 2 * H * K + HV * V)]
    failing = [(name, value) for name, value in candidates if value % tp]
    if not failing:
        return None
    name, value = failing[0]
    key = model.field_name(name) if name in ("num_k_heads", "num_v_heads") else name
    notes = [f"{_quantity_text(model, n)} = {v} is not divisible by {tp} either" for n, v in failing[1:]
             if _quantity_text(model, n) != _quantity_text(model, name)]  # (KDA: H and HV are one field)
    assumed = model.sources.get("head_k_dim")
    # Only H*K is measured where K is assumed: a failure that holds for every K (H*K itself, or HV) stays an error.
    guessed = (assumed is not None and assumed.kind == "assumed" and K is not None and (H * K) % tp == 0
               and all(n not in ("num_v_heads", "value width HV*V") for n, _ in failing))
    if guessed:
        # Only H*K is measured (the conv's key block): H rests on K = V, and a K that makes H divisible may be
        # the real one. An error needs the config's head_k_dim.
        notes.insert(0, f"only H*K = {H * (K or 0)} is measured: H = {H} rests on head_k_dim = head_v_dim = {K}, an "
                        "assumption (no config field and no tensor gives K alone); the TP sizes listed rest on it too")
    spec = variant_spec(model.kind)
    if spec.layer_checks_heads:
        notes.append(f"sglang 0.5.23 raises `ValueError: {spec.label} num_heads ({H}) must be divisible by shard "
                     f"tp_size ({tp})`; vLLM fails a bare assertion")
    else:
        notes.append(f"sglang and vLLM stop while loading, in `divide()`: `AssertionError: <n> is not divisible "
                     f"by {tp}` for the first sharded width that does not split")
        profile = ctx.deployment.profile
        if model.num_attention_heads and model.num_attention_heads % tp and profile.checks_attention_heads_first:
            notes.append(f"{profile.display_name} checks the attention heads first and stops there (GDR122)")
    working = working_tp_sizes(model)
    fixes = [f"use tp={t}" for t in _nearest(working, tp)] or ["no TP size > 1 splits these heads"]
    if guessed:
        fixes.insert(0, "pass the checkpoint with its config.json (its head_k_dim settles H)")
    return Finding({"tp": tp, "key": key, "value": value, "working": _sizes_text(working)},
                   location=_where(model.sources.get(name)), notes=notes, fixes=fixes,
                   severity="warning" if guessed else None)


def _quantity_text(model: LinearAttentionModel, name: str) -> str:
    return f"`{model.field_name(name)}`" if name in ("num_k_heads", "num_v_heads") else name


def _nearest(sizes: list[int], tp: int) -> list[int]:
    """The working sizes just below and above tp."""
    below = [s for s in sizes if s < tp]
    above = [s for s in sizes if s > tp]
    return ([below[-1]] if below else []) + ([above[0]] if above else [])


@rule(
    "GDR122", "tp-not-dividing-attention-heads", scope=MODEL,
    summary="the TP size does not divide the full-attention heads",
    message="tp={tp} does not divide `num_attention_heads`={heads}",
    explanation=(
        "The full-attention layers of a hybrid model are sharded by attention head, separately from the "
        "linear-attention layers. vLLM checks this before anything else and raises `ValueError: Total "
        "number of attention heads (<N>) must be divisible by tensor parallel size (<T>).`; sglang's "
        "Kimi-Linear asserts `num_attention_heads must be divisible by world_size`. In sglang the "
        "attention TP size can be smaller than TP with DP attention, so the same TP may load there.\n\n"
        "This is not a kernel precondition: the GDN/KDA layers may split fine at this TP (Qwen3.5-0.8B/2B "
        "have 8 attention heads and 27B has 24, so TP 16 fails here while the GDN layers allow it)."
    ),
    causes=("TP 16 for Qwen3.5-27B (24 heads) or Qwen3.5-0.8B (8 heads)",),
    fixes=("pick a TP size that divides both head counts; sglang: DP attention lowers the attention TP size",),
    engines="vLLM (ModelConfig.verify_with_parallel_config); sglang for Kimi-Linear and without DP attention.",
    example=ModelExample(qwen3_next_config(linear_num_key_heads=4, linear_num_value_heads=8, num_attention_heads=2),
                         "2 attention heads at TP 4", deployment={"tp": 4}),
)
def tp_attention_heads(ctx: ModelContext) -> Finding | None:
    heads, tp = ctx.model.num_attention_heads, ctx.deployment.tp
    if not heads or heads % tp == 0:
        return None
    note = ctx.deployment.profile.decode_of(ctx.model.kind).attention_heads_error.format(heads=heads, tp=tp)
    working = working_tp_sizes(ctx.model)
    return Finding({"tp": tp, "heads": heads}, location=_where(ctx.model.sources.get("num_attention_heads")),
                   notes=[note, f"TP sizes that work: {_sizes_text(working)}"],
                   fixes=[f"use tp={t}" for t in _nearest(working, tp)] or ["use tp=1"])


@rule(
    "GDR123", "tp-not-fitting-kv-heads", scope=MODEL,
    summary="the TP size neither divides nor is a multiple of the KV heads",
    message="tp={tp} neither divides nor is a multiple of `num_key_value_heads`={kv_heads}",
    explanation=(
        "The full-attention layers split KV heads across ranks when TP divides them, and replicate them when "
        "TP is a multiple of them. Any other TP size leaves some rank with a fraction of a KV head, which "
        "neither engine supports."
    ),
    causes=("TP 3 for a model with 2 or 4 KV heads",),
    fixes=("pick a TP size that divides or is a multiple of the KV heads",),
    engines="sglang 0.5.23 and vLLM.",
    example=ModelExample(qwen3_next_config(num_attention_heads=6, num_key_value_heads=3), "3 KV heads at TP 2",
                         deployment={"tp": 2}),
)
def tp_kv_heads(ctx: ModelContext) -> Finding | None:
    kv, tp = ctx.model.num_key_value_heads, ctx.deployment.tp
    if not variant_spec(ctx.model.kind).attention_kv_heads or not kv or kv % tp == 0 or tp % kv == 0:
        return None
    return Finding({"tp": tp, "kv_heads": kv}, location=_where(ctx.model.sources.get("num_key_value_heads")),
                   fixes=[f"use tp={t}" for t in _nearest(working_tp_sizes(ctx.model), tp)] or ["use tp=1"])


@rule(
    "GDR124", "uneven-value-head-groups", scope=MODEL,
    summary="the value heads are not a multiple of the key heads",
    message="`{hv_key}`={HV} is not a multiple of `{h_key}`={H}",
    explanation=(
        "The packed decode kernel maps value head j to key head j // (HV/H), so HV must be a multiple of H. "
        "It infers H from the `mixed_qkv` width and raises `ValueError: Invalid head config inferred from "
        "mixed_qkv: H=<H>, HV=<HV>.` otherwise. No TP size can fix a config like this."
    ),
    causes=("a config whose value head count was edited", "key and value head counts swapped"),
    fixes=("use a checkpoint whose value head count is a multiple of its key head count",),
    engines="sglang 0.5.23 and vLLM (the same kernel check).",
    example=ModelExample(qwen3_next_config(linear_num_key_heads=3), "HV=4 value heads for H=3 key heads"),
)
def uneven_groups(ctx: ModelContext) -> Finding | None:
    model = ctx.model
    H, HV = model.num_k_heads, model.num_v_heads
    if not H or not HV or HV % H == 0:
        return None
    tp = ctx.deployment.tp
    note = None
    if H % tp == 0 and HV % tp == 0:
        note = (f"the kernel would raise: ValueError: Invalid head config inferred from mixed_qkv: "
                f"H={H // tp}, HV={HV // tp}.")
    return Finding({"hv_key": model.field_name("num_v_heads"), "HV": HV, "h_key": model.field_name("num_k_heads"),
                    "H": H}, location=_where(model.sources.get("num_v_heads")), notes=[note] if note else [],
                   fixes=[f"use a checkpoint whose `{model.field_name('num_v_heads')}` is a multiple of {H}"])


@rule(
    "GDR125", "asymmetric-kda-heads", scope=MODEL,
    summary="key and value head shapes of a kda model differ",
    message="the KDA kernel needs equal key and value heads and head dims (got H={H}, HV={HV}, K={K}, V={V})",
    explanation=(
        "Kimi Delta Attention runs with H = HV heads of K = V channels: the packed decode kernel infers H "
        "from the `mixed_qkv` width and requires num_q_heads == num_k_heads and head_q_dim == head_k_dim. "
        "The optional `num_k_heads` / `head_k_dim` fields fall back to `num_heads` / `head_dim`; a config "
        "that sets them to other values describes a model the kernel cannot decode."
    ),
    causes=("`linear_attn_config.head_k_dim` or `num_k_heads` set to a different value",),
    fixes=("drop the optional `num_k_heads` / `head_k_dim` fields or set them equal to `num_heads` / `head_dim`",),
    engines="sglang 0.5.23 (`fused_recurrent_kda_packed_decode`).",
    example=ModelExample({**_KIMI_LINEAR,
                          "linear_attn_config": {**_KIMI_LINEAR["linear_attn_config"], "head_k_dim": 8}},
                         "Kimi-Linear with head_k_dim 8 != head_dim 16"),
)
def asymmetric_kda(ctx: ModelContext) -> Finding | None:
    model = ctx.model
    if not variant_spec(model.kind).symmetric_heads or not model.complete:
        return None
    if model.num_k_heads == model.num_v_heads and model.head_k_dim == model.head_v_dim:
        return None
    source = (model.sources.get("num_k_heads") if model.num_k_heads != model.num_v_heads
              else model.sources.get("head_k_dim"))
    return Finding({"H": model.num_k_heads, "HV": model.num_v_heads, "K": model.head_k_dim, "V": model.head_v_dim},
                   location=_where(source),
                   fixes=["set the key head count and dim equal to the value head count and dim"])


# -- GDR131-GDR133: state memory and engine support ------------------------------------------------------------
@rule(
    "GDR131", "linear-state-footprints", severity="info", scope=MODEL,
    summary="linear-attention state per request",
    message=("each request holds {per_request} of linear-attention state per rank: {layers} {layer_word} x "
             "({conv} conv + {ssm} SSM)"),
    explanation=(
        "A linear-attention layer keeps a fixed-size state per request instead of a KV cache: the short-conv "
        "window (W-1 columns of the [q | k | v] channels) and the recurrent SSM state [HV/tp, V, K]. The "
        "engines allocate one slot per request in every linear-attention layer, plus the reserved row 0, so "
        "the pool costs (slots) x (this number) per rank."
    ),
    fixes=("a bf16 SSM state halves the SSM part, at some accuracy cost (GDR249)",),
    example=ModelExample(qwen3_next_config(), "any model: the state each request holds"),
)
def state_footprint(ctx: ModelContext) -> Finding | None:
    memory = ctx.memory
    if memory is None:
        return None
    settings = ctx.settings
    notes = [f"SSM state {settings.state_dtype} ({settings.state_dtype_reason}); conv state "
             f"{settings.conv_dtype} ({settings.conv_dtype_reason})",
             f"the pool of {counted(memory.num_slots, 'slot')} takes {format_bytes(memory.pool_bytes)} per rank"]
    pool = settings.pool
    if pool is not None and pool.modelled and pool.counted_slots > 1:  # the figure is one slot (GDR135 counts)
        notes.append(f"{ctx.deployment.profile.display_name} counts {pool.counted_slots} such slots per running "
                     f"request ({pool.counting}), {format_bytes(pool.counted_slots * memory.bytes_per_request)}, "
                     "when it sizes the pool (GDR135)")
    return Finding(
        {"per_request": format_bytes(memory.bytes_per_request), "layers": memory.linear_layers,
         "layer_word": layer_word(memory.linear_layers),
         "conv": format_bytes(memory.conv_bytes_per_layer), "ssm": format_bytes(memory.ssm_bytes_per_layer)},
        notes=notes)


@rule(
    "GDR132", "state-budgets-too-small", severity="warning", scope=MODEL,
    summary="the memory budget does not hold the decode batch",
    message="a {budget} budget holds the state of {fit} requests per rank, fewer than the batch of {batch}",
    explanation=(
        "The linear-attention state pool needs one slot per running request (plus the reserved row 0) in "
        "every linear-attention layer. When the budget holds fewer requests than the decode batch, the "
        "engine caps the running requests below the batch, or fails to start. When it holds not even one "
        "request the deployment cannot run at all: then this is an error. Under sglang, which counts several "
        "slots per running request, GDR136 counts the requests as sglang does and replaces this rule."
    ),
    causes=("a large batch at low TP", "an fp32 SSM state on a small GPU"),
    fixes=("raise TP, lower the batch, or use a bf16 SSM state",),
    example=ModelExample(qwen3_next_config(), "a budget of 3 requests for a batch of 16 under vLLM",
                         deployment={"batch": 16, "gpu_memory": 140_000, "engine": "vllm"}),
)
def state_budget(ctx: ModelContext) -> Finding | None:
    memory = ctx.memory
    if memory is None or memory.budget is None or memory.requests_that_fit is None:
        return None
    if memory.requests_that_fit >= ctx.deployment.batch:
        return None
    needed = memory.bytes_per_request * (ctx.deployment.batch + 1)
    return Finding({"budget": format_bytes(memory.budget), "fit": memory.requests_that_fit,
                    "batch": ctx.deployment.batch},
                   notes=[f"{ctx.deployment.batch} requests need {format_bytes(needed)} per rank "
                          f"({ctx.deployment.batch + 1} slots x {format_bytes(memory.bytes_per_request)})"],
                   fixes=_budget_fixes(ctx, memory.requests_that_fit, memory.bytes_per_request),
                   severity=None if memory.requests_that_fit else "error")  # no request fits: nothing runs


def _budget_fixes(ctx: ModelContext, fit: int, per_request: int, reserved: int | None = None) -> list[str]:
    # A batch of 0 serves nothing: when no request fits, name the budget that holds one (its rows and row 0, which
    # holds one slot: `reserved`, a request's worth where each request is one slot).
    one = per_request + (per_request if reserved is None else reserved)
    first = (f"lower the batch to {fit}" if fit else
             f"not even one request fits: one needs {format_bytes(one)} per rank (a request and the "
             f"reserved row 0): raise the budget to at least that")
    fixes = [first, "raise TP to split the state across more ranks"]
    profile, settings = ctx.deployment.profile, ctx.settings
    fixed = profile.decode_of(ctx.model.kind).state_dtype_fixed
    halve = profile.state_dtype_setting("bfloat16")  # None where the release's flag has no bfloat16 (vLLM < 0.22)
    if settings.state_dtype == "float32" and not fixed and halve is not None:
        fixes.append(f"halve the SSM state with `{halve}`, at some accuracy cost (GDR249)")
    return fixes


@rule(
    "GDR133", "packed-decode-env-switch", severity="info", scope=MODEL,
    summary="the engine runs this kernel by default, and an environment variable turns it off",
    message="{engine} {statement}",
    explanation=(
        "vLLM (from 0.18.0, the first release with the GDN packed decode) runs it by default: "
        "`VLLM_ENABLE_FLA_PACKED_RECURRENT_DECODE` defaults to \"1\" in `vllm/envs.py`, and the GDN layer takes "
        "the packed decode for decode batches without speculative tokens. Set to 0, the variable turns it off, "
        "and the contract checked here is not the call vLLM makes. With speculative decoding the decode path is "
        "another kernel (GDR134). KDA layers decode with `fused_recurrent_kda` before vLLM 0.27.0 and with "
        "vLLM's own KDA packed op (another argument list) from 0.27.0 (GDR134)."
    ),
    fixes=("nothing to change: unset `VLLM_ENABLE_FLA_PACKED_RECURRENT_DECODE` or leave it at 1 for the packed "
           "decode checked here",),
    engines="vLLM 0.18.0 and later.",
    example=ModelExample(qwen3_next_config(), "a GDN model under vLLM", deployment={"engine": "vllm"}),
)
def vllm_packed_switch(ctx: ModelContext) -> Finding | None:
    profile = ctx.deployment.profile
    env = profile.decode_of(ctx.model.kind).packed_decode_env
    if env is None or (ctx.model.adapter is not None and ctx.model.adapter.own_decode):
        return None  # no switch, or not the packed kernel at all: GDR134 says which kernel the engine calls
    return Finding({"engine": profile.label,
                    "statement": f"runs the GDN packed decode by default (`{env}` defaults to "
                                 f"\"{profile.packed_decode_env_default}\"); `{env}=0` turns it off"},
                   fixes=[f"leave `{env}` unset (or {profile.packed_decode_env_default}) for the packed decode "
                          "checked here"])


# Rules whose errors mean the per-rank call is not what an engine would run, so the contract is not run.
BLOCKING_RULES: frozenset[str] = frozenset({"GDR103", "GDR121", "GDR124", "GDR125"})


# -- every architecture the engines route to GDN/KDA, and no silent pass -----------------------------
class UndescribedLinearAttention(Violation):
    rule = declare(
        "GDR107", "undescribed-linear-attention", scope=MODEL,
        summary="the config has linear attention that cannot be described",
        message="`{architecture}` has linear attention ({marker}) but {problem}",
        explanation=(
            "The config carries a linear-attention marker (`linear_attn_config`, `kda_layers`, "
            "`linear_num_*_heads`, `efficient_attention_config`, a `layer_types` entry of a linear kind, or an "
            "architecture that sglang or vLLM routes to its GDN/KDA backend), so the engine builds GDN or KDA "
            "layers. gdr-check could not work out which layers those are or their geometry: a field is missing, "
            "the layer map is unusable, or it makes no layer linear. \"Nothing to check\" would be a green CI "
            "gate on a model that does have linear attention, so this is an error. A value of the wrong type or "
            "out of range (a layer count written as a string, or past its limit in docs/limits.md) is GDR108, "
            "here too; when the layers cannot be described without it, this error names it as well, so that "
            "ignoring GDR108 never passes a model nothing was checked of."
        ),
        causes=("a layer count or layer map that is missing",
                "a layer map that makes every layer full attention",
                "an architecture renamed by a fine-tune while its config keeps the linear-attention fields"),
        fixes=("fix the config key named in the message; compare with the released config of the model",),
        example=ModelExample(qwen3_next_config(num_hidden_layers=None), "a config-only checkpoint without its "
                             "layer count"),
        engines="sglang 0.5.23 and vLLM.",
    )

    architecture: object
    marker: object
    problem: object


def undescribed_linear_attention(checkpoint: Checkpoint, selection: Selection, markers: list[tuple[str, str]]
                                 ) -> list[Diagnostic]:
    """GDR107 diagnostics for a config with linear-attention markers and no description: one per problem."""
    locate = Locator(checkpoint)
    marker_key, marker_text = markers[0]
    marker = f"`{marker_key}`: {marker_text}" if marker_key != "architectures" else marker_text
    notes = [f"also `{key}`: {text}" for key, text in markers[1:4]]
    problems = why_undescribed(checkpoint, selection.adapter)
    architecture = selection.identity.architecture
    by_type = adapter_serving(model_type=selection.identity.root_model_type)
    if by_type is not None and selection.adapter is not None and by_type is not selection.adapter:
        # `architectures` chose another family than `model_type`: the missing fields are likely that mismatch's
        notes.insert(0, f"`model_type` `{selection.identity.root_model_type}` is {by_type.family}'s (served by "
                        f"`{by_type.architectures[0]}`), while `architectures` names {selection.adapter.family}'s "
                        f"`{architecture}`: the fields are looked up as {selection.adapter.family}'s")
    # A value of the wrong type or out of range is GDR108's whether or not the model could be described (with
    # weights, the layers come from the tensors and the same value is GDR108), as documented; GDR107 still says
    # that nothing was described, so that ignoring GDR108 never turns an unchecked model into a pass.
    nothing_checked = (f"`{architecture}` has linear attention ({marker}), but its layers could not be described: "
                       "nothing else was checked")
    diagnostics = [invalid_value_diagnostic(problem.invalid, nothing_checked)
                   for problem in problems if problem.invalid is not None]
    if not problems:
        where = locate.config(marker_key).location
        text = ("gdr-check has no adapter for this architecture and its tensors hold no GDN/KDA parameter it "
                "recognises")
        violation = UndescribedLinearAttention(architecture=architecture, marker=marker, problem=text)
        diagnostics.append(violation.diagnostic(
            location=where, notes=notes,
            fixes=["give the checkpoint's config.json and weights, or report the architecture"]))
        return diagnostics
    for problem in problems:
        text = (f"`{problem.key}` {problem.problem}" if problem.invalid is None
                else f"`{problem.key}` holds a value that cannot be used (GDR108)")
        violation = UndescribedLinearAttention(architecture=architecture, marker=marker, problem=text)
        diagnostics.append(violation.diagnostic(location=problem.source.location, notes=notes,
                                                fixes=[f"fix `{problem.key}`"]))
    return diagnostics


@rule(
    "GDR109", "architectures-not-serving-the-model", severity="warning", scope=MODEL,
    summary="`architectures` does not name a model class that serves this model",
    message="`architectures` {what}; sglang and vLLM take the model class from its first entry",
    explanation=(
        "transformers builds the config class from `model_type`, while sglang and vLLM pick the model class from "
        "the first entry of `architectures` (a list of class names). gdr-check describes the layers by the model "
        "type's family. When the two disagree, the engine builds a model class that does not serve this model "
        "type: it fails to load the weights, or builds other layers than the ones checked here. A string or an "
        "empty list fails at start-up."
    ),
    causes=("a config edited by hand, or copied from another model", "a class name with a typo"),
    fixes=("set `architectures` to the model class of the released config",),
    example=ModelExample(qwen3_next_config(architectures=["LlamaForCausalLM"]),
                         "a Qwen3-Next config naming another model class"),
    engines="sglang 0.5.23 and vLLM.",
)
def architectures_not_serving(ctx: ModelContext) -> Finding | None:
    model, identity = ctx.model, ctx.model.identity
    locator = model.locator
    if identity is None or locator is None or "architectures" not in (locator.checkpoint.config or {}):
        return None
    declared = (locator.checkpoint.config or {})["architectures"]
    by_type = adapter_serving(model_type=identity.root_model_type)
    if not isinstance(declared, list) or not declared or not isinstance(declared[0], str):
        what = ("is an empty list" if declared == []
                else f"is {shown_value(declared)}, whose first entry is no class name" if isinstance(declared, list)
                else f"is {shown_value(declared)}, not a list of class names")
        fix = f"write it as a list: [\"{by_type.architectures[0]}\"]" if by_type else "write it as a list"
    elif adapter_serving(architecture=declared[0]) is None and by_type is not None and model.adapter is by_type:
        # A class gdr-check knows is left alone: it chose the family (Kimi-K3's text-only class reads a
        # `kimi_linear` config), and fields it lacks are GDR107's. An unknown one is what the engine builds.
        serving = " or ".join(f"`{name}`" for name in by_type.architectures)
        what = f"names `{declared[0]}`, but `model_type` `{identity.root_model_type}` is served by {serving}"
        fix = (f"set `architectures` to [\"{by_type.architectures[0]}\"], or `model_type` to the one `{declared[0]}` "
               "reads")
    else:
        return None
    return Finding({"what": what}, fixes=[fix], location=locator.config("architectures").location)


def _either(names: Iterable[str]) -> str:
    """'"a", "b" or "c"'."""
    quoted = [f'"{name}"' for name in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


@rule(
    "GDR108", "invalid-config-values", scope=MODEL,
    summary="a config value has the wrong type or is out of range",
    message="`{key}` is {value}: {problem}",
    explanation=(
        "Head counts, head dims, conv widths, layer counts and the hidden size must be positive whole numbers, "
        "and the model dtype one of bfloat16, float16 or float32. A value written as a string, float, boolean, "
        "null or list makes the engine's config class fail, or fall back to a default that does not match the "
        "weights. gdr-check does not guess: the value is reported and not used. The value's limits are in "
        "docs/limits.md. When the layers cannot be described without it (the layer count of a config-only "
        "checkpoint), nothing else is checked.\n\n"
        "A `mamba_ssm_dtype` the engine reads (sglang: every GDN family; vLLM: Qwen3.5/3.6) must name the state "
        "dtype: exactly float32, bfloat16 or float16 for sglang, which logs a warning for any other value and "
        "keeps its float32 state (a warning here); vLLM also takes \"half\", \"float\" and \"auto\", and its "
        "Qwen3.5 hook passes any other value on as `mamba_ssm_cache_dtype`, which it cannot map to a dtype, so it "
        "fails at start-up (an error, or a warning when the deployment sets the state dtype, which then wins)."
    ),
    causes=("a config edited by hand or by a script that wrote numbers as strings", "an unknown `torch_dtype`",
            "a `mamba_ssm_dtype` such as \"float64\" or \"fp32\" that the engine does not take"),
    fixes=("write the value as a JSON integer (or a dtype name)",),
    example=ModelExample(qwen3_next_config(linear_num_value_heads="4"), "a head count written as a string"),
    engines="sglang 0.5.23 and vLLM.",
)
def invalid_config_values(ctx: ModelContext) -> list[Finding]:
    findings = [_invalid_value_finding(item) for item in ctx.model.invalid_values]
    ssm = ctx.settings.ssm_dtype_problem
    if ssm is not None:
        key = ssm.source.key if ssm.source is not None and ssm.source.key else "mamba_ssm_dtype"
        findings.append(Finding(
            {"key": key, "problem": ssm.problem, "value": shown_value(ssm.value)},
            severity="error" if ssm.fatal else "warning",
            location=ssm.source.location if ssm.source is not None else None,
            fixes=[f"set `mamba_ssm_dtype` to {_either(STATE_DTYPES)}"]))
    return findings


def _invalid_value_finding(item: InvalidValue) -> Finding:
    return Finding({"key": item.key, "problem": item.problem, "value": shown_value(item.value)},
                   location=item.source.location,
                   fixes=[f"set `{item.key.rsplit('.', 1)[-1]}` to the value the released config has"])


def invalid_value_diagnostic(item: InvalidValue, note: str) -> Diagnostic:
    """GDR108 for a config that could not be described (`undescribed_linear_attention`), with `note`."""
    finding = _invalid_value_finding(item)
    finding.notes.append(note)
    return RULES["GDR108"].diagnostic(finding)


@rule(
    "GDR126", "tp-unsupported-by-architecture", scope=MODEL,
    summary="the architecture runs at tp=1 only",
    message="`{architecture}` runs at tp=1 only; tp={tp} is not supported",
    explanation=(
        "Jet-Nemotron's JetBlock (sglang 0.5.23 `models/jet_nemotron.py`) keeps the full head count in its "
        "projections, `A_log` and `dt_bias`, while its state pool is split by the attention TP size "
        "(`configs/jet_nemotron.py`). At tp > 1 the layer and the pool disagree on the heads per rank."
    ),
    causes=("serving Jet-Nemotron with --tp 2 or more",),
    fixes=("serve at tp=1 and scale with data parallelism",),
    example=ModelExample(_JET_NEMOTRON, "a Jet-Nemotron config at TP 2", deployment={"tp": 2}),
    engines="sglang 0.5.23.",
)
def tp_unsupported(ctx: ModelContext) -> Finding | None:
    adapter = ctx.model.adapter
    if adapter is None or adapter.tp_one_only is None or ctx.deployment.tp == 1:
        return None
    return Finding({"architecture": ctx.model.architecture, "tp": ctx.deployment.tp},
                   notes=[adapter.tp_one_only], fixes=["use tp=1 (data parallelism for more GPUs)"])


@rule(
    "GDR134", "decode-paths", severity="info", scope=MODEL,
    summary="the decode kernel the engine calls for this model",
    message="the decode step under {engine} calls `{kernel}`{packed}",
    explanation=(
        "The packed recurrent decode kernels are what gdr-check checks, and not every model reaches them. "
        "sglang 0.5.23: GDN layers decode with `fused_recurrent_gated_delta_rule_packed_decode` and KDA layers "
        "with `fused_recurrent_kda_packed_decode`, except Jet-Nemotron, whose JetBlock calls "
        "`fused_recurrent_gated_delta_rule_update` itself, and KDA layers with a safe-gate lower bound "
        "(Kimi-K3 `gate_lower_bound`, GLM-5-Next, Ling `kda_safe_gate`), which take the packed kernel only "
        "with a decode kernel that supports the safe gate (`kda_backend.py`); otherwise Kimi-K3's "
        "`kda_fused_decode` or the unfused chain. Other sglang releases differ: no KDA packed decode before "
        "0.5.13; safe-gate layers take it as is in 0.5.17 - 0.5.19 and never in 0.5.20 - 0.5.21; from 0.5.11 an "
        "SM100+ GPU (`--gpu`, `--sm`) with a bfloat16 state decodes with flashinfer unless a decode backend is "
        "given. vLLM decodes GDN with the packed kernel by default (`VLLM_ENABLE_FLA_PACKED_RECURRENT_DECODE` "
        "defaults to 1) for batches without speculative tokens, and KDA with `fused_recurrent_kda` before "
        "0.27.0, its own KDA packed op (another argument list) from 0.27.0.\n\n"
        "This note appears where the path is not the packed kernel: the kernel contract is then not run, "
        "while the TP, pool and shape checks still are, and `gdr-check dry-run` has nothing to run (GDR314, an "
        "error). Every report carries the path in `decode_path` (JSON)."
    ),
    fixes=("pick the engine flag named in the notes to change the path",),
    engines="sglang 0.5.23 and vLLM.",
    example=ModelExample(_KIMI_LINEAR, "a KDA model under vLLM", deployment={"engine": "vllm"}),
)
def decode_path_info(ctx: ModelContext) -> Finding | None:
    deployment = ctx.deployment
    path = decode_path(ctx.model, deployment.engine, speculative_tokens=deployment.speculative_tokens,
                       sm=deployment.sm, state_dtype=ctx.settings.state_dtype)
    if path.packed:
        return None  # the usual path: the JSON report's `decode_path` says it, the text stays quiet
    notes = [path.reason]
    if ctx.model.lower_bound is not None:
        notes.append(f"lower bound {ctx.model.lower_bound[0]} {_source_note(ctx.model.lower_bound[1])}")
    return Finding({"engine": path.engine, "kernel": path.kernel,
                    "packed": " (the packed decode kernel)" if path.packed else ", not the packed decode kernel"},
                   notes=notes, fixes=[path.switch] if path.switch else [])


BLOCKING_RULES = BLOCKING_RULES | {"GDR108", "GDR126"}


# -- pool strategies and speculative decoding -------------------------------------------------
# The arithmetic is `deployment.state_pool` (sglang's own formulas), the same `gdr-check launch` runs.
def _pool_plan(ctx: ModelContext) -> PoolPlan | None:
    return plan_pool(ctx.model, ctx.settings)


def _plan_text(plan: PoolPlan) -> str:
    text = f"{plan.slots_per_request} state slot(s) counted per request ({plan.counting})"
    if plan.speculative_tokens:
        text += f" and the verify state of {plan.speculative_tokens} draft token(s)"
    return text


def _engine_outcome(ctx: ModelContext, plan: PoolPlan, pool: int) -> tuple[str, bool]:
    """What sglang does with a pool of `pool` (K) for the batch: its words, and whether it stops start-up."""
    cap = RunningCap(pool, plan.slots_per_request, plan.batch)
    refusal = cap.refusal
    if refusal is not None:
        return f"{ctx.deployment.profile.label} stops at start-up: `{refusal}`", True
    return cap.warning(ctx.deployment.profile), False


def _no_buffer_fix(plan: PoolPlan, fit_with_three: int) -> str | None:
    if not plan.tracking_slots or fit_with_three <= (plan.requests_that_fit or 0):
        return None
    return ("serve with `--mamba-radix-cache-strategy no_buffer --disable-overlap-schedule` (in gdr-check "
            f"`--mamba-strategy no_buffer`): 3 slots counted per request, {fit_with_three} requests")


@rule(
    "GDR135", "state-pool-plans", severity="info", scope=MODEL,
    summary="the slots sglang counts per running request under its pool strategy, and the state memory they cost",
    message=("{engine} counts {counted} state slot(s) per running request ({counting}) when it sizes the state "
             "pool{spec}: {per_request} per rank"),
    explanation=(
        "sglang sizes the linear-attention state pool in slots (one request's state in every linear layer) and caps "
        "the running requests at the pool's slots divided by the slots it counts per request, "
        "`_calculate_mamba_ratio` (sglang 0.5.23 `mem_cache/kv_cache_configurator.py`): 1 with the radix cache off, "
        "else 3, plus the ping-pong tracking slots of `extra_buffer` (2 with the overlap schedule, 1 without it or "
        "lazily, `get_mamba_tracking_slots` in `mem_cache/allocation_sizing.py`). The strategy `auto` (the "
        "default) resolves to extra_buffer for the architectures a release lists, with the overlap schedule on and "
        "the Triton backend, from 0.5.14 (before: no_buffer): Qwen3-Next, Qwen3.5 and, from 0.5.16, Kimi-Linear "
        "count 5 slots per request by default. With speculative decoding sglang sizes the pool from the budget "
        "with each running request's verify state, one slot per draft token.\n\n"
        "This note appears where the strategy, the draft tokens or the radix cache are set; vLLM's pool "
        "strategies and speculative buffers are not modelled."
    ),
    fixes=("`--mamba-radix-cache-strategy no_buffer --disable-overlap-schedule` counts 3 slots per request",),
    example=ModelExample(qwen3_next_config(), "extra_buffer and 2 draft tokens",
                         deployment={"mamba_strategy": "extra_buffer", "speculative_tokens": 2}),
    engines="sglang 0.5.9-0.5.23.",
)
def pool_plan_info(ctx: ModelContext) -> Finding | None:
    deployment = ctx.deployment
    chosen = deployment.mamba_strategy != "auto" or deployment.speculative_tokens or not deployment.radix_cache
    if not deployment.profile.models_pool_strategies:
        if chosen:
            return Finding({"engine": deployment.profile.label, "counted": 1,
                            "counting": "its pool strategies are not modelled", "spec": "",
                            "per_request": "one slot"},
                           notes=["vLLM's mamba cache strategies and speculative buffers are not modelled: "
                                  "the numbers shown elsewhere are for one slot per request"])
        return None
    plan = _pool_plan(ctx)
    if plan is None or not chosen:
        return None
    notes = [f"strategy: {plan.strategy} ({plan.strategy_reason})",
             f"one slot: {format_bytes(plan.slot_bytes)} over {len(ctx.model.linear_layers)} linear layers; a "
             f"request holds {counted(plan.held_slots, 'slot')} at once"]
    if plan.speculative_tokens:
        notes.append(f"verify state: {plan.speculative_tokens} slot(s) per running request in the sizing")
    notes.append(f"a batch of {plan.batch} needs a pool of {plan.batch} x {plan.slots_per_request} = "
                 f"{counted(plan.pool_for_batch, 'slot')} (and row 0): a {format_bytes(plan.bytes_for_batch)} budget "
                 "per rank")
    if plan.budget is not None:
        notes.append(f"a {format_bytes(plan.budget)} budget gives a pool of {plan.pool_size} and serves "
                     f"{plan.requests_that_fit} requests")
    spec = (f", with the verify state of {plan.speculative_tokens} draft token(s) (one slot each)"
            if plan.speculative_tokens else "")
    return Finding({"engine": deployment.profile.label, "counted": plan.slots_per_request,
                    "counting": plan.counting, "spec": spec, "per_request": format_bytes(plan.bytes_per_request)},
                   notes=notes)


@rule(
    "GDR136", "state-pools-too-small-for-the-strategy", severity="warning", scope=MODEL,
    summary="the state budget's pool serves fewer running requests than the batch",
    message=("a {budget} budget gives a pool of {pool} slots, which serves {fit} running requests per rank at "
             "{what}, fewer than the batch of {batch}"),
    explanation=(
        "sglang sizes its linear-attention state pool from the budget (`max_mamba_cache_size` K = (budget - one "
        "slot) // one slot; with D draft tokens (budget - slot x (1 + D)) // (slot x (1 + D / ratio))) and serves "
        "at most K // ratio running requests, ratio being the slots it counts per request (GDR135). Below the "
        "requested number it caps them (a warning from sglang 0.5.17, silent before): the deployment serves a "
        "smaller batch. Where the pool is empty or serves no request, sglang stops at start-up: then this is an "
        "error. The numbers here are the linear-attention state alone, per rank (`--gpu-memory`)."
    ),
    causes=("extra_buffer (the default for Qwen3-Next and Qwen3.5) at a large batch on a small budget",
            "many draft tokens with an fp32 SSM state"),
    fixes=("raise `--mamba-full-memory-ratio` or `--max-mamba-cache-size` so the state pool gets the slots shown",
           "use `--mamba-radix-cache-strategy no_buffer --disable-overlap-schedule`",
           "lower the batch or the draft tokens"),
    example=ModelExample(qwen3_next_config(), "auto -> extra_buffer counts 5 slots per request of a 400 kB budget",
                         deployment={"batch": 8, "gpu_memory": 400_000}),
    engines="sglang 0.5.9-0.5.23.",
    supersedes=("GDR132",),  # the same budget, its requests counted as sglang counts them: one count per report
)
def pool_plan_budget(ctx: ModelContext) -> Finding | None:
    plan = _pool_plan(ctx)
    if plan is None or plan.pool_size is None or plan.requests_that_fit is None or plan.budget is None:
        return None
    if plan.requests_that_fit >= plan.batch:
        return None
    outcome, refused = _engine_outcome(ctx, plan, plan.pool_size)
    notes = [f"{plan.batch} requests need a pool of {plan.batch} x {plan.slots_per_request} = "
             f"{counted(plan.pool_for_batch, 'slot')} of {format_bytes(plan.slot_bytes)}: a "
             f"{format_bytes(plan.bytes_for_batch)} budget per rank", outcome]
    fixes = [f"raise `--mamba-full-memory-ratio` until the state pool gets {format_bytes(plan.bytes_for_batch)} per "
             f"rank, or set `--max-mamba-cache-size {plan.pool_for_batch * ctx.deployment.tp}`"]
    three = pool_from_budget(plan.budget, plan.slot_bytes, ratio=3, draft_tokens=plan.speculative_tokens)
    no_buffer = _no_buffer_fix(plan, max(three, 0) // 3)
    if no_buffer is not None:
        fixes.append(no_buffer)
    if plan.speculative_tokens:
        fixes.append("fewer draft tokens (`--speculative-num-draft-tokens`)")
    # the batch, TP, a bf16 state: as GDR132, which it replaces
    fixes += _budget_fixes(ctx, plan.requests_that_fit, plan.bytes_per_request, plan.reserved_bytes)
    return Finding({"budget": format_bytes(plan.budget), "pool": plan.pool_size, "fit": plan.requests_that_fit,
                    "what": _plan_text(plan), "batch": plan.batch},
                   severity="error" if refused else None, notes=notes, fixes=fixes)


@rule(
    "GDR137", "slot-counts-too-small-for-the-strategy", severity="warning", scope=MODEL,
    summary="the pool's rows serve fewer running requests than the batch",
    message=("a pool of {slots} (0..{last}) serves {fit} running requests at {per_request} slots each ({counting}), "
             "fewer than the batch of {batch}"),
    explanation=(
        "sglang serves at most K // ratio running requests from a pool of K + 1 rows (row 0 is padding), ratio "
        "being the slots it counts per request (GDR135: 5 under `extra_buffer` with the overlap schedule, the "
        "default for Qwen3-Next and Qwen3.5; 3 under no_buffer; 1 with the radix cache off). A `--slots` below "
        "batch x ratio + 1 gets the batch capped (a warning from sglang 0.5.17, silent before), and a pool that "
        "serves no request stops start-up (an error). gdr-check's default `--slots` is that smallest pool. The "
        "engine then never makes a decode call of the whole batch: this rule replaces the decode call's "
        "out-of-range slots (GDR241)."
    ),
    causes=("`--slots batch + 1`, the size without sglang's radix cache", "a pool size taken from vLLM"),
    fixes=("grow the pool to batch x ratio + 1 rows, or leave gdr-check's `--slots` out", "lower the batch"),
    example=ModelExample(qwen3_next_config(), "8 requests of 5 counted slots in a 9-row pool",
                         deployment={"batch": 8, "slots": 9}),
    engines="sglang 0.5.9-0.5.23.",
    # The model check's decode call holds slots 1..B: past a pool this small the engine caps the batch first.
    supersedes=("GDR241",),
)
def slot_count_for_strategy(ctx: ModelContext) -> Finding | None:
    deployment, pool = ctx.deployment, ctx.settings.pool
    slots, batch = deployment.slots, deployment.batch
    if pool is None or not pool.modelled or slots is None:
        return None  # vLLM: GDR241 on the decode call says a pool too small
    ratio = pool.counted_slots
    cap = RunningCap(slots - 1, ratio, batch)
    if not cap.capped:
        return None
    needed = batch * ratio + 1
    refusal = cap.refusal
    notes = [f"{deployment.profile.label} counts {ratio} slots per running request ({pool.counting}; strategy "
             f"{pool.strategy}: {pool.reason}): {batch} x {ratio} + 1 = {counted(needed, 'row')}",
             (f"{deployment.profile.label} stops at start-up: `{refusal}`" if refusal
              else cap.warning(deployment.profile))]
    fixes = [f"grow the pool to at least {counted(needed, 'slot')} (gdr-check `--slots {needed}`, or no `--slots`)"]
    if cap.cap:  # a batch of 0 serves nothing
        fixes.append(f"lower the batch to {cap.cap}")
    three = (slots - 1) // 3
    if pool.tracking_slots and three > cap.cap:
        fixes.append("serve with `--mamba-radix-cache-strategy no_buffer --disable-overlap-schedule` (in gdr-check "
                     f"`--mamba-strategy no_buffer`): 3 slots counted per request, {three} requests")
    return Finding({"batch": batch, "fit": cap.cap, "per_request": ratio, "counting": pool.counting,
                    "slots": counted(slots, "slot"), "last": slots - 1},
                   severity="error" if refusal else None, notes=notes, fixes=fixes)


@rule(
    "GDR138", "kda-state-dtype-refused", severity="error", scope=MODEL,
    summary="the engine release refuses the KDA recurrent state dtype the deployment requests",
    message="{engine} refuses a {dtype} KDA recurrent state: it stops at start-up",
    explanation=(
        "From vLLM 0.30.0 a KDA model's recurrent state follows `--mamba-ssm-cache-dtype` (before, vLLM kept it "
        "in float32 whatever the flag said). Its KDA state dtype function takes only \"auto\" (float32), float32 "
        "and bfloat16, and raises a ValueError for anything else, float16 included, although the flag itself "
        "offers float16. The model class calls it while vLLM builds its configuration, so the server stops "
        "before it loads a weight (vLLM 0.33.0: model_executor/layers/mamba/mamba_utils.py:133-148, called from "
        "platforms/interface.py:1059). GDN models are not affected: their state takes float16."
    ),
    causes=("`--mamba-ssm-cache-dtype float16` (gdr-check `--state-dtype float16`) copied from a GDN deployment",),
    fixes=("serve with `--mamba-ssm-cache-dtype bfloat16` to halve the state, or leave it at auto (float32)",),
    example=ModelExample(kimi_linear_config(), "a float16 KDA state under vLLM",
                         deployment={"engine": "vllm", "state_dtype": "float16"}),
    engines="vLLM 0.30.0 and later.",
)
def kda_state_dtype_refused(ctx: ModelContext) -> Finding | None:
    refusal = ctx.settings.kda_state_refusal
    if refusal is None:
        return None
    profile = ctx.deployment.profile
    accepted = profile.kda_state_dtypes or ()
    flag = profile.state_dtype_flag
    return Finding({"engine": profile.label, "dtype": ctx.settings.state_dtype},
                   notes=[f"{profile.label} stops with `{refusal}`"],
                   fixes=[f"serve with `{flag} {dtype}`" + (" (halves the state)" if dtype == "bfloat16" else "")
                          for dtype in reversed(accepted)] + [f"leave `{flag}` at auto ({profile.kda_state_dtype})"])
