"""Group-quantized GDN and KDA projections at tensor parallelism: each rank's slice against what the engine release
loads (`engines.group_quant`: the checks, their outcome and the engine's words, per release).

The schemes read from the config's `quantization_config` (or its `text_config`'s):
- AWQ (`quant_method: awq`, GEMM layout): bits, `group_size`; `modules_to_not_convert` read as substrings of the
  layer's path (sglang 0.5.23 `awq/awq.py:61-62`; vLLM 0.33.0 `auto_awq.py:294-299`, `match_mode="substring"`, which
  also tries a fused layer's shard names, `quant_utils.py:619-690`);
- GPTQ (`quant_method: gptq`, and AutoRound's `auto_round:auto_gptq` packing, which both engines load as GPTQ):
  bits, `group_size`; a GPTQModel `dynamic` key `-:<regex>` keeps the layers it matches unquantized (sglang 0.5.23
  `gptq/gptq.py:69-93`); an AutoRound `extra_config` entry with `bits` >= 16 keeps its layer unquantized, matched by
  name or, where it holds regex characters, as a full regex, and a fused layer by its shards when they all agree
  (sglang 0.5.23 `auto_round.py:190-280`); `block_name_to_quantize` limits quantization to the blocks it names;
- compressed-tensors `pack-quantized` (WNA16) and `nvfp4-pack-quantized`: the weights' `num_bits` and
  `group_size` (`strategy: channel` is one group over the whole input); `ignore` holds names and `re:` patterns;
- ModelOpt NVFP4 (`quant_method: modelopt`, `quant_algo: NVFP4`): `exclude_modules` / `ignore`, shell wildcards.

Where an entry names a projection by its full path the comparison is on `layers.<i>.<mixer>.<name>` (a checkpoint's
own prefix, `model.` or `model.language_model.`, is not the engine's). A fused layer is kept unquantized when its own
name matches or all its shards do.

The projections (the engine's layer, its checkpoint shards, its output widths and whole input width):
- GDN: `in_proj_qkvz` and `in_proj_ba` column-parallel (one interleaved output or four / two, as
  `quant_blocks`), `out_proj` row-parallel over value_dim; Qwen3.5's `in_proj_ba` replicated where the release
  does so for the scheme (vLLM 0.22 on, `qwen_gdn_linear_attn.py:853-869` in 0.33.0); sglang 0.5.9's Qwen3.5 has
  four layers instead (`in_proj_qkv`, `in_proj_z`, `in_proj_b`, `in_proj_a`: `launch_flags.gdn_separate_families`);
- KDA (sglang 0.5.23 `models/kimi_linear.py:331-381`, the unfused path it takes for a quantized checkpoint; vLLM
  0.22.0 `mamba/gdn/kimi_gdn_linear_attn.py:120-225`; from 0.27 vLLM fuses q, k, v, b, f_a into `in_proj_qkvgfab`,
  where with Marlin's padding only `o_proj`'s input is checked, the same layer): q, k, v (sglang: one `qkv_proj`)
  column-parallel of
  projection_size = heads x head_dim each, `f_a_proj` and `g_a_proj` replicated (head_dim outputs), `f_b_proj` and
  `g_b_proj` column-parallel from head_dim to projection_size, `b_proj` column-parallel of one output per head,
  `o_proj` row-parallel over projection_size.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ..base.errors import InputError, described, printable
from ..base.records import dataclass
from ..base.variants import variant_spec
from ..engines.group_quant import GROUP, PACK, GroupQuantFacts
from .description import LinearAttentionModel
from .quant_blocks import TP_SIZES


class GroupRelease(Protocol):
    """What a release's launch-flag table tells about loading these layers."""

    @property
    def group_quant(self) -> GroupQuantFacts: ...

    @property
    def fp8_interleaved_families(self) -> tuple[str, ...]: ...

    @property
    def gdn_separate_families(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class GroupScheme:
    scheme: str  # "awq" | "gptq" (through Marlin) | "gptq-plain" | "wna16" | "nvfp4"
    label: str
    bits: int
    group_size: int  # -1: one group over the whole input
    match: str  # how `patterns` name the layers kept unquantized: "substring", "regex", "names", "ct", "wildcard"
    patterns: tuple[str, ...] = ()
    blocks: tuple[str, ...] = ()  # AutoRound's `block_name_to_quantize` (empty: every block)


def _quantization(config: Mapping[str, Any]) -> Mapping[str, Any] | None:
    text = config.get("text_config")
    quant = config.get("quantization_config")
    if not isinstance(quant, Mapping) and isinstance(text, Mapping):
        quant = text.get("quantization_config")
    return quant if isinstance(quant, Mapping) else None


class QuantizationConfigError(InputError):
    """The checkpoint's `quantization_config` holds a value no engine loads (said in one line)."""


# The widths the engines' group kernels pack (2, 3, 4 and 8 bits; vLLM's and sglang's GPTQ configs refuse others).
_BITS = (2, 3, 4, 8)
# A pattern from the config is run against every projection's name: one with a quantified group, or more unbounded
# quantifiers than a name pattern needs, can backtrack for hours on a 50-character name, so it is refused.
_QUANTIFIED_GROUP = re.compile(r"\)(?:[*+?]|\{\d*,\d*\})")
_UNBOUNDED = re.compile(r"(?<!\\)(?:[*+]|\{\d*,\})")
_MAX_UNBOUNDED = 3
_MAX_PATTERN = 512


def _key_path(within: str, key: str) -> str:
    return ".".join(("quantization_config", *([within] if within else []), key))


def _int(quant: Mapping[str, Any], keys: tuple[str, ...], default: int, *, whole_input: bool = False,
         within: str = "") -> int:
    """The first of `keys` the config gives, as a positive integer (-1 too where `whole_input`: one group over the
    whole input); `default` when it gives none. `within`: where `quant` lies in `quantization_config`."""
    key = next((k for k in keys if quant.get(k) is not None), None)
    if key is None:
        return default
    value = quant[key]
    if isinstance(value, int) and not isinstance(value, bool) and (value > 0 or (whole_input and value == -1)):
        return value
    raise QuantizationConfigError(f"`{_key_path(within, key)}` is {described(value)}, not a "
                                  f"{'positive integer or -1' if whole_input else 'positive integer'}")


def _bits(quant: Mapping[str, Any], keys: tuple[str, ...], default: int, *, within: str = "") -> int:
    bits = _int(quant, keys, default, within=within)
    if bits not in _BITS:
        key = next(k for k in keys if quant.get(k) is not None)
        raise QuantizationConfigError(f"`{_key_path(within, key)}` is {bits}: the engines load "
                                      f"{', '.join(map(str, _BITS[:-1]))} or {_BITS[-1]}-bit groups")
    return bits


def _pattern(where: str, pattern: str) -> str:
    """`pattern` (a layer-name regex from the config), refused where it could backtrack without end."""
    if (len(pattern) > _MAX_PATTERN or _QUANTIFIED_GROUP.search(pattern)
            or len(_UNBOUNDED.findall(pattern)) > _MAX_UNBOUNDED):
        raise QuantizationConfigError(
            f"`quantization_config.{where}` holds the pattern {printable(repr(pattern), 80)}: a quantified "
            f"group, more than {_MAX_UNBOUNDED} unbounded repeats or over {_MAX_PATTERN} characters, which "
            "gdr-check does not run (it can backtrack without end)")
    return pattern


def _strings(value: object) -> tuple[str, ...]:
    return tuple(item for item in value if isinstance(item, str)) if isinstance(value, list) else ()


def group_scheme(config: Mapping[str, Any]) -> GroupScheme | None:
    """The group or NVFP4 scheme the config declares; None for any other (FP8 blocks are `quant_blocks`')."""
    quant = _quantization(config)
    if quant is None:
        return None
    method = str(quant.get("quant_method", "")).lower()
    if method == "awq" and str(quant.get("version", "gemm")).lower() == "gemm":
        bits = _bits(quant, ("bits", "w_bit"), 4)
        group = _int(quant, ("group_size", "q_group_size"), 128, whole_input=True)
        return GroupScheme("awq", f"AWQ {bits}-bit, group {group}", bits, group, "substring",
                           _strings(quant.get("modules_to_not_convert")))
    if method == "gptq":
        bits, group = _bits(quant, ("bits",), 4), _int(quant, ("group_size",), 128, whole_input=True)
        if quant.get("sym") is not True or quant.get("desc_act") is None or bits not in (4, 8):
            # sglang converts GPTQ to Marlin only when `sym` and `desc_act` are given, symmetric, 4 or 8 bits
            # (`gptq/gptq.py:459-482` in 0.5.23); the plain GPTQ kernels are not modelled.
            return GroupScheme("gptq-plain", f"GPTQ {bits}-bit, group {group}", bits, group, "regex")
        dynamic = quant.get("dynamic")
        negatives = tuple(_pattern("dynamic", key[2:]) for key in dynamic
                          if isinstance(key, str) and key.startswith("-:")) if isinstance(dynamic, Mapping) else ()
        return GroupScheme("gptq", f"GPTQ {bits}-bit, group {group}", bits, group, "regex", negatives)
    if method in ("auto-round", "intel/auto-round"):
        if "gptq" not in str(quant.get("packing_format", "auto_round:auto_gptq")):
            return None
        bits, group = _bits(quant, ("bits",), 4), _int(quant, ("group_size",), 128, whole_input=True)
        extra = quant.get("extra_config")
        kept = tuple(_pattern("extra_config", name) for name, entry in extra.items()
                     if isinstance(name, str) and isinstance(entry, Mapping)
                     and isinstance(entry.get("bits"), int) and entry["bits"] >= 16) if isinstance(extra, Mapping) \
            else ()
        blocks = quant.get("block_name_to_quantize")
        named = tuple(b.strip() for b in blocks.split(",")) if isinstance(blocks, str) else _strings(blocks)
        return GroupScheme("gptq", f"AutoRound {bits}-bit (GPTQ packing), group {group}", bits, group, "names", kept,
                           named)
    if method == "compressed-tensors":
        fmt = str(quant.get("format", ""))
        groups = quant.get("config_groups")
        weight_groups = [(f"config_groups.{name}.weights", group.get("weights")) for name, group in groups.items()
                         if isinstance(group, Mapping)] if isinstance(groups, Mapping) else []
        where, first = next(((w, weights) for w, weights in weight_groups if isinstance(weights, Mapping)), ("", None))
        if first is None:
            return None
        bits = _bits(first, ("num_bits",), 4, within=where)
        group = _int(first, ("group_size",), -1, whole_input=True, within=where) if first.get("strategy") in (
            "group", "tensor_group") else -1
        ignored = _strings(quant.get("ignore"))
        for entry in ignored:
            if entry.startswith("re:"):
                _pattern("ignore", entry[3:])
        if fmt == "pack-quantized":
            return GroupScheme("wna16", f"compressed-tensors W{bits}A16, group {group}", bits, group, "ct", ignored)
        if fmt == "nvfp4-pack-quantized":
            return GroupScheme("nvfp4", "compressed-tensors NVFP4", 4, 16, "ct", ignored)
        return None
    if method == "modelopt" and str(quant.get("quant_algo", "")).upper() == "NVFP4":
        excluded = _strings(quant.get("exclude_modules")) or _strings(quant.get("ignore"))
        return GroupScheme("nvfp4", "ModelOpt NVFP4", 4, _int(quant, ("group_size",), 16), "wildcard", excluded)
    return None


def _matches(scheme: GroupScheme, path: str) -> bool:
    """Whether `path` (`model.layers.<i>.<mixer>.<name>`) is named by the scheme's unquantized entries."""
    tail = path.split("model.", 1)[-1]
    for entry in scheme.patterns:
        if scheme.match == "substring":
            hit = entry in path
        elif scheme.match == "regex":
            hit = _regex(entry, path, full=False)
        elif scheme.match == "names":
            hit = _named(entry, tail) or (any(c in entry for c in "*+?^$()[]{}|\\") and _regex(entry, path, True))
        elif scheme.match == "ct":
            hit = _regex(entry[3:], path, full=False) if entry.startswith("re:") else _named(entry, tail)
        else:
            hit = fnmatch.fnmatchcase(path, entry) or fnmatch.fnmatchcase(tail, entry)
        if hit:
            return True
    return False


def _tail(name: str) -> str:
    """`model.language_model.layers.3.x` -> `layers.3.x`: a checkpoint's own prefix is not the engine's."""
    at = name.find("layers")
    return name[at:] if at >= 0 else name


def _named(entry: str, tail: str) -> bool:
    return entry == tail or entry.endswith("." + tail)


def _regex(pattern: str, path: str, full: bool) -> bool:
    try:
        found = re.fullmatch(pattern, path) if full else re.match(pattern, path)
    except re.error:
        return False
    return found is not None


@dataclass(frozen=True)
class Projection:
    module: str
    shards: tuple[str, ...]
    outputs: tuple[int, ...]
    input_size: int
    parallel: str  # "column" | "row" | "replicated"


def projections(model: LinearAttentionModel, scheme: str, release: GroupRelease) -> list[Projection]:
    """The release's quantizable GDN or KDA projections of one layer; empty where the geometry is unknown."""
    if model.hidden_size is None or None in (model.num_k_heads, model.num_v_heads, model.head_k_dim,
                                             model.head_v_dim):
        return []
    layer = _PROJECTIONS.get(model.kind)
    return [] if layer is None else layer(model, scheme, release)


def _kda_projections(model: LinearAttentionModel, scheme: str, release: GroupRelease) -> list[Projection]:
    hidden = model.hidden_size or 0
    k_heads, v_heads = model.num_k_heads or 0, model.num_v_heads or 0
    key_dim, value_dim = k_heads * (model.head_k_dim or 0), v_heads * (model.head_v_dim or 0)
    head_dim, size = model.head_k_dim or 0, value_dim
    qkv = [Projection("qkv_proj", ("q_proj", "k_proj", "v_proj"), (key_dim, key_dim, value_dim), hidden,
                      "column")] if release.group_quant.kda_merged_qkv else [
        Projection(name, (), (width,), hidden, "column")
        for name, width in (("q_proj", key_dim), ("k_proj", key_dim), ("v_proj", value_dim))]
    return qkv + [
        Projection("f_a_proj", (), (head_dim,), hidden, "replicated"),
        Projection("f_b_proj", (), (size,), head_dim, "column"),
        Projection("b_proj", (), (v_heads,), hidden, "column"),
        Projection("g_a_proj", (), (head_dim,), hidden, "replicated"),
        Projection("g_b_proj", (), (size,), head_dim, "column"),
        Projection("o_proj", (), (size,), size, "row"),
    ]


def _gdn_projections(model: LinearAttentionModel, scheme: str, release: GroupRelease) -> list[Projection]:
    hidden = model.hidden_size or 0
    k_heads, v_heads = model.num_k_heads or 0, model.num_v_heads or 0
    key_dim, value_dim = k_heads * (model.head_k_dim or 0), v_heads * (model.head_v_dim or 0)
    if model.family in release.gdn_separate_families:  # sglang 0.5.9's Qwen3.5: four layers
        return [Projection("in_proj_qkv", (), (key_dim, key_dim, value_dim), hidden, "column"),
                Projection("in_proj_z", (), (value_dim,), hidden, "column"),
                Projection("in_proj_b", (), (v_heads,), hidden, "column"),
                Projection("in_proj_a", (), (v_heads,), hidden, "column"),
                Projection("out_proj", (), (value_dim,), value_dim, "row")]
    interleaved = model.family in release.fp8_interleaved_families
    ba_parallel = "replicated" if not interleaved and scheme in release.group_quant.ba_replicated else "column"
    return [
        Projection("in_proj_qkvz", () if interleaved else ("in_proj_qkv", "in_proj_z"),
                   (2 * key_dim + 2 * value_dim,) if interleaved else (key_dim, key_dim, value_dim, value_dim),
                   hidden, "column"),
        Projection("in_proj_ba", () if interleaved else ("in_proj_b", "in_proj_a"),
                   (2 * v_heads,) if interleaved else (v_heads, v_heads), hidden, ba_parallel),
        Projection("out_proj", (), (value_dim,), value_dim, "row"),
    ]


# Each variant's projection layout in the engines' layers: a procedure per variant, by `VariantSpec.name`; a
# variant without one has no projections checked here.
_PROJECTIONS: dict[str, Callable[[LinearAttentionModel, str, GroupRelease], list[Projection]]] = {
    "gdn": _gdn_projections, "kda": _kda_projections,
}


def mixer(model: LinearAttentionModel) -> str:
    return variant_spec(model.kind).mixer


@dataclass(frozen=True)
class ShardConflict:
    layer: str
    prefix: str
    kept: tuple[str, ...]  # the shards the config keeps unquantized
    shards: tuple[str, ...]
    says: str
    source: str
    layers: int


def shard_conflicts(model: LinearAttentionModel, config: Mapping[str, Any],
                    release: GroupRelease) -> list[ShardConflict]:
    """The fused projections whose shards AWQ's `modules_to_not_convert` names only in part, where the release
    refuses that (vLLM: all shards or none; from 0.24 unless the fused name itself is named)."""
    scheme = group_scheme(config)
    facts = release.group_quant
    if scheme is None or scheme.scheme != "awq" or not facts.awq_shards_disagree:
        return []
    found: dict[str, ShardConflict] = {}
    counts: dict[str, int] = {}
    for layer in model.linear_layers:
        prefix = f"model.layers.{layer}.{mixer(model)}"
        for projection in projections(model, scheme.scheme, release):
            path = f"{prefix}.{projection.module}"
            if not projection.shards or (facts.awq_fused_name_first and _matches(scheme, path)):
                continue
            kept = tuple(shard for shard in projection.shards if _matches(scheme, f"{prefix}.{shard}"))
            if kept and len(kept) < len(projection.shards):
                found.setdefault(projection.module, ShardConflict(
                    projection.module, path, kept, projection.shards, facts.awq_shards_disagree.format(prefix=path),
                    facts.awq_shards_source, 0))
                counts[projection.module] = counts.get(projection.module, 0) + 1
    return [ShardConflict(**{**c.__dict__, "layers": counts[name]}) for name, c in found.items()]


def _kept(scheme: GroupScheme, projection: Projection, prefix: str, shards_too: bool,
          fused_first: bool = True) -> bool:
    path = f"{prefix}.{projection.module}"
    blocks = [block for block in scheme.blocks if not block.startswith("mtp")]  # the MTP head's own layers
    if blocks and not any(_tail(path).startswith(_tail(block)) for block in blocks):
        return True
    if _matches(scheme, path) and (fused_first or not projection.shards):
        return True
    return shards_too and bool(projection.shards) and all(
        _matches(scheme, f"{prefix}.{shard}") for shard in projection.shards)


@dataclass(frozen=True)
class WidthProblem:
    layer: str  # the engine's module name
    prefix: str  # its path in the first layer found
    side: str  # "output" | "input"
    width: int  # per rank
    multiple: int
    outcome: str  # "warning" | "error"
    says: str  # the engine's words
    source: str
    layers: int  # how many linear-attention layers have it


def width_problems(model: LinearAttentionModel, config: Mapping[str, Any], tp: int,
                   release: GroupRelease) -> list[WidthProblem]:
    """What the release does at load with each quantized projection's per-rank slice at `tp` (the attention TP):
    a warning for each fallback, an error for each refusal; one per module and outcome, counting the layers."""
    scheme = group_scheme(config)
    facts = release.group_quant
    if scheme is None or scheme.scheme not in facts.modelled:
        return []
    shards_too = scheme.scheme != "awq" or facts.awq_matches_shards
    found: dict[tuple[str, str], WidthProblem] = {}
    counts: dict[tuple[str, str], int] = {}
    for layer in model.linear_layers:
        prefix = f"model.layers.{layer}.{mixer(model)}"
        for projection in projections(model, scheme.scheme, release):
            fused_first = scheme.scheme != "awq" or facts.awq_fused_name_first or not facts.awq_matches_shards
            if _kept(scheme, projection, prefix, shards_too, fused_first):
                continue
            for problem in _layer_problems(scheme, projection, f"{prefix}.{projection.module}", tp, facts):
                key = (problem.layer, problem.outcome)
                found.setdefault(key, problem)
                counts[key] = counts.get(key, 0) + 1
    return [WidthProblem(**{**problem.__dict__, "layers": counts[key]}) for key, problem in found.items()]


def _layer_problems(scheme: GroupScheme, projection: Projection, path: str, tp: int,
                    facts: GroupQuantFacts) -> list[WidthProblem]:
    split = projection.parallel if tp > 1 else "replicated"
    output = sum(width // tp for width in projection.outputs) if split == "column" else sum(projection.outputs)
    inputs = projection.input_size // tp if split == "row" else projection.input_size
    fell_back = False
    problems: list[WidthProblem] = []
    for check in facts.checks:
        if check.scheme != scheme.scheme or (check.after_fallback and not fell_back):
            continue
        if fell_back and check.outcome == "warning":
            continue
        if check.multiple == GROUP:
            if not 0 < scheme.group_size < projection.input_size:
                continue
            multiple = scheme.group_size
        elif check.multiple == PACK:
            multiple = 32 // scheme.bits
        else:
            multiple = int(check.multiple)
        width = output if check.side == "output" else inputs
        if width % multiple == 0:
            continue
        says = check.says.format(prefix=path, width=width, multiple=multiple)
        problems.append(WidthProblem(projection.module, path, check.side, width, multiple, check.outcome, says,
                                     check.source, 1))
        if check.outcome == "warning":
            fell_back = True
        else:
            break
    return problems


def working_tp_sizes(model: LinearAttentionModel, config: Mapping[str, Any], release: GroupRelease) -> list[int]:
    """The TP sizes (of 1, 2, 4, 8, 16) that split the heads and load without a refusal."""
    heads = [h for h in (model.num_k_heads, model.num_v_heads) if h]
    return [tp for tp in TP_SIZES if all(h % tp == 0 for h in heads)
            and not any(p.outcome == "error" for p in width_problems(model, config, tp, release))]


def quiet_tp_sizes(model: LinearAttentionModel, config: Mapping[str, Any], release: GroupRelease) -> list[int]:
    """The TP sizes (of 1, 2, 4, 8, 16) that split the heads and load every projection on the fast kernel."""
    heads = [h for h in (model.num_k_heads, model.num_v_heads) if h]
    return [tp for tp in TP_SIZES if all(h % tp == 0 for h in heads)
            and not width_problems(model, config, tp, release)]
