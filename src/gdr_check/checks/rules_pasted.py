"""GDR4xx: errors users paste from engine logs next to the GDN/KDA decode kernel, and what their numbers say.

These are not checks gdr-check runs: they are the engines' and PyTorch's own messages (quoted from their
source), declared so that `gdr-check explain` recognises them in a pasted log and connects them to the
checks that predict them. Each rule's reasoner (`checks.explain.reasoner`) reads the numbers of the message,
with the deployment's model/tp/batch when given.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from typing import TYPE_CHECKING

from ..base.records import dataclass
from ..base.registry import Finding, declare
from ..base.tensor_spec import TensorSpec
from ..call.packed_call import GRID_X_LIMIT, CallContext, PackedDecodeCall
from ..engines.profiles import DEFAULT_ENGINE, GRID_NV_BHV, EngineProfile, profile_for
from .explanations import (
    BA_WIDTH,
    QKV_WIDTH,
    QKVZ_WIDTH,
    Context,
    find_all,
    full_value_heads,
    head_k_dim,
    head_v_dim,
    ints,
    model_kind,
    named_head_dims,
    named_widths,
    reasoner,
    tp_factor,
)

if TYPE_CHECKING:
    from ..base.registry import RuleSet
    from ..base.report import Diagnostic

GRID_LIMIT = 65535  # CUDA's cap on grid dimensions 1 and 2 (rules_assumed GDR244)


@dataclass(frozen=True)
class PastedExample:
    """A pasted log line; `diagnostics` runs it through `explain`'s matcher, which reports the rule."""

    text: str

    def __str__(self) -> str:
        return f"pasted: {self.text}"

    def diagnostics(self, rules: RuleSet) -> list[Diagnostic]:
        return [rules.rules[found.rule.code].diagnostic(Finding(dict(found.values))) for found in find_all(self.text)]


# The largest TP size the divisibility messages list: a width has many divisors, and no deployment splits a layer
# over more ranks.
_MAX_LISTED_TP = 64


def _remainder(count: int, tp: int) -> tuple[list[int], str]:
    """The TP sizes up to `_MAX_LISTED_TP` that divide `count` (every divisor: the engines assert `count % tp == 0`,
    which 3 or 6 passes as well as a power of two), and the line saying what tp={tp} leaves over."""
    valid = [size for size in range(1, min(count, _MAX_LISTED_TP) + 1) if count % size == 0]
    sizes = "TP sizes" if count <= _MAX_LISTED_TP else f"TP sizes up to {_MAX_LISTED_TP}"
    line = f"{count} = {tp} × {count // tp} + {count % tp}: tp={tp} leaves a remainder"
    return valid, line + (f"; {sizes} that divide {count}: {', '.join(map(str, valid))}" if valid else "")


declare(
    "GDR401", "tp-does-not-divide",
    summary="an engine's load-time divisibility assert: a head count or width is not divisible by the TP size",
    message="{numerator} is not divisible by {denominator}",
    explanation=(
        "sglang's and vLLM's `divide()`/`ensure_divisibility()` (distributed/utils.py) assert "
        "`numerator % denominator == 0` when a layer splits its heads or widths over the TP ranks: the "
        "model's key or value head count (or a projection width) is not a multiple of --tp. "
        "`gdr-check MODEL --tp N` names the TP sizes that work before loading."),
    causes=("--tp (tensor-parallel size) that does not divide num_k_heads or num_v_heads of the linear layers",
            "a checkpoint whose config was edited (head counts) while the weights were not"),
    fixes=("pick a TP size that divides every head count (`gdr-check MODEL --tp N` lists them)",),
    example=PastedExample("AssertionError: 16 is not divisible by 3"),
    engines="sglang 0.5.23 and vLLM (distributed/utils.py)",
    scope="pasted",
)


@reasoner("GDR401", numeric=("numerator", "denominator"))
def _divisibility(values: Mapping[str, str], context: Context) -> list[str]:
    numerator, denominator = int(values["numerator"]), int(values["denominator"])
    if denominator <= 0:
        return []
    valid, remainder = _remainder(numerator, denominator)
    out = [remainder]
    if valid:
        out[0] += f" (the nearest: {min(valid, key=lambda tp: (abs(tp - denominator), tp))})"
    out += named_widths(numerator, context)
    return out


declare(
    "GDR402", "triton-launch-invalid-argument",
    summary="a Triton kernel launch failed with `invalid argument`: typically a grid past CUDA's 65535 limit",
    message="Triton Error [CUDA]: invalid argument",
    explanation=(
        "CUDA rejects a launch whose grid dimension 1 or 2 exceeds 65535, and Triton reports it as "
        "`RuntimeError: Triton Error [CUDA]: invalid argument`. sglang's GDN packed decode launches a "
        "(NV, B*HV) grid, so a decode batch B with B*HV_l > 65535 fails (GDR244, docs/kernel-contract.md U7). "
        "Its Triton KDA packed decode launches (NV, B, HV), so a KDA model fails at B > 65535 (not B*HV_l); "
        "its CUDA KDA kernel, which takes the call instead when GDR226 says so (B >= 8, K = V = 128, a float32 "
        "state, ...), launches a 1-D grid of B*HV_l blocks, limited only by 2**31 - 1."),
    causes=("a GDN decode batch (or a CUDA-graph capture size) with B * HV_l > 65535, or a KDA one with B > 65535 "
            "on the Triton kernel",
            "an unrelated bad launch argument (shared memory past the device's limit)"),
    fixes=("keep B * HV_l <= 65535 (GDN) or B <= 65535 (KDA on Triton): lower the maximum running requests / "
           "CUDA-graph batch sizes, or raise --tp (GDN)",),
    example=PastedExample("RuntimeError: Triton Error [CUDA]: invalid argument"),
    engines="sglang 0.5.23 (GDN and KDA packed decode); vLLM splits the GDN grid",
    scope="pasted",
)


def _value_heads(context: Context) -> int | None:
    heads = full_value_heads(context)
    if heads is None:
        return None
    return heads // context.tp if context.tp and heads % context.tp == 0 else heads


def _kda_cuda_misses(profile: EngineProfile, batch: int, heads: int, K: int, V: int) -> list[str] | None:
    """`CallContext.kda_cuda_misses` of the call the engine's KDA layer makes for `batch` rows of `heads` value heads
    per rank: the engine's default KDA state dtype, with the activations and parameters in the dtypes its CUDA kernel
    takes (a bf16 model's), dense state, int32 indices."""
    fast = profile.kda_fast_path
    if fast is None:
        return None
    act, param = fast.activation_dtype, fast.param_dtype
    call = PackedDecodeCall(
        mixed_qkv=TensorSpec.of((batch, 2 * heads * K + heads * V), act), a=TensorSpec.of((batch, heads * K), act),
        b=TensorSpec.of((batch, heads), act), A_log=TensorSpec.of((heads,), param),
        dt_bias=TensorSpec.of((heads * K,), param), scale=K ** -0.5,
        initial_state=TensorSpec.of((batch + 1, heads, V, K), profile.kda_state_dtype),
        out=TensorSpec.of((batch, 1, heads, V), act), ssm_state_indices=TensorSpec.of((batch,), fast.index_dtype),
        use_qk_l2norm_in_kernel=True, variant="kda")
    return CallContext.build(call, profile).kda_cuda_misses()


def _verdict(crosses: bool) -> str:
    """What a batch's grid against the limit says about a pasted grid error."""
    return "crosses the limit: this is the cause" if crosses else \
        "is within the limit: look for another bad launch argument"


def _batch_line(batch: int, heads: int, product: str) -> str:
    """`--batch B`: the grid's `product` (B*H_l, B*HV_l) = B*heads against the limit."""
    blocks = batch * heads
    verdict = _verdict(blocks > GRID_LIMIT)
    return f"--batch {batch}: the grid needs {product} = {batch}*{heads} = {blocks}, which {verdict}"


def _kda_grid(context: Context, heads: int) -> list[str]:
    """GDR402 for a KDA model: Triton's (NV, B, HV) grid limits B and HV_l; the CUDA kernel's 1-D grid, B*HV_l."""
    profile = context.profile or profile_for(DEFAULT_ENGINE)
    if profile.kda_decode_kernel is not None and profile.kda_grids:  # the engine's own KDA packed op
        grid = profile.kda_grids[0]
        out = [f"{profile.label} decodes KDA layers with its own `{profile.kda_decode_kernel}` (another argument "
               f"list, not the contract's), whose Triton grid is ({', '.join(grid)}): B*H_l <= {GRID_LIMIT} "
               f"(H_l = {heads} heads per rank), so the largest batch that launches is {GRID_LIMIT // heads}"]
        if context.batch:
            out.append(_batch_line(context.batch, heads, "B*H_l"))
        return out
    if profile.kda_decode_kernel is not None:
        return [f"{profile.label} decodes KDA layers with `{profile.kda_decode_kernel}`, not the packed KDA kernel: "
                f"gdr-check knows no grid limit of it; look for another bad launch argument"]
    unsplit = profile.kda_grids == (GRID_NV_BHV,)  # before sglang 0.5.19
    largest = GRID_LIMIT // heads if unsplit else GRID_LIMIT
    out = [f"a KDA model: {profile.label}'s Triton KDA decode launches a (NV, B*HV) grid, so B*HV_l <= {GRID_LIMIT} "
           f"(HV_l = {heads} value heads per rank): the largest batch that launches on Triton is {GRID_LIMIT} // "
           f"{heads} = {largest}" if unsplit else
           f"a KDA model: {profile.label}'s Triton KDA decode launches a (NV, B, HV) grid, so B <= {GRID_LIMIT} and "
           f"HV_l <= {GRID_LIMIT} (HV_l = {heads} value heads per rank), not B*HV_l: the largest batch that launches "
           f"on Triton is {GRID_LIMIT}"]
    K, V = head_k_dim(context), head_v_dim(context)
    fast = profile.kda_fast_path
    cuda = None if fast is None or K is None or V is None else \
        _kda_cuda_misses(profile, max(context.batch or 0, fast.min_batch), heads, K, V)
    if fast is not None and cuda == []:
        out.append(f"with {profile.label}'s default {profile.kda_state_dtype} KDA state ({fast.activation_dtype} "
                   f"activations), its CUDA KDA kernel takes every call of B >= {fast.min_batch} (GDR226): a 1-D "
                   f"grid of B*HV_l blocks, limited only by 2**31 - 1 = {GRID_X_LIMIT} (B <= {GRID_X_LIMIT // heads}"
                   f" at HV_l = {heads}), so the batch does not cross Triton's limit unless the state is another "
                   f"dtype ({profile.state_dtype_flag})")
    elif cuda:
        out.append(f"{profile.label}'s CUDA KDA kernel does not take this model's calls ({'; '.join(cuda)}): Triton "
                   f"runs")
    if context.batch:
        batch = context.batch
        crosses = batch * heads > GRID_LIMIT if unsplit else batch > GRID_LIMIT or heads > GRID_LIMIT
        if fast is not None and cuda == [] and batch >= fast.min_batch:
            blocks = batch * heads
            if blocks > GRID_X_LIMIT:
                verdict = _verdict(True)
            elif crosses:
                verdict = (f"is within the limit: with the {profile.kda_state_dtype} state the grid is not the cause; "
                           f"with another state dtype Triton runs, and B = {batch} > {GRID_LIMIT} is the cause")
            else:
                verdict = (f"is within the limit, and B = {batch} is within Triton's: look for another bad launch "
                           f"argument")
            out.append(f"--batch {batch}: the CUDA kernel launches B*HV_l = {batch}*{heads} = {blocks} blocks, "
                       f"which {verdict}")
        else:
            verdict = _verdict(crosses)
            needs = f"B*HV_l = {batch}*{heads} = {batch * heads}" if unsplit else f"B = {batch} and HV_l = {heads}"
            out.append(f"--batch {batch}: the Triton grid needs {needs}, which {verdict}")
    return out


@reasoner("GDR402")
def _grid(values: Mapping[str, str], context: Context) -> list[str]:
    heads = _value_heads(context)
    if heads is not None and model_kind(context) == "kda":
        return _kda_grid(context, heads)
    profile = context.profile
    if profile is not None and profile.grid_dim_limit is None:
        out = [f"{profile.label} splits the GDN decode grid into (NV, HV, B) when B*HV > {GRID_LIMIT}: the limit is "
               f"B <= {GRID_LIMIT} and HV_l <= {GRID_LIMIT}, not B*HV_l"]
        if context.batch and context.batch > GRID_LIMIT:
            out.append(f"--batch {context.batch} crosses B <= {GRID_LIMIT}: this is the cause")
        else:
            out.append("unless the decode batch exceeds that, look for another bad launch argument (shared memory, "
                       "a kernel of another layer)")
        return out
    if heads is None:
        return ["with --model (and --tp, --batch) gdr-check computes the grid B*HV_l and the largest batch "
                f"that fits {GRID_LIMIT}"]
    out = [f"HV_l = {heads} value heads per rank: the largest batch that launches is {GRID_LIMIT} // {heads} = "
           f"{GRID_LIMIT // heads}"]
    if context.batch:
        out.append(_batch_line(context.batch, heads, "B*HV_l"))
    return out


declare(
    "GDR403", "cuda-illegal-memory-access",
    summary="CUDA illegal memory access: often a state slot index outside the pool",
    message="an illegal memory access was encountered",
    explanation=(
        "PyTorch reports it as `CUDA error: an illegal memory access was encountered`, Triton (a launch, or a "
        "CUDA-graph capture in sglang) as `Triton Error [CUDA]: an illegal memory access was encountered`. "
        "The packed decode kernel reads and writes `initial_state[ssm_state_indices[i]]` without a bounds "
        "check: a slot >= the pool's slot count, or a negative padding slot the engine's kernel does not skip, "
        "reads or writes outside the pool (GDR241 catches these before launch; GDR240 a pool view the kernel does "
        "not assume). The error is reported "
        "asynchronously, at a later CUDA call, so the traceback's frame is often not the faulty kernel."),
    causes=("a slot index >= the state pool's slot count (a pool sized for fewer requests than are scheduled)",
            "padding rows marked -1 passed to a kernel that does not skip them",
            "a state pool of another layer, or a view whose strides the kernel does not assume"),
    fixes=("rerun with CUDA_LAUNCH_BLOCKING=1 to find the faulting kernel",
           "check the call with `gdr-check call` or the runtime guard: it names the bad slot and the pool size"),
    example=PastedExample("torch.AcceleratorError: CUDA error: an illegal memory access was encountered"),
    engines="any (PyTorch's message)",
    # PyTorch's next line names the CUDA error (`Search for `cudaErrorIllegalAddress' in ...`), the driver API's
    # name is CUDA_ERROR_ILLEGAL_ADDRESS (Triton, cuda-python).
    follow_on=("cudaErrorIllegalAddress", "CUDA_ERROR_ILLEGAL_ADDRESS"),
    scope="pasted",
)


@reasoner("GDR403")
def _illegal_access(values: Mapping[str, str], context: Context) -> list[str]:
    profile = context.profile
    if profile is None:
        return ["with --engine, gdr-check names which slot values the engine's decode kernel skips"]
    bound = profile.skip_at_or_below
    skipped = "negative" if bound < 0 else f"<= {bound}"
    out = [f"{profile.label}'s packed decode skips a row whose slot is {skipped}; any other slot must be below the "
           f"state pool's row count, or the kernel reads and writes outside the pool"]
    if profile.reserved_slot_zero:
        size = f"the pool size ({profile.cache_size_flag})" if profile.cache_size_flag else "the pool size"
        out.append(f"{profile.label} allocates {size} + 1 rows and keeps row 0 for padding: live slots run from 1 "
                   f"to the size" + (f"; --batch {context.batch} needs a size of at least {context.batch} (more "
                                     f"with speculative or prefix-cache buffers, GDR135)" if context.batch else ""))
    return out


declare(
    "GDR404", "reshape-invalid-for-size",
    summary="a view/reshape whose sizes do not fit the input: a per-rank vs full width or head count mix-up",
    message="shape '[{shape}]' is invalid for input of size {size}",
    explanation=(
        "PyTorch's view/reshape fails when the product of the known sizes does not divide the input's element "
        "count (without a -1: differs from it). Next to the GDN layer the sizes in the shape are the model's "
        "(head counts, head sizes, q/k/v widths, HV*V) and the input holds tokens × a per-rank or full width: a "
        "factor of tp between them names the mix-up, in a head count or a width (TP never splits a head's size)."),
    causes=("a tensor sharded for --tp reshaped with the unsharded width or head count (or the reverse)",
            "the `qkvz` projection output (z included) reshaped as `mixed_qkv`"),
    fixes=("reshape with the per-rank width and head counts (divided by tp) on every rank",),
    example=PastedExample("RuntimeError: shape '[4, -1, 8192]' is invalid for input of size 16384"),
    engines="any (PyTorch's message)",
    scope="pasted",
)


def _dims(shape: str) -> list[int]:
    return [int(part.strip()) for part in shape.split(",") if part.strip()]


def _head_counts(context: Context) -> set[int]:
    return {width for name, width in context.widths.items() if name.startswith("num_")}


def _flat_widths(context: Context) -> set[int]:
    """The model's widths that are no head count (q/k/v, qkvz, HV*V, ...), whole."""
    return {width for name, width in context.widths.items() if not name.startswith("num_")}


def _tokens_index(dims: list[int]) -> int | None:
    """The dim of a shape that holds the rows (tokens): the first before the last that is not 1, as a leading 1 is
    a batch of one ([1, T, W], [1, T, H, D]); None when every dim before the last is 1 ([W], [1, W])."""
    return next((index for index in range(len(dims) - 1) if dims[index] != 1), None)


def _split_dim(dims: list[int], tp: int, full: list[int], context: Context, tokens: int | None) -> int | None:
    """Which dim of a shape TP split by `tp` (`full` holds each dim's unsplit size): the product alone cannot tell,
    so the model's head counts come first, then its other widths, then by place: a middle dim (the heads of
    [tokens, heads, head size]) before the last (a flattened width). A last dim that is one of the model's
    flattened widths comes before all: it holds every head, so the dims before it are rows, not heads. The tokens
    (dim `tokens`, which TP never splits) are one only when the model names them, and a model's head size never:
    TP splits heads, not their size."""
    widths, heads, sizes = set(context.widths.values()), _head_counts(context), set(context.head_dims.values())
    flat = _flat_widths(context)
    last = len(dims) - 1

    def rank(index: int) -> tuple[int, int, int]:
        size = full[index]
        place = 0 if 0 < index < last else 1 if index == last else 2
        named = 0 if size in heads else 1 if size in widths else 2
        if index == last and size in flat and dims[index] not in sizes:  # [1, 8, 2048]: 8 tokens of 2048, not heads
            named = -1
        # The tokens (of [tokens, width], [1, tokens, width]) come after any other dim the model names: a [8, 2048]
        # reshape of 8 full 8192-wide rows is the width's split, not 8 of 32 heads. A head count of the model there
        # is level with a dim it does not name, and the place decides: [1, 4, 768] is one token's 4 of 16 key heads.
        return named + (2 if index == tokens else 0), place, index

    candidates = [index for index, size in enumerate(dims) if size > 1 and full[index] % tp == 0
                  and (size not in sizes or full[index] in widths)
                  and (index != tokens or full[index] in widths)]
    return min(candidates, key=rank, default=None)


def _linear_tps(context: Context) -> list[int]:
    """The TP sizes a width may be split by: the one given first, then whole, then each power of two that divides
    the model's linear-attention head counts (a TP size must divide them)."""
    heads = [width for name, width in context.widths.items()
             if name.startswith(("num_k_heads", "num_v_heads", "num_heads"))]
    tps = [tp for tp in (1, 2, 4, 8, 16, 32, 64) if all(count % tp == 0 for count in heads)]
    return list(dict.fromkeys([*([context.tp] if context.tp else []), *tps]))


def _width_names(width: int, context: Context) -> list[tuple[str, int]]:
    """(name, tp) of each of the model's flattened widths that `width` is, whole (tp=1) or a rank's, in the order
    of `_linear_tps`."""
    return [(name, tp) for tp in _linear_tps(context) for name, full in context.widths.items()
            if not name.startswith("num_") and full % tp == 0 and full // tp == width]


def _number(value: Fraction) -> str:
    """1.5, 6, 0.75; a ratio a decimal would round (2/3) as a fraction."""
    if value.denominator == 1:
        return str(value.numerator)
    decimal = value.denominator
    while decimal % 2 == 0:
        decimal //= 2
    while decimal % 5 == 0:
        decimal //= 5
    return f"{float(value):g}" if decimal == 1 else f"{value.numerator}/{value.denominator}"


def _sized(width: int, tp: int) -> str:
    return "(unsharded)" if tp == 1 else f"per rank at tp={tp} ({width * tp}/{tp})"


def _tp_clause(row_tp: int, shape_tp: int, context: Context, factors: str = "") -> str:
    """What the TP sizes of the input's rows and of the shape say, when they differ; `factors` (`× 1.5 for z`) and
    the TP size the user gave, when the shape's is another, in parentheses."""
    if row_tp == shape_tp:
        return ""
    notes = [note for note in (factors, f"you said --tp {context.tp}" if context.tp not in (None, shape_tp) else "")
             if note]
    rows = "unsharded" if row_tp == 1 else f"sized for tp={row_tp}"
    return f"{rows} while the shape is sized for tp={shape_tp}" + (f" ({'; '.join(notes)})" if notes else "")


def _row_widths(lead: int, row: int, per: int, shown: list[int], tokens: int | None, size: int) -> str:
    """The first words of a per-row reading: the rows that fit and the factor between their width and the shape's."""
    shape = f"the shape's width {per}" if len(shown) == 1 else \
        f"the shape's {' × '.join(map(str, shown))} = {per} per row"
    ratio = _number(Fraction(row, per))
    if lead == 1:
        return f"{size} elements are one row of {row} = {ratio} × {shape}"
    return (f"{size} = {lead} × {row}: the shape's {lead} rows (dim {tokens}) fit, and each holds {row} = {ratio} × "
            f"{shape}")


def _z_reading(row: int, per: int, context: Context) -> str | None:
    """Why the input's rows are `row` wide where the shape gives `per`: the model's qkvz and [q | k | v] widths (either
    way round, at one TP size or two), or one width at two TP sizes; None when no such pair of the model's widths
    explains them."""
    rows, shapes = _width_names(row, context), _width_names(per, context)
    pairs = [(0 if r == s else 1, at, r, rt, st) for at, (s, st) in enumerate(shapes) for r, rt in rows
             if r == s or {r, s} == {QKV_WIDTH, QKVZ_WIDTH}]
    if not pairs:
        return None
    kind, _, name, row_tp, shape_tp = min(pairs, key=lambda pair: pair[:2])
    target = context.tp or shape_tp  # the rank's TP size: the shape's, unless the user said another
    if kind == 0:
        tp_clause = _tp_clause(row_tp, shape_tp, context)
        full = context.widths[name]
        fix = (f"at tp={target} a rank's is {full // target}: size both with it" if full % target == 0 else
               "size both for the TP size the rank runs at")
        return (f"{row} is the model's {name} {_sized(row, row_tp)} and {per} the same width {_sized(per, shape_tp)}: "
                f"the input is {tp_clause}; {fix}")
    full_qkv, full_qkvz = context.widths[QKV_WIDTH], context.widths[QKVZ_WIDTH]
    qkv_tp, qkvz_tp = (shape_tp, row_tp) if name == QKVZ_WIDTH else (row_tp, shape_tp)
    z_ratio = Fraction(full_qkvz, full_qkv) if name == QKVZ_WIDTH else Fraction(full_qkv, full_qkvz)
    tp_clause = _tp_clause(row_tp, shape_tp, context, f"× {_number(z_ratio)} for z, × "
                                                      f"{_number(Fraction(shape_tp, row_tp))} from the TP sizes")
    split = f", and {tp_clause}" if tp_clause else ""
    names = (f"{row} is the model's {QKVZ_WIDTH} {_sized(row, qkvz_tp)} and {per} its {QKV_WIDTH} "
             f"{_sized(per, qkv_tp)}" if name == QKVZ_WIDTH else
             f"{per} is the model's {QKVZ_WIDTH} {_sized(per, qkvz_tp)} and {row} its {QKV_WIDTH} "
             f"{_sized(row, qkv_tp)}")
    width = f"{full_qkv // target} wide" if full_qkv % target == 0 else "the rank's width"
    if name == QKVZ_WIDTH:  # the rows hold z; the shape is [q | k | v]
        z_cols = (full_qkvz - full_qkv) // row_tp
        take = f"take this rank's {full_qkvz // target} columns, " if row_tp != target and full_qkvz % target == 0 \
            else ""
        return (f"{names}: the input is the `in_proj_qkvz` output, z included (HV*V = {z_cols} of each {row}-wide "
                f"row){split}; {take}split z off and reshape [q | k | v], {width} (Qwen3-Next interleaves q, k, v "
                f"and z per key head: `fix_query_key_value_ordering` separates them)")
    z_cols = (full_qkvz - full_qkv) // shape_tp
    return (f"{names}: the shape is written for the `in_proj_qkvz` output, z included (HV*V = {z_cols} more per row), "
            f"while the input is [q | k | v] only{split}; reshape the qkvz projection's output, or the input with its "
            f"[q | k | v] width, {width}")


def _z_hint(row: int, per: int) -> str | None:
    """Without the model: the factor between a qkvz row and a [q | k | v] one when HV = 2·H and K = V (1.5), alone
    or times a TP size."""
    ratio = Fraction(row, per)
    if ratio == Fraction(2, 3):
        return (f"a row of the qkvz projection is 1.5 × one of [q | k | v] when HV = 2·H and K = V (Qwen3-Next, "
                f"Qwen3.5): the shape may be written for the qkvz output (z included, {per - row} more per row) "
                f"while the input is [q | k | v]; --model names the model's widths")
    for tp in (1, 2, 4, 8, 16):
        if ratio == Fraction(3, 2) * tp:
            split = "" if tp == 1 else (f", and hold {tp} × the shape's TP share (unsharded where the shape is a "
                                        f"rank's at tp={tp}, or sized for a TP size {tp} × smaller)")
            return (f"a row of the qkvz projection is 1.5 × one of [q | k | v] when HV = 2·H and K = V (Qwen3-Next, "
                    f"Qwen3.5): the input may include z (× 1.5){split}; --model names the model's widths")
    return None


# Rows of q, k, v or z hold whole heads, and head sizes are multiples of this.
_HEAD_MULTIPLE = 64


def _rows(dims: list[int], size: int, context: Context) -> list[str]:
    """A failed reshape read by rows: the shape's dims up to its tokens (the first dim that is not 1) fit the input,
    and each row holds another width than the shape's dims after the tokens give: the model's qkvz width for its
    [q | k | v] width (or the reverse), or one width at two TP sizes; without the model, their factor of 1.5."""
    last = len(dims) - 1
    tokens = _tokens_index(dims)
    lead = 1 if tokens is None else math.prod(dims[:tokens + 1])
    after = dims[last:] if tokens is None else dims[tokens + 1:]
    shown = [dim for dim in after if dim != -1]
    per = math.prod(shown)
    if lead <= 0 or per <= 0 or size % lead:
        return []
    row = size // lead
    if row == per or (-1 in after and row % per == 0):  # the rows fit the shape: something else disagrees
        return []
    first = _row_widths(lead, row, per, shown, tokens, size)
    if not context.widths:
        # q, k, v and z rows are whole heads (a multiple of 64 channels): smaller sizes are gates or head counts
        hint = _z_hint(row, per) if row % _HEAD_MULTIPLE == 0 and per % _HEAD_MULTIPLE == 0 else None
        return [f"{first}: {hint}"] if hint else []
    counts = {count // tp for name, count in context.widths.items() if name.startswith("num_")
              for tp in _linear_tps(context) if count % tp == 0}
    if row in counts or per in counts:  # a head count ([T, HV_l] gates), not a width: no width pair explains it
        return []
    reading = _z_reading(row, per, context)
    return [first, reading] if reading else []


def _field(size: int, context: Context) -> str:
    name = next((name for name, width in context.widths.items() if width == size), None)
    return f" (the model's {name})" if name else ""


def _split(dims: list[int], size: int, known: int, tp: int, context: Context, tokens: int | None) -> list[str]:
    """The sentence naming the dim a TP split of `tp` explains: the input per-rank while the shape is full, or
    (a shape without -1) the reverse; the shape's last dim in the words of a width; `tokens` is the dim that holds
    the tokens."""
    free = -1 in dims
    if known % tp == 0 and (size % (known // tp) == 0 if free else size == known // tp):
        index = _split_dim(dims, tp, dims, context, tokens)
        if index is None:
            return []
        full = dims[index]
        if index == len(dims) - 1:  # a flattened width: rows × the rank's width
            return [f"{size} = {size // (full // tp)} × {full // tp}: the input is per-rank for tp={tp} (width "
                    f"{full // tp}) while the shape uses the full width {full}"]
        inferred = size // (known // tp)  # the -1's size, at the rank's shape
        rank = [full // tp if at == index else inferred if dim == -1 else dim for at, dim in enumerate(dims)]
        return [f"{size} = {' × '.join(map(str, rank))}: the input is per-rank for tp={tp} while the shape's dim "
                f"{index} is the full {full}{_field(full, context)}; reshape with the rank's {full}/{tp} = "
                f"{full // tp}"]
    if not free and size == known * tp:
        index = _split_dim(dims, tp, [dim * tp for dim in dims], context, tokens)
        if index is None:
            return []
        part = dims[index]
        whole = [part * tp if at == index else dim for at, dim in enumerate(dims)]
        return [f"{size} = {' × '.join(map(str, whole))}: the input is unsharded while the shape's dim {index} is a "
                f"rank's {part} of the full {part * tp}{_field(part * tp, context)} at tp={tp}; reshape this rank's "
                f"shard, or with the full {part * tp}"]
    return []


@reasoner("GDR404", numeric=("size",))
def _reshape(values: Mapping[str, str], context: Context) -> list[str]:
    dims, size = _dims(values["shape"]), int(values["size"])
    known = math.prod(d for d in dims if d != -1)
    if known <= 0:
        return []
    if -1 not in dims and size % known == 0:  # a whole multiple still fails: without -1 the sizes must agree
        out = [f"{size} elements are {size // known} × {known} (the product of the shape's sizes): without a -1 "
               f"the shape must hold all {size}"]
    else:
        # the ratio as `_number` writes the rows' ratio below it (2/3, not 0.666667)
        out = [f"{size} elements are {_number(Fraction(size, known))} × {known} (the product of the known sizes): "
               f"not a whole number"]
    width = dims[-1]
    split: list[str] = []
    tokens = _tokens_index(dims)  # the first dim that is not 1: [1, T, W] and [1, T, H, D] are a batch of one
    for tp in (context.tp,) if context.tp else (2, 4, 8, 16):
        if tp > 1 and (split := _split(dims, size, known, tp, context, tokens)):
            # Without the model to name the dims, a leading 1 may also be one token's row ([1, HV, V]): both readings
            if not context.widths and tokens not in (None, 0):
                other = _split(dims, size, known, tp, context, 0)
                if other and other != split:
                    split = [split[0], f"or, if dim {tokens} is not the tokens (one token: [1, heads, head size]), "
                                       f"{other[0]}"]
            out += split
            break
    # No TP factor of the shape's own sizes: the rows may fit while their width is another of the model's (z).
    rows = [] if split else _rows(dims, size, context)
    out += rows
    lead = known // width if width > 0 else 0
    if len(out) == 1 and width > 0 and size % width == 0 and lead > 1 and (size // width) % lead:
        # No TP factor: the width fits the input, and the leading sizes are what disagree.
        count = size // width
        out.append(f"{size} = {count} × {width}: the input holds {count} rows of the shape's width {width}, and "
                   f"{count} is not a multiple of the leading size ({lead}): the width fits; the row count (tokens, "
                   f"or sequences × tokens each) disagrees with the leading size")
    # Once a split or the rows explain the size, naming it as a width would mislead; so would naming a size of
    # several rows (the tokens' dim known) as one row's width.
    one_row = tokens is None or dims[tokens] == -1
    for value in () if rows else (width,) if split or not one_row else (width, size):
        out += named_widths(value, context)
    out += named_head_dims(width, context)
    return out


_PING_PONG = "Not enough space for mamba ping pong idx, try to increase --mamba-full-memory-ratio."
declare(
    "GDR405", "mamba-ping-pong-slots-exhausted",
    summary="sglang's state pool has no slot left for a request's ping-pong tracking buffer",
    message=_PING_PONG,
    explanation=(
        "sglang keeps each running request's GDN/KDA state in the mamba pool and, with prefix caching, two extra "
        "'ping pong' tracking slots; the allocator asserts when the pool has none left "
        "(mem_cache/memory_pool.py). The pool's slot count comes from --mamba-full-memory-ratio (its share of "
        "memory) or --max-mamba-cache-size."),
    causes=("more running requests than state slots: the pool is sized by memory while the scheduler admits "
            "by KV-cache tokens",),
    fixes=("sglang: raise --mamba-full-memory-ratio or --max-mamba-cache-size, or lower --max-running-requests",),
    example=PastedExample(f"AssertionError: {_PING_PONG}"),
    engines="sglang 0.5.23",
    scope="pasted",
)

declare(
    "GDR406", "mamba-cache-slots-exhausted",
    summary="sglang's state pool has fewer free slots than the requests being scheduled",
    message=("Not enough space for mamba cache, try to increase --mamba-full-memory-ratio or "
             "--max-mamba-cache-size. mid={mid}, self.mamba_pool.size={size}, "
             "self.mamba_allocator.available_size()={available}, len(reqs)={requests}"),
    explanation=(
        "sglang allocates one state slot per new request from the mamba pool and asserts when the allocation "
        "fails (mem_cache/memory_pool.py); the message gives the pool's size, its free slots and the requests."),
    causes=("more concurrent requests than the pool's slots (the pool is sized by --mamba-full-memory-ratio)",),
    fixes=("sglang: raise --max-mamba-cache-size or --mamba-full-memory-ratio, or lower --max-running-requests",),
    example=PastedExample(
        "AssertionError: Not enough space for mamba cache, try to increase --mamba-full-memory-ratio or "
        "--max-mamba-cache-size. mid=None, self.mamba_pool.size=64, self.mamba_allocator.available_size()=2, "
        "len(reqs)=8"),
    engines="sglang 0.5.23",
    scope="pasted",
)


def _not_this_engine(context: Context) -> list[str]:
    profile = context.profile
    if profile is None or profile.memory_ratio_flag is not None:
        return []
    return [f"this message is sglang's state pool; {profile.label} has no --mamba-full-memory-ratio: the log "
            f"is not from the engine you named"]


@reasoner("GDR405")
def _ping_pong(values: Mapping[str, str], context: Context) -> list[str]:
    return _not_this_engine(context)


@reasoner("GDR406", numeric=("size", "available", "requests"))
def _pool(values: Mapping[str, str], context: Context) -> list[str]:
    size, available, requests = int(values["size"]), int(values["available"]), int(values["requests"])
    out = [f"{requests} requests need slots and {available} of {size} are free: {requests - available} short; "
           f"{size - available} slots are held by running requests"]
    if context.batch and context.batch > size:
        out.append(f"--batch {context.batch} > {size} slots: the pool cannot hold that many running requests")
    return out + _not_this_engine(context)


declare(
    "GDR407", "weight-shape-mismatch-at-load",
    summary="a checkpoint tensor's shape differs from the parameter's at load: sharded vs unsharded widths",
    message="Attempted to load weight (torch.Size([{weight}])) into parameter (torch.Size([{parameter}]))",
    explanation=(
        "The default weight loader asserts that the checkpoint tensor and the (per-rank) parameter have one "
        "shape (model_loader/weight_utils.py). Next to the GDN layer a factor of tp between the two names a "
        "tensor the loader did not shard (or a checkpoint already sharded); other differences name a config "
        "whose head counts or head dims do not match the weights (`gdr-check CHECKPOINT` compares them)."),
    causes=("a parameter without a sharding weight_loader (A_log, dt_bias, conv1d) loaded with --tp > 1",
            "a checkpoint whose config head counts differ from its weights"),
    fixes=("run `gdr-check CHECKPOINT --tp N`: it compares every linear-attention tensor with the config",),
    example=PastedExample(
        "AssertionError: Attempted to load weight (torch.Size([32])) into parameter (torch.Size([16]))"),
    engines="sglang 0.5.23 and vLLM (default_weight_loader)",
    scope="pasted",
)


@reasoner("GDR407")
def _weight(values: Mapping[str, str], context: Context) -> list[str]:
    weight, parameter = ints(values["weight"]), ints(values["parameter"])
    out: list[str] = []
    if len(weight) != len(parameter):
        return [f"the checkpoint tensor has {len(weight)} dimensions, the parameter {len(parameter)}"]
    for axis, (w, p) in enumerate(zip(weight, parameter, strict=True)):
        if w == p:
            continue
        if (k := tp_factor(w, p)) is not None:
            out.append(f"dim {axis}: {w} = {k} × {p}: the checkpoint tensor is unsharded while the parameter is "
                       f"this rank's shard for tp={k}: the loader did not split it")
        elif (k := tp_factor(p, w)) is not None:
            out.append(f"dim {axis}: {p} = {k} × {w}: the checkpoint tensor is already a 1/{k} shard (a "
                       f"pre-sharded checkpoint) while the parameter is sized for the full width")
        else:
            out.append(f"dim {axis}: {w} vs {p}: no TP factor; the config's head counts or head dims differ "
                       f"from the weights")
        out += named_widths(w, context) + named_widths(p, context)
    return out


declare(
    "GDR408", "tp-does-not-divide-attention-heads",
    summary="vLLM's start-up check: the TP size does not divide the model's full-attention heads",
    message="Total number of attention heads ({heads}) must be divisible by tensor parallel size ({tp}).",
    explanation=(
        "vLLM validates the TP size against `num_attention_heads` before it builds the model "
        "(config `verify_with_parallel_config`), so on a hybrid model (Qwen3-Next, Qwen3.5, Kimi-Linear) this "
        "error comes before any linear-attention layer is built: the full-attention heads are checked first. "
        "The linear layers' key and value head counts must divide too (GDR121, `gdr-check MODEL --tp N`). "
        "Users often see it inside pydantic's `Value error, ...` wrapping."),
    causes=("--tensor-parallel-size that does not divide num_attention_heads",),
    fixes=("pick a TP size that divides the attention heads and every linear-attention head count "
           "(`gdr-check MODEL --tp N` lists them); pipeline parallelism splits layers and has no head constraint",),
    example=PastedExample("ValueError: Total number of attention heads (16) must be divisible by tensor parallel "
                          "size (3)."),
    engines="vLLM (config validation); sglang fails in `divide()` instead (GDR401)",
    scope="pasted",
)


@reasoner("GDR408", numeric=("heads", "tp"))
def _attention_heads(values: Mapping[str, str], context: Context) -> list[str]:
    heads, tp = int(values["heads"]), int(values["tp"])
    if tp <= 0:
        return []
    valid, remainder = _remainder(heads, tp)
    out = [remainder]
    linear = [(name, width) for name, width in context.widths.items()
              if name.startswith(("num_k_heads", "num_v_heads", "num_heads"))]
    if linear and valid:
        both = [size for size in valid if all(width % size == 0 for _, width in linear)]
        out.append(f"the linear-attention heads ({', '.join(f'{n} = {w}' for n, w in linear)}) must divide too: "
                   f"TP sizes that work for the whole model: {', '.join(map(str, both))}")
    out += named_widths(heads, context)
    profile = context.profile
    if profile is not None and not profile.checks_attention_heads_first:
        what = profile.attention_heads_errors[0].format(heads=heads, tp=tp)
        out.append(f"this is vLLM's start-up check; {profile.label} does not run it ({what} instead): "
                   f"the log is not from the engine you named")
    return out


declare(
    "GDR409", "a-log-float32-assert",
    summary="a decode kernel asserts that `A_log` is float32, and the layer holds it in 16 bits",
    message="A_log must be float32, got {dtype}",
    explanation=(
        "FlashInfer's GDN decode kernel asserts `A_log.dtype == torch.float32` (reported with sglang's "
        "`--linear-attn-backend flashinfer` in sgl-project/sglang#20741). A model class that declares `A_log` "
        "without an explicit dtype inherits the model's bf16 (`--dtype bfloat16`); Qwen3-Next, Kimi-Linear and "
        "Jet-Nemotron declare it float32. `A_log` sets each head's decay exp(-exp(A_log) * ...), applied once per "
        "token, so a 16-bit `A_log` also changes the Triton path's result (the runtime check reports it, GDR265)."),
    causes=("the model's `A_log` parameter created in the activation dtype (bf16) instead of float32",
            "a checkpoint converted to bf16 whole, loaded into a float32-less parameter"),
    fixes=("create `A_log` (and `dt_bias`) as float32 parameters, as Qwen3-Next and Kimi-Linear do",
           "until then, use a decode backend that accepts it (the Triton kernel casts on load), and check the "
           "call with `gdr-check call` (GDR265)"),
    example=PastedExample("AssertionError: A_log must be float32, got torch.bfloat16"),
    engines="FlashInfer GDN decode, as used by sglang and vLLM",
    scope="pasted",
)


@reasoner("GDR409", names=("dtype",))
def _a_log_dtype(values: Mapping[str, str], context: Context) -> list[str]:
    dtype = values["dtype"].rsplit(".", 1)[-1]
    bits = {"bfloat16": 16, "float16": 16, "half": 16, "float64": 64, "double": 64}.get(dtype)
    out = [f"`A_log` is {dtype}" + (f" ({bits}-bit)" if bits else "") + ": the kernel needs float32"]
    if bits == 16:
        out.append("in 16 bits each head's decay rate exp(A_log) is rounded (A_log keeps 8 or 11 significant "
                   "bits), and the decay compounds over every token of the context")
    return out


declare(
    "GDR410", "kda-heads-do-not-divide-tp",
    summary="sglang's Kimi-Linear load check: the TP size does not divide the KDA heads",
    message="KDA num_heads ({heads}) must be divisible by shard tp_size ({tp})",
    explanation=(
        "sglang's Kimi-Linear model (`models/kimi_linear.py`, `_get_kda_local_num_heads`) splits the KDA heads over "
        "the TP ranks while it builds each linear-attention layer and raises `ValueError` when the count does "
        "not divide. It is the KDA form of GDR401; `gdr-check MODEL --tp N` reports it before loading (GDR121)."),
    causes=("--tp that does not divide the model's KDA head count (32 for Kimi-Linear-48B)",),
    fixes=("pick a TP size that divides the KDA heads and the full-attention heads (`gdr-check MODEL --tp N` lists "
           "them); pipeline parallelism splits layers and has no head constraint",),
    example=PastedExample("ValueError: KDA num_heads (32) must be divisible by shard tp_size (3)"),
    engines="sglang 0.5.23 (models/kimi_linear.py)",
    scope="pasted",
)


@reasoner("GDR410", numeric=("heads", "tp"))
def _kda_heads(values: Mapping[str, str], context: Context) -> list[str]:
    heads, tp = int(values["heads"]), int(values["tp"])
    if tp <= 0:
        return []
    return [_remainder(heads, tp)[1], *named_widths(heads, context)]



# The message up to PyTorch's advice, which changed: "Use .reshape(...) instead." (ATen, as torch 2.x raises it),
# "Call .contiguous() before .view()." (the TH backend of PyTorch 0.4-1.x, followed by the source location).
_VIEW_ERROR_HEAD = ("view size is not compatible with input tensor's size and stride (at least one dimension spans "
                    "across two contiguous subspaces). ")
_VIEW_ERROR = f"{_VIEW_ERROR_HEAD}Use .reshape(...) instead."
declare(
    "GDR411", "view-incompatible-with-strides",
    summary="a `.view()` of a strided tensor: typically `mixed_qkv` or a gate cut as a column slice of a projection",
    message=_VIEW_ERROR_HEAD + "{advice}",
    explanation=(
        "PyTorch's `Tensor.view` never copies: it needs strides that describe the new shape over the same memory, and "
        "raises this (`aten/src/ATen/native/TensorShape.cpp`) when a dimension of the new shape would span two blocks "
        "of the input that are not adjacent in memory. The advice that ends it is \"Use .reshape(...) instead.\" "
        "today; PyTorch's older TH backend ended it with \"Call .contiguous() before .view().\" and the source "
        "location, after `invalid argument 2:`. Next to the packed decode kernel the input is usually a column "
        "slice of a projection's output: `mixed_qkv` taken as the [q | k | v] columns of `in_proj_qkvz`'s rows (z is "
        "the rest of each row), or `b` and `a` split from `in_proj_ba`'s, keeps the projection's row stride: a "
        "[B, (2*H*K + HV*V)/tp] view with strides ((2*H*K + 2*HV*V)/tp, 1). Such a slice can be viewed with its last "
        "dim split, not with its rows merged (`.view(-1)`, `.view(-1, K)`). The kernel takes it as it is: it needs "
        "`mixed_qkv`, `a` and `b` dense in the last dim only (`stride(-1) == 1`, GDR202, GDR204), whatever their row "
        "stride; `A_log`/`dt_bias` need `stride(0) == 1` (GDR206), `out` is written as a contiguous block (GDR208), "
        "and the state pool needs a unit last-dim stride (GDR213) and a dense [HV, V, K] block per slot (GDR240)."),
    causes=("`mixed_qkv` cut from the `in_proj_qkvz` output (or `b`/`a` from `in_proj_ba`'s) and viewed with a shape "
            "that merges its rows: the slice keeps the projection's row stride",
            "a transposed or permuted tensor viewed: a [HV, K, V] state pool transposed to [HV, V, K], a transposed "
            "gate"),
    fixes=("pass `mixed_qkv`, `a` and `b` to the kernel without the view: it needs them dense in the last dim only "
           "(`stride(-1) == 1`, GDR202 and GDR204) and takes any row stride, so a column slice of the projection's "
           "output needs no copy",
           "to reshape a strided tensor, use `.reshape(...)` (it copies only when the strides leave no view) or "
           "`.contiguous().view(...)`; a transposed `mixed_qkv` or gate, or every other column of a fused output "
           "(`ba[:, 0::2]`), needs `.contiguous()` for the kernel too (GDR202, GDR204)"),
    example=PastedExample(f"RuntimeError: {_VIEW_ERROR}"),
    engines="any (PyTorch's message)",
    scope="pasted",
)


@reasoner("GDR411")
def _view(values: Mapping[str, str], context: Context) -> list[str]:
    qkvz, qkv = context.widths.get(QKVZ_WIDTH), context.widths.get(QKV_WIDTH)
    if qkvz is None or qkv is None:  # no model, or one without a fused qkvz projection (KDA: q, k, v apart)
        return [] if context.widths else [
            "with --model (and --tp, --batch) gdr-check gives the width and strides of `mixed_qkv` cut from the "
            "`in_proj_qkvz` output"]
    tp = context.tp or 1
    if qkvz % tp or qkv % tp:
        return []
    rows = str(context.batch) if context.batch else "B"
    K = head_k_dim(context)
    split = f"`.view({rows}, -1, {K})`" if K else f"`.view({rows}, heads, -1)`"
    merge = f"`.view(-1)`, `.view(-1, {K})`" if K else "`.view(-1)`"

    def sized(full: int) -> str:
        return f"{full // tp} wide ({full}/{tp})" if tp > 1 else f"{full} wide"

    where = f"at tp={tp} a rank's" if tp > 1 else "unsharded,"
    columns = f"{qkv // tp} [q | k | v] columns" + (f" ({qkv}/{tp})" if tp > 1 else "")
    out = [f"{where} `in_proj_qkvz` rows are {sized(qkvz)}: `mixed_qkv`, their {columns}, is a view of shape "
           f"[{rows}, {qkv // tp}] and strides ({qkvz // tp}, 1); `.view` can split its last dim ({split}) but not "
           f"merge its rows ({merge})"]
    ba = context.widths.get(BA_WIDTH)
    if ba is not None and ba % (2 * tp) == 0:
        out.append(f"`b` and `a` split from `in_proj_ba`'s rows, {sized(ba)}, as two column blocks are views too: "
                   f"shape [{rows}, {ba // tp // 2}], strides ({ba // tp}, 1)")
    out.append("the kernel takes these slices as they are: it needs only stride(-1) == 1 of `mixed_qkv` (GDR202) and "
               "of `a`/`b` (GDR204)")
    return out
