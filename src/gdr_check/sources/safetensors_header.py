"""Read and validate one safetensors header: 8-byte little-endian length N, then N bytes of JSON.

Why not `safetensors.safe_open`: reading metadata through it needs a framework, and with
`framework="numpy"` the first `keys()` call imports numpy (observed with safetensors 0.8.0: ~100 modules,
~45 ms); the other frameworks import torch, jax or mlx. The metadata path must import none of them, and the
library's errors ("incomplete metadata, file not fully covered") name neither the file nor the sizes. So the
header is read here with the stdlib, under the same rules the library enforces (plus duplicate names, which
the format forbids), and every failure is a `SourceError` with a GDR03x code.
"""

from __future__ import annotations

import json
import math
import re
import struct
from itertools import repeat
from pathlib import Path
from typing import Any

from ..base.errors import not_utf8
from ..base.files import json_error_reason
from ..base.source_error import SourceError
from ..base.tensor_spec import canonical_dtype
from .checkpoint import TensorInfo
from .header_cache import HEADER
from .metadata_reader import MetadataReader
from .rules import (
    GitLfsPointers,
    InvalidDataOffsets,
    InvalidTensorShapes,
    MalformedSafetensorsHeaders,
    OverlappingTensors,
    OversizedSafetensorsFiles,
    OversizedSafetensorsHeaders,
    TensorSizeMismatches,
    TruncatedSafetensorsFiles,
    UnknownTensorDtypes,
)

# The safetensors library refuses longer headers; real ones are kilobytes to a few megabytes.
MAX_HEADER_BYTES = 100_000_000
# What `git clone` leaves in place of a file tracked by Git LFS when the LFS objects were not fetched: a small
# text file (about 130 bytes) starting with this line. Read as a safetensors file, its first 8 bytes would be a
# header length of ~8e18.
LFS_POINTER_PREFIX = b"version https://git-lfs.github.com/spec/v1"
MAX_LFS_POINTER_BYTES = 1024
_U64_LIMIT = 1 << 64
METADATA_KEY = "__metadata__"

# safetensors dtype -> (canonical torch name, bits per element). The sub-byte float formats have no torch
# dtype with the same element size, so they keep descriptive names in torch's style.
SAFETENSORS_DTYPES: dict[str, tuple[str, int]] = {
    "BOOL": ("bool", 8),
    "U8": ("uint8", 8), "I8": ("int8", 8),
    "U16": ("uint16", 16), "I16": ("int16", 16),
    "U32": ("uint32", 32), "I32": ("int32", 32),
    "U64": ("uint64", 64), "I64": ("int64", 64),
    "F16": ("float16", 16), "BF16": ("bfloat16", 16), "F32": ("float32", 32), "F64": ("float64", 64),
    "C64": ("complex64", 64),
    "F8_E4M3": ("float8_e4m3fn", 8), "F8_E5M2": ("float8_e5m2", 8),
    "F8_E4M3FNUZ": ("float8_e4m3fnuz", 8), "F8_E5M2FNUZ": ("float8_e5m2fnuz", 8),
    "F8_E8M0": ("float8_e8m0fnu", 8),
    "F6_E2M3": ("float6_e2m3fn", 6), "F6_E3M2": ("float6_e3m2fn", 6),
    "F4": ("float4_e2m1fn", 4),
}
# Keep every name canonical in the project's sense (tensors.canonical_dtype), computed once.
SAFETENSORS_DTYPES = {key: (canonical_dtype(name), bits) for key, (name, bits) in SAFETENSORS_DTYPES.items()}


# -- the reading's hot path ------------------------------------------------------------------------------------
# A 41-shard checkpoint's headers hold ~76k entries, and reading them is most of a `gdr-check <checkpoint>` run
# (docs/performance.md, *Metadata path*). The reading's speed tricks are kept here, in the sources layer's one
# hot-path module (the checks keep theirs in `checks/hotpath.py`, a layer above, which the readers must not import):
# the entry loop's fast path in `parse_header` and `_check_tiling`'s C-level chain test. Each settles only the
# usual, well-formed case and hands anything else to the plain code that names the fault, so the results and the
# errors are the same either way. (The cyclic collector is the CLI's to pause, `cli/main.py`, not the library's.)


def read_safetensors_header(reader: MetadataReader, path: Path, shard: str) -> list[TensorInfo]:
    """The tensors of the safetensors file at `path`, read from its header only.

    Raises `SourceError` for a truncated or oversized file, an over-long or malformed header, or tensor
    entries that do not tile the data region exactly.
    """
    raw, size = read_header_bytes(reader, path)
    return header_tensors(reader, path, shard, raw, size)[0]


def read_header_bytes(reader: MetadataReader, path: Path) -> tuple[bytearray, int]:
    """The N header bytes of the safetensors file at `path` and the file's size; `SourceError` where the file is
    too short for its length field, the field is over the cap, or the file is an LFS pointer."""
    handle, size = reader.open(path)
    with handle:
        if size < 8:
            raise TruncatedSafetensorsFiles(path, actual_size=size, expected_size=8, detail="the 8-byte header length",
                fix=f"re-download or re-copy `{path.name}`",
            )
        first = reader.read(handle, path, 8)
        if first == LFS_POINTER_PREFIX[:8] and size <= MAX_LFS_POINTER_BYTES:
            rest = reader.read(handle, path, len(LFS_POINTER_PREFIX) - 8)
            if first + rest == LFS_POINTER_PREFIX:
                raise GitLfsPointers.at(path, reader.cache_repo)
        length = struct.unpack("<Q", first.ljust(8, b"\0"))[0]
        # Bound N by the cap and the file size before reading it, so memory never follows a claimed length.
        if length > MAX_HEADER_BYTES:
            raise OversizedSafetensorsHeaders(path, length=length, limit=MAX_HEADER_BYTES,
                fix=f"check that `{path.name}` is a safetensors file, and re-download it if it is",
            )
        if 8 + length > size:
            raise TruncatedSafetensorsFiles(path, actual_size=size, expected_size=8 + length,
                detail=f"8 + {length}-byte header", fix=f"re-download or re-copy `{path.name}`",
            )
        raw = reader.read(handle, path, length)
    if len(raw) < length:  # the file shrank while being read
        raise TruncatedSafetensorsFiles(path, actual_size=8 + len(raw), expected_size=8 + length,
            detail=f"8 + {length}-byte header", fix=f"re-download or re-copy `{path.name}`",
        )
    return raw, size


def header_tensors(reader: MetadataReader, path: Path, shard: str, raw: bytearray, size: int, *, keep: bool = True
                   ) -> tuple[list[TensorInfo], bytes | None, int]:
    """The tensors of the header bytes `raw` of a file of `size` bytes (`read_header_bytes`), the header's cache
    key (None: no cache) and the end of its data region; `SourceError` for a malformed header or a file size the
    header does not account for. `keep`: the header has an entry of its own in the cache (a sharded checkpoint's
    headers are kept together instead, `open._Builder._sharded`)."""
    length = len(raw)
    cache = reader.metadata_cache
    key = cache.key(HEADER, raw) if cache is not None else None
    cached = cache.load_header(key) if cache is not None and key is not None and keep else None
    if cached is not None:  # what `parse_header` returned for these very bytes (header_cache.py)
        names, dtypes, shapes, data_end = cached
        tensors = list(map(TensorInfo, names, dtypes, shapes, repeat(shard)))
    else:
        tensors, data_end = parse_header(raw, path, shard)
    expected = 8 + length + data_end
    if size < expected:
        raise TruncatedSafetensorsFiles(path, actual_size=size, expected_size=expected,
            detail=f"8 + {length}-byte header + {data_end} bytes of tensor data",
            fix=f"re-download or re-copy `{path.name}`",
        )
    if size > expected:
        raise OversizedSafetensorsFiles(path, extra=size - expected, actual_size=size, expected_size=expected)
    if cache is not None and key is not None and cached is None and keep:
        cache.store_header(key, [info.name for info in tensors], [info.dtype for info in tensors],
                           [info.shape for info in tensors], data_end)
    return tensors, key, data_end


def parse_header(raw: bytes | bytearray, path: Path | str, shard: str) -> tuple[list[TensorInfo], int]:
    """Tensors described by the header bytes `raw`, in header order, and the end of their data region."""
    text = _text(raw, path)
    document = _loads(text, path)
    metadata = document.pop(METADATA_KEY, None)
    if metadata is not None and not (
        isinstance(metadata, dict) and all(isinstance(v, str) for v in metadata.values())
    ):
        raise MalformedSafetensorsHeaders(path, reason=f"`{METADATA_KEY}` must map strings to strings")
    tensors: list[TensorInfo] = []
    spans: list[tuple[int, int, str]] = []
    dtypes, limit = SAFETENSORS_DTYPES, _U64_LIMIT
    duplicates_checked = False
    for name, entry in document.items():
        # Fast path for the common, well-formed entry; anything else goes through `_tensor`, which raises
        # the precise error. A real 41-shard checkpoint has ~75k entries, so this loop is the hot spot.
        try:
            dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
            torch_name, bits = dtypes[dtype]
            begin, end = offsets
            valid = (
                type(shape) is list and len(shape) <= 16 and type(begin) is int and type(end) is int
                and 0 <= begin <= end < limit
            )
            if valid:
                for dim in shape:  # a plain loop: ~2x faster than all(<generator>) on short shapes
                    if type(dim) is not int or dim < 0 or dim >= limit:
                        valid = False
                        break
                else:
                    valid = math.prod(shape) * bits == (end - begin) * 8
        except (TypeError, KeyError, ValueError):
            valid = False
        if valid:
            info = TensorInfo(name, torch_name, tuple(shape), shard)
        else:
            if not duplicates_checked:  # a repeated name explains more than the entry that survived it
                _loads(text, path, object_pairs_hook=_unique_keys)
                duplicates_checked = True
            info, begin, end = _tensor(name, entry, path, shard)
        tensors.append(info)
        spans.append((begin, end, name))
    if not duplicates_checked:
        # Each member of valid JSON has one ':' outside strings, so a repeated name (which parsing drops)
        # shows up as more colons than members. A raw count settles the usual header, which has no ':'
        # inside its strings; otherwise count again outside strings, then parse slowly to name the duplicate.
        members = _members(document, metadata)
        if text.count(":") != members and _colons_outside_strings(text) != members:
            _loads(text, path, object_pairs_hook=_unique_keys)
    return tensors, _check_tiling(spans, path)


def _text(raw: bytes | bytearray, path: Path | str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        overrun = _length_overrun(raw[:exc.start].decode("utf-8"), len(raw), more=True)
        reason = overrun or not_utf8(raw, exc, at="header offset")
        raise MalformedSafetensorsHeaders(path, reason=reason) from None


_PADDING = " \t\n\r"  # JSON's whitespace: the format pads a header with spaces, and the parser takes any


def _length_overrun(text: str, length: int, more: bool = False) -> str | None:
    """Where the header's text starts with a whole JSON object followed by more than the whitespace the format
    allows as padding (`more`: by bytes that are not even UTF-8): the length field names more bytes than the
    header has, so the header runs into the tensor data. None where the text does not start so."""
    start = len(text) - len(text.lstrip(_PADDING))
    try:
        document, end = json.JSONDecoder().raw_decode(text, start)
    except (json.JSONDecodeError, RecursionError, ValueError):
        return None
    if not isinstance(document, dict) or not (more or text[end:].strip(_PADDING)):
        return None
    return (f"the length field gives {length} bytes, but the JSON ends after {len(text[:end].encode('utf-8'))}: "
            "the length runs into the tensor data, or bytes follow the JSON")


def _loads(text: str, path: Path | str, object_pairs_hook: Any = None) -> dict[str, Any]:
    try:
        document = json.loads(text, object_pairs_hook=object_pairs_hook, parse_constant=_no_constants)
    except json.JSONDecodeError as exc:
        reason = f"invalid JSON at line {exc.lineno}, column {exc.colno} of the header: {json_error_reason(exc)}"
        if exc.msg == "Extra data":
            reason = _length_overrun(text, len(text.encode("utf-8"))) or reason
        raise MalformedSafetensorsHeaders(path, reason=reason) from None
    except _DuplicateName as exc:
        raise MalformedSafetensorsHeaders(path, reason=f"duplicate name `{exc.name}`") from None
    except RecursionError:
        raise MalformedSafetensorsHeaders(path, reason="JSON nested too deeply") from None
    except ValueError as exc:  # NaN/Infinity, or an integer literal over Python's 4300-digit limit
        raise MalformedSafetensorsHeaders(path, reason=f"invalid JSON value: {exc}") from None
    if not isinstance(document, dict):
        raise MalformedSafetensorsHeaders(path, reason=f"the header is a JSON {json_type(document)}, not an object")
    return document


_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')


def _colons_outside_strings(text: str) -> int:
    """Object members in valid JSON text: each has exactly one ':' outside a string."""
    return _STRING.sub("", text).count(":")


def _members(document: dict[str, Any], metadata: Any) -> int:
    """Object members in the parsed header (called after validation: shapes and offsets are int lists)."""
    count = len(document) + (1 + len(metadata) if metadata is not None else 0)
    sizes = list(map(len, document.values()))
    count += sum(sizes)
    nested: list[Any] = []
    if sizes and max(sizes) > 3:  # extra keys may hold objects of their own
        for entry in document.values():
            if len(entry) > 3:
                nested.extend(v for k, v in entry.items() if k not in ("dtype", "shape", "data_offsets"))
    while nested:
        value = nested.pop()
        if isinstance(value, dict):
            count += len(value)
            nested.extend(value.values())
        elif isinstance(value, list):
            nested.extend(value)
    return count


def _tensor(name: str, entry: Any, path: Path | str, shard: str) -> tuple[TensorInfo, int, int]:
    if type(entry) is not dict:
        raise MalformedSafetensorsHeaders(path, reason=f"entry `{name}` is a JSON {json_type(entry)}, not an object")
    try:
        dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    except KeyError as missing:
        raise MalformedSafetensorsHeaders(
            path, reason=f"tensor `{name}` has no `{missing.args[0]}`", tensor=name) from None
    known = SAFETENSORS_DTYPES.get(dtype) if type(dtype) is str else None
    if known is None:
        raise UnknownTensorDtypes(path, tensor=name, dtype=dtype if isinstance(dtype, str) else brief(dtype))
    torch_name, bits = known
    shape = _shape(name, shape, path)
    begin, end = _offsets(name, offsets, path)
    span = end - begin
    nbits = _numel_bits(shape, bits, limit=span * 8)
    if nbits != span * 8:
        expected = f"more than {span}" if nbits < 0 else f"{nbits / 8:g}"
        raise TensorSizeMismatches(path, tensor=name, span=span, expected=expected)
    return TensorInfo(name=name, dtype=torch_name, shape=shape, shard=shard), begin, end


def _shape(name: str, shape: Any, path: Path | str) -> tuple[int, ...]:
    # `type(...) is int` also rejects booleans, which JSON parsing turns into bool, an int subclass.
    if type(shape) is list and all(type(dim) is int and 0 <= dim < _U64_LIMIT for dim in shape):
        return tuple(shape)

    def bad(reason: str) -> SourceError:
        return InvalidTensorShapes(path, tensor=name, shape=brief(shape), reason=reason)

    if not isinstance(shape, list):
        raise bad(f"a JSON {json_type(shape)}, not a list")
    for dim in shape:
        if type(dim) is not int:
            raise bad(f"`{brief(dim)}` is not an integer")
        if dim < 0:
            raise bad(f"`{dim}` is negative")
        if dim >= _U64_LIMIT:
            raise bad("a dimension does not fit in 64 bits")
    raise AssertionError("unreachable: the fast check rejected a valid shape")


def _offsets(name: str, offsets: Any, path: Path | str) -> tuple[int, int]:
    if type(offsets) is list and len(offsets) == 2 and type(offsets[0]) is int and type(offsets[1]) is int:
        begin, end = offsets
        if 0 <= begin <= end < _U64_LIMIT:
            return begin, end

    def bad(reason: str) -> SourceError:
        return InvalidDataOffsets(path, tensor=name, offsets=brief(offsets), reason=reason)

    if not isinstance(offsets, list) or len(offsets) != 2 or not all(type(v) is int for v in offsets):
        raise bad("expected two integers [begin, end]")
    begin, end = offsets
    if begin < 0 or end < 0 or end >= _U64_LIMIT:
        raise bad("offsets must be in 0..2**64-1")
    raise bad("begin is after end")


def _numel_bits(shape: tuple[int, ...], bits: int, *, limit: int) -> int:
    """prod(shape) * bits, or -1 once it exceeds `limit` (a hostile shape must not build a huge integer)."""
    if 0 in shape:
        return 0
    total = bits
    for dim in shape:
        total *= dim
        if total > limit:
            return -1
    return total


def _check_tiling(spans: list[tuple[int, int, str]], path: Path | str) -> int:
    """Sorted by offset, the tensors must tile [0, end) with no gap or overlap; returns the end."""
    ordered = sorted(spans)
    if not ordered:
        return 0
    # The usual header, settled in C: sorted, each span begins where the one before ends (empty ones included).
    begins, ends, _ = zip(*ordered, strict=True)
    if begins[0] == 0 and begins[1:] == ends[:-1]:
        end: int = ends[-1]
        return end
    previous_end, previous_name, previous_empty = 0, None, True
    for begin, end, name in ordered:
        if begin < previous_end:
            if begin < end and not previous_empty:
                raise OverlappingTensors(path, tensor=previous_name, other=name)
            raise InvalidDataOffsets(path, tensor=name, offsets=f"[{begin}, {end}]",
                reason=f"starts inside tensor `{previous_name}`",
            )
        if begin > previous_end:
            after = f"tensor `{previous_name}`" if previous_name else "the start of the data region"
            raise InvalidDataOffsets(path, tensor=name, offsets=f"[{begin}, {end}]",
                reason=f"leaves a {begin - previous_end}-byte gap after {after}",
            )
        previous_end, previous_name, previous_empty = end, name, begin == end
    return previous_end


class _DuplicateName(ValueError):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)  # built in C; a length mismatch is the rare duplicate, found in Python
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateName(key)
            seen.add(key)
    return result


def _no_constants(token: str) -> Any:
    raise ValueError(f"`{token}` is not allowed")


def brief(value: Any, depth: int = 2) -> str:
    """A short JSON rendering of a value from a hostile file: a few items, a few levels, a few characters."""
    if isinstance(value, list):
        if depth == 0:
            return "[...]"
        items = [brief(item, depth - 1) for item in value[:6]]
        return "[" + ", ".join(items + (["..."] if len(value) > 6 else [])) + "]"
    if isinstance(value, dict):
        return "{...}"
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:39] + "…"


def json_type(value: Any) -> str:
    """The JSON name of a parsed value's type: object, array, string, number, boolean, null."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"
