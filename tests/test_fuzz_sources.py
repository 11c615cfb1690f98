"""Hostile inputs for the metadata readers (hypothesis, bounded for CI).

Property at this layer: `open_checkpoint` returns a `Checkpoint` or raises `SourceError` whose message is one
line naming the file; never any other exception, never a hang, never memory that follows a claimed length.

The generators and writers below are plain module-level functions so that the CLI-level fuzz tests (exit 2 in
every output format) can reuse them: draw a `SafetensorsSpec` / config bytes / index bytes, write them with
`write_spec` / `write_checkpoint`, then run the CLI on the result.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import struct
import tempfile
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fixtures_sources import INDEX_NAME, ITEMSIZE, qwen3_next_config
from gdr_check.base.registry import RULES
from gdr_check.sources import Checkpoint, SourceError, open_checkpoint
from gdr_check.sources.jsonpos import key_spans

# Deterministic in CI; GDR_CHECK_FUZZ_EXAMPLES raises the budget for a longer local hunt.
EXAMPLES = int(os.environ.get("GDR_CHECK_FUZZ_EXAMPLES", "150"))
FUZZ = settings(
    max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
HANG_SECONDS = 5.0
# Sparse data regions stay below this, so even extreme shapes cost no disk.
MAX_DATA_BYTES = 1 << 32

# -- generators -------------------------------------------------------------------------------------------------

json_scalars = (
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=10,
)
tensor_names = st.sampled_from([
    "model.layers.0.linear_attn.A_log", "model.layers.0.linear_attn.in_proj_qkvz.weight",
    "model.layers.1.self_attn.q_proj.weight", "lm_head.weight", "__metadata__x",
]) | st.text(min_size=1, max_size=12)
hostile_lengths = st.sampled_from([0, 1, 7, 2, 100_000_001, 2**31, 2**32 + 1, 2**63, 2**64 - 1]) | st.integers(
    0, 2**64 - 1
)
hostile_shard_names = st.sampled_from([
    "../model.safetensors", "/etc/passwd", "sub/s.safetensors", "..", ".", "", "a\\b.safetensors",
    "s\x00.safetensors", "C:evil.safetensors", "missing.safetensors", "s0.safetensors",
])


@dataclass(frozen=True)
class SafetensorsSpec:
    """A possibly hostile safetensors file: length prefix, header bytes, total file size (data is sparse)."""

    length: int
    header: bytes
    size: int



@st.composite
def valid_headers(draw) -> tuple[dict[str, Any], int]:
    """A correct header (1-4 tensors, back to back, optional `__metadata__`) and its data size."""
    names = draw(st.lists(tensor_names, min_size=1, max_size=4, unique=True))
    header: dict[str, Any] = {}
    if draw(st.booleans()):
        header["__metadata__"] = {"format": "pt"}
    offset = 0
    for name in names:
        dtype = draw(st.sampled_from(sorted(ITEMSIZE)))
        shape = draw(st.lists(st.integers(0, 1 << 10), max_size=3))
        size = ITEMSIZE[dtype]
        for dim in shape:
            size *= dim
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    return header, offset


def _tensor_entries(header: dict[str, Any]) -> list[str]:
    """Names whose entry is still an object (an earlier mutation may have replaced it)."""
    return [k for k, v in header.items() if k != "__metadata__" and isinstance(v, dict)]


@st.composite
def safetensors_specs(draw) -> SafetensorsSpec:
    """Random bytes, or a valid header put through 0-3 mutations of its structure, bytes, length or size."""
    if draw(st.integers(0, 9)) == 0:
        blob = draw(st.binary(max_size=64))
        return SafetensorsSpec(struct.unpack("<Q", blob[:8].ljust(8, b"\0"))[0], blob[8:], len(blob))
    header, data_size = draw(valid_headers())
    length: int | None = None
    size_change: int | None = None
    raw: bytes | None = None
    for mutation in draw(st.lists(st.sampled_from(_MUTATIONS), max_size=3)):
        entries = _tensor_entries(header)
        target = draw(st.sampled_from(entries)) if entries else None
        if mutation == "length":
            length = draw(hostile_lengths)
        elif mutation == "length-off-by":
            length = max(0, len(json.dumps(header).encode()) + draw(st.integers(-3, 3)))
        elif mutation == "truncate":
            size_change = -draw(st.integers(1, 64))
        elif mutation == "extend":
            size_change = draw(st.integers(1, 64))
        elif mutation == "dtype" and target:
            header[target]["dtype"] = draw(st.sampled_from(["Q4", "bf16", "F128", "", "C128"]) | json_values)
        elif mutation == "shape" and target:
            header[target]["shape"] = draw(
                st.lists(st.integers(-(2**65), 2**65), max_size=4) | st.lists(json_scalars, max_size=3) | json_values
            )
        elif mutation == "offsets" and target:
            header[target]["data_offsets"] = draw(
                st.lists(st.integers(-10, 2**65), max_size=3) | st.lists(json_scalars, max_size=2) | json_values
            )
        elif mutation == "overlap" and len(entries) > 1:
            a, b = draw(st.permutations(entries))[:2]
            header[a]["data_offsets"] = header[b].get("data_offsets")
        elif mutation == "drop-field" and target:
            header[target].pop(draw(st.sampled_from(["dtype", "shape", "data_offsets"])), None)
        elif mutation == "entry" and target:
            header[target] = draw(json_values)
        elif mutation == "metadata":
            header["__metadata__"] = draw(json_values)
        elif mutation == "non-object":
            raw = json.dumps(draw(st.lists(json_scalars, max_size=3) | json_scalars)).encode()
        elif mutation == "duplicate" and target:
            text = json.dumps(header)
            raw = (text[:-1] + ", " + json.dumps({target: header[target]})[1:]).encode()
        elif mutation == "flip-byte":
            data = bytearray(raw if raw is not None else json.dumps(header).encode())
            if data:
                data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
            raw = bytes(data)
        elif mutation == "non-utf8":
            data = raw if raw is not None else json.dumps(header).encode()
            at = draw(st.integers(0, len(data)))
            raw = data[:at] + draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\x80"])) + data[at:]
        elif mutation == "deep":
            depth = draw(st.integers(500, 50_000))
            raw = b"[" * depth + b"]" * depth
        elif mutation == "huge-literal":
            raw = json.dumps(header).encode().replace(b'"shape": [', b'"shape": [' + b"9" * 5000 + b", ", 1)
    if raw is None:
        raw = json.dumps(header).encode()
    size = 8 + len(raw) + data_size + (size_change or 0)
    return SafetensorsSpec(len(raw) if length is None else length, raw, max(0, min(size, MAX_DATA_BYTES)))


_MUTATIONS = [
    "length", "length-off-by", "truncate", "extend", "dtype", "shape", "offsets", "overlap", "drop-field", "entry",
    "metadata", "non-object", "duplicate", "flip-byte", "non-utf8", "deep", "huge-literal",
]


def _text_mutations(draw, text: bytes) -> bytes:
    """Truncate, corrupt or replace the bytes of a JSON file."""
    choice = draw(st.sampled_from(["none", "none", "truncate", "flip-byte", "non-utf8", "random", "deep"]))
    if choice == "truncate" and text:
        return text[: draw(st.integers(0, len(text) - 1))]
    if choice == "flip-byte" and text:
        data = bytearray(text)
        data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
        return bytes(data)
    if choice == "non-utf8":
        at = draw(st.integers(0, len(text)))
        return text[:at] + b"\xff\xfe" + text[at:]
    if choice == "random":
        return draw(st.binary(max_size=64))
    if choice == "deep":
        depth = draw(st.integers(500, 50_000))
        return b"{\"a\":" * depth + b"1" + b"}" * depth
    return text


@st.composite
def config_bytes(draw) -> bytes:
    """A Qwen3-Next, Qwen3.5 or Kimi-Linear style config with wrong types, missing fields, negative counts,
    out-of-range layer lists, then possibly corrupted bytes."""
    config: Any = qwen3_next_config()
    family = draw(st.sampled_from(["qwen3_next", "qwen3_5", "kimi"]))
    if family == "qwen3_5":
        config = {"model_type": "qwen3_5", "text_config": dict(config, layer_types=["linear_attention"] * 4)}
    elif family == "kimi":
        config = {"model_type": "kimi_linear", "num_hidden_layers": 4,
                  "linear_attn_config": {"num_heads": 4, "head_dim": 8, "kda_layers": [1, 2, 3]}}
    body = config.get("text_config", config)
    for mutation in draw(st.lists(st.sampled_from(["type", "drop", "negative", "layers", "wrap"]), max_size=3)):
        key = draw(st.sampled_from(sorted(body))) if body else None
        if mutation == "type" and key:
            body[key] = draw(json_values)
        elif mutation == "drop" and key:
            body.pop(key)
        elif mutation == "negative" and key:
            body[key] = -draw(st.integers(1, 2**40))
        elif mutation == "layers":
            body["layer_types"] = draw(st.lists(st.sampled_from(["linear_attention", "full_attention", 3, None])))
            body["kda_layers"] = draw(st.lists(st.integers(-(2**40), 2**40), max_size=5))
        elif mutation == "wrap":
            config = [config]
    return _text_mutations(draw, json.dumps(config, indent=2).encode())


@st.composite
def index_bytes(draw, shard_names: tuple[str, ...] = ("s0.safetensors",)) -> bytes:
    """An index over `shard_names` with hostile shard names, wrong types, missing `weight_map`, unknown
    tensors, then possibly corrupted bytes."""
    weight_map: Any = {f"t{i}": draw(st.sampled_from(shard_names)) for i in range(draw(st.integers(0, 4)))}
    index: Any = {"metadata": {"total_size": 0}, "weight_map": weight_map}
    for mutation in draw(st.lists(st.sampled_from(["shard", "value", "map", "drop", "tensor", "wrap"]), max_size=3)):
        if mutation == "shard" and weight_map:
            weight_map[draw(st.sampled_from(sorted(weight_map)))] = draw(hostile_shard_names)
        elif mutation == "value" and weight_map:
            weight_map[draw(st.sampled_from(sorted(weight_map)))] = draw(json_values)
        elif mutation == "map" and isinstance(index, dict):
            index["weight_map"] = draw(json_values)
        elif mutation == "drop" and isinstance(index, dict):
            index.pop("weight_map", None)
        elif mutation == "tensor" and isinstance(index, dict) and isinstance(index.get("weight_map"), dict):
            index["weight_map"][draw(tensor_names)] = draw(st.sampled_from(shard_names))
        elif mutation == "wrap":
            index = [index]
    return _text_mutations(draw, json.dumps(index, indent=2).encode())


# -- writers ----------------------------------------------------------------------------------------------------

def write_spec(path: Path, spec: SafetensorsSpec) -> Path:
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", spec.length))
        handle.write(spec.header)
        handle.truncate(spec.size)
    return path


def write_checkpoint(
    directory: Path, *, config: bytes | None = None, index: bytes | None = None,
    shards: dict[str, SafetensorsSpec] | None = None,
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (directory / "config.json").write_bytes(config)
    if index is not None:
        (directory / INDEX_NAME).write_bytes(index)
    for name, spec in (shards or {}).items():
        write_spec(directory / name, spec)
    return directory


# -- the property -----------------------------------------------------------------------------------------------

class Hang(BaseException):
    """Raised by the alarm: a BaseException, so that no `except Exception` under test can swallow a hang."""


@contextlib.contextmanager
def no_hang(seconds: float = HANG_SECONDS, what: str = "open_checkpoint") -> Iterator[None]:
    def alarm(signum, frame):
        raise Hang(f"{what} ran for more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def read_or_refuse(target: Path, names: list[str], *, memory_limit: int | None = None) -> Checkpoint | SourceError:
    """Open `target`; assert the outcome is a Checkpoint or a one-line SourceError naming one of `names`."""
    if memory_limit is not None:
        tracemalloc.start()
    try:
        with no_hang():
            result: Checkpoint | SourceError = open_checkpoint(target)
    except SourceError as error:
        result = error
    finally:
        if memory_limit is not None:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            assert peak < memory_limit, f"peak {peak} bytes for a file of {memory_limit} bound"
    if isinstance(result, SourceError):
        text = str(result)
        assert text and "\n" not in text and "\r" not in text, repr(text)
        assert result.code in RULES and RULES[result.code].scope == "source"
        assert any(name in text for name in names), (text, names)
    else:
        assert isinstance(result, Checkpoint)
    return result


@contextlib.contextmanager
def scratch_dir() -> Iterator[Path]:
    """A fresh directory per hypothesis example (a pytest fixture would be shared between examples)."""
    with tempfile.TemporaryDirectory(prefix="gdr-fuzz-") as name:
        yield Path(name)


@FUZZ
@given(spec=safetensors_specs())
@example(spec=SafetensorsSpec(2**64 - 1, b"{}", 10))
@example(spec=SafetensorsSpec(2**63, b"", 8))
@example(spec=SafetensorsSpec(99_999_999, b"{}", 10))
def test_safetensors_headers(spec):
    with scratch_dir() as directory:
        path = write_spec(directory / "x.safetensors", spec)
        # Memory may follow what is on disk, never what the length prefix claims beyond it.
        on_disk = min(spec.length, spec.size)
        result = read_or_refuse(path, ["x.safetensors"], memory_limit=3 * on_disk + (4 << 20))
    if isinstance(result, Checkpoint):
        assert result.bytes_read == 8 + spec.length <= spec.size


@FUZZ
@given(config=config_bytes())
def test_configs(config):
    with scratch_dir() as scratch:
        result = read_or_refuse(write_checkpoint(scratch / "ck", config=config), ["config.json"])
    if isinstance(result, Checkpoint):
        assert result.kind == "config-only" and isinstance(result.config, dict)


@FUZZ
@given(data=st.data())
def test_sharded_checkpoints(data):
    shard_names = ("s0.safetensors", "s1.safetensors")
    shards = {name: data.draw(safetensors_specs() | _valid_specs, label=name) for name in shard_names}
    index = data.draw(index_bytes(shard_names), label="index")
    config = data.draw(st.none() | config_bytes(), label="config")
    with scratch_dir() as scratch:
        directory = write_checkpoint(scratch / "ck", config=config, index=index, shards=shards)
        result = read_or_refuse(directory, ["config.json", INDEX_NAME, *shard_names])
    if isinstance(result, Checkpoint):
        assert result.kind == "sharded"
        # The fast locator agrees with the general one on every accepted index.
        text = index.decode("utf-8")
        general = {p[1]: span for p, span in key_spans(text) if len(p) == 2 and p[0] == "weight_map"}
        assert dict(result.index_lines) == general
        assert set(general) == set(json.loads(text)["weight_map"])


@FUZZ
@given(spec=safetensors_specs())
def test_never_laxer_than_the_safetensors_library(spec):
    """Whatever our reader accepts, the safetensors library also accepts, with the same tensors."""
    safetensors = pytest.importorskip("safetensors")
    pytest.importorskip("numpy")
    with scratch_dir() as scratch:
        path = write_spec(scratch / "x.safetensors", spec)
        result = read_or_refuse(path, ["x.safetensors"])
        if isinstance(result, SourceError):
            return
        with safetensors.safe_open(str(path), framework="numpy") as handle:
            theirs = {name: tuple(handle.get_slice(name).get_shape()) for name in handle.keys()}
    assert theirs == {name: info.shape for name, info in result.tensors.items()}


@st.composite
def _valid_spec(draw) -> SafetensorsSpec:
    header, data_size = draw(valid_headers())
    raw = json.dumps(header).encode()
    return SafetensorsSpec(len(raw), raw, 8 + len(raw) + data_size)


_valid_specs = _valid_spec()
