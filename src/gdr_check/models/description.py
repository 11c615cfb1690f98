"""The model description: the linear-attention geometry of a checkpoint, from its config and every layer's tensors.

`describe()` reads the config through the family adapter and fills each field the config lacks from what the
tensors of most linear-attention layers measure (every tensor axis solved back into the field it measures).
The description records each value with its source, and keeps its evidence (each layer's tensors and layout,
the layers whose tensors are linear attention, a `Locator`) without judging it: whether the config and the
tensors agree (GDR103, GDR111-GDR115) is decided by the rules (`checks/config_weights.py`, reported by
`checks/rules_model.py`).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import field, replace
from itertools import repeat
from typing import Any, Literal, Protocol

from ..base.errors import display_path
from ..base.limits import LIMITS, range_problem, shorten
from ..base.records import dataclass
from ..base.report import Location
from ..base.tensor_spec import canonical_dtype
from ..base.variants import VariantName, variant_spec
from .adapters import (
    GEOMETRY_FIELDS,
    SHAPE_FIELDS,
    Adapter,
    ConfigView,
    Dim,
    Geometry,
    Identity,
    LayerMap,
    Layout,
    TensorLike,
    layers_by_namespace,
    with_field,
)
from .quantized import Quantization, UnpackedWeight, quantization_of, unpacked_layer

SourceKind = Literal["config", "tensor", "assumed", "default"]


class CheckpointLike(Protocol):
    """What the description reads from `gdr_check.sources.Checkpoint` (read-only, so any mapping will do)."""

    @property
    def config(self) -> dict[str, Any] | None: ...
    @property
    def config_file(self) -> str | None: ...
    @property
    def config_keys(self) -> Mapping[str, Any]: ...
    @property
    def tensors(self) -> Mapping[str, TensorLike]: ...
    @property
    def index_file(self) -> str | None: ...
    @property
    def index_lines(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class Source:
    """Where a value came from: a config key, a tensor, or an assumption."""

    kind: SourceKind
    key: str | None = None
    tensor: str | None = None
    shard: str | None = None
    location: Location | None = None
    detail: str | None = None

    @property
    def leaf(self) -> str | None:
        """The config key without its section (`text_config.linear_num_key_heads` -> `linear_num_key_heads`)."""
        return self.key.rsplit(".", 1)[-1] if self.key else None

    def __str__(self) -> str:
        if self.kind == "config":
            return f"config `{self.key}`"
        if self.kind == "tensor":
            return f"tensor `{self.tensor}`"
        return self.detail or self.kind

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "key": self.key, "tensor": self.tensor, "shard": self.shard,
                "detail": self.detail}


class Locator:
    """Turns config keys and tensor names into `Source`s with report locations."""

    def __init__(self, checkpoint: CheckpointLike) -> None:
        self.checkpoint = checkpoint

    def config(self, dotted: str) -> Source:
        where = (self.checkpoint.config_keys or {}).get(dotted)
        location = Location(
            file=self.checkpoint.config_file, json_key=dotted,
            line=getattr(where, "line", None), column=getattr(where, "column", None),
            end_line=getattr(where, "end_line", None), end_column=getattr(where, "end_column", None),
        )
        return Source("config", key=dotted, location=location)

    def tensor_location(self, info: TensorLike) -> Location:
        where = (self.checkpoint.index_lines or {}).get(info.name)
        return Location(
            file=self.checkpoint.index_file if where is not None else self._shard_path(info.shard),
            line=getattr(where, "line", None), column=getattr(where, "column", None),
            end_line=getattr(where, "end_line", None), end_column=getattr(where, "end_column", None),
            tensor=info.name, shard=info.shard,
        )

    def _shard_path(self, shard: str) -> str:
        """The shard as the reports show every file: from the working directory, like `config_file`."""
        root = getattr(self.checkpoint, "root", None)
        return display_path(os.path.join(root, shard)) if root is not None and shard else shard

    def tensor(self, info: TensorLike) -> Source:
        # A packed weight's shape is its unpacked one: say how it is stored.
        detail = (f"{list(info.shape)} unpacked ({info.detail})" if isinstance(info, UnpackedWeight)
                  else f"{canonical_dtype(info.dtype)}{list(info.shape)}")
        return Source("tensor", tensor=info.name, shard=info.shard, location=self.tensor_location(info),
                      detail=detail)


# -- evidence ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class InvalidValue:
    """A config value of the wrong type or out of range: the key, the value as written, and what is wrong."""

    field: str
    key: str
    value: Any
    problem: str
    source: Source
    # The other geometry fields read from the same key (Kimi-Linear's `linear_attn_config.head_dim` is both
    # head_k_dim and head_v_dim): reported once, as `field`, but none of them is missing from the config.
    also: tuple[str, ...] = ()

    @property
    def fields(self) -> tuple[str, ...]:
        """Every field this value was read for."""
        return (self.field, *self.also)


def value_problem(value: Any, name: str | None = None) -> str | None:
    """Why `value` cannot be a head count or size, as "is ..." reads after the value (None: a positive integer
    within `name`'s range of `gdr_check.base.limits`)."""
    if isinstance(value, bool):
        return "a boolean, not a whole number"
    if isinstance(value, int):
        if value <= 0:
            return "not a positive whole number"
        return range_problem(name, value) if name in LIMITS else None
    kinds = {float: "a float", str: "a string", list: "a list", dict: "an object", type(None): "null"}
    return f"{kinds.get(type(value), 'not a number')}, not a whole number"


# Model dtypes the engines run the linear-attention layers in.
MODEL_DTYPES = ("bfloat16", "float16", "float32")


@dataclass
class ModelDtypes:
    activation: str
    activation_source: Source
    A_log: str | None = None  # checkpoint dtypes; the engines hold A_log as an fp32 parameter
    dt_bias: str | None = None
    # The config's requested SSM state dtype, verbatim, of whatever JSON type (None: absent or null, which both
    # engines read as unset); an engine that reads it and does not take it is GDR108 (`deployment.resolve`).
    mamba_ssm_dtype: Any = None
    mamba_ssm_dtype_source: Source | None = None


@dataclass
class LinearAttentionModel:
    architecture: str
    family: str
    kind: VariantName
    num_hidden_layers: int | None
    linear_layers: list[int]
    num_k_heads: int | None
    num_v_heads: int | None
    head_k_dim: int | None
    head_v_dim: int | None
    conv_kernel: int | None
    hidden_size: int | None
    num_attention_heads: int | None
    num_key_value_heads: int | None
    dtypes: ModelDtypes
    sources: dict[str, Source] = field(default_factory=dict)
    known_architecture: bool = True
    adapter: Adapter | None = None
    namespace: str | None = None
    layouts: tuple[str, ...] = ()
    layer_map: LayerMap = field(default_factory=LayerMap)
    weights_checked: bool = False
    # Tensors the checkpoint holds when none lies under the family's layer names (so nothing was cross-checked):
    # how many, and the first few names (GDR116). 0 when the weights were placed or none were read.
    unplaced_tensors: int = 0
    unplaced_examples: tuple[str, ...] = ()
    # Beta doubling (OLMo-Hybrid `linear_allow_neg_eigval`), which the packed kernel does not do.
    beta_scale_flag: tuple[bool, Source] | None = None
    invalid_values: list[InvalidValue] = field(default_factory=list)
    # The KDA safe-gate lower bound (Kimi-K3 `gate_lower_bound`, GLM-5-Next, Ling `kda_lower_bound`).
    lower_bound: tuple[Any, Source] | None = None
    notes: list[str] = field(default_factory=list)
    identity: Identity | None = None  # what the config says the model is (`architectures`, `model_type`)
    # The evidence the rules compare the config with (`checks.config_weights`, GDR103 and GDR111-GDR115): each
    # decoder layer's tensors (empty when no weights were read or the family's tensors are not modelled), the
    # layers whose tensors are linear attention, each linear layer's tensor layout, and where things are.
    layer_tensors: dict[int, dict[str, TensorLike]] = field(default_factory=dict, repr=False, compare=False)
    tensor_linear_layers: list[int] = field(default_factory=list, repr=False, compare=False)
    layer_layouts: dict[int, Layout] = field(default_factory=dict, repr=False, compare=False)
    locator: Locator | None = field(default=None, repr=False, compare=False)

    @property
    def complete(self) -> bool:
        """Every geometry field is known, so per-rank shapes can be computed."""
        return all(getattr(self, name) for name in GEOMETRY_FIELDS)

    def field_name(self, name: str) -> str:
        """How a field is named in messages: its config key, or the description's own name."""
        source = self.sources.get(name)
        return (source.leaf if source is not None and source.kind == "config" else None) or name

    def to_dict(self) -> dict[str, Any]:
        return {
            "architecture": self.architecture,
            "family": self.family,
            "kind": self.kind,
            "num_hidden_layers": self.num_hidden_layers,
            "linear_layers": list(self.linear_layers),
            "num_k_heads": self.num_k_heads,
            "num_v_heads": self.num_v_heads,
            "head_k_dim": self.head_k_dim,
            "head_v_dim": self.head_v_dim,
            "conv_kernel": self.conv_kernel,
            "hidden_size": self.hidden_size,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "dtypes": {
                "activation": self.dtypes.activation,
                "A_log": self.dtypes.A_log,
                "dt_bias": self.dtypes.dt_bias,
                "mamba_ssm_dtype": self.dtypes.mamba_ssm_dtype,
            },
            "sources": {name: source.to_dict() for name, source in self.sources.items()},
            "weights_checked": self.weights_checked,
        }


# -- solving tensor shapes -----------------------------------------------------------------------------------
@dataclass
class _LayerEvidence:
    observations: list[tuple[str, int, TensorLike]] = field(default_factory=list)  # (field, value, tensor)
    residuals: list[tuple[TensorLike, tuple[int, ...] | None]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # in-layer names


def _expected_shape(dims: Iterable[Dim], geometry: Geometry) -> tuple[int, ...] | None:
    sizes: list[int] = []
    for dim in dims:
        size = dim.expected(geometry)
        if size is None:
            return None
        sizes.append(size)
    return tuple(sizes)


def solve_layer(tensors: Mapping[str, TensorLike], layout: Layout, geometry: Geometry) -> _LayerEvidence:
    """Read every tensor of one layer against `geometry`.

    An axis that disagrees is solved for the field it measures, and that value holds for the rest of the
    layer: a wrong head count shows up once (at the tensor that measures it alone), not once per tensor. A
    tensor that fits `geometry` and not the values solved so far sides with the config against what an earlier
    tensor measured: it adds nothing, and the tensors after it are read against the config again (else one odd
    tensor would make the layer's right ones look wrong, their expected shapes their own, and hide a wrong one
    after them). A tensor that fits both (a norm [V] after the value heads were solved) settles nothing: the
    solved values hold on, so a projection the header cannot measure (bitsandbytes) does not leave the next
    tensor to be solved against the config's wrong head count.
    """
    evidence = _LayerEvidence()
    local = geometry
    for rule in layout.tensors:
        name = layout.prefix + rule.suffix
        info = tensors.get(name)
        if info is None:
            if rule.required:
                evidence.missing.append(name)
            continue
        if isinstance(info, UnpackedWeight) and info.logical is None:
            continue  # a packed weight whose shape the header cannot tell: present, not measured
        if local is not geometry and rule.matching(tuple(info.shape), geometry) is not None:
            if rule.matching(tuple(info.shape), local) is None:
                local = geometry  # it tells the two apart and sides with the config: its values hold again
            continue  # (one that fits both, a norm [V] after a head count was solved, settles nothing)
        dims = rule.shape_for(tuple(info.shape), local)
        if dims is None:
            evidence.residuals.append((info, _expected_shape(rule.shapes[0], local)))
            continue
        unexplained = False
        for dim, actual in zip(dims, info.shape, strict=True):  # shape_for picked a layout of this rank
            expected = dim.expected(local)
            if expected == actual:
                continue
            solved = dim.solve(actual, local)
            if solved is None or dim.field is None:  # solve() gives None for an axis that measures no field
                unexplained = unexplained or expected is not None
                continue
            evidence.observations.append((dim.field, solved, info))
            local = with_field(local, dim.field, solved)
        if unexplained:
            evidence.residuals.append((info, _expected_shape(dims, geometry)))
    return evidence


# -- building the description --------------------------------------------------------------------------------
def read_fields(view: ConfigView, adapter: Adapter, locate: Locator) -> tuple[
        dict[str, int | None], dict[str, Source], list[InvalidValue]]:
    """The adapter's config fields: valid values with their sources, and every value of the wrong type."""
    found: dict[str, tuple[Any, str]] = {}
    for name, keys in adapter.fields.items():
        hit = view.first_present(keys)
        if hit is not None:
            found[name] = hit
    if adapter.derive is not None:
        found.update(adapter.derive(view, found))
    values: dict[str, int | None] = {}
    sources: dict[str, Source] = {}
    invalid: list[InvalidValue] = []
    for name, (value, key) in found.items():
        problem = value_problem(value, name)
        if problem is None:
            values[name], sources[name] = value, locate.config(key)
            continue
        # One key read for two fields (Kimi-Linear's `head_dim`, `num_heads`) is one invalid value: the first
        # field names it, the others are recorded with it so that none is reported as missing (GDR103).
        index = next((i for i, item in enumerate(invalid) if item.key == key), None)
        if index is None:
            invalid.append(InvalidValue(name, key, value, problem, locate.config(key)))
        else:
            invalid[index] = replace(invalid[index], also=(*invalid[index].also, name))
    return values, sources, invalid


def _renamed_layer_examples(by_namespace: Mapping[str, Mapping[int, Mapping[str, Any]]],
                            adapter: Adapter) -> tuple[str, ...]:
    """Three names of one layer's linear-attention tensors (under the adapter's layout prefixes) in a namespace
    the adapter does not load; () when no layer has them."""
    prefixes = tuple(layout.prefix for layout in adapter.layouts)
    for namespace, layers in by_namespace.items():
        for index, rests in layers.items():
            names = [f"{namespace}layers.{index}.{rest}" for rest in rests if rest.startswith(prefixes)]
            if names:
                return tuple(sorted(names)[:3])
    return ()


def _pick_namespace(seen: set[str], namespaces: tuple[str, ...]) -> str | None:
    for namespace in namespaces:
        if namespace in seen:
            return namespace
    return None


def _distinctive(layout: Layout) -> set[str]:
    """In-layer names that mark a layer as linear attention (a KDA layer shares `self_attn.` with MLA)."""
    generic = {"q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight"}
    return {layout.prefix + r.suffix for r in layout.tensors
            if layout.mixer != "self_attn" or r.suffix not in generic}


def layer_is_linear(rests: Iterable[str], adapter: Adapter) -> bool:
    for layout in adapter.layouts:
        marks = _distinctive(layout)
        if layout.mixer != "self_attn":
            if any(map(str.startswith, rests, repeat(layout.prefix))):  # a full layer has ~1.5k names
                return True
        elif any(rest in marks for rest in rests):
            return True
    return False


def layer_is_full(rests: Iterable[str], adapter: Adapter) -> bool:
    return any(rest.startswith(marker) for rest in rests for marker in adapter.full_markers)


def _layout_of(rests: Mapping[str, Any], adapter: Adapter) -> Layout:
    for layout in adapter.layouts:
        if layout.prefix + layout.marker in rests:
            return layout
    return max(adapter.layouts, key=lambda lay: sum(lay.prefix + r.suffix in rests for r in lay.tensors))


def describe(checkpoint: CheckpointLike, adapter: Adapter, identity: Identity) -> LinearAttentionModel | None:
    """The description of a checkpoint's linear-attention layers; None when it has none."""
    view = ConfigView(checkpoint.config, adapter.sections)
    locate = Locator(checkpoint)

    values, sources, invalid = read_fields(view, adapter, locate)

    # Tensors of each decoder layer, keyed by their in-layer name.
    by_namespace = layers_by_namespace(checkpoint.tensors)
    namespace = _pick_namespace(set(by_namespace), adapter.namespaces)
    layers: dict[int, dict[str, TensorLike]] = by_namespace[namespace] if namespace is not None else {}
    have_weights = bool(layers)
    quantization = quantization_of(checkpoint.config)
    prefixes = tuple({layout.prefix for layout in adapter.layouts})
    layers = {index: unpacked_layer(rests, quantization, prefixes) for index, rests in layers.items()}

    num_layers = values.get("num_hidden_layers")
    if num_layers is None and layers:
        num_layers = max(layers) + 1
        sources["num_hidden_layers"] = Source("tensor", detail="the highest layer index in the tensor names + 1")

    if not adapter.weights_modelled:
        layers, have_weights = {}, False  # the tensor table is not modelled: nothing to cross-check
    layer_map = adapter.layer_map(view)
    tensor_linear = sorted(i for i, rests in layers.items() if layer_is_linear(rests, adapter))
    if layer_map.linear is not None:
        linear = sorted(layer_map.linear)
        sources["linear_layers"] = locate.config(layer_map.key) if layer_map.key else Source("default")
    else:
        linear = tensor_linear
        sources["linear_layers"] = Source("tensor", detail="the layers that hold linear-attention tensors")
    if not linear:
        return None

    model = LinearAttentionModel(
        architecture=identity.architecture, family=adapter.family, kind=adapter.kind,
        num_hidden_layers=num_layers, linear_layers=linear,
        num_k_heads=None, num_v_heads=None, head_k_dim=None, head_v_dim=None, conv_kernel=None,
        hidden_size=None, num_attention_heads=values.get("num_attention_heads"),
        num_key_value_heads=values.get("num_key_value_heads"),
        dtypes=_dtypes(view, locate, layers, linear, namespace),
        sources=sources, known_architecture=adapter.known, adapter=adapter, namespace=namespace,
        layer_map=layer_map, weights_checked=have_weights, invalid_values=invalid,
    )
    if namespace is None and adapter.weights_modelled and checkpoint.tensors:
        # Renamed layers (linear-attention tensors under another namespace), or stray tensors (no layer at all and
        # nothing under the family's names); not a shard of embeddings or an MTP-only file, which are the family's.
        renamed = _renamed_layer_examples(by_namespace, adapter)
        stray = not by_namespace and not any(name.startswith(adapter.namespaces) for name in checkpoint.tensors)
        if renamed or stray:
            model.unplaced_tensors = len(checkpoint.tensors)
            model.unplaced_examples = renamed or tuple(sorted(checkpoint.tensors)[:3])
    model.invalid_values.extend(dtype_problems(view, locate))
    if adapter.lower_bound is not None:
        bound = adapter.lower_bound(view)
        if bound is not None:
            model.lower_bound = (bound[0], locate.config(bound[1]))
    if (model.num_key_value_heads is None and variant_spec(adapter.kind).attention_kv_heads
            and model.num_attention_heads is not None):
        # Missing KV heads mean multi-head attention, as in transformers.
        model.num_key_value_heads = model.num_attention_heads
        sources["num_key_value_heads"] = Source("default", detail="`num_attention_heads` (no `num_key_value_heads`)")

    linear_with_tensors = [i for i in linear if i in layers and layer_is_linear(layers[i], adapter)]
    layouts = {i: _layout_of(layers[i], adapter) for i in linear_with_tensors}
    model.layouts = tuple(sorted({layout.name for layout in layouts.values()}))
    model.layer_tensors, model.tensor_linear_layers, model.layer_layouts = layers, tensor_linear, layouts
    model.locator = locate

    _fill_from_tensors(values, sources, layers, layouts, locate)
    model.notes.extend(_quantization_notes(layers, linear_with_tensors, quantization))
    for name in SHAPE_FIELDS:
        setattr(model, name, values.get(name))
    model.beta_scale_flag = _beta_scale_flag(view, identity, locate)
    model.identity = identity
    return model


def _quantization_notes(layers: Mapping[int, Mapping[str, TensorLike]], linear: list[int],
                        quantization: Quantization | None) -> list[str]:
    """What the linear-attention layers' packed weights were read as (`quantized.unpacked_layer`)."""
    packed = [info for index in linear for info in layers[index].values() if isinstance(info, UnpackedWeight)]
    if not packed:
        return []
    label = quantization.label if quantization is not None else "no `quantization_config`"
    notes = [f"quantized checkpoint ({label}): {len(packed)} packed projection weight(s) of the linear-attention "
             "layers read as their unpacked [out, in] shapes"]
    unmeasured = [info for info in packed if info.logical is None]
    if unmeasured:
        notes.append(f"{len(unmeasured)} of them not measured ({unmeasured[0].detail}): present, shape not "
                     "cross-checked")
    return notes


def dtype_problems(view: ConfigView, locate: Locator) -> list[InvalidValue]:
    """`dtype` / `torch_dtype` that name no model dtype ("auto" is not valid in a released config either)."""
    problems = []
    for key in ("dtype", "torch_dtype"):
        found = view.first_present((key,))
        if found is None:
            continue
        value, dotted = found
        if not isinstance(value, str) or canonical_dtype(value) not in MODEL_DTYPES:
            problems.append(InvalidValue(key, dotted, value, f"not a model dtype (expected one of "
                                         f"{', '.join(MODEL_DTYPES)})", locate.config(dotted)))
    return problems


@dataclass(frozen=True)
class Unreadable:
    """Why a config with linear-attention markers yields no description: one config key and what is wrong."""

    key: str
    problem: str
    source: Source
    # A value of the wrong type or out of range: reported as GDR108, as when the model is described.
    invalid: InvalidValue | None = None


def why_undescribed(checkpoint: CheckpointLike, adapter: Adapter | None) -> list[Unreadable]:
    """What keeps a config with linear-attention markers from being described (empty when nothing is found)."""
    locate = Locator(checkpoint)
    view = ConfigView(checkpoint.config, adapter.sections if adapter is not None else ("text_config", "llm_config"))
    found: list[Unreadable] = []
    if adapter is None:
        return found
    config = checkpoint.config or {}
    # The text model's fields are looked up in its section: one that is no object hides them (when no other
    # section is an object to read them from), so it is the one problem to name.
    readable = any(isinstance(config.get(section), dict) for section in adapter.sections)
    for section in () if readable else adapter.sections:
        if section in config and not isinstance(config[section], dict):
            found.append(Unreadable(section, f"is {shown_value(config[section])}: not an object, so the fields it "
                                    "holds cannot be read", locate.config(section)))
    if found:  # what else is missing follows from it
        return found
    _, _, invalid = read_fields(view, adapter, locate)
    invalid += dtype_problems(view, locate)
    for item in invalid:
        found.append(Unreadable(item.key, f"is {shown_value(item.value)}: {item.problem}", item.source, item))
    layer_map = adapter.layer_map(view)
    for key, problem in layer_map.problems:
        found.append(Unreadable(key, problem, locate.config(key)))
    if layer_map.linear is not None and not layer_map.linear and layer_map.key is not None:
        found.append(Unreadable(layer_map.key, "makes no layer a linear-attention layer",
                                locate.config(layer_map.key)))
    elif layer_map.linear is not None and not layer_map.linear:
        found.append(Unreadable("num_hidden_layers", "the engine's default layer map makes no layer a "
                                "linear-attention layer", locate.config("num_hidden_layers")))
    if layer_map.linear is None and not layer_map.problems and not any(
            item.field == "num_hidden_layers" for item in invalid):
        count = view.find("num_hidden_layers")
        interval = view.find("full_attention_interval")
        if count is None:
            found.append(Unreadable("num_hidden_layers", "is missing: the layer map needs the layer count",
                                    locate.config("num_hidden_layers")))
        elif interval is not None and value_problem(interval[0]) is not None:  # present but unusable: the problem
            found.append(Unreadable(interval[1], f"is {shown_value(interval[0])}: the layer map needs a positive whole "
                                    "number (every n-th layer is full attention)", locate.config(interval[1])))
        else:
            found.append(Unreadable("layer_types", "is missing and no other key says which layers are linear "
                                    "attention", locate.config("layer_types")))
    return found


def shown_value(value: Any) -> str:
    """A config value as a message quotes it: JSON (repr where it is not JSON), at most 60 characters, huge
    integers shortened before they are formatted."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return shorten(value)  # never format thousands of digits
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _dtypes(view: ConfigView, locate: Locator, layers: dict[int, dict[str, TensorLike]], linear: list[int],
            namespace: str | None) -> ModelDtypes:
    found = view.first(("dtype", "torch_dtype"))
    if found is not None and isinstance(found[0], str) and canonical_dtype(found[0]) in MODEL_DTYPES:
        dtypes = ModelDtypes(canonical_dtype(found[0]), locate.config(found[1]))
    else:
        dtypes = ModelDtypes("bfloat16", Source("default", detail="bfloat16 (no `dtype`/`torch_dtype` in the config)"))
    ssm = view.find("mamba_ssm_dtype")
    if ssm is not None and ssm[0] is not None:
        dtypes.mamba_ssm_dtype, dtypes.mamba_ssm_dtype_source = ssm[0], locate.config(ssm[1])
    for index in linear:
        for rest, info in layers.get(index, {}).items():
            if rest.endswith(".A_log") and dtypes.A_log is None:
                dtypes.A_log = canonical_dtype(info.dtype)
            if rest.endswith(".dt_bias") and dtypes.dt_bias is None:
                dtypes.dt_bias = canonical_dtype(info.dtype)
        if dtypes.A_log and dtypes.dt_bias:
            break
    return dtypes


def _fill_from_tensors(values: dict[str, int | None], sources: dict[str, Source],
                       layers: dict[int, dict[str, TensorLike]], layouts: dict[int, Layout],
                       locate: Locator) -> None:
    """Fields the config does not give: the value most layers' tensors imply (K = V when nothing says K)."""
    for _ in range(3):
        unknown = [name for name in SHAPE_FIELDS if values.get(name) is None]
        if not unknown or not layouts:
            return
        geometry = Geometry.of(values)
        votes: dict[str, Counter[int]] = {name: Counter() for name in unknown}
        first: dict[tuple[str, int], TensorLike] = {}
        for index, layout in layouts.items():
            for name, value, info in solve_layer(layers[index], layout, geometry).observations:
                if name in votes:
                    votes[name][value] += 1
                    first.setdefault((name, value), info)
        progressed = False
        for name, counter in votes.items():
            if counter:
                value = counter.most_common(1)[0][0]
                values[name], sources[name] = value, locate.tensor(first[(name, value)])
                progressed = True
        if values.get("head_k_dim") is None and values.get("head_v_dim") is not None:
            values["head_k_dim"] = values["head_v_dim"]
            sources["head_k_dim"] = Source("assumed", detail="assumed equal to head_v_dim: no tensor holds K alone")
            progressed = True
        if not progressed:
            return


_NEG_EIGVAL_DEFAULT_TRUE = ("olmo_hybrid", "olmo3_5_hybrid")


def _beta_scale_flag(view: ConfigView, identity: Identity, locate: Locator) -> tuple[bool, Source] | None:
    found = view.find("linear_allow_neg_eigval")
    if found is not None:
        return bool(found[0]), locate.config(found[1])
    if any(t in _NEG_EIGVAL_DEFAULT_TRUE for t in identity.model_types):
        return True, Source("default", detail="the OLMo-Hybrid default (`linear_allow_neg_eigval` = true)")
    return None
