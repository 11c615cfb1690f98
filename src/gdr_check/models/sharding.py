"""The TP sharding plan of one linear-attention layer: which columns of which full tensor each rank's kernel gets.

Each kernel argument is sliced from a "source": the full (unsharded) tensor the engine shards, in checkpoint
order. The engine's projections are column-parallel (rank r keeps the r-th contiguous block of output rows of
each projection or of each merged sub-projection), and the per-head parameters are split in value-head blocks:

* Qwen3-Next (`gdn-fused-qkvz`): `in_proj_qkvz` is interleaved per key head, [q K | k K | v G*V | z G*V], so
  a contiguous block is a block of key-head groups; sglang's `fix_query_key_value_ordering` then reorders the
  rank's groups into [q | k | v]. `in_proj_ba` is interleaved the same way, [b G | a G] per key head.
* Qwen3.5 (`gdn-split-qkv`), OLMo-Hybrid (`gdn-separate-qkv`) and KDA: q, k and v are sliced separately (a
  merged column-parallel projection or three projections), each in head blocks, and concatenated.
* KDA's per-key-channel gate `a` and its `dt_bias` are [HV*K], head-major: rank r gets heads r*HV/tp.. with all
  K channels of each, i.e. columns r*(HV/tp)*K ..
* `A_log`, `b`, GDN's `a` and `dt_bias`, and the state pool's head axis: value-head blocks.

Every column list is in the order the rank's kernel argument holds it; the unsharded layer is the same plan at
tp=1. Torch-free: the dry-run ranks (`gdr_check.pipeline.dryrun.rank_worker`) index with these lists.
"""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING, Any

from ..base.records import dataclass
from ..base.variants import variant_spec

if TYPE_CHECKING:
    from .description import LinearAttentionModel

QKV_TENSOR = "mixed_qkv"
STATE_TENSOR = "initial_state"
# Kernel arguments in the order diagnostics report them.
SHARDED_TENSORS: tuple[str, ...] = (QKV_TENSOR, "a", "b", "A_log", "dt_bias", STATE_TENSOR)


@dataclass(frozen=True)
class LayerDims:
    """The unsharded layer: key heads H, value heads HV, channels per key head K and per value head V."""

    H: int
    HV: int
    K: int
    V: int

    @property
    def group(self) -> int:
        return self.HV // self.H


@dataclass(frozen=True)
class TensorShard:
    """One kernel argument: its source tensor and, per rank, the source columns it holds (last axis; the state's
    value-head axis)."""

    tensor: str
    source: str
    source_width: int
    columns: tuple[tuple[int, ...], ...]
    how: str

    def to_dict(self) -> dict[str, Any]:
        return {"tensor": self.tensor, "source": self.source, "source_width": self.source_width,
                "columns": [list(c) for c in self.columns], "how": self.how}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TensorShard:
        return cls(data["tensor"], data["source"], int(data["source_width"]),
                   tuple(tuple(int(i) for i in c) for c in data["columns"]), data["how"])


@dataclass(frozen=True)
class ShardingPlan:
    layout: str
    variant: str  # "gdn" or "kda"
    dims: LayerDims
    tp: int
    tensors: dict[str, TensorShard] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"layout": self.layout, "variant": self.variant, "dims": vars(self.dims), "tp": self.tp,
                "tensors": {name: shard.to_dict() for name, shard in self.tensors.items()}}

    def unsharded(self) -> ShardingPlan:
        return sharding_plan(self.layout, self.variant, self.dims, 1)


def _block(start: int, size: int) -> tuple[int, ...]:
    return tuple(range(start, start + size))


def _split_qkv_columns(d: LayerDims, tp: int, rank: int) -> tuple[int, ...]:
    """[q | k | v] source, each part sliced in head blocks."""
    H_l, HV_l = d.H // tp, d.HV // tp
    q = _block(rank * H_l * d.K, H_l * d.K)
    k = _block(d.H * d.K + rank * H_l * d.K, H_l * d.K)
    v = _block(2 * d.H * d.K + rank * HV_l * d.V, HV_l * d.V)
    return q + k + v


def _fused_qkv_columns(d: LayerDims, tp: int, rank: int) -> tuple[int, ...]:
    """Qwen3-Next's interleaved `in_proj_qkvz`: the rank's block of key-head groups, reordered to [q | k | v]."""
    H_l, GV = d.H // tp, d.group * d.V
    per_group = 2 * d.K + 2 * GV
    groups = range(rank * H_l, (rank + 1) * H_l)
    q = tuple(c for g in groups for c in _block(g * per_group, d.K))
    k = tuple(c for g in groups for c in _block(g * per_group + d.K, d.K))
    v = tuple(c for g in groups for c in _block(g * per_group + 2 * d.K, GV))
    return q + k + v


def _fused_ba_columns(d: LayerDims, tp: int, rank: int, part: str) -> tuple[int, ...]:
    """Qwen3-Next's interleaved `in_proj_ba`, [b G | a G] per key head: the rank's groups' `b` or `a`."""
    H_l, G = d.H // tp, d.group
    offset = 0 if part == "b" else G
    return tuple(c for g in range(rank * H_l, (rank + 1) * H_l) for c in _block(g * 2 * G + offset, G))


def sharding_plan(layout: str, variant: str, dims: LayerDims, tp: int) -> ShardingPlan:
    """How the engine shards one layer of `layout` over `tp` ranks (tp divides H and HV: callers check)."""
    d, spec = dims, variant_spec(variant)
    HV_l = d.HV // tp
    ranks = range(tp)
    heads = tuple(_block(r * HV_l, HV_l) for r in ranks)
    qkv_width = 2 * d.H * d.K + d.HV * d.V
    shards: list[TensorShard] = []
    if layout == "gdn-fused-qkvz":
        per_group = 2 * d.K + 2 * d.group * d.V
        shards += [
            TensorShard(QKV_TENSOR, "in_proj_qkvz", d.H * per_group,
                        tuple(_fused_qkv_columns(d, tp, r) for r in ranks),
                        "blocks of key-head groups of the interleaved [q|k|v|z] projection, reordered to [q|k|v]"),
            TensorShard("a", "in_proj_ba", 2 * d.HV, tuple(_fused_ba_columns(d, tp, r, "a") for r in ranks),
                        "the `a` half of each key-head group of the interleaved [b|a] projection"),
            TensorShard("b", "in_proj_ba", 2 * d.HV, tuple(_fused_ba_columns(d, tp, r, "b") for r in ranks),
                        "the `b` half of each key-head group of the interleaved [b|a] projection"),
        ]
    else:
        qkv_source = "in_proj_qkv" if layout == "gdn-split-qkv" else "q_proj|k_proj|v_proj"
        shards.append(TensorShard(QKV_TENSOR, qkv_source, qkv_width,
                                  tuple(_split_qkv_columns(d, tp, r) for r in ranks),
                                  "q, k and v each in head blocks, concatenated"))
        if spec.gate_per_key:
            gate = tuple(_block(r * HV_l * d.K, HV_l * d.K) for r in ranks)
            shards.append(TensorShard("a", "f_b_proj", d.HV * d.K, gate, "value-head blocks of HV*K (all K per head)"))
        else:
            shards.append(TensorShard("a", "in_proj_a" if layout == "gdn-split-qkv" else "a_proj", d.HV, heads,
                                      "value-head blocks"))
        shards.append(TensorShard("b", "in_proj_b" if layout == "gdn-split-qkv" else "b_proj", d.HV, heads,
                                  "value-head blocks"))
    shards.append(TensorShard("A_log", "A_log", d.HV, heads, "value-head blocks"))
    if spec.gate_per_key:
        shards.append(TensorShard("dt_bias", "dt_bias", d.HV * d.K,
                                  tuple(_block(r * HV_l * d.K, HV_l * d.K) for r in ranks),
                                  "value-head blocks of HV*K (all K per head)"))
    else:
        shards.append(TensorShard("dt_bias", "dt_bias", d.HV, heads, "value-head blocks"))
    shards.append(TensorShard(STATE_TENSOR, "ssm_state", d.HV, heads, "value-head blocks of the pool"))
    return ShardingPlan(layout, variant, d, tp, {s.tensor: s for s in shards})


def model_layout(model: LinearAttentionModel) -> str:
    """The layout whose sharding applies: the checkpoint's, else (a built-in description) the architecture's."""
    if model.layouts:
        return str(model.layouts[0])
    own = variant_spec(model.kind).weight_layout
    if own is not None:
        return own
    return "gdn-fused-qkvz" if "Qwen3Next" in (model.architecture or "") else "gdn-split-qkv"


# -- diagnosis: what a rank received, in heads -------------------------------------------------------------------
def ranges(values: list[int]) -> str:
    """[0, 1, 2, 5] -> "0–2, 5"."""
    runs: list[tuple[int, int]] = []  # (first, last) of each run of consecutive values
    for value in sorted(set(values)):
        if runs and value == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], value)
        else:
            runs.append((value, value))
    return ", ".join(f"{first}" if first == last else f"{first}–{last}" for first, last in runs)


def _unit(plan: ShardingPlan, tensor: str) -> int:
    """Source columns per head of the canonical (unsharded) argument, for tensors other than mixed_qkv."""
    return plan.dims.K if variant_spec(plan.variant).gate_per_key and tensor in ("a", "dt_bias") else 1


def _label(plan: ShardingPlan, tensor: str, position: int) -> tuple[str, int, bool]:
    """(part, head, whole?) of a column of the canonical unsharded argument; `whole` is False mid-head."""
    d = plan.dims
    if tensor == QKV_TENSOR:
        if position < d.H * d.K:
            return "q of key heads", position // d.K, position % d.K == 0
        if position < 2 * d.H * d.K:
            return "k of key heads", (position - d.H * d.K) // d.K, position % d.K == 0
        offset = position - 2 * d.H * d.K
        return "v of value heads", offset // d.V, offset % d.V == 0
    unit = _unit(plan, tensor)
    return "value heads", position // unit, position % unit == 0


def describe_columns(plan: ShardingPlan, tensor: str, columns: tuple[int, ...]) -> str:
    """What the source columns are, as heads of the unsharded argument: "v of value heads 0–7"."""
    canonical = plan.unsharded().tensors[tensor].columns[0]
    position_of = {column: position for position, column in enumerate(canonical)}
    segments: list[tuple[str, list[int]]] = []
    for column in columns:
        position = position_of.get(column)
        part, head = (("columns outside the kernel's", column) if position is None
                      else _label(plan, tensor, position)[:2])
        if not segments or segments[-1][0] != part:
            segments.append((part, []))
        heads = segments[-1][1]
        if not heads or heads[-1] != head:
            heads.append(head)
    texts = [f"{part if len(heads) > 1 else part.replace('heads', 'head')} {ranges(heads)}"
             for part, heads in segments]
    return ", ".join(texts)


def _aligned(plan: ShardingPlan, tensor: str, columns: tuple[int, ...]) -> bool:
    """Whether each head's block starts on a head boundary of the canonical argument."""
    if tensor == QKV_TENSOR:
        return True
    unit = _unit(plan, tensor)
    canonical = plan.unsharded().tensors[tensor].columns[0]
    position_of = {column: position for position, column in enumerate(canonical)}
    return all(position_of.get(columns[i], 0) % unit == 0 for i in range(0, len(columns), unit))


def _segments(plan: ShardingPlan, tensor: str, rank_width: int) -> list[tuple[str, int, int]]:
    """(name, start, stop) of the parts of one rank's argument: q, k, v for mixed_qkv, else the whole."""
    if tensor != QKV_TENSOR:
        return [("", 0, rank_width)]
    d, tp = plan.dims, plan.tp
    q = d.H // tp * d.K
    return [("q", 0, q), ("k", q, 2 * q), ("v", 2 * q, rank_width)]


@dataclass(frozen=True)
class Misshard:
    """One rank holding the wrong part of one tensor."""

    tensor: str
    rank: int
    received: str  # what it holds, in heads of the unsharded tensor
    expected: str
    pool_heads: str  # the value heads of the pool this rank holds
    detail: str  # one sentence for people

    def to_dict(self) -> dict[str, Any]:
        return vars(self).copy()


def find_misshards(correct: ShardingPlan, used: ShardingPlan) -> list[Misshard]:
    """Every (tensor, rank) whose columns in `used` differ from the engine's plan `correct`."""
    found: list[Misshard] = []
    for tensor in SHARDED_TENSORS:
        # Both plans are for the same TP size: one column tuple per rank in each.
        pairs = zip(correct.tensors[tensor].columns, used.tensors[tensor].columns, strict=True)
        for rank, (want, got) in enumerate(pairs):
            if want == got:
                continue
            pool = describe_columns(correct, STATE_TENSOR, correct.tensors[STATE_TENSOR].columns[rank])
            expected = describe_columns(correct, tensor, want)
            if len(got) != len(want):
                read = got[:len(want)]
                received = describe_columns(correct, tensor, got)
                detail = (f"rank {rank} received {len(got)} entries of `{tensor}` ({received}: unsliced) where its "
                          f"kernel takes {len(want)}; the kernel reads the first {len(want)}, "
                          f"{describe_columns(correct, tensor, read)}, but the rank holds {pool} of the pool")
            elif tensor == QKV_TENSOR:
                parts = []
                for name, start, stop in _segments(correct, tensor, len(want)):
                    if got[start:stop] != want[start:stop]:
                        parts.append(f"its {name} columns hold {describe_columns(correct, tensor, got[start:stop])} "
                                     f"(expected {describe_columns(correct, tensor, want[start:stop])})")
                received = describe_columns(correct, tensor, got)
                detail = f"rank {rank} received the wrong columns of `{tensor}`: " + "; ".join(parts) + \
                    f"; the rank holds {pool} of the pool"
            else:
                received = describe_columns(correct, tensor, got)
                if _aligned(correct, tensor, got):
                    detail = f"rank {rank} received {received} of `{tensor}` but holds {pool} of the pool"
                else:
                    unit = _unit(correct, tensor)
                    received = f"columns {got[0]}–{got[-1]} ({received}, cut mid-head)"
                    detail = (f"rank {rank} received {received} of `{tensor}` but holds {pool} of the pool: its "
                              f"block starts at column {got[0]}, not on a head boundary of {unit} columns (sliced "
                              f"by HV instead of HV*K)")
            found.append(Misshard(tensor, rank, received, expected, pool, detail))
    return found
