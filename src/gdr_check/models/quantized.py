"""Quantized checkpoints: the logical [out, in] shape of each projection stored packed.

A quantized checkpoint stores a linear layer's weight under other names and packed shapes (docs/models.md §5.4,
*Quantized checkpoints*). The description reads every layer's tensors against the model's geometry under the
names of a bf16 checkpoint (`<projection>.weight`, [out, in]), so each packed weight found here stands in for
that name with its unpacked shape, read from the header alone:

- AWQ (GEMM): `qweight` int32 [in, out / pack] and `scales` [in / group, out];
- GPTQ: `qweight` int32 [in / pack, out], `scales` [in / group, out] and `g_idx` [in] where it is kept;
- compressed-tensors `pack-quantized`: `weight_packed` int32 [out, in / pack]; its `nvfp4-pack-quantized`:
  `weight_packed` uint8 [out, in / 2];
- 4-bit floats packed two to a byte under `weight` itself (NVFP4, MXFP4): uint8 [out, in / 2] beside a
  `weight_scale` (8 / bits to a byte where the config gives other bits);
- bitsandbytes 4-bit: `weight` uint8 [out * in / 2, 1] with a `quant_state`: the shape lives in tensor data,
  which is never read, so such a weight counts as present and its shape is not checked.

`pack` is 32 / bits for an int32 word. Where a dimension cannot be told from the header and the config (the
bits unknown), the weight counts as present, unmeasured. Weights stored as themselves (FP8 with a scale, int8)
need nothing here. The other tensors a scheme adds (`qzeros`, `scales`, `weight_scale`, ...) stay in the layer,
where no rule reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..base.records import dataclass
from .adapters import TensorLike

QWEIGHT, WEIGHT_PACKED, WEIGHT = ".qweight", ".weight_packed", ".weight"
BNB_STATE = ".weight.quant_state.bitsandbytes__"  # bitsandbytes 4-bit: `...nf4` or `...fp4`
_WORD_BITS = {"int32": 32, "uint8": 8}


@dataclass(frozen=True)
class Quantization:
    """What the config's `quantization_config` says: the method and the weights' bits (None where it does not)."""

    method: str | None
    bits: int | None
    version: str | None = None  # AWQ's kernel layout: "gemm" (what the engines load), "gemv", ...

    @property
    def label(self) -> str:
        bits = f", {self.bits}-bit" if self.bits is not None else ""
        return f"{self.method or 'packed weights'}{bits}"


def quantization_of(config: Mapping[str, Any] | None) -> Quantization | None:
    """The checkpoint's quantization as its config declares it; None where it declares none."""
    block = (config or {}).get("quantization_config")
    if not isinstance(block, Mapping):
        return None
    method = block.get("quant_method")
    bits = _whole(block.get("bits", block.get("w_bit")))
    if bits is None:  # compressed-tensors: the bits of its weight groups, where they all agree
        groups = block.get("config_groups")
        found = {_whole(group.get("weights", {}).get("num_bits")) for group in groups.values()
                 if isinstance(group, Mapping) and isinstance(group.get("weights"), Mapping)} \
            if isinstance(groups, Mapping) else set()
        bits = found.pop() if len(found) == 1 else None
    version = block.get("version")
    return Quantization(method if isinstance(method, str) else None, bits,
                        version.lower() if isinstance(version, str) else None)


def _whole(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 32 else None


@dataclass(frozen=True)
class UnpackedWeight:
    """A packed weight as the projection it stands for: the stored tensor's name, dtype and shard, the logical
    [out, in] shape (None: present, shape not measurable), and how it was read (`detail`, for reports)."""

    name: str
    dtype: str
    logical: tuple[int, int] | None
    shard: str
    detail: str

    @property
    def shape(self) -> tuple[int, ...]:
        return self.logical if self.logical is not None else ()


def unpacked_layer(tensors: dict[str, TensorLike], quantization: Quantization | None,
                   prefixes: tuple[str, ...]) -> dict[str, TensorLike]:
    """One layer's tensors (in-layer name -> tensor) with each packed weight under one of `prefixes` (the
    linear-attention mixers' `linear_attn.`, `self_attn.`: not the MoE experts beside them, thousands per layer)
    standing in for `<projection>.weight`; the packed tensor itself is kept too. A layer with nothing packed is
    returned as it is."""
    found: dict[str, TensorLike] = {}
    mixer = [(rest, info) for rest, info in tensors.items() if rest.startswith(prefixes)]
    bnb_states = {rest[: rest.index(BNB_STATE)] for rest, _ in mixer if BNB_STATE in rest}
    for rest, info in mixer:
        unpacked: UnpackedWeight | None = None
        if rest.endswith(QWEIGHT) and rest[: -len(QWEIGHT)] + WEIGHT not in tensors:
            base = rest[: -len(QWEIGHT)]
            unpacked = _gptq_or_awq(info, tensors.get(base + ".scales"), tensors.get(base + ".g_idx"), quantization)
        elif rest.endswith(WEIGHT_PACKED) and rest[: -len(WEIGHT_PACKED)] + WEIGHT not in tensors:
            base = rest[: -len(WEIGHT_PACKED)]
            unpacked = _rows_packed(info, quantization, "compressed-tensors")
        elif rest.endswith(WEIGHT) and info.dtype == "uint8":
            base = rest[: -len(WEIGHT)]
            if base in bnb_states:
                unpacked = UnpackedWeight(info.name, info.dtype, None, info.shard,
                                          f"bitsandbytes 4-bit, {_stored(info)}: its shape is kept in tensor data, "
                                          "which is not read")
            elif base + ".weight_scale" in tensors and len(info.shape) == 2:  # NVFP4 / MXFP4: two to a byte
                rows, columns = info.shape
                bits = quantization.bits if quantization is not None and quantization.bits in (1, 2, 4) else 4
                unpacked = UnpackedWeight(info.name, info.dtype, (rows, columns * (8 // bits)), info.shard,
                                          f"{bits}-bit values {8 // bits} to a byte, {_stored(info)}")
        if unpacked is not None:
            found[base + WEIGHT] = unpacked
    return {**tensors, **found} if found else tensors


def _stored(info: TensorLike) -> str:
    return f"stored {info.dtype}{list(info.shape)}"


def _gptq_or_awq(qweight: TensorLike, scales: TensorLike | None, g_idx: TensorLike | None,
                 quantization: Quantization | None) -> UnpackedWeight:
    """AWQ packs along `out` ([in, out / pack]), GPTQ along `in` ([in / pack, out]); both keep `scales` as
    [groups, out], which tells them apart where the config does not: GPTQ's `out` is the scales' own."""
    bits = quantization.bits if quantization is not None else None
    pack = 32 // bits if bits and qweight.dtype == "int32" and 32 % bits == 0 else None
    if len(qweight.shape) != 2:
        return UnpackedWeight(qweight.name, qweight.dtype, None, qweight.shard, f"packed, {_stored(qweight)}")
    first, second = qweight.shape
    out_by_scales = scales.shape[-1] if scales is not None and len(scales.shape) == 2 else None
    method = quantization.method if quantization is not None else None
    gptq = g_idx is not None or method == "gptq" or (method != "awq" and out_by_scales == second)
    # With the bits known, a dimension is what the engine makes of them (it sizes the packed parameter from the
    # config's bits, so a checkpoint packed with other bits does not load); `g_idx` and `scales` only stand in
    # where the bits are unknown.
    if gptq:
        columns = first * pack if pack is not None else (
            g_idx.shape[0] if g_idx is not None and len(g_idx.shape) == 1 else None)
        logical = (second, columns) if columns is not None else None
        label = "gptq"
    elif quantization is not None and quantization.version not in (None, "gemm"):
        # AWQ's GEMV layouts pack another way, and neither engine loads them: present, not measured.
        logical, label = None, f"awq {quantization.version}"
    else:
        rows = second * pack if pack is not None else out_by_scales
        logical = (rows, first) if rows is not None else None
        label = "awq"
    bits_text = f" {bits}-bit" if bits else ""
    return UnpackedWeight(qweight.name, qweight.dtype, logical, qweight.shard, f"{label}{bits_text}, "
                          f"{_stored(qweight)}")


def _rows_packed(info: TensorLike, quantization: Quantization | None, label: str) -> UnpackedWeight:
    """[out, in / pack]: `pack` values of `bits` bits to a stored word (int32, or uint8 for 4-bit floats)."""
    bits = quantization.bits if quantization is not None else None
    word = _WORD_BITS.get(info.dtype)
    logical = None
    if len(info.shape) == 2 and bits and word and word % bits == 0:
        logical = (info.shape[0], info.shape[1] * (word // bits))
    bits_text = f" {bits}-bit" if bits else ""
    return UnpackedWeight(info.name, info.dtype, logical, info.shard, f"{label}{bits_text}, {_stored(info)}")
