"""`dry-run --ranks all --weights`: where one layer's real `A_log` and `dt_bias` lie in the checkpoint's files.

Torch-free: the safetensors header gives each tensor's byte span; rank 0 reads exactly those bytes and makes a
tensor of them with `torch.frombuffer` (`rank_worker`). Nothing is unpickled and no other data is read.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...base.errors import InputError

if TYPE_CHECKING:
    from ..model_check import ModelCheck

PARAMETERS = ("A_log", "dt_bias")


class WeightsError(InputError, ValueError):
    """The checkpoint cannot supply the parameters (one line for the CLI, exit 2)."""

    code = "weights"


def _span(path: Path, name: str) -> tuple[int, int]:
    """(file offset, byte count) of tensor `name` in the safetensors file `path`."""
    with open(path, "rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(length))
    begin, end = header[name]["data_offsets"]
    return 8 + length + int(begin), int(end) - int(begin)


# Per float dtype: (bytes per entry, the exponent bits, all set in an inf or a NaN only), little-endian as
# safetensors stores them. Other dtypes are not checked.
_EXPONENTS = {"float64": (8, 0x7FF0_0000_0000_0000), "float32": (4, 0x7F80_0000), "float16": (2, 0x7C00),
              "bfloat16": (2, 0x7F80)}


def _not_finite(path: Path, offset: int, nbytes: int, dtype: str) -> tuple[int, str] | None:
    """(position, "NaN" or "inf") of the first entry of the tensor at `offset` that is not finite, or None."""
    if dtype not in _EXPONENTS:
        return None
    width, exponent = _EXPONENTS[dtype]
    with open(path, "rb") as handle:  # one layer's A_log or dt_bias: a few hundred bytes
        handle.seek(offset)
        data = handle.read(nbytes)
    for position in range(len(data) // width):
        bits = int.from_bytes(data[position * width:(position + 1) * width], "little")
        if bits & exponent == exponent:  # a mantissa bit set: NaN, none: +-inf
            return position, "NaN" if bits & ((exponent & -exponent) - 1) else "inf"
    return None


def layer_parameters(check: ModelCheck) -> dict[str, Any]:
    """{"layer": i, "tensors": {"A_log": {path, offset, nbytes, dtype, shape, name}, ...}} for the first linear
    layer whose `A_log` and `dt_bias` the checkpoint holds."""
    checkpoint, model = check.checkpoint, check.model
    root = getattr(checkpoint, "root", None)
    tensors = getattr(checkpoint, "tensors", None) or {}
    if root is None or not tensors:
        raise WeightsError(f"--weights needs a safetensors checkpoint; `{checkpoint.target}` has no tensor data here")
    assert model is not None, "ranks_dry_run refuses a check without a model description"
    for layer in model.linear_layers:
        found = {}
        for parameter in PARAMETERS:
            suffix = f"layers.{layer}."
            names = [n for n in tensors if suffix in n and n.endswith("." + parameter)
                     and n.split(suffix, 1)[1].count(".") == 1]
            if names:
                found[parameter] = tensors[names[0]]
        if len(found) < len(PARAMETERS):
            continue
        result: dict[str, Any] = {}
        for parameter, info in found.items():
            path = Path(root) / info.shard if Path(root).is_dir() else Path(root)
            try:
                offset, nbytes = _span(path, info.name)
            except (OSError, ValueError, KeyError, struct.error) as error:
                raise WeightsError(f"--weights: cannot locate `{info.name}` in {path.name}: {error}") from None
            try:
                bad = _not_finite(path, offset, nbytes, info.dtype)
            except OSError as error:
                raise WeightsError(f"--weights: cannot read `{info.name}` in {path.name}: {error}") from None
            if bad is not None:  # every rank would return NaN, and the sharding be blamed: say it before launching
                raise WeightsError(f"--weights: `{info.name}` in {path.name} holds {bad[1]} (entry {bad[0]}): "
                                   f"the dry-run needs finite A_log and dt_bias; check or download the checkpoint "
                                   f"again")
            result[parameter] = {"name": info.name, "path": str(path), "offset": offset, "nbytes": nbytes,
                                 "dtype": info.dtype, "shape": list(info.shape)}
        return {"layer": layer, "tensors": result}
    raise WeightsError(f"--weights: no linear-attention layer of `{checkpoint.target}` holds both `A_log` and "
                       f"`dt_bias`")
