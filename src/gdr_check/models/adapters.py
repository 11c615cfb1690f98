"""Architecture adapters: where each family keeps its linear-attention fields, layer map and tensors.

An adapter is a table, not a parser: config keys per model field, the namespaces its layers live under, a
layer-map rule, and the tensor layouts of one linear-attention layer, each tensor axis written as a formula
of the geometry (H, HV, K, V, W, hidden) and tagged with the model field it measures. `description.py` reads
these tables to build the model description and to solve every tensor axis back into a field value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import field, replace
from typing import Any, Protocol, TypeVar

from ..base.limits import LIMITS
from ..base.records import dataclass
from ..base.variants import VariantName, variant_spec

Kind = VariantName

# The geometry fields every description has, in the order they are reported.
GEOMETRY_FIELDS: tuple[str, ...] = ("num_k_heads", "num_v_heads", "head_k_dim", "head_v_dim", "conv_kernel")
# Fields that only size the projections (cross-checked against tensors, not used by the kernel).
SHAPE_FIELDS: tuple[str, ...] = GEOMETRY_FIELDS + ("hidden_size",)
# How a disagreement reads: "config says 32 value heads but ... holds 8".
QUANTITIES: dict[str, str] = {
    "num_k_heads": "key heads",
    "num_v_heads": "value heads",
    "head_k_dim": "channels per key head",
    "head_v_dim": "channels per value head",
    "conv_kernel": "conv taps",
    "hidden_size": "hidden channels",
}


class TensorLike(Protocol):
    """What the model stage reads from `gdr_check.sources.TensorInfo` (read-only)."""

    @property
    def name(self) -> str: ...
    @property
    def dtype(self) -> str: ...
    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def shard(self) -> str: ...


@dataclass(frozen=True)
class Geometry:
    """Symbol values for the tensor formulas; None where not known yet."""

    H: int | None = None
    HV: int | None = None
    K: int | None = None
    V: int | None = None
    W: int | None = None
    hidden: int | None = None

    @classmethod
    def of(cls, values: Mapping[str, int | None]) -> Geometry:
        return cls(
            H=values.get("num_k_heads"), HV=values.get("num_v_heads"), K=values.get("head_k_dim"),
            V=values.get("head_v_dim"), W=values.get("conv_kernel"), hidden=values.get("hidden_size"),
        )


_SYMBOL_OF_FIELD = {"num_k_heads": "H", "num_v_heads": "HV", "head_k_dim": "K", "head_v_dim": "V",
                    "conv_kernel": "W", "hidden_size": "hidden"}


def with_field(geometry: Geometry, name: str, value: int | None) -> Geometry:
    return replace(geometry, **{_SYMBOL_OF_FIELD[name]: value})


class UnknownSymbol(TypeError):
    """A formula read a symbol whose value is not known yet."""


def _known(value: int | None) -> int:
    if value is None:
        raise UnknownSymbol
    return value


class Symbols:
    """A geometry as a formula reads it: each symbol an int, and reading one not known yet raises UnknownSymbol."""

    __slots__ = ("_geometry",)

    def __init__(self, geometry: Geometry) -> None:
        self._geometry = geometry

    @property
    def H(self) -> int:
        return _known(self._geometry.H)

    @property
    def HV(self) -> int:
        return _known(self._geometry.HV)

    @property
    def K(self) -> int:
        return _known(self._geometry.K)

    @property
    def V(self) -> int:
        return _known(self._geometry.V)

    @property
    def W(self) -> int:
        return _known(self._geometry.W)

    @property
    def hidden(self) -> int:
        return _known(self._geometry.hidden)


Formula = Callable[[Symbols], int]


@dataclass(frozen=True)
class Dim:
    """One tensor axis: its size as a formula of the geometry, and the field it measures (None: a literal 1)."""

    size: Formula
    field: str | None = None

    def expected(self, geometry: Geometry) -> int | None:
        try:
            return int(self.size(Symbols(geometry)))
        except TypeError:  # a symbol is still unknown
            return None

    def solve(self, actual: int, geometry: Geometry) -> int | None:
        """The value of `field` that gives `actual`, the others held fixed; None when no positive integer does.

        Every formula here is linear in each single field, so two evaluations give slope and intercept.
        """
        if self.field is None:
            return None
        try:
            at0 = self.size(Symbols(with_field(geometry, self.field, 0)))
            at1 = self.size(Symbols(with_field(geometry, self.field, 1)))
        except TypeError:
            return None
        slope = at1 - at0
        if slope <= 0 or (actual - at0) % slope:
            return None
        value = (actual - at0) // slope
        return value if value > 0 else None


ONE = Dim(lambda g: 1)


def _hidden() -> Dim:
    return Dim(lambda g: g.hidden, "hidden_size")


@dataclass(frozen=True)
class TensorRule:
    """A tensor of one linear-attention layer: name suffix after the mixer prefix, and its accepted shapes.

    Shapes are tried by rank, so a tensor stored in two layouts (Kimi's conv weights [P, 1, W] or [P, W],
    `A_log` [1, 1, H, 1] or [H]) lists both. Axes are checked in order: earlier tensors fix the fields later
    ones are solved against, so put the tensors that measure one field alone first.
    """

    suffix: str
    shapes: tuple[tuple[Dim, ...], ...]
    required: bool = True

    def matching(self, actual: tuple[int, ...], geometry: Geometry) -> tuple[Dim, ...] | None:
        """The first shape of `actual`'s rank whose sizes all match `geometry`; None when none does."""
        return next((shape for shape in self.shapes if len(shape) == len(actual)
                     and all(dim.expected(geometry) == size for dim, size in zip(shape, actual, strict=True))), None)

    def shape_for(self, actual: tuple[int, ...], geometry: Geometry) -> tuple[Dim, ...] | None:
        """The layout of `actual`: among the shapes of its rank, the first whose sizes all match, else the first.

        Kimi-K3 stores `A_log` as [head_dim] where Kimi-Linear stores [num_heads]: both are rank 1.
        """
        return self.matching(actual, geometry) or next(
            (shape for shape in self.shapes if len(shape) == len(actual)), None)


def T(suffix: str, *shapes: tuple[Dim, ...], required: bool = True) -> TensorRule:
    return TensorRule(suffix, tuple(shapes), required)


@dataclass(frozen=True)
class Layout:
    """The tensors of one linear-attention layer, under `{namespace}layers.{i}.{mixer}.`."""

    name: str
    mixer: str
    marker: str  # a suffix only this layout has: identifies the layout of a layer
    tensors: tuple[TensorRule, ...]

    @property
    def prefix(self) -> str:
        return self.mixer + "."


# -- the layouts -------------------------------------------------------------------------------------------
def _heads_v() -> Dim:
    return Dim(lambda g: g.HV, "num_v_heads")


def _head_v() -> Dim:
    return Dim(lambda g: g.V, "head_v_dim")


def _taps() -> Dim:
    return Dim(lambda g: g.W, "conv_kernel")


def _conv(width: Formula, field_name: str) -> tuple[tuple[Dim, ...], ...]:
    """A depthwise conv weight: [C, 1, W], or [C, W] as some exports store it."""
    return ((Dim(width, field_name), ONE, _taps()), (Dim(width, field_name), _taps()))


def _qkv_width(g: Symbols) -> int:
    return 2 * g.H * g.K + g.HV * g.V


GDN_FUSED = Layout(  # Qwen3-Next: fused interleaved projections (docs/models.md §5.1)
    name="gdn-fused-qkvz", mixer="linear_attn", marker="in_proj_qkvz.weight",
    tensors=(
        T("A_log", (_heads_v(),)),
        T("dt_bias", (_heads_v(),)),
        T("norm.weight", (_head_v(),)),
        T("in_proj_ba.weight", (Dim(lambda g: 2 * g.HV, "num_v_heads"), _hidden())),
        T("out_proj.weight", (_hidden(), Dim(lambda g: g.HV * g.V, "head_v_dim"))),
        T("conv1d.weight", *_conv(_qkv_width, "num_k_heads")),
        T("in_proj_qkvz.weight", (Dim(lambda g: 2 * g.H * g.K + 2 * g.HV * g.V, "num_k_heads"), _hidden())),
    ),
)

GDN_SPLIT = Layout(  # Qwen3.5/3.6: split projections, already in [q | k | v] order (docs/models.md §5.2)
    name="gdn-split-qkv", mixer="linear_attn", marker="in_proj_qkv.weight",
    tensors=(
        T("A_log", (_heads_v(),)),
        T("dt_bias", (_heads_v(),)),
        T("norm.weight", (_head_v(),)),
        T("in_proj_b.weight", (_heads_v(), _hidden())),
        T("in_proj_a.weight", (_heads_v(), _hidden())),
        T("in_proj_z.weight", (Dim(lambda g: g.HV * g.V, "head_v_dim"), _hidden())),
        T("out_proj.weight", (_hidden(), Dim(lambda g: g.HV * g.V, "head_v_dim"))),
        T("conv1d.weight", *_conv(_qkv_width, "num_k_heads")),
        T("in_proj_qkv.weight", (Dim(_qkv_width, "num_k_heads"), _hidden())),
    ),
)

GDN_SEPARATE = Layout(  # OLMo-Hybrid style: separate q/k/v projections and convs
    name="gdn-separate-qkv", mixer="linear_attn", marker="q_conv1d.weight",
    tensors=(
        T("A_log", (_heads_v(),)),
        T("dt_bias", (_heads_v(),)),
        T("o_norm.weight", (_head_v(),)),
        T("b_proj.weight", (_heads_v(), _hidden())),
        T("a_proj.weight", (_heads_v(), _hidden())),
        T("v_proj.weight", (Dim(lambda g: g.HV * g.V, "head_v_dim"), _hidden())),
        T("o_proj.weight", (_hidden(), Dim(lambda g: g.HV * g.V, "head_v_dim"))),
        T("v_conv1d.weight", *_conv(lambda g: g.HV * g.V, "head_v_dim")),
        T("q_proj.weight", (Dim(lambda g: g.H * g.K, "num_k_heads"), _hidden())),
        T("k_proj.weight", (Dim(lambda g: g.H * g.K, "num_k_heads"), _hidden())),
        T("q_conv1d.weight", *_conv(lambda g: g.H * g.K, "num_k_heads")),
        T("k_conv1d.weight", *_conv(lambda g: g.H * g.K, "num_k_heads")),
    ),
)

# Kimi-Linear KDA (docs/models.md §5.3). H = HV and K = V = D; P = H*D. `A_log` is stored [1, 1, H, 1].
KDA = Layout(
    name="kda", mixer="self_attn", marker="q_conv1d.weight",
    tensors=(
        T("A_log", (ONE, ONE, _heads_v(), ONE), (_heads_v(),)),
        T("o_norm.weight", (_head_v(),)),
        T("b_proj.weight", (_heads_v(), _hidden())),
        T("f_a_proj.weight", (Dim(lambda g: g.K, "head_k_dim"), _hidden())),
        T("dt_bias", (Dim(lambda g: g.HV * g.K, "head_k_dim"),)),
        T("f_b_proj.weight", (Dim(lambda g: g.HV * g.K, "head_k_dim"), Dim(lambda g: g.K, "head_k_dim"))),
        T("g_a_proj.weight", (Dim(lambda g: g.V, "head_v_dim"), _hidden())),
        T("g_b_proj.weight", (Dim(lambda g: g.HV * g.V, "head_v_dim"), Dim(lambda g: g.V, "head_v_dim"))),
        T("v_proj.weight", (Dim(lambda g: g.HV * g.V, "head_v_dim"), _hidden())),
        T("o_proj.weight", (_hidden(), Dim(lambda g: g.HV * g.V, "head_v_dim"))),
        T("v_conv1d.weight", *_conv(lambda g: g.HV * g.V, "head_v_dim")),
        T("q_proj.weight", (Dim(lambda g: g.H * g.K, "num_k_heads"), _hidden())),
        T("k_proj.weight", (Dim(lambda g: g.H * g.K, "num_k_heads"), _hidden())),
        T("q_conv1d.weight", *_conv(lambda g: g.H * g.K, "num_k_heads")),
        T("k_conv1d.weight", *_conv(lambda g: g.H * g.K, "num_k_heads")),
    ),
)

# Kimi-K3 / GLM-5-Next with `use_full_rank_gate`: one [H*V, hidden] `g_proj` replaces `g_a_proj`/`g_b_proj`
# (sglang 0.5.23 `models/kimi_k3.py`, KimiK3DeltaAttention). K3 stores `A_log` as [head_dim]; the loader keeps
# its first num_heads entries, so [head_dim], [num_heads] and [1, 1, num_heads, 1] all load.
def _kda_full_gate_tensors() -> tuple[TensorRule, ...]:
    low_rank = ("g_a_proj.weight", "g_b_proj.weight")
    kept = tuple(rule for rule in KDA.tensors if rule.suffix not in low_rank and rule.suffix != "A_log")
    a_log = T("A_log", (ONE, ONE, _heads_v(), ONE), (_heads_v(),), (Dim(lambda g: g.K, "head_k_dim"),))
    g_proj = T("g_proj.weight", (Dim(lambda g: g.HV * g.V, "head_v_dim"), _hidden()))
    return (a_log,) + kept[:1] + (g_proj,) + kept[1:]


KDA_FULL_GATE = Layout(name="kda-full-rank-gate", mixer="self_attn", marker="g_proj.weight",
                       tensors=_kda_full_gate_tensors())

# Jet-Nemotron JetBlock (sglang 0.5.23 `models/jet_nemotron.py`): H = HV heads, separate q/k/v/a/b/g
# projections (stacked into `qkvabz_proj` at load time) and a dynamic conv over the value channels only, whose
# kernels a two-layer generator makes: w1 [HV*V/r, hidden], w2 [HV*V*W, HV*V/r] with a bias.
JET = Layout(
    name="jet-block", mixer="self_attn", marker="dynamic_conv1d.kernel_generator.w2.weight",
    tensors=(
        T("A_log", (_heads_v(),)),
        T("dt_bias", (_heads_v(),)),
        T("o_norm.weight", (_head_v(),)),
        T("a_proj.weight", (_heads_v(), _hidden())),
        T("b_proj.weight", (_heads_v(), _hidden())),
        T("v_proj.weight", (Dim(lambda g: g.HV * g.V, "head_v_dim"), _hidden())),
        T("g_proj.weight", (Dim(lambda g: g.HV * g.V, "head_v_dim"), _hidden())),
        T("o_proj.weight", (_hidden(), Dim(lambda g: g.HV * g.V, "head_v_dim"))),
        T("q_proj.weight", (Dim(lambda g: g.H * g.K, "num_k_heads"), _hidden())),
        T("k_proj.weight", (Dim(lambda g: g.H * g.K, "num_k_heads"), _hidden())),
        T("dynamic_conv1d.kernel_generator.w2.bias", (Dim(lambda g: g.HV * g.V * g.W, "conv_kernel"),)),
    ),
)

GDN_LAYOUTS: tuple[Layout, ...] = (GDN_FUSED, GDN_SPLIT, GDN_SEPARATE)


# -- layer maps ----------------------------------------------------------------------------------------------
@dataclass
class LayerMap:
    """Which layers the config makes linear-attention layers, and the key that says so."""

    linear: list[int] | None = None
    key: str | None = None
    # Qwen: what the `full_attention_interval` rule gives, which is what sglang 0.5.23 builds.
    interval_linear: list[int] | None = None
    interval_key: str | None = None
    interval: int | None = None
    problems: list[tuple[str, str]] = field(default_factory=list)  # (dotted key, what is wrong)
    listed: int | None = None  # `layer_types`: how many layers the list names (its length, whatever the model's)


class ConfigView:
    """Look fields up in a config: first in each section (e.g. `text_config`), then at the root."""

    def __init__(self, config: Mapping[str, Any] | None, sections: Iterable[str] = ()) -> None:
        self.config = dict(config or {})
        self.sections = tuple(s for s in sections if isinstance(self.config.get(s), dict)) + ("",)

    def raw(self, dotted: str) -> Any:
        node: Any = self.config
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return None
            node = node[part]
        return node

    def find(self, key: str) -> tuple[Any, str] | None:
        """(value, dotted key) of the first non-null occurrence of `key`."""
        for section in self.sections:
            dotted = f"{section}.{key}" if section else key
            value = self.raw(dotted)
            if value is not None:
                return value, dotted
        return None

    def first(self, keys: Iterable[str]) -> tuple[Any, str] | None:
        for key in keys:
            found = self.find(key)
            if found is not None:
                return found
        return None

    def home(self, key: str) -> str:
        """The dotted key where `key` would be read first: under the first section the config has."""
        section = self.sections[0]
        return f"{section}.{key}" if section else key

    def first_present(self, keys: Iterable[str]) -> tuple[Any, str] | None:
        """Like `first`, but a key set to null counts (its value is None): a null head count is an error."""
        keys = tuple(keys)
        found = self.first(keys)
        if found is not None:
            return found
        for key in keys:
            for section in self.sections:
                dotted = f"{section}.{key}" if section else key
                parent, _, leaf = dotted.rpartition(".")
                node = self.raw(parent) if parent else self.config
                if isinstance(node, dict) and leaf in node:
                    return None, dotted
        return None


def _num_layers(view: ConfigView) -> int | None:
    found = view.find("num_hidden_layers")
    # Out of range is GDR108 (read_fields); the layer map is not built from a claimed billion layers.
    return found[0] if found and isinstance(found[0], int) and LIMITS["num_hidden_layers"].allows(found[0]) else None


def _from_layer_types(view: ConfigView, linear_names: frozenset[str], known: frozenset[str]) -> LayerMap | None:
    found = view.find("layer_types")
    if found is None:
        return None
    types, key = found
    result = LayerMap(key=key)
    if not isinstance(types, list):
        result.problems.append((key, "is not a list"))
        return result
    # An entry may be any JSON value (a list or an object is unhashable): only strings name a kind.
    unknown = sorted({t if isinstance(t, str) else _json(t) for t in types if not (isinstance(t, str) and t in known)})
    if unknown:
        shown = ", ".join(f"`{u if len(u) <= 200 else u[:197] + '...'}`" for u in unknown[:_SHOWN])
        more = f" and {len(unknown) - _SHOWN} more" if len(unknown) > _SHOWN else ""
        result.problems.append((key, f"holds unknown layer kinds {shown}{more}"))
    count = _num_layers(view)
    if count is not None and len(types) != count:
        result.problems.append((key, f"has {len(types)} entries but `num_hidden_layers` is {count}"))
    # The model has `num_hidden_layers` layers: entries past them (GDR104) name no layer.
    result.linear = [i for i, t in enumerate(types[:count] if count is not None else types)
                     if isinstance(t, str) and t in linear_names]
    result.listed = len(types)
    return result


def _from_interval(view: ConfigView) -> tuple[list[int], str, int] | None:
    found = view.find("full_attention_interval")
    count = _num_layers(view)
    if found is None or count is None or not isinstance(found[0], int) or found[0] <= 0:
        return None
    interval, key = found
    return [i for i in range(count) if (i + 1) % interval != 0], key, interval


_QWEN_KINDS = frozenset({"linear_attention", "full_attention"})


def qwen_layer_map(view: ConfigView, kinds: frozenset[str] = _QWEN_KINDS) -> LayerMap:
    """Explicit `layer_types` when present; else layer i is full iff (i+1) % full_attention_interval == 0."""
    interval = _from_interval(view)
    result = _from_layer_types(view, frozenset({"linear_attention"}), kinds) or LayerMap()
    if interval is not None:
        result.interval_linear, result.interval_key, result.interval = interval
        if result.linear is None:
            result.linear, result.key = interval[0], interval[1]
    return result


def kimi_layer_map(view: ConfigView, *, one_based: bool = True, full_required: bool = True) -> LayerMap:
    """Layer i is KDA iff (i+1) is in `linear_attn_config.kda_layers` (1-based)."""
    result = LayerMap()
    base = 1 if one_based else 0
    count = _num_layers(view)
    kda = view.find("linear_attn_config.kda_layers")
    full = view.find("linear_attn_config.full_attn_layers")
    if full is None and full_required:
        # sglang 0.5.23 asserts, with no message, that both lists are set.
        result.problems.append((view.home("linear_attn_config.full_attn_layers"),
                                "is missing: sglang 0.5.23 asserts that it is set"))
    if kda is None:
        result.problems.append((view.home("linear_attn_config.kda_layers"), "is missing"))
        return result
    values, key = kda
    result.key = key
    if not isinstance(values, list) or not all(isinstance(v, int) for v in values):
        result.problems.append((key, "is not a list of layer numbers"))
        return result
    outside = {v for v in values if v < base or (count is not None and v - base >= count)}
    if outside:
        out_of_range = [v for v in values if v in outside]
        span = f"{base}..{count - 1 + base}" if count is not None else f">= {base}"
        result.problems.append((key, f"names layers {_listed(out_of_range)} outside {span} (the list is {base}-based)"))
    result.linear = sorted({v - base for v in values if v not in outside})
    if full is not None and isinstance(full[0], list):
        # `full_attn_layers` may hold anything: only its integers can name a layer.
        both = sorted(set(values) & {v for v in full[0] if isinstance(v, int)})
        if both:
            result.problems.append((key, f"and `full_attn_layers` both name layers {_listed(both)}"))
    return result


def generic_layer_map(view: ConfigView) -> LayerMap:
    """`layer_types`, else a 0-based `full_attention_layers` (GigaChat 3.5), else the interval rule."""
    kinds = frozenset({"linear_attention", "full_attention", "attention", "sliding_attention"})
    by_types = _from_layer_types(view, frozenset({"linear_attention"}), kinds)
    if by_types is not None:
        return by_types
    full = view.find("full_attention_layers")
    count = _num_layers(view)
    if full is not None and count is not None and isinstance(full[0], list):
        values, key = full
        result = LayerMap(key=key)
        bad = [v for v in values if not isinstance(v, int) or not 0 <= v < count]
        if bad:
            result.problems.append((key, f"names layers {_listed(bad)} outside 0..{count - 1} (the list is 0-based)"))
        full_layers = {v for v in values if isinstance(v, int)}
        result.linear = [i for i in range(count) if i not in full_layers]
        return result
    interval = _from_interval(view)
    if interval is not None:
        return LayerMap(linear=interval[0], key=interval[1])
    return LayerMap()


# Qwen4-Exp (sglang 0.5.23 `configs/qwen4_exp.py`): sparse and indexed attention layers are full attention.
_QWEN4_KINDS = _QWEN_KINDS | {"qwen_sparse_attention", "indexed_attention"}


def qwen4_layer_map(view: ConfigView) -> LayerMap:
    return qwen_layer_map(view, _QWEN4_KINDS)


def jet_layer_map(view: ConfigView) -> LayerMap:
    """JetNemotronConfig: layer i is a JetBlock iff `layer_types[i]` == "jet" ("attn" and "swa" are full)."""
    result = _from_layer_types(view, frozenset({"jet"}), frozenset({"jet", "attn", "swa"}))
    if result is None:
        return LayerMap(problems=[(view.home("layer_types"),
                                   "is missing: Jet-Nemotron names its JetBlock layers only there")])
    return result


def bailing_layer_map(view: ConfigView) -> LayerMap:
    """BailingHybridConfig: an integer `layer_group_size` makes layer i full iff (i+1) % size == 0; a list
    marks each linear layer with 1. sglang's default size, 1, makes every layer full attention."""
    count = _num_layers(view)
    found = view.find("layer_group_size")
    if count is None:
        return LayerMap()
    if found is None:
        return LayerMap(linear=[], key=None)
    size, key = found
    result = LayerMap(key=key)
    if isinstance(size, int) and not isinstance(size, bool) and size > 0:
        result.linear = [i for i in range(count) if (i + 1) % size != 0]
    elif isinstance(size, list):
        if len(size) != count:
            result.problems.append((key, (f"has {len(size)} entries but `num_hidden_layers` is {count} "
                                          "(sglang asserts that they are equal)")))
        result.linear = [i for i, entry in enumerate(size[:count]) if entry == 1]
    else:
        result.problems.append((key, f"is {_json(size)}: expected a positive integer or a list of 0/1 per layer"))
    return result


def glm5_layer_map(view: ConfigView) -> LayerMap:
    """Glm5NextTextConfig: 0-based `linear_attn_config.kda_layers` when given; else `layer_types`
    ("linear_attention"); else layer i is KDA iff i % 4 != 3."""
    if view.find("linear_attn_config") is not None:
        return kimi_layer_map(view, one_based=False, full_required=False)
    by_types = _from_layer_types(view, frozenset({"linear_attention"}),
                                 frozenset({"linear_attention", "full_attention", "sliding_attention"}))
    if by_types is not None:
        return by_types
    count = _num_layers(view)
    if count is None:
        return LayerMap()
    return LayerMap(linear=[i for i in range(count) if i % 4 != 3], key=None)


_SHOWN = 12  # list entries a message shows before it counts the rest


def _listed(values: list[Any]) -> str:
    """`values` as a message shows a list: whole up to `_SHOWN` entries, else the first ones and the count (a
    list read from data can hold a hundred thousand)."""
    if len(values) <= _SHOWN:
        return "[" + ", ".join(_json(v) for v in values) + "]"
    return "[" + ", ".join(_json(v) for v in values[:_SHOWN]) + f", ... ({len(values)} in all)]"


def _json(value: Any) -> str:

    try:
        text = json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        text = "a value nested too deeply to show" if not isinstance(value, (str, int, float)) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# -- adapters ------------------------------------------------------------------------------------------------
_LINEAR_FIELDS: dict[str, tuple[str, ...]] = {
    "num_k_heads": ("linear_num_key_heads",),
    "num_v_heads": ("linear_num_value_heads",),
    "head_k_dim": ("linear_key_head_dim",),
    "head_v_dim": ("linear_value_head_dim",),
    "conv_kernel": ("linear_conv_kernel_dim",),
    "hidden_size": ("hidden_size",),
    "num_hidden_layers": ("num_hidden_layers",),
    "num_attention_heads": ("num_attention_heads",),
    "num_key_value_heads": ("num_key_value_heads",),
}

_KIMI_FIELDS: dict[str, tuple[str, ...]] = {
    # Optional num_k_heads / head_k_dim fall back to num_heads / head_dim; the root `head_dim` (72 in some
    # copies) and `num_key_value_heads` are legacy fields that KDA ignores.
    "num_k_heads": ("linear_attn_config.num_k_heads", "linear_attn_config.num_heads"),
    "num_v_heads": ("linear_attn_config.num_heads",),
    "head_k_dim": ("linear_attn_config.head_k_dim", "linear_attn_config.head_dim"),
    "head_v_dim": ("linear_attn_config.head_dim",),
    "conv_kernel": ("linear_attn_config.short_conv_kernel_size",),
    "hidden_size": ("hidden_size",),
    "num_hidden_layers": ("num_hidden_layers",),
    "num_attention_heads": ("num_attention_heads",),
}

QWEN_NAMESPACES = ("model.language_model.", "language_model.model.", "model.")


@dataclass(frozen=True)
class Adapter:
    family: str
    kind: Kind
    architectures: tuple[str, ...]
    model_types: tuple[str, ...]
    sections: tuple[str, ...]  # config sections searched before the root
    fields: Mapping[str, tuple[str, ...]]
    layer_map: Callable[[ConfigView], LayerMap]
    layouts: tuple[Layout, ...]
    namespaces: tuple[str, ...] = ("model.",)
    # Layer-kind markers: in-layer name prefixes of a full-attention layer.
    full_markers: tuple[str, ...] = ("self_attn.",)
    # sglang 0.5.23 builds the layer map from `full_attention_interval`, ignoring `layer_types`.
    sglang_uses_interval: bool = False
    # False for the fallback that infers an unknown architecture from its tensors.
    known: bool = True
    # Fields computed from others (Jet-Nemotron's V = int(K * expand_v)): name -> (value, config key).
    derive: Callable[[ConfigView, Mapping[str, tuple[Any, str]]], dict[str, tuple[Any, str]]] | None = None
    # The safe-gate lower bound of the KDA forget gate: (value, config key), or None.
    lower_bound: Callable[[ConfigView], tuple[Any, str] | None] | None = None
    # Why the engine serves this architecture at tp=1 only (None: TP splits the heads).
    tp_one_only: str | None = None
    # False when the tensor table is not modelled: the weights are listed, not cross-checked.
    weights_modelled: bool = True
    # The decoder that sglang 0.5.23 runs for a decode step when it is not the packed kernel.
    own_decode: str | None = None
    # Where the facts come from (upstream file paths), for `docs/model-families.md` and the notes.
    upstream: tuple[str, ...] = ()


QWEN3_NEXT = Adapter(
    family="qwen3-next", kind="gdn",
    architectures=("Qwen3NextForCausalLM",), model_types=("qwen3_next",),
    sections=(), fields=_LINEAR_FIELDS, layer_map=qwen_layer_map, layouts=(GDN_FUSED,),
    namespaces=("model.",), sglang_uses_interval=True,
)

QWEN3_5 = Adapter(
    family="qwen3.5", kind="gdn",
    architectures=("Qwen3_5ForConditionalGeneration", "Qwen3_5ForCausalLM"),
    # MiniCPM-V 4.6 wraps a `qwen3_5_text` or `qwen3_5_moe_text` text config (sglang `configs/minicpmv4_6.py`):
    # it is recognised by that `text_config.model_type`.
    model_types=("qwen3_5", "qwen3_5_text"),
    sections=("text_config", "llm_config"), fields=_LINEAR_FIELDS, layer_map=qwen_layer_map, layouts=(GDN_SPLIT,),
    namespaces=QWEN_NAMESPACES, sglang_uses_interval=True,
)

QWEN3_5_MOE = Adapter(
    family="qwen3.5-moe", kind="gdn",
    architectures=("Qwen3_5MoeForConditionalGeneration", "Qwen3_5MoeForCausalLM",
                   "InternS2PreviewForConditionalGeneration"),
    # InternS2-Preview is a Qwen3_5MoeConfig subclass (sglang `configs/interns2preview.py`).
    model_types=("qwen3_5_moe", "qwen3_5_moe_text", "intern_s2_preview"),
    sections=("text_config", "llm_config"), fields=_LINEAR_FIELDS, layer_map=qwen_layer_map, layouts=(GDN_SPLIT,),
    namespaces=QWEN_NAMESPACES, sglang_uses_interval=True,
)

KIMI_LINEAR = Adapter(
    family="kimi-linear", kind="kda",
    architectures=("KimiLinearForCausalLM",), model_types=("kimi_linear",),
    sections=(), fields=_KIMI_FIELDS, layer_map=kimi_layer_map, layouts=(KDA,),
    namespaces=("model.", "language_model.model."),
    full_markers=("self_attn.kv_a_proj_with_mqa", "self_attn.kv_b_proj", "self_attn.kv_a_layernorm"),
    # No lower bound: KimiLinearForCausalLM builds KimiDeltaAttention without `safe_gate`, so sglang ignores a
    # `gate_lower_bound` here (only Kimi-K3 and the Bailing/GLM wrappers pass it on).
    upstream=("sglang/srt/configs/kimi_linear.py", "sglang/srt/models/kimi_linear.py"),
)

GENERIC_GDN = Adapter(  # OLMo-Hybrid, GigaChat 3.5 and other configs with the Qwen `linear_*` fields
    family="generic-gdn", kind="gdn",
    architectures=("OlmoHybridForCausalLM", "Olmo3_5HybridForCausalLM", "GigaChat3_5ForCausalLM"),
    model_types=("olmo_hybrid", "olmo3_5_hybrid", "gigachat3_5"),
    sections=("text_config", "llm_config"), fields=_LINEAR_FIELDS, layer_map=generic_layer_map, layouts=GDN_LAYOUTS,
    namespaces=QWEN_NAMESPACES,
)

INFERRED_GDN = Adapter(
    family="inferred-gdn", kind="gdn", architectures=(), model_types=(),
    sections=("text_config", "llm_config"), fields=_LINEAR_FIELDS, layer_map=generic_layer_map, layouts=GDN_LAYOUTS,
    namespaces=QWEN_NAMESPACES + ("",), known=False,
)

INFERRED_KDA = Adapter(
    family="inferred-kda", kind="kda", architectures=(), model_types=(),
    sections=("text_config",), fields=_KIMI_FIELDS, layer_map=lambda view: LayerMap(), layouts=(KDA,),
    namespaces=QWEN_NAMESPACES + ("",),
    full_markers=KIMI_LINEAR.full_markers, known=False,
)

def _kimi_lower_bound(view: ConfigView) -> tuple[Any, str] | None:
    return view.find("linear_attn_config.gate_lower_bound")


def _glm5_lower_bound(view: ConfigView) -> tuple[Any, str] | None:
    # Glm5NextTextConfig: `gate_lower_bound`, else `linear_lower_bound`, copied into the built linear_attn_config.
    return view.first(("linear_attn_config.gate_lower_bound", "gate_lower_bound", "linear_lower_bound"))


def _bailing_lower_bound(view: ConfigView) -> tuple[Any, str] | None:
    # BailingHybridConfig keeps `kda_lower_bound` only when `kda_safe_gate` is true.
    safe = view.find("kda_safe_gate")
    if safe is None or safe[0] is not True:
        return None
    return view.find("kda_lower_bound")


def _jet_derive(view: ConfigView, found: Mapping[str, tuple[Any, str]]) -> dict[str, tuple[Any, str]]:
    """JetBlock: H = HV = `num_heads`, V = int(head_dim * expand_v) (sglang `models/jet_nemotron.py`)."""
    out: dict[str, tuple[Any, str]] = {}
    if "num_k_heads" in found:
        out["num_v_heads"] = found["num_k_heads"]
    expand = view.find("efficient_attention_config.jet.expand_v")
    head = found.get("head_k_dim")
    if expand is not None:
        value, key = expand
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        if numeric and head is not None and isinstance(head[0], int) and not isinstance(head[0], bool):
            out["head_v_dim"] = (int(head[0] * value), key)
        elif not numeric:
            out["head_v_dim"] = (value, key)
    return out


_JET_FIELDS: dict[str, tuple[str, ...]] = {
    "num_k_heads": ("efficient_attention_config.jet.num_heads",),
    "num_v_heads": ("efficient_attention_config.jet.num_heads",),
    "head_k_dim": ("efficient_attention_config.jet.head_dim",),
    "head_v_dim": ("efficient_attention_config.jet.expand_v",),
    "conv_kernel": ("efficient_attention_config.jet.conv_size",),
    "hidden_size": ("hidden_size",),
    "num_hidden_layers": ("num_hidden_layers",),
    "num_attention_heads": ("num_attention_heads",),
    "num_key_value_heads": ("num_key_value_heads",),
}

_BAILING_FIELDS: dict[str, tuple[str, ...]] = {
    # BailingKDA builds a KimiLinearConfig with num_heads = num_attention_heads, head_dim = head_dim and
    # v_head_dim = v_head_dim (sglang `models/bailing_moe_v3.py`).
    "num_k_heads": ("num_attention_heads",),
    "num_v_heads": ("num_attention_heads",),
    "head_k_dim": ("head_dim",),
    "head_v_dim": ("v_head_dim", "head_dim"),
    "conv_kernel": ("short_conv_kernel_size",),
    "hidden_size": ("hidden_size",),
    "num_hidden_layers": ("num_hidden_layers",),
    "num_attention_heads": ("num_attention_heads",),
}

_GLM5_FIELDS: dict[str, tuple[str, ...]] = {
    "num_k_heads": ("linear_attn_config.num_heads", "linear_num_heads"),
    "num_v_heads": ("linear_attn_config.num_heads", "linear_num_heads"),
    "head_k_dim": ("linear_attn_config.head_dim", "linear_head_dim"),
    "head_v_dim": ("linear_attn_config.head_dim", "linear_head_dim"),
    "conv_kernel": ("linear_attn_config.short_conv_kernel_size", "linear_conv_kernel_dim"),
    "hidden_size": ("hidden_size",),
    "num_hidden_layers": ("num_hidden_layers",),
    "num_attention_heads": ("num_attention_heads",),
}

QWEN4_EXP = Adapter(
    family="qwen4-exp", kind="gdn",
    architectures=("Qwen4ExpForConditionalGeneration",), model_types=("qwen4_exp", "qwen4_exp_text"),
    sections=("text_config", "llm_config"), fields=_LINEAR_FIELDS, layer_map=qwen4_layer_map,
    layouts=(GDN_SPLIT, GDN_FUSED),
    namespaces=QWEN_NAMESPACES,
    upstream=("sglang/srt/configs/qwen4_exp.py", "sglang/srt/models/qwen4_exp.py"),
)

INTERNS2_MOBIUS = Adapter(
    family="interns2-mobius", kind="gdn",
    architectures=("InternS2MobiusForConditionalGeneration",),
    model_types=("interns2_mobius", "interns2_mobius_text"),
    sections=("text_config", "llm_config"), fields=_LINEAR_FIELDS, layer_map=qwen_layer_map, layouts=(GDN_SPLIT,),
    namespaces=QWEN_NAMESPACES,  # keeps `layer_types` verbatim, so sglang does not follow the interval rule
    upstream=("sglang/srt/configs/interns2_mobius.py", "sglang/srt/models/interns2_mobius.py"),
)

JET_NEMOTRON = Adapter(
    family="jet-nemotron", kind="gdn",
    architectures=("JetNemotronForCausalLM", "JetVLMForConditionalGeneration"),
    model_types=("jet_nemotron", "jet_vlm"),
    sections=("text_config", "llm_config"), fields=_JET_FIELDS, layer_map=jet_layer_map, layouts=(JET,),
    namespaces=("model.", "language_model.model.", "model.language_model."), full_markers=(),
    derive=_jet_derive,
    tp_one_only=("JetBlock builds its projections with the full head count and `A_log`/`dt_bias` unsharded "
                 "while the state pool is split by the attention TP size"),
    own_decode="fused_recurrent_gated_delta_rule_update",
    upstream=("sglang/srt/configs/jet_nemotron.py", "sglang/srt/configs/jet_vlm.py",
              "sglang/srt/models/jet_nemotron.py"),
)

KIMI_K3 = Adapter(
    family="kimi-k3", kind="kda",
    architectures=("KimiK3ForConditionalGeneration", "KimiK3LinearForCausalLM"), model_types=("kimi_k3",),
    sections=("text_config",), fields=_KIMI_FIELDS, layer_map=kimi_layer_map, layouts=(KDA_FULL_GATE, KDA),
    namespaces=("language_model.model.", "language_model.", "model."),
    full_markers=KIMI_LINEAR.full_markers, lower_bound=_kimi_lower_bound,
    upstream=("sglang/srt/configs/kimi_k3.py", "sglang/srt/configs/kimi_linear.py", "sglang/srt/models/kimi_k3.py",
              "sglang/srt/layers/attention/linear/kda_backend.py"),
)

BAILING_HYBRID = Adapter(
    family="bailing-hybrid", kind="kda",
    architectures=("BailingMoeV3ForCausalLM",), model_types=("bailing_hybrid", "bailing_moe_v3_vl"),
    sections=("text_config",), fields=_BAILING_FIELDS, layer_map=bailing_layer_map, layouts=(KDA,),
    full_markers=(), lower_bound=_bailing_lower_bound, weights_modelled=False,
    upstream=("sglang/srt/configs/bailing_hybrid.py", "sglang/srt/models/bailing_moe_v3.py"),
)

GLM5_NEXT = Adapter(
    family="glm5-next", kind="kda",
    architectures=("Glm5NextForConditionalGeneration",), model_types=("glm5_next",),
    sections=("text_config",), fields=_GLM5_FIELDS, layer_map=glm5_layer_map, layouts=(KDA_FULL_GATE, KDA),
    namespaces=("model.", "model.language_model.", "language_model.model."),
    full_markers=(), lower_bound=_glm5_lower_bound,
    upstream=("sglang/srt/configs/glm5_next.py", "sglang/srt/models/glm5_next.py"),
)

ADAPTERS: tuple[Adapter, ...] = (QWEN3_NEXT, QWEN3_5, QWEN3_5_MOE, KIMI_LINEAR, GENERIC_GDN, QWEN4_EXP,
                                 INTERNS2_MOBIUS, JET_NEMOTRON, KIMI_K3, BAILING_HYBRID, GLM5_NEXT)

# Families that are not GDN/KDA, or whose linear attention the packed decode kernel does not run.
OUT_OF_SCOPE: dict[str, str] = {
    "bailing_moe_linear": "Ring/Ling-linear uses MiniMax-style lightning attention, not GDN or KDA",
    "BailingMoeLinearForCausalLM": "Ring/Ling-linear uses MiniMax-style lightning attention, not GDN or KDA",
    "BailingMoeLinearV2ForCausalLM": "Ring/Ling-linear uses MiniMax-style lightning attention, not GDN or KDA",
    "minimax_text_01": "MiniMax uses lightning attention, not GDN or KDA",
    "minimax_m1": "MiniMax uses lightning attention, not GDN or KDA",
    "MiniMaxText01ForCausalLM": "MiniMax uses lightning attention, not GDN or KDA",
    "MiniMaxM1ForCausalLM": "MiniMax uses lightning attention, not GDN or KDA",
    "minicpm_sala": "MiniCPM-SALA uses simple GLA / lightning attention, not GDN or KDA",
}


BAILING_LIGHTNING = ("a Bailing hybrid config without `short_conv_kernel_size` uses lightning attention, not KDA "
                     "(sglang 0.5.23 `configs/bailing_hybrid.py`: `use_kda` is `short_conv_kernel_size is not None`)")

# `layer_types` entries that name a linear-attention layer in some family.
LINEAR_LAYER_KINDS = frozenset({"linear_attention", "jet", "kda", "gdn", "linear"})
_MARKER_KEYS = ("linear_attn_config", "linear_attn_config.kda_layers", "kda_layers", "linear_num_key_heads",
                "linear_num_value_heads", "linear_num_heads", "efficient_attention_config")


def attention_head_dim(config: Mapping[str, Any] | None) -> int | None:
    """`head_dim` of the full-attention layers (the `text_config` of a multimodal config, else the root), or None
    when the config does not give a positive integer. The call comparison uses it to tell the attention head
    size from the linear-attention one when a recorded call has the wrong K."""
    config = config or {}
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    value = text.get("head_dim") if isinstance(text, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def linear_markers(config: Mapping[str, Any] | None, selection: Selection | None = None) -> list[tuple[str, str]]:
    """Every sign in the config that the model has linear attention: (dotted key, what it is).

    A config with any of these must be described in full or rejected with an error: "nothing to check" is
    only for configs with none.
    """
    if not isinstance(config, Mapping):
        return []
    view = ConfigView(config, ("text_config", "llm_config"))
    markers: list[tuple[str, str]] = []
    if selection is not None and selection.adapter is not None and selection.adapter.known:
        label = variant_spec(selection.adapter.kind).label
        markers.append(("architectures", f"routed to the engines' {label} backend"))
    for key in _MARKER_KEYS:
        found = view.find(key)
        if found is not None:
            markers.append((found[1], "a linear-attention field"))
    types = view.find("layer_types")
    if types is not None and isinstance(types[0], list):
        kinds = sorted({t for t in types[0] if isinstance(t, str) and t in LINEAR_LAYER_KINDS})
        if kinds:
            markers.append((types[1], f"names {', '.join(f'`{k}`' for k in kinds)} layers"))
    return markers


@dataclass(frozen=True)
class Identity:
    """What the config says the model is: `architecture` names it (the first of `architectures`, else the model
    type); `root_model_type` is the top-level `model_type`, where the config has one as a string."""

    architecture: str
    model_types: tuple[str, ...]
    root_model_type: str | None = None
    # How messages name it: `architecture` in backticks, or what the config lacks where it names none.
    subject: str = ""


def identify(config: Mapping[str, Any] | None) -> Identity:
    has_config = config is not None
    config = config or {}
    architectures = config.get("architectures")
    architecture = architectures[0] if isinstance(architectures, list) and architectures else None
    types = [config.get("model_type")]
    for section in ("text_config", "llm_config"):
        text = config.get(section)
        if isinstance(text, dict):
            types.append(text.get("model_type"))
    model_types = tuple(t for t in types if isinstance(t, str))
    name = architecture if isinstance(architecture, str) else (model_types[0] if model_types else "unknown")
    root = types[0] if isinstance(types[0], str) else None
    if isinstance(architecture, str) or model_types:
        subject = f"`{name}`"
    else:
        subject = ("the unnamed architecture (its config.json names none)" if has_config
                   else "the unnamed architecture (no config.json)")
    return Identity(architecture=name, model_types=model_types, root_model_type=root, subject=subject)


def adapter_serving(architecture: str | None = None, model_type: str | None = None) -> Adapter | None:
    """The known family adapter that lists `architecture` (or `model_type`), if any."""
    for adapter in ADAPTERS:
        if architecture in adapter.architectures or model_type in adapter.model_types:
            return adapter
    return None


# The lookahead refuses a name with a line break before its end in one pass: without it, `.*?` would retry
# every start of `layers.` against a `.+$` that fails at the break (quadratic).
_LAYER_NAME = re.compile(r"^(?=[^\n]*\n?\Z)(?P<ns>.*?)layers\.(?P<index>\d+)\.(?P<rest>.+)$")


def _has_marker(tensor_names: Iterable[str], layouts: Iterable[Layout]) -> bool:
    suffixes = [layout.prefix + "A_log" for layout in layouts] + [layout.prefix + layout.marker for layout in layouts]
    for name in tensor_names:
        match = _LAYER_NAME.match(name)
        if match and any(match["rest"] == suffix for suffix in suffixes):
            return True
    return False


@dataclass(frozen=True)
class Selection:
    """The adapter for a checkpoint, or why there is nothing to check (`adapter` None)."""

    identity: Identity
    adapter: Adapter | None
    reason: str | None = None


def select_adapter(config: Mapping[str, Any] | None, tensor_names: Iterable[str]) -> Selection:
    """Pick the family adapter by architecture or model_type; fall back to tensor-shape inference."""
    identity = identify(config)
    keys = (identity.architecture,) + identity.model_types
    # The architecture first, then the root model_type, then the text config's: Kimi-K3 wraps a `kimi_linear`
    # text config but has its own tensor table.
    for key in keys:
        adapter = adapter_serving(architecture=key, model_type=key)
        if adapter is not None:
            if adapter is BAILING_HYBRID and ConfigView(config, adapter.sections).find(
                    "short_conv_kernel_size") is None:
                return Selection(identity, None, BAILING_LIGHTNING)
            return Selection(identity, adapter)
    for key in keys:
        if key in OUT_OF_SCOPE:
            return Selection(identity, None, OUT_OF_SCOPE[key])
    names = list(tensor_names)
    if _has_marker(names, GDN_LAYOUTS):
        return Selection(identity, INFERRED_GDN)
    if _has_marker(names, (KDA,)):
        return Selection(identity, INFERRED_KDA)
    view = ConfigView(config, ("text_config",))
    if view.find("linear_num_value_heads") is not None:
        return Selection(identity, INFERRED_GDN)
    if view.find("linear_attn_config.num_heads") is not None:
        return Selection(identity, INFERRED_KDA)
    return Selection(identity, None, None)


# A layer index has at most this many digits after its leading zeros: past the largest `num_hidden_layers`
# that limits.py allows. A longer run of digits names no layer of any model and is not converted (Python
# refuses to convert more than 4300 digits, and converting thousands costs time for nothing).
_INDEX_DIGITS = len(str(int(LIMITS["num_hidden_layers"].maximum)))


def _layer_index(digits: str) -> int | None:
    significant = digits.lstrip("0")
    if len(significant) > _INDEX_DIGITS:
        return None
    index = int(significant or "0")
    return index if LIMITS["num_hidden_layers"].allows(index + 1) else None


def split_layer_name(name: str) -> tuple[str, int, str] | None:
    """(namespace, layer index, in-layer name) of `{ns}layers.{i}.{rest}`, or None (also for an index past
    any model's layers)."""
    match = _LAYER_NAME.match(name)
    if match is None:
        return None
    index = _layer_index(match["index"])
    return None if index is None else (match["ns"], index, match["rest"])


V = TypeVar("V")


def layers_by_namespace(tensors: Mapping[str, V]) -> dict[str, dict[int, dict[str, V]]]:
    """Every `{ns}layers.{i}.{rest}` entry of `tensors`, split as `split_layer_name` splits it and grouped:
    namespace -> layer index -> in-layer name -> value, each level in the order first seen (a later entry
    with the same in-layer name replaces the value in place, as dict assignment does).

    A 41-shard MoE checkpoint has ~76k tensor names, and a layer's names come one after another, so a name
    that starts with the `{ns}layers.{i}.` of a name already split, continues after it and holds no newline
    is split without the regular expression: the pattern splits it there too. (Its match at that point
    exists; an earlier one would lie inside the shared prefix, since "layers." cannot overlap itself and a
    digit run ends at the "l" of the prefix's own "layers.", so it would have matched the earlier name too,
    whose namespace is the earliest match.)
    """
    match = _LAYER_NAME.match
    grouped: dict[str, dict[int, dict[str, V]]] = {}
    numbers: dict[str, int] = {}  # "07" and "7" are both layer 7
    prefix: str | None = None  # `{ns}layers.{i}.` of the last name the pattern split, and its layer
    cut = 0
    layer: dict[str, V] = {}
    for name, value in tensors.items():
        if prefix is not None and name.startswith(prefix) and len(name) > cut and "\n" not in name:
            layer[name[cut:]] = value
            continue
        found = match(name)
        if found is None:
            continue
        namespace, digits, rest = found.groups()
        index = numbers.get(digits)
        if index is None:
            index = _layer_index(digits)
            if index is None:  # past any model's layers: names no layer
                continue
            numbers[digits] = index
        layers = grouped.get(namespace)
        if layers is None:
            layers = grouped[namespace] = {}
        seen = layers.get(index)
        if seen is None:
            seen = layers[index] = {}
        layer = seen
        layer[rest] = value
        prefix = f"{namespace}layers.{digits}."
        cut = len(prefix)
    return grouped
