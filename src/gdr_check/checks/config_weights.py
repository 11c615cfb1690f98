"""GDR103 and GDR111-GDR115 detection: the config's fields and layer map against the checkpoint's tensors.

The description (`models.description`) reads the config and the tensor names and shapes, fills the fields the
config lacks from what the tensors measure, and keeps its evidence on the model: each decoder layer's
tensors and layout, the layers whose tensors are linear attention, and a `Locator`. Whether the config and the
tensors agree is the rules' question: this module answers it from that evidence (`tensor_findings`), and the
rules of `rules_model` report what it finds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import field, replace

from ..base.records import dataclass
from ..models.adapters import GEOMETRY_FIELDS, SHAPE_FIELDS, Geometry, TensorLike, split_layer_name
from ..models.description import LinearAttentionModel, Source, layer_is_full, layer_is_linear, solve_layer


def layer_ranges(layers: Iterable[int]) -> tuple[int, ...]:
    return tuple(sorted(set(layers)))


@dataclass(frozen=True)
class Disagreement:
    """Tensors that measure `field` as `actual` while the description holds `expected`."""

    field: str
    expected: int
    expected_source: Source
    actual: int
    actual_source: Source  # the first tensor that shows `actual`
    actual_shape: tuple[int, ...]
    layers: tuple[int, ...]
    shards: tuple[str, ...] = ()  # the files holding the tensors that show `actual`, in order


@dataclass(frozen=True)
class ShapeMismatch:
    """A tensor whose shape no single field explains."""

    source: Source
    actual: tuple[int, ...]
    expected: tuple[int, ...] | None
    layers: tuple[int, ...]


@dataclass(frozen=True)
class MissingTensor:
    suffix: str  # in-layer name, e.g. `linear_attn.A_log`
    example: str  # the full name in the first layer that lacks it
    layers: tuple[int, ...]
    file: str | None = None  # where the layer's other tensors are listed (the index, or their shard)


@dataclass(frozen=True)
class LayerKindMismatch:
    config_kind: str  # what the config makes these layers: "linear-attention" or "full-attention"
    tensor_kind: str  # what their tensors are
    layers: tuple[int, ...]
    source: Source | None  # the layer-map key
    example: str | None  # a tensor name that shows the tensors' kind


@dataclass(frozen=True)
class MissingField:
    field: str
    keys: tuple[str, ...]
    inferred: Source | None  # the tensor the value was taken from instead, if any


def _layer_kinds(model: LinearAttentionModel, found: TensorFindings) -> None:
    """GDR114 (a layer the config's map calls linear holds other tensors, or the reverse) and GDR115 for the
    linear layers that have no tensor at all."""
    layers, tensor_linear, adapter = model.layer_tensors, model.tensor_linear_layers, model.adapter
    namespace = model.namespace or ""
    config_linear = set(model.linear_layers)
    source = model.sources.get("linear_layers")
    if not layers or adapter is None or (source is not None and source.kind != "config"):
        return  # no weights read, or the layer map came from the tensors themselves
    no_linear = [i for i in sorted(config_linear) if i in layers and i not in tensor_linear]
    if no_linear:
        rests = layers[no_linear[0]]
        example = next((r for r in sorted(rests) if layer_is_full([r], adapter)), next(iter(sorted(rests)), None))
        kind = "full-attention" if layer_is_full(rests, adapter) else "non-linear-attention"
        found.layer_kind_mismatches.append(LayerKindMismatch(
            "linear-attention", kind, layer_ranges(no_linear), source,
            f"{namespace}layers.{no_linear[0]}.{example}" if example else None))
    # A layer past a short `layer_types` is GDR104's (the list's length): the config names no kind for it.
    listed = model.layer_map.listed
    extra = [i for i in tensor_linear if i not in config_linear and (listed is None or i < listed)]
    if extra:
        rests = layers[extra[0]]
        example = next((r for r in sorted(rests) if layer_is_linear([r], adapter)), None)
        found.layer_kind_mismatches.append(LayerKindMismatch(
            "full-attention", "linear-attention", layer_ranges(extra), source,
            f"{namespace}layers.{extra[0]}.{example}" if example else None))
    absent = [i for i in sorted(config_linear) if i not in layers]
    if absent:
        found.missing_tensors.append(MissingTensor(
            "*", f"{namespace}layers.{absent[0]}.*", layer_ranges(absent)))


def _verify_tensors(model: LinearAttentionModel, found: TensorFindings) -> None:
    """GDR111/GDR112 (a tensor measures another value than the description holds), GDR113 (a shape no single
    field explains) and GDR115 (a linear layer lacks one of its tensors), from each layer's tensors read
    against the description's geometry."""
    layers, layouts, locate = model.layer_tensors, model.layer_layouts, model.locator
    namespace = model.namespace or ""
    if not layouts or locate is None:
        return
    values = {name: getattr(model, name) for name in SHAPE_FIELDS}
    geometry = Geometry.of(values)
    by_value: dict[tuple[str, int], list[tuple[int, TensorLike]]] = {}
    shapes: dict[tuple[str, tuple[int, ...], tuple[int, ...] | None], list[tuple[int, TensorLike]]] = {}
    missing: dict[str, list[int]] = {}
    for index, layout in sorted(layouts.items()):
        evidence = solve_layer(layers[index], layout, geometry)
        for name, value, info in evidence.observations:
            if values.get(name) is not None and value != values[name]:
                by_value.setdefault((name, value), []).append((index, info))
        for info, expected in evidence.residuals:
            parts = split_layer_name(info.name)
            suffix = parts[2] if parts else info.name
            shapes.setdefault((suffix, tuple(info.shape), expected), []).append((index, info))
        for rest in evidence.missing:
            missing.setdefault(rest, []).append(index)
    said: set[tuple[object, int]] = set()
    for (name, value), hits in by_value.items():
        # One config key read as two fields (KDA's `num_heads` is its key and its value heads) is one disagreement.
        source = model.sources[name]
        key = (source.key if source.kind == "config" and source.key else name, value)
        if key in said:
            continue
        said.add(key)
        index, info = hits[0]
        found.disagreements.append(Disagreement(
            field=name, expected=values[name], expected_source=model.sources[name], actual=value,
            actual_source=locate.tensor(info), actual_shape=tuple(info.shape),
            layers=layer_ranges(i for i, _ in hits), shards=tuple(dict.fromkeys(hit.shard for _, hit in hits))))
    for (_suffix, actual, expected), hits in shapes.items():
        found.shape_mismatches.append(ShapeMismatch(locate.tensor(hits[0][1]), actual, expected,
                                                    layer_ranges(i for i, _ in hits)))
    for rest, indices in missing.items():
        sibling = next(iter(layers[indices[0]].values()))
        file = locate.tensor_location(sibling).file
        found.missing_tensors.append(
            MissingTensor(rest, f"{namespace}layers.{indices[0]}.{rest}", layer_ranges(indices), file))


@dataclass
class TensorFindings:
    """What the config and the tensors disagree on, by rule."""

    missing_fields: list[MissingField] = field(default_factory=list)  # GDR103
    disagreements: list[Disagreement] = field(default_factory=list)  # GDR111 (vs the config), GDR112 (vs a layer)
    shape_mismatches: list[ShapeMismatch] = field(default_factory=list)  # GDR113
    layer_kind_mismatches: list[LayerKindMismatch] = field(default_factory=list)  # GDR114
    missing_tensors: list[MissingTensor] = field(default_factory=list)  # GDR115


def _missing_fields(model: LinearAttentionModel, found: TensorFindings) -> None:
    """GDR103: each geometry field a known family keeps in its config that the config lacks (the value may
    still come from a tensor). A field whose config value is invalid is reported as such (GDR10x), not here."""
    adapter = model.adapter
    if adapter is None or not adapter.known:
        return
    bad = {name for item in model.invalid_values for name in item.fields}
    for name in GEOMETRY_FIELDS:
        source = model.sources.get(name)
        if name in bad and (source is None or source.kind != "config"):
            continue  # reported as an invalid value, with what the tensors say
        if source is None or source.kind != "config":
            keys = adapter.fields[name]
            earlier = next((i for i, item in enumerate(found.missing_fields) if set(item.keys) & set(keys)), None)
            if earlier is None:
                found.missing_fields.append(MissingField(name, keys, source))
            else:  # one key read for two fields (Kimi-Linear's `head_dim` is K and V): one finding, naming that key
                item = found.missing_fields[earlier]
                found.missing_fields[earlier] = replace(item, keys=tuple(key for key in item.keys if key in keys))


def tensor_findings(model: LinearAttentionModel) -> TensorFindings:
    """Every GDR103 and GDR111-GDR115 finding of `model`, in the order the rules report them."""
    found = TensorFindings()
    _missing_fields(model, found)
    _layer_kinds(model, found)
    _verify_tensors(model, found)
    return found
