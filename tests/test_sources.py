"""The metadata readers: every target kind, locations, the HF cache, safety rules and every GDR0xx error."""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest

import gdr_check.sources
from fixtures_sources import (
    INDEX_NAME,
    header_for,
    make_hf_cache_repo,
    qwen3_next_config,
    qwen3_next_layer,
    write_json,
    write_raw_safetensors,
    write_safetensors,
    write_sharded,
)
from gdr_check.base.limits import INDEX_CAP_WHY, MAX_INDEX_BYTES
from gdr_check.base.registry import RULES
from gdr_check.sources import KeyLocation, SourceError, TensorInfo, jsonfile, open_checkpoint, safetensors_header
from gdr_check.sources import metadata_reader as files_module
from gdr_check.sources.jsonpos import dotted_keys

SMALL = {
    "model.layers.0.linear_attn.A_log": ("BF16", [4]),
    "model.layers.0.linear_attn.dt_bias": ("F32", [4]),
}


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    """Run in tmp_path (display paths are relative to it) with an empty, private HF cache."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.delenv("HF_HOME", raising=False)
    return tmp_path


def error_of(target, **kwargs) -> SourceError:
    with pytest.raises(SourceError) as info:
        open_checkpoint(target, **kwargs)
    return info.value


# -- target kinds ---------------------------------------------------------------------------------------------

def test_single_file_with_config_beside(tmp_path):
    write_safetensors(tmp_path / "ck" / "model.safetensors", SMALL)
    write_json(tmp_path / "ck" / "config.json", qwen3_next_config())
    ckpt = open_checkpoint("ck/model.safetensors")
    assert ckpt.kind == "safetensors-file"
    assert ckpt.root == tmp_path / "ck"
    assert ckpt.config["linear_num_value_heads"] == 4
    assert ckpt.config_file == os.path.join("ck", "config.json")
    assert ckpt.tensors == {
        "model.layers.0.linear_attn.A_log": TensorInfo("model.layers.0.linear_attn.A_log", "bfloat16", (4,),
                                                       "model.safetensors"),
        "model.layers.0.linear_attn.dt_bias": TensorInfo("model.layers.0.linear_attn.dt_bias", "float32", (4,),
                                                         "model.safetensors"),
    }
    assert ckpt.files_read == [os.path.join("ck", "config.json"), os.path.join("ck", "model.safetensors")]
    assert ckpt.index_file is None and ckpt.index_lines == {}


def test_single_file_without_config(tmp_path):
    write_safetensors(tmp_path / "w.safetensors", SMALL)
    ckpt = open_checkpoint(tmp_path / "w.safetensors")
    assert ckpt.kind == "safetensors-file" and ckpt.config is None and ckpt.config_file is None
    assert set(ckpt.tensors) == set(SMALL)


def test_model_directory(tmp_path):
    write_safetensors(tmp_path / "ck" / "model.safetensors", qwen3_next_layer(0))
    write_json(tmp_path / "ck" / "config.json", qwen3_next_config())
    ckpt = open_checkpoint("ck")
    assert ckpt.kind == "directory" and ckpt.target == "ck"
    assert ckpt.tensors["model.layers.0.linear_attn.in_proj_qkvz.weight"].shape == (96, 16)
    assert ckpt.tensors["model.layers.0.linear_attn.conv1d.weight"].shape == (64, 1, 4)


def test_directory_of_unindexed_safetensors_files_reads_them_all(tmp_path):
    write_safetensors(tmp_path / "ck" / "a.safetensors", qwen3_next_layer(0))
    write_safetensors(tmp_path / "ck" / "b.safetensors", qwen3_next_layer(1))
    ckpt = open_checkpoint("ck")
    assert ckpt.kind == "directory" and len(ckpt.tensors) == 14
    assert {t.shard for t in ckpt.tensors.values()} == {"a.safetensors", "b.safetensors"}


@pytest.mark.parametrize("via_file", [False, True])
def test_sharded_checkpoint(tmp_path, via_file):
    shards = {
        "model-00001-of-00002.safetensors": qwen3_next_layer(0),
        "model-00002-of-00002.safetensors": qwen3_next_layer(1),
    }
    write_sharded(tmp_path / "ck", shards, config=qwen3_next_config())
    ckpt = open_checkpoint("ck/" + INDEX_NAME if via_file else "ck")
    assert ckpt.kind == "sharded"
    assert ckpt.index_file == os.path.join("ck", INDEX_NAME)
    assert len(ckpt.tensors) == 14 and set(ckpt.index_lines) == set(ckpt.tensors)
    assert ckpt.tensors["model.layers.1.linear_attn.A_log"].shard == "model-00002-of-00002.safetensors"
    assert ckpt.files_read == [os.path.join("ck", n) for n in ("config.json", INDEX_NAME, *shards)]


def test_each_distinct_shard_is_opened_once(tmp_path, monkeypatch):
    write_sharded(tmp_path / "ck", {f"s{i}.safetensors": qwen3_next_layer(i) for i in range(3)})
    opened = []
    real_open = files_module.MetadataReader.open
    monkeypatch.setattr(files_module.MetadataReader, "open",
                        lambda self, p: opened.append(p.name) or real_open(self, p))
    open_checkpoint("ck")
    assert opened == [INDEX_NAME, "s0.safetensors", "s1.safetensors", "s2.safetensors"]


def test_tensors_in_a_shard_but_not_in_the_index_are_kept_with_a_note(tmp_path):
    write_sharded(
        tmp_path / "ck", {"s.safetensors": SMALL}, weight_map={"model.layers.0.linear_attn.A_log": "s.safetensors"}
    )
    ckpt = open_checkpoint("ck")
    assert set(ckpt.tensors) == set(SMALL)
    assert ckpt.notes == [
        "1 tensor(s) in the shards are not listed in `model.safetensors.index.json`, "
        "e.g. `model.layers.0.linear_attn.dt_bias`"
    ]


@pytest.mark.parametrize("where", ["file", "directory"])
def test_config_only(tmp_path, where):
    write_json(tmp_path / "ck" / "config.json", qwen3_next_config())
    ckpt = open_checkpoint("ck/config.json" if where == "file" else "ck")
    assert ckpt.kind == "config-only" and ckpt.tensors == {}
    assert ckpt.notes == ["only `config.json` was read: no weights were cross-checked"]
    assert ckpt.config["model_type"] == "qwen3_next"


def test_every_safetensors_dtype_maps_to_a_canonical_name(tmp_path):
    dtypes = {"BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "U16": "uint16", "F16": "float16",
              "BF16": "bfloat16", "I32": "int32", "U32": "uint32", "F32": "float32", "F64": "float64",
              "I64": "int64", "U64": "uint64", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2", "C64": "complex64"}
    write_safetensors(tmp_path / "d.safetensors", {f"t.{d}": (d, [2, 3]) for d in dtypes})
    ckpt = open_checkpoint("d.safetensors")
    assert {name[2:]: t.dtype for name, t in ckpt.tensors.items()} == dtypes


def test_sub_byte_dtypes_must_fill_whole_bytes(tmp_path):
    header = {"a": {"dtype": "F4", "shape": [6], "data_offsets": [0, 3]}}
    write_raw_safetensors(tmp_path / "f4.safetensors", json.dumps(header).encode(), 3)
    assert open_checkpoint("f4.safetensors").tensors["a"].shape == (6,)
    header = {"a": {"dtype": "F4", "shape": [3], "data_offsets": [0, 2]}}
    write_raw_safetensors(tmp_path / "odd.safetensors", json.dumps(header).encode(), 2)
    assert str(error_of("odd.safetensors")) == (
        "odd.safetensors: tensor `a` spans 2 bytes but its shape and dtype need 1.5; "
        "help: re-save the tensor with the `safetensors` library"
    )


def test_header_metadata_zero_size_tensors_and_padding_are_accepted(tmp_path):
    header, size = header_for({"a": ("F32", [2]), "empty": ("F32", [0, 4]), "b": ("U8", [3])}, {"format": "pt"})
    write_raw_safetensors(tmp_path / "m.safetensors", json.dumps(header).encode() + b"    ", size)
    ckpt = open_checkpoint("m.safetensors")
    assert list(ckpt.tensors) == ["a", "empty", "b"] and ckpt.tensors["empty"].shape == (0, 4)


# -- the Hugging Face cache ------------------------------------------------------------------------------------

def _cached_model(tmp_path, repo_id="Org/Tiny-GDN", **kwargs) -> Path:
    staged = write_safetensors(tmp_path / "staging" / "model.safetensors", qwen3_next_layer(0))
    files = {"config.json": json.dumps(qwen3_next_config()).encode(), "model.safetensors": staged}
    return make_hf_cache_repo(tmp_path / "hub", repo_id, files, **kwargs)


def test_repo_id_resolves_in_the_cache(tmp_path):
    repo = _cached_model(tmp_path)
    ckpt = open_checkpoint("Org/Tiny-GDN")
    assert ckpt.kind == "hf-cache" and ckpt.target == "Org/Tiny-GDN"
    assert ckpt.root == repo / "snapshots" / ("1a2b3c4d" * 5)
    assert ckpt.notes == ["resolved Org/Tiny-GDN in the local Hugging Face cache (snapshot 1a2b3c4)"]
    assert ckpt.tensors["model.layers.0.linear_attn.A_log"].shard == "model.safetensors"
    assert ckpt.config["model_type"] == "qwen3_next"


def test_repo_id_without_huggingface_hub_uses_the_layout_resolver(tmp_path, monkeypatch):
    _cached_model(tmp_path)
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # makes `import huggingface_hub` fail
    ckpt = open_checkpoint("Org/Tiny-GDN")
    assert ckpt.kind == "hf-cache" and len(ckpt.tensors) == 7


@pytest.mark.parametrize("how", ["HF_HOME", "cache_dir"])
def test_cache_location_from_hf_home_or_argument(tmp_path, monkeypatch, how):
    _cached_model(tmp_path)
    monkeypatch.delenv("HF_HUB_CACHE")
    if how == "HF_HOME":
        monkeypatch.setenv("HF_HOME", str(tmp_path))
        ckpt = open_checkpoint("Org/Tiny-GDN")
    else:
        ckpt = open_checkpoint("Org/Tiny-GDN", cache_dir=str(tmp_path / "hub"))
    assert ckpt.kind == "hf-cache"


def test_cache_repo_directory_snapshot_directory_and_snapshot_file(tmp_path):
    repo = _cached_model(tmp_path)
    snapshot = repo / "snapshots" / ("1a2b3c4d" * 5)
    assert open_checkpoint(repo).kind == "hf-cache"
    assert open_checkpoint(snapshot).kind == "hf-cache"
    single = open_checkpoint(snapshot / "model.safetensors")
    assert single.kind == "safetensors-file" and single.config is not None


def test_cache_entry_without_ref_uses_its_only_snapshot(tmp_path):
    _cached_model(tmp_path, write_ref=False)
    ckpt = open_checkpoint("Org/Tiny-GDN")
    assert ckpt.notes == [
        "resolved Org/Tiny-GDN in the local Hugging Face cache (snapshot 1a2b3c4); it has no `refs/main`, "
        "so its only snapshot was used"
    ]


def test_a_local_path_wins_over_a_repo_id(tmp_path):
    _cached_model(tmp_path)
    write_json(tmp_path / "Org" / "Tiny-GDN" / "config.json", {"model_type": "local"})
    assert open_checkpoint("Org/Tiny-GDN").config == {"model_type": "local"}


# -- locations ------------------------------------------------------------------------------------------------

def test_config_key_locations(tmp_path):
    text = (
        '{\n'
        '  "model_type": "qwen3_5",\n'
        '  "text_config": {\n'
        '    "linear_num_value_heads": 32,\n'
        '    "layer_types": ["linear_attention", "full_attention"],\n'
        '    "rope": {"theta": 1e7}\n'
        '  }\n'
        '}\n'
    )
    (tmp_path / "config.json").write_text(text)
    keys = open_checkpoint("config.json").config_keys
    assert keys["model_type"] == KeyLocation(2, 3, 2, 26)
    assert keys["text_config"] == KeyLocation(3, 3, 7, 4)
    assert keys["text_config.linear_num_value_heads"] == KeyLocation(4, 5, 4, 33)
    assert keys["text_config.layer_types"] == KeyLocation(5, 5, 5, 58)
    assert keys["text_config.layer_types.1"] == KeyLocation(5, 41, 5, 57)
    assert keys["text_config.rope.theta"] == KeyLocation(6, 14, 6, 26)
    line = text.splitlines()[3]
    assert line[5 - 1:33 - 1] == '"linear_num_value_heads": 32'


def test_key_locations_handle_escapes_unicode_and_compact_json():
    text = '{"a\\"b":{"c":[1,{"d":"x\\"}y"}]},"é":true}'
    keys = dotted_keys(text)
    assert keys['a"b'] == KeyLocation(1, 2, 1, 32)
    assert keys['a"b.c.1.d'] == KeyLocation(1, 18, 1, 29)
    assert keys["é"] == KeyLocation(1, 33, 1, 41)
    assert text[33 - 1:41 - 1] == '"é":true'


def test_index_line_locations(tmp_path):
    write_sharded(tmp_path / "ck", {"s1.safetensors": {"w.a": ("F32", [2])}, "s2.safetensors": {"w.b": ("F32", [2])}})
    ckpt = open_checkpoint("ck")
    lines = (tmp_path / "ck" / INDEX_NAME).read_text().splitlines()
    assert ckpt.index_lines["w.a"] == KeyLocation(6, 5, 6, 28)
    assert lines[5][4:27] == '"w.a": "s1.safetensors"'
    assert ckpt.index_lines["w.b"].line == 7


def test_index_lines_are_located_on_first_use_and_behave_as_a_dict(tmp_path):
    write_sharded(tmp_path / "ck", {"s1.safetensors": {"w.a": ("F32", [2])}, "s2.safetensors": {"w.b": ("F32", [2])}})
    lines = open_checkpoint("ck").index_lines
    assert isinstance(lines, dict) and lines._compute is not None  # nothing located yet
    expected = {"w.a": KeyLocation(6, 5, 6, 28), "w.b": KeyLocation(7, 5, 7, 28)}
    assert lines == expected and lines._compute is None
    assert len(lines) == 2 and list(lines) == ["w.a", "w.b"] and lines.get("w.c") is None
    assert pickle.loads(pickle.dumps(lines)) == expected
    assert dict(lines) == expected and {**lines} == expected and repr(lines) == repr(expected)
    assert dataclasses.asdict(open_checkpoint("ck"))["index_lines"]["w.b"] == {
        "line": 7, "column": 5, "end_line": 7, "end_column": 28,
    }


# -- safety ---------------------------------------------------------------------------------------------------

_IMPORT_GUARD = (
    "import sys\n{prelude}\n"
    "from gdr_check.sources import SourceError, open_checkpoint\n"
    "open_checkpoint(sys.argv[1])\n"
    "try:\n    open_checkpoint(sys.argv[2])\nexcept SourceError as e:\n    assert e.code == 'GDR043', e\n"
    "bad = [m for m in ('torch', 'triton', 'numpy') if m in sys.modules]\n"
    "assert not bad, bad\n"
)


def _run_import_guard(tmp_path, prelude: str = "") -> subprocess.CompletedProcess:
    write_sharded(tmp_path / "ok", {"s.safetensors": qwen3_next_layer(0)}, config=qwen3_next_config())
    write_sharded(tmp_path / "broken", {"s.safetensors": qwen3_next_layer(0), "t.safetensors": {"x": ("F32", [1])}})
    (tmp_path / "broken" / "s.safetensors").unlink()
    script = _IMPORT_GUARD.format(prelude=prelude)
    args = [sys.executable, "-c", script, str(tmp_path / "ok"), str(tmp_path / "broken")]
    return subprocess.run(args, capture_output=True, text=True, timeout=60)


def test_metadata_path_never_imports_torch_triton_or_numpy(tmp_path):
    # Both a successful read and a SourceError (which loads the rule registry) stay free of them.
    result = _run_import_guard(tmp_path)
    assert result.returncode == 0, result.stderr


def test_the_import_guard_can_fail(tmp_path):
    result = _run_import_guard(tmp_path, prelude="sys.modules['numpy'] = sys  # what an accidental import leaves")
    assert result.returncode != 0 and "numpy" in result.stderr


def test_pickle_files_are_never_opened(tmp_path, monkeypatch):
    write_json(tmp_path / "ck" / "config.json", qwen3_next_config())
    (tmp_path / "ck" / "pytorch_model.bin").write_bytes(b"\x80\x04not really a pickle")
    opened = []
    real_open = files_module.MetadataReader.open
    monkeypatch.setattr(files_module.MetadataReader, "open",
                        lambda self, p: opened.append(p.name) or real_open(self, p))
    for target in ("ck", "ck/pytorch_model.bin"):
        assert error_of(target).code == "GDR003"
    assert "pytorch_model.bin" not in opened


def test_fifo_is_refused_without_blocking(tmp_path):
    (tmp_path / "ck").mkdir()
    os.mkfifo(tmp_path / "ck" / "model.safetensors")
    assert str(error_of("ck")) == (
        "ck/model.safetensors: cannot read `model.safetensors`: not a regular file; "
        "help: replace it with the checkpoint's regular file: a FIFO, a device or a folder is never read"
    )


def test_a_named_link_outside_the_cache_is_followed(tmp_path):
    write_safetensors(tmp_path / "real.safetensors", SMALL)
    os.symlink("real.safetensors", tmp_path / "alias.safetensors")
    assert set(open_checkpoint("alias.safetensors").tensors) == set(SMALL)


def test_bytes_read_stay_close_to_the_header_size_on_a_full_size_shard(tmp_path):
    # Qwen3-Next-80B geometry: 48 layers of full-size linear-attention tensors, ~1 GB of (sparse) data.
    full = dict(H=16, HV=32, K=128, V=128, hidden=2048)
    tensors = {name: spec for i in range(48) for name, spec in qwen3_next_layer(i, **full).items()}
    header, data_size = header_for(tensors)
    raw = json.dumps(header).encode()
    path = write_raw_safetensors(tmp_path / "big" / "model.safetensors", raw, data_size)
    assert path.stat().st_size > 1_000_000_000
    ckpt = open_checkpoint("big")
    assert ckpt.bytes_read == 8 + len(raw)
    assert ckpt.tensors["model.layers.47.linear_attn.in_proj_qkvz.weight"].shape == (12288, 2048)


def test_source_error_as_a_diagnostic(tmp_path):
    write_sharded(tmp_path / "ck", {"s.safetensors": SMALL, "t.safetensors": {"x": ("F32", [1])}})
    (tmp_path / "ck" / "s.safetensors").unlink()
    diagnostic = error_of("ck").diagnostic()
    assert diagnostic.code == "GDR043" and diagnostic.name == "missing-shards"
    assert diagnostic.message == "shard `s.safetensors` listed in the index does not exist"
    assert diagnostic.location.file == os.path.join("ck", INDEX_NAME)
    assert (diagnostic.location.line, diagnostic.location.column) == (6, 5)
    assert diagnostic.fixes == ["re-download `s.safetensors`"]


# -- every error, with its exact one-line message --------------------------------------------------------------

def _dir_with(tmp_path, names):
    (tmp_path / "ck").mkdir()
    for name in names:
        (tmp_path / "ck" / name).write_text("x")
    return "ck"


def _header_file(tmp_path, header, data_size=None, **kwargs):
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    if data_size is None:
        data_size = max((e["data_offsets"][1] for k, e in header.items() if k != "__metadata__"), default=0)
    write_raw_safetensors(tmp_path / "x.safetensors", raw, data_size, **kwargs)
    return "x.safetensors"


def _entry(dtype="F32", shape=(2,), offsets=(0, 8)):
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offsets)}


def _index(tmp_path, text, shards=()):
    (tmp_path / "ck").mkdir()
    for shard in shards:
        write_safetensors(tmp_path / "ck" / shard, SMALL)
    (tmp_path / "ck" / INDEX_NAME).write_text(text if isinstance(text, str) else json.dumps(text, indent=2))
    return "ck"


def _link_in_plain_dir(tmp_path):
    write_safetensors(tmp_path / "elsewhere.safetensors", SMALL)
    (tmp_path / "ck").mkdir()
    os.symlink("../elsewhere.safetensors", tmp_path / "ck" / "model.safetensors")
    return "ck"


def _lfs_pointer(path):
    """What `git clone` leaves for an LFS-tracked file when LFS objects are not fetched."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("version https://git-lfs.github.com/spec/v1\n"
                    "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n")
    return path


def _cache_link(tmp_path, link_target, blob=None):
    repo = _cached_model(tmp_path)
    link = repo / "snapshots" / ("1a2b3c4d" * 5) / "model.safetensors"
    if blob is not None:
        (repo / "blobs" / blob).write_bytes(b"partial")
    os.unlink(link)
    os.symlink(link_target, link)
    return "Org/Tiny-GDN"


SNAP = "hub/models--Org--Tiny-GDN/snapshots/" + "1a2b3c4d" * 5
CASES = {
    "missing-path": (
        lambda t: "no/such/dir",
        "GDR001", "path `no/such/dir` does not exist; help: check the path, or pass a Hugging Face repo id such as "
        "`Qwen/Qwen3-Next-80B-A3B-Instruct`",
    ),
    "empty-directory": (
        lambda t: _dir_with(t, ["README.md", "tokenizer.json"]),
        "GDR002", "`ck` is not a checkpoint: the directory holds no `config.json`, `.safetensors` file or safetensors "
        "index; help: pass the model directory, its `config.json` or its `.safetensors` files",
    ),
    "other-file": (
        lambda t: _dir_with(t, ["model.gguf"]) + "/model.gguf",
        "GDR002", "`ck/model.gguf` is not a checkpoint: expected a `.safetensors` file, a safetensors index or a "
        "`config.json`; help: pass the model directory, its `config.json` or its `.safetensors` files",
    ),
    "pickle-directory": (
        lambda t: _dir_with(t, ["config.json", "pytorch_model-00001-of-00002.bin", "pytorch_model.bin.index.json"]),
        "GDR003", "ck/pytorch_model-00001-of-00002.bin: unsupported pickle-based checkpoint "
        "`pytorch_model-00001-of-00002.bin`; help: convert it to safetensors (e.g. with the `safetensors` convert "
        "script, or `transformers` `save_pretrained(..., safe_serialization=True)`) and check the converted directory",
    ),
    "pickle-pth": (
        lambda t: _dir_with(t, ["consolidated.pth"]) + "/consolidated.pth",
        "GDR003", "ck/consolidated.pth: unsupported pickle-based checkpoint `consolidated.pth`; help: convert it to "
        "safetensors (e.g. with the `safetensors` convert script, or `transformers` "
        "`save_pretrained(..., safe_serialization=True)`) and check the converted directory",
    ),
    "shard-is-a-directory": (
        lambda t: (_index(t, {"weight_map": {"w": "s.safetensors"}}), (t / "ck" / "s.safetensors").mkdir())[0],
        "GDR004", "ck/s.safetensors: cannot read `s.safetensors`: not a regular file; help: replace it with the "
        "checkpoint's regular file: a FIFO, a device or a folder is never read",
    ),
    "unresolved-ref": (
        lambda t: (_cached_model(t),
                   (t / "hub/models--Org--Tiny-GDN/refs/main").write_text("feedface"))[1] and "Org/Tiny-GDN",
        "GDR006", "hub/models--Org--Tiny-GDN: cache entry `Org/Tiny-GDN` has no usable snapshot for revision `main`: "
        "`snapshots/feedface` is missing; help: download the model again (`hf download Org/Tiny-GDN`)",
    ),
    "no-snapshot": (
        lambda t: ((t / "hub/models--Org--Gone/snapshots").mkdir(parents=True), "hub/models--Org--Gone")[1],
        "GDR006", "hub/models--Org--Gone: cache entry `Org/Gone` has no usable snapshot for revision `main`: "
        "`refs/main` is missing and there is no snapshot; help: download the model again (`hf download Org/Gone`)",
    ),
    "model-not-cached": (
        lambda t: "Qwen/Qwen3-Next-80B-A3B-Instruct",
        "GDR007", "`Qwen/Qwen3-Next-80B-A3B-Instruct` is neither a local path nor a model in the local Hugging Face "
        "cache `{tmp}/hub`; "
        "help: download it (`hf download Qwen/Qwen3-Next-80B-A3B-Instruct`), or set `HF_HUB_CACHE` to the cache "
        "that holds it",
    ),
    "incomplete-blob": (
        lambda t: _cache_link(t, "../../blobs/abc123", blob="abc123.incomplete"),
        "GDR008", f"{SNAP}/model.safetensors: `model.safetensors` is an incomplete download "
        "(`blobs/abc123.incomplete`); help: re-download `model.safetensors` (run the download again; it resumes)",
    ),
    "dangling-cache-link": (
        lambda t: _cache_link(t, "../../blobs/deadbeef"),
        "GDR009", f"{SNAP}/model.safetensors: `model.safetensors` is a link to `../../blobs/deadbeef`, which does "
        "not exist; help: re-download `model.safetensors`",
    ),
    "dangling-named-link": (
        lambda t: (os.symlink("gone.safetensors", t / "x.safetensors"), "x.safetensors")[1],
        "GDR009", "`x.safetensors` is a link to `gone.safetensors`, which does not exist; "
        "help: fetch the file `x.safetensors` stands for (`git annex get`, `dvc pull`, a re-download) or fix the link",
    ),
    "dangling-link-in-plain-directory": (
        lambda t: ((t / "ck").mkdir(), os.symlink("../annex/objects/x", t / "ck" / "model.safetensors"), "ck")[2],
        "GDR009", "ck/model.safetensors: `model.safetensors` is a link to `../annex/objects/x`, which does not exist; "
        "help: fetch the file `model.safetensors` stands for (`git annex get`, `dvc pull`, a re-download) or fix the "
        "link",
    ),
    "named-link-loop": (
        lambda t: (os.symlink("y.safetensors", t / "x.safetensors"), os.symlink("x.safetensors", t / "y.safetensors"),
                   "x.safetensors")[2],
        "GDR014", "`x.safetensors` is a link to `y.safetensors`, and following the links from there reaches no "
        "file; help: replace a link on the way with the real file, or point `x.safetensors` at it",
    ),
    "link-loop-in-plain-directory": (
        lambda t: ((t / "ck").mkdir(), os.symlink("y", t / "ck" / "config.json"),
                   os.symlink("config.json", t / "ck" / "y"), "ck")[3],
        "GDR014", "ck/config.json: `config.json` is a link to `y`, and following the links from there reaches no "
        "file; help: replace a link on the way with the real file, or point `config.json` at it",
    ),
    "link-chain-past-the-systems-limit": (  # 60 links in a row to a real file: no loop, still no file reached
        lambda t: ((t / "real.safetensors").write_bytes(b""), [os.symlink(
            "real.safetensors" if i == 59 else f"l{i + 1}", t / f"l{i}") for i in range(60)],
                   os.symlink("l0", t / "x.safetensors"), "x.safetensors")[3],
        "GDR014", "`x.safetensors` is a link to `l0`, and following the links from there reaches no file; "
        "help: replace a link on the way with the real file, or point `x.safetensors` at it",
    ),
    "git-lfs-pointer": (
        lambda t: (_lfs_pointer(t / "ck" / "model.safetensors"), "ck")[1],
        "GDR011", "ck/model.safetensors: is a Git LFS pointer, not the weights; help: run `git lfs pull` in the clone",
    ),
    "git-lfs-pointer-config": (
        lambda t: (_lfs_pointer(t / "ck" / "config.json"), "ck/config.json")[1],
        "GDR011", "ck/config.json: is a Git LFS pointer, not the weights; help: run `git lfs pull` in the clone",
    ),
    "missing-revision": (
        lambda t: (_cached_model(t), "Org/Tiny-GDN@v9")[1],
        "GDR012", "`Org/Tiny-GDN` has no revision `v9` in the local Hugging Face cache (cached: main (1a2b3c4)); "
        "help: download it (`hf download Org/Tiny-GDN --revision v9`), or pick one of the cached revisions",
    ),
    "empty-revision": (  # `org/name@` names no revision: not a repo id (never read as main)
        lambda t: (_cached_model(t), "Org/Tiny-GDN@")[1],
        "GDR001", "path `Org/Tiny-GDN@` does not exist; help: check the path, or pass a Hugging Face repo id such "
        "as `Qwen/Qwen3-Next-80B-A3B-Instruct`",
    ),
    "link-in-plain-directory": (
        _link_in_plain_dir,
        "GDR010", "ck/model.safetensors: `model.safetensors` is a link to `../elsewhere.safetensors`, outside a "
        "Hugging Face cache snapshot (files inside a checkpoint must not be links); "
        "help: pass `--follow-links` to follow links you trust (git-annex, DVC, shared storage), or copy the real "
        "files into the checkpoint directory",
    ),
    "cache-link-outside-blobs": (
        lambda t: (write_safetensors(t / "secret.safetensors", SMALL),
                   _cache_link(t, str(t / "secret.safetensors")))[1],
        "GDR010", f"{SNAP}/model.safetensors: `model.safetensors` is a link to `{{tmp}}/secret.safetensors`, outside "
        "`blobs/` of `models--Org--Tiny-GDN`; help: pass `--follow-links` to follow links you trust (git-annex, "
        "DVC, shared storage), or copy the real files into the checkpoint directory",
    ),
    "config-bad-json": (
        lambda t: (write_json(t / "ck/config.json", {}),
                   (t / "ck/config.json").write_text('{\n  "a": 1,\n  "b" 2\n}\n'), "ck")[2],
        "GDR020", "ck/config.json: invalid JSON at line 3, column 7: expecting ':' delimiter; "
        "help: fix the JSON at the reported line and column, or download `config.json` again",
    ),
    "config-not-utf8": (
        lambda t: (_dir_with(t, []), (t / "ck/config.json").write_bytes(b'{\n  "a": "\xff"\n}'), "ck/config.json")[2],
        "GDR020", "ck/config.json: invalid JSON at line 2, column 9: not valid UTF-8 (byte 0xff); help: fix the "
        "JSON at the reported line and column, or download `config.json` again",
    ),
    "config-control-character": (  # Python's message ends "... character at": the position is said apart
        lambda t: (_dir_with(t, []), (t / "ck/config.json").write_text('{"a": "x\x01"}'), "ck/config.json")[2],
        "GDR020", "ck/config.json: invalid JSON at line 1, column 9: invalid control character here; help: fix the "
        "JSON at the reported line and column, or download `config.json` again",
    ),
    "config-unterminated-string": (
        lambda t: (_dir_with(t, []), (t / "ck/config.json").write_text('{"a": "x'), "ck/config.json")[2],
        "GDR020", "ck/config.json: invalid JSON at line 1, column 7: unterminated string starting here; help: fix "
        "the JSON at the reported line and column, or download `config.json` again",
    ),
    "config-byte-order-mark": (
        lambda t: (_dir_with(t, []), (t / "ck/config.json").write_bytes(b'\xef\xbb\xbf{"a": 1}'), "ck/config.json")[2],
        "GDR020", "ck/config.json: invalid JSON at line 1, column 1: the text starts with a UTF-8 byte-order mark, "
        "which JSON does not allow; help: fix the JSON at the reported line and column, or download `config.json` "
        "again",
    ),
    "config-not-object": (
        lambda t: write_json(t / "ck/config.json", [1, 2]).parent.name,
        "GDR021", "ck/config.json: config holds a JSON array, not an object; help: replace it with the model's real "
        "`config.json`",
    ),
    "shorter-than-length-prefix": (
        lambda t: ((t / "x.safetensors").write_bytes(b"\x05\x00"), "x.safetensors")[1],
        "GDR030", "x.safetensors: safetensors file is truncated: 2 bytes on disk, 8 expected (the 8-byte header "
        "length); help: re-download or re-copy `x.safetensors`",
    ),
    "truncated-header": (
        lambda t: _header_file(t, {"a": _entry()}, total_size=40),
        "GDR030", "x.safetensors: safetensors file is truncated: 40 bytes on disk, 69 expected (8 + 61-byte header); "
        "help: re-download or re-copy `x.safetensors`",
    ),
    "truncated-data": (
        lambda t: _header_file(t, {"a": _entry()}, total_size=72),
        "GDR030", "x.safetensors: safetensors file is truncated: 72 bytes on disk, 77 expected (8 + 61-byte header "
        "+ 8 bytes of tensor data); help: re-download or re-copy `x.safetensors`",
    ),
    "huge-length": (
        lambda t: _header_file(t, b"{}", 0, length=2**64 - 1),
        "GDR031", "x.safetensors: header length 18446744073709551615 exceeds the 100000000-byte limit; help: check "
        "that `x.safetensors` is a safetensors file, and re-download it if it is",
    ),
    "header-not-json": (
        lambda t: _header_file(t, b'{"a": ', 0),
        "GDR032", "x.safetensors: malformed safetensors header: invalid JSON at line 1, column 7 of the header: "
        "expecting value; help: re-download the file, or re-save it with the `safetensors` library",
    ),
    "header-not-utf8": (
        lambda t: _header_file(t, b'{"\xc3\x28": 1}', 0),
        "GDR032", "x.safetensors: malformed safetensors header: not valid UTF-8 (byte 0xc3 at header offset 2); "
        "help: re-download the file, or re-save it with the `safetensors` library",
    ),
    # The length field 16 bytes past the JSON, into the tensor data: zeros (not JSON), or bytes not even UTF-8.
    "header-length-into-zero-data": (
        lambda t: _header_file(t, b'{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}' + bytes(16), 8),
        "GDR032", "x.safetensors: malformed safetensors header: the length field gives 77 bytes, but the JSON ends "
        "after 61: the length runs into the tensor data, or bytes follow the JSON; help: re-download the file, or "
        "re-save it with the `safetensors` library",
    ),
    "header-length-into-binary-data": (
        lambda t: _header_file(t, b'{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}  \xc8\x01', 8),
        "GDR032", "x.safetensors: malformed safetensors header: the length field gives 65 bytes, but the JSON ends "
        "after 61: the length runs into the tensor data, or bytes follow the JSON; help: re-download the file, or "
        "re-save it with the `safetensors` library",
    ),
    "header-not-object": (
        lambda t: _header_file(t, b"[1, 2]", 0),
        "GDR032", "x.safetensors: malformed safetensors header: the header is a JSON array, not an object; help: "
        "re-download the file, or re-save it with the `safetensors` library",
    ),
    "duplicate-name": (
        lambda t: _header_file(t, b'{"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}, "a": {}}', 1),
        "GDR032", "x.safetensors: malformed safetensors header: duplicate name `a`; help: re-download the file, or "
        "re-save it with the `safetensors` library",
    ),
    "missing-offsets": (
        lambda t: _header_file(t, {"a": {"dtype": "F32", "shape": [2]}}, 8),
        "GDR032", "x.safetensors: malformed safetensors header: tensor `a` has no `data_offsets`; help: re-download "
        "the file, or re-save it with the `safetensors` library",
    ),
    "bad-metadata": (
        lambda t: _header_file(t, {"__metadata__": {"format": 1}, "a": _entry()}),
        "GDR032", "x.safetensors: malformed safetensors header: `__metadata__` must map strings to strings; help: "
        "re-download the file, or re-save it with the `safetensors` library",
    ),
    "unknown-dtype": (
        lambda t: _header_file(t, {"a": _entry(dtype="Q4_K")}),
        "GDR033", "x.safetensors: tensor `a` has unknown dtype `Q4_K`; help: re-save the checkpoint with the "
        "`safetensors` library, or upgrade gdr-check",
    ),
    "negative-dim": (
        lambda t: _header_file(t, {"a": _entry(shape=(-2, -1))}),
        "GDR034", "x.safetensors: tensor `a` has invalid shape `[-2, -1]`: `-2` is negative; help: re-download the "
        "file, or re-save it with the `safetensors` library",
    ),
    "fractional-dim": (
        lambda t: _header_file(t, {"a": _entry(shape=(2.0,))}),
        "GDR034", "x.safetensors: tensor `a` has invalid shape `[2.0]`: `2.0` is not an integer; help: re-download "
        "the file, or re-save it with the `safetensors` library",
    ),
    "overflowing-dim": (
        lambda t: _header_file(t, {"a": _entry(shape=(2**64, 1))}),
        "GDR034", "x.safetensors: tensor `a` has invalid shape `[18446744073709551616, 1]`: a dimension does not fit "
        "in 64 bits; help: re-download the file, or re-save it with the `safetensors` library",
    ),
    "size-mismatch": (
        lambda t: _header_file(t, {"a": _entry(dtype="BF16", shape=(3,), offsets=(0, 8))}),
        "GDR035", "x.safetensors: tensor `a` spans 8 bytes but its shape and dtype need 6; help: re-save the tensor "
        "with the `safetensors` library",
    ),
    "huge-shape": (
        lambda t: _header_file(t, {"a": _entry(shape=(2**40, 2**40, 2**40))}),
        "GDR035", "x.safetensors: tensor `a` spans 8 bytes but its shape and dtype need more than 8; help: re-save "
        "the tensor with the `safetensors` library",
    ),
    "overlap": (
        lambda t: _header_file(t, {"a": _entry(offsets=(0, 8)), "b": _entry(offsets=(4, 12))}),
        "GDR036", "x.safetensors: tensors `a` and `b` overlap in the data region; help: re-save the checkpoint with "
        "the `safetensors` library",
    ),
    "gap": (
        lambda t: _header_file(t, {"a": _entry(offsets=(0, 8)), "b": _entry(offsets=(16, 24))}),
        "GDR037", "x.safetensors: tensor `b` has invalid `data_offsets` `[16, 24]`: leaves a 8-byte gap after "
        "tensor `a`; help: re-save the checkpoint with the `safetensors` library",
    ),
    "reversed-offsets": (
        lambda t: _header_file(t, {"a": _entry(offsets=(8, 0))}, 8),
        "GDR037", "x.safetensors: tensor `a` has invalid `data_offsets` `[8, 0]`: begin is after end; help: re-save "
        "the checkpoint with the `safetensors` library",
    ),
    "offsets-not-a-pair": (
        lambda t: _header_file(t, {"a": _entry(offsets=(0, 4, 8))}, 8),
        "GDR037", "x.safetensors: tensor `a` has invalid `data_offsets` `[0, 4, 8]`: expected two integers "
        "[begin, end]; help: re-save the checkpoint with the `safetensors` library",
    ),
    "trailing-bytes": (
        lambda t: _header_file(t, {"a": _entry()}, total_size=100),
        "GDR038", "x.safetensors: safetensors file has 23 unexpected bytes after its tensor data: 100 bytes on disk, "
        "77 expected; help: re-download the file, or re-save it with the `safetensors` library",
    ),
    "index-bad-json": (
        lambda t: _index(t, '{"weight_map": {"w" "s.safetensors"}}'),
        "GDR040", "ck/model.safetensors.index.json: invalid JSON at line 1, column 21: expecting ':' delimiter; "
        "help: download `model.safetensors.index.json` again",
    ),
    "index-without-weight-map": (
        lambda t: _index(t, {"metadata": {}}),
        "GDR041", "ck/model.safetensors.index.json: malformed safetensors index: it has no `weight_map`; help: "
        "download `model.safetensors.index.json` again, or regenerate it with `save_pretrained`",
    ),
    "weight-map-not-object": (
        lambda t: _index(t, {"weight_map": ["s.safetensors"]}),
        "GDR041", "ck/model.safetensors.index.json: malformed safetensors index: `weight_map` is a JSON array, not "
        "an object; help: download `model.safetensors.index.json` again, or regenerate it with `save_pretrained`",
    ),
    "shard-name-not-string": (
        lambda t: _index(t, {"weight_map": {"w": 3}}),
        "GDR041", "ck/model.safetensors.index.json: malformed safetensors index: `weight_map` maps `w` to a JSON "
        "number, not a file name; help: download `model.safetensors.index.json` again, or regenerate it with "
        "`save_pretrained`",
    ),
    "missing-shards": (
        lambda t: _index(t, {"weight_map": {"a": "s1.safetensors", "b": "s2.safetensors", "c": "s3.safetensors"}},
                         shards=["s2.safetensors"]),
        "GDR043", "ck/model.safetensors.index.json: shard `s1.safetensors` listed in the index does not exist; "
        "help: re-download `s1.safetensors` (and 1 more missing shards)",
    ),
    "tensor-not-in-shard": (
        lambda t: _index(t, {"weight_map": {"model.norm.weight": "s.safetensors"}}, shards=["s.safetensors"]),
        "GDR044", "ck/model.safetensors.index.json: tensor `model.norm.weight` is mapped to `s.safetensors`, whose "
        "header does not contain it; help: download the index and `s.safetensors` of one revision again",
    ),
    "duplicate-across-files": (
        lambda t: (write_safetensors(t / "ck/a.safetensors", SMALL),
                   write_safetensors(t / "ck/b.safetensors", SMALL), "ck")[2],
        "GDR045", "ck/b.safetensors: tensor `model.layers.0.linear_attn.A_log` is stored in both `a.safetensors` and "
        "`b.safetensors`; help: remove the stale file so that each tensor is stored once",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_error_has_its_code_and_exact_one_line_message(tmp_path, case):
    make, code, expected = CASES[case]
    error = error_of(make(tmp_path))
    assert error.code == code
    assert str(error) == expected.replace("{tmp}", str(tmp_path))
    assert "\n" not in str(error)
    assert code in RULES and RULES[code].scope == "source"
    assert error.message == RULES[code].message.format(**error.values)


@pytest.mark.parametrize(
    "shard", ["../model.safetensors", "/etc/passwd", "sub/model.safetensors", "..", ".", "a\\b.safetensors", ""]
)
def test_shard_names_must_be_plain_file_names(tmp_path, shard):
    (tmp_path / "sub").mkdir()
    write_safetensors(tmp_path / "sub" / "model.safetensors", SMALL)
    write_safetensors(tmp_path / "model.safetensors", SMALL)
    _index(tmp_path, {"weight_map": {"model.layers.0.linear_attn.A_log": shard}})
    error = error_of("ck")
    assert error.code == "GDR042"
    assert str(error) == (
        f"ck/model.safetensors.index.json: shard name `{shard}` for tensor `model.layers.0.linear_attn.A_log` is not "
        "a plain file name inside the checkpoint directory; help: move the shards into the checkpoint directory and "
        "list them by file name only"
    )
    assert (error.line, error.column) == (3, 5)


def test_json_file_caps(tmp_path, monkeypatch):
    write_json(tmp_path / "ck" / "config.json", qwen3_next_config())
    monkeypatch.setattr(jsonfile, "MAX_CONFIG_BYTES", 100)
    size = (tmp_path / "ck" / "config.json").stat().st_size
    assert str(error_of("ck")) == (
        f"ck/config.json: `config.json` is {size} bytes, over the 100-byte limit; "
        "help: check that the file is the model's real `config.json`"
    )


def test_header_cap_is_checked_before_reading(tmp_path, monkeypatch):
    monkeypatch.setattr(safetensors_header, "MAX_HEADER_BYTES", 1000)
    header, size = header_for({f"t{i}": ("F32", [1]) for i in range(40)})
    _header_file(tmp_path, header, size)
    error = error_of("x.safetensors")
    assert error.code == "GDR031" and "exceeds the 1000-byte limit" in str(error)


def test_hostile_names_stay_on_one_short_line(tmp_path):
    name = "evil\nname\x1b[31m" + "x" * 1000
    _header_file(tmp_path, {name: _entry(dtype="WAT")})
    text = str(error_of("x.safetensors"))
    assert "\n" not in text and "\x1b" not in text and len(text) < 400
    assert "evil\\nname\\x1b[31m" in text


def test_every_source_rule_is_raised_somewhere():
    from gdr_check.base.source_error import SourceError

    source_codes = {code for code, rule in RULES.items() if rule.scope == "source"}
    classes = {cls.rule.code: cls.__name__ for cls in SourceError.__subclasses__()}
    assert set(classes) == source_codes  # every GDR0xx rule is a typed error
    sources_dir = Path(gdr_check.sources.__file__).resolve().parent
    text = "".join(p.read_text() for p in sources_dir.glob("*.py"))
    assert {code for code, name in classes.items() if re.search(rf"\b{name}\b", text)} == source_codes
    # GDR013 is an info note, not an error: test_an_index_without_its_shards_is_checked_from_the_config.
    tested = {code for _, code, _ in CASES.values()} | {"GDR005", "GDR042", "GDR013"}
    assert tested == source_codes


# -- revisions, JSON-only downloads, followed links (issue 9 item 5) -----------------------------------------

def _two_revisions(tmp_path) -> Path:
    """`Org/Tiny-GDN` cached at main (1a2b3c4d...) and at tag `v2` (beefbeef...), whose snapshot holds only the
    JSON files: the config and an index whose one shard was not downloaded."""
    repo = _cached_model(tmp_path)
    index = {"weight_map": {name: "model-00001-of-00001.safetensors" for name in qwen3_next_layer(0)}}
    make_hf_cache_repo(tmp_path / "hub", "Org/Tiny-GDN", {
        "config.json": json.dumps(qwen3_next_config()).encode(), INDEX_NAME: json.dumps(index).encode(),
    }, commit="beef" * 10, write_ref=False)
    (repo / "refs" / "v2").write_text("beef" * 10)
    return repo


@pytest.mark.parametrize("hub", ["with-hub", "without-hub"])
@pytest.mark.parametrize("how", ["at", "argument", "commit", "prefix", "repo-dir"])
def test_a_revision_picks_its_snapshot(tmp_path, monkeypatch, how, hub):
    if hub == "without-hub":
        monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # makes `import huggingface_hub` fail
    repo = _two_revisions(tmp_path)
    target, revision = {
        "at": ("Org/Tiny-GDN@v2", None), "argument": ("Org/Tiny-GDN", "v2"),
        "commit": ("Org/Tiny-GDN", "beef" * 10), "prefix": ("Org/Tiny-GDN@beefbe", None),
        "repo-dir": (str(repo), "v2"),
    }[how]
    ckpt = open_checkpoint(target, revision=revision)
    assert ckpt.root == repo / "snapshots" / ("beef" * 10)
    assert ckpt.notes[0].startswith("resolved Org/Tiny-GDN at revision ")
    assert open_checkpoint("Org/Tiny-GDN").root == repo / "snapshots" / ("1a2b3c4d" * 5)  # main by default


def test_a_revision_for_a_folder_or_a_snapshot_on_disk_is_a_note_not_silence(tmp_path, monkeypatch):
    # Only a cached model's repository has snapshots to choose from; a folder (a snapshot's own too) or a file is
    # read as it is, and the result says the revision was not applied. Relative targets: the note names the target
    # as given, and an absolute temporary path can be long enough to be shortened (a parallel worker's is).
    repo = _two_revisions(tmp_path)
    monkeypatch.chdir(tmp_path)
    snapshot = (repo / "snapshots" / ("beef" * 10)).relative_to(tmp_path)
    for target in (snapshot, snapshot / "config.json"):
        ckpt = open_checkpoint(str(target), revision="v1")
        assert ckpt.root is not None and ckpt.root.resolve() == (tmp_path / snapshot).resolve()
        assert ckpt.notes[-1] == (f"revision `v1` picks nothing here: `{target}` is not a cached Hugging Face "
                                  "model's repository, so it was read as it is on disk")
    assert not any("picks nothing" in note for note in open_checkpoint(str(snapshot)).notes)


def test_the_revision_in_the_target_wins_over_the_argument_and_a_note_says_so(tmp_path):
    repo = _two_revisions(tmp_path)
    checkpoint = open_checkpoint("Org/Tiny-GDN@main", revision="v2")
    assert checkpoint.root == repo / "snapshots" / ("1a2b3c4d" * 5)
    assert checkpoint.notes[-1] == ("revision `v2` not used for `Org/Tiny-GDN@main`: the target names its own, "
                                    "`main`, which wins")
    assert not any("not used" in note for note in open_checkpoint("Org/Tiny-GDN@main", revision="main").notes)
    assert not any("not used" in note for note in open_checkpoint("Org/Tiny-GDN@main").notes)


def test_an_ambiguous_commit_prefix_names_the_candidates(tmp_path):
    _two_revisions(tmp_path)
    (tmp_path / "hub/models--Org--Tiny-GDN/snapshots" / ("beef" + "0" * 36)).mkdir()
    error = error_of("Org/Tiny-GDN@beef")
    assert str(error) == (
        "hub/models--Org--Tiny-GDN: cache entry `Org/Tiny-GDN` has no usable snapshot for revision `beef`: it is a "
        "prefix of 2 cached commits (beef00000000, beefbeefbeef); help: give more characters of the commit hash"
    )


@pytest.mark.parametrize("revision", ["../../../etc", "/etc", "v2/../../x", "refs/../main"])
def test_revisions_cannot_walk_out_of_the_cache_entry(tmp_path, revision):
    _two_revisions(tmp_path)
    error = error_of("Org/Tiny-GDN", revision=revision)
    assert error.code == "GDR012" and "(cached: main (1a2b3c4), v2 (beefbee))" in str(error)


def test_an_index_without_its_shards_is_checked_from_the_config(tmp_path):
    _two_revisions(tmp_path)
    ckpt = open_checkpoint("Org/Tiny-GDN@v2")
    assert ckpt.config["model_type"] == "qwen3_next" and ckpt.tensors == {}
    assert ckpt.index_tensors == list(qwen3_next_layer(0))
    [note] = ckpt.diagnostics
    assert (note.code, note.severity) == ("GDR013", "info")
    assert note.message == (
        "none of the 1 shard(s) listed in `model.safetensors.index.json` is present: checked from `config.json` "
        "alone (7 tensor names in the index, no shapes read)")
    assert note.location.file == f"hub/models--Org--Tiny-GDN/snapshots/{'beef' * 10}/{INDEX_NAME}"


def _awq_moe_index(path: Path) -> int:
    """A Qwen3-Next-80B AWQ index as transformers writes it (`json.dump(indent=2)`): every one of the 512 experts x
    48 layers stores its 3 projections apart, as qweight/qzeros/scales, ~222k tensors and ~20 MB. Returns the
    tensor count."""
    quant = ("qweight", "qzeros", "scales")
    names = ["model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"]
    for layer in range(48):
        prefix = f"model.layers.{layer}."
        names += [prefix + "input_layernorm.weight", prefix + "post_attention_layernorm.weight"]
        if (layer + 1) % 4 == 0:
            names += [f"{prefix}self_attn.{proj}.{q}" for proj in ("q_proj", "k_proj", "v_proj", "o_proj")
                      for q in quant]
            names += [prefix + "self_attn.q_norm.weight", prefix + "self_attn.k_norm.weight"]
        else:
            names += [f"{prefix}linear_attn.{proj}.{q}" for proj in ("in_proj_qkvz", "in_proj_ba", "out_proj")
                      for q in quant]
            names += [prefix + "linear_attn." + name for name in ("A_log", "dt_bias", "conv1d.weight", "norm.weight")]
        names += [prefix + "mlp.gate.weight", prefix + "mlp.shared_expert_gate.weight"]
        names += [f"{prefix}mlp.shared_expert.{proj}.{q}" for proj in ("gate_proj", "up_proj", "down_proj")
                  for q in quant]
        names += [f"{prefix}mlp.experts.{expert}.{proj}.{q}" for expert in range(512)
                  for proj in ("gate_proj", "up_proj", "down_proj") for q in quant]
    per_shard = -(-len(names) // 41)
    weight_map = {name: f"model-{n // per_shard + 1:05d}-of-00041.safetensors" for n, name in enumerate(names)}
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"metadata": {"total_size": 48_000_000_000}, "weight_map": weight_map}, handle, indent=2)
    return len(names)


def test_the_index_of_a_quantized_moe_with_per_expert_tensors_is_read(tmp_path):
    """A quantized MoE release that stores each expert apart has an index of tens of MB (Qwen3-Next-80B AWQ ~20 MB,
    GPTQ ~27 MB): over the config's 16 MiB cap, well under the index's own."""
    write_json(tmp_path / "ck" / "config.json", qwen3_next_config())
    tensors = _awq_moe_index(tmp_path / "ck" / INDEX_NAME)
    size = (tmp_path / "ck" / INDEX_NAME).stat().st_size
    assert tensors == 222_447 and 20_000_000 < size < MAX_INDEX_BYTES and size > jsonfile.MAX_CONFIG_BYTES
    ckpt = open_checkpoint("ck")
    assert len(ckpt.index_tensors) == tensors
    [note] = ckpt.diagnostics
    assert note.message == (
        "none of the 41 shard(s) listed in `model.safetensors.index.json` is present: checked from `config.json` "
        "alone (222447 tensor names in the index, no shapes read)")


def test_an_index_over_its_cap_is_refused_as_too_big_not_as_fake(tmp_path, monkeypatch):
    """The index's cap keeps a corrupt or hostile file from using unbounded memory; the help says so without
    taking a big index for a fake one."""
    write_json(tmp_path / "ck" / "config.json", qwen3_next_config())
    write_json(tmp_path / "ck" / INDEX_NAME, {"weight_map": {"w": "s.safetensors"}})
    size = (tmp_path / "ck" / INDEX_NAME).stat().st_size
    monkeypatch.setattr(jsonfile, "MAX_INDEX_BYTES", size - 1)
    assert str(error_of("ck")) == (
        f"ck/{INDEX_NAME}: `{INDEX_NAME}` is {size} bytes, over the {size - 1}-byte limit; help: the cap is ten "
        "times the largest released index (docs/limits.md); if this one is genuine, check a folder holding only its "
        "`config.json` and report the index's size in a gdr-check issue"
    )


def test_the_index_caps_reason_is_written_once():
    """"ten times the largest released index" was written three times: GDR005's explanation, its fix and
    limits.INDEX_CAP_WHY (review). The rule now prints limits.py's words, and no other source file has them."""
    rule = RULES["GDR005"]
    assert rule.explanation.endswith("\n\nThe index's cap is 256 MiB. " + INDEX_CAP_WHY)
    assert "The cap is ten times the largest released index and twice the largest plausible one" in INDEX_CAP_WHY
    assert rule.fixes[1] == ("the cap is ten times the largest released index (docs/limits.md); if this one is "
                             "genuine, check a folder holding only its `config.json` and report the index's size in "
                             "a gdr-check issue")
    package = Path(gdr_check.sources.__file__).parent.parent
    assert [path.name for path in sorted(package.rglob("*.py"))
            if "ten times the largest" in path.read_text()] == ["limits.py"]


def test_an_index_with_some_shards_missing_is_still_an_incomplete_download(tmp_path):
    write_sharded(tmp_path / "ck", {"a.safetensors": SMALL, "b.safetensors": {"x": ("F32", [1])}},
                  config=qwen3_next_config())
    (tmp_path / "ck" / "b.safetensors").unlink()
    assert error_of("ck").code == "GDR043"


def test_follow_links_reads_linked_files_under_the_same_caps(tmp_path, monkeypatch):
    write_sharded(tmp_path / "store", {"s0.safetensors": SMALL}, config=qwen3_next_config())
    (tmp_path / "ck").mkdir()
    for name in os.listdir(tmp_path / "store"):
        os.symlink(tmp_path / "store" / name, tmp_path / "ck" / name)
    assert error_of("ck").code == "GDR010"
    ckpt = open_checkpoint("ck", follow_links=True)
    assert set(ckpt.tensors) == set(SMALL) and ckpt.config is not None
    monkeypatch.setattr(jsonfile, "MAX_CONFIG_BYTES", 100)
    assert error_of("ck", follow_links=True).code == "GDR005"


_HUB_CACHE = "import sys; from huggingface_hub import constants; sys.stdout.write(constants.HF_HUB_CACHE)"


@pytest.mark.parametrize("variables", [
    {"HF_HUB_CACHE": "a", "HUGGINGFACE_HUB_CACHE": "b", "HF_HOME": "c"},
    {"HUGGINGFACE_HUB_CACHE": "b", "HF_HOME": "c", "XDG_CACHE_HOME": "d"},
    {"HF_HOME": "c", "XDG_CACHE_HOME": "d"},
    {"XDG_CACHE_HOME": "d"},
    {},
])
def test_the_cache_location_is_the_one_huggingface_hub_uses(tmp_path, monkeypatch, variables):
    pytest.importorskip("huggingface_hub")
    from gdr_check.sources.hf_cache import cache_root

    names = ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME")
    env = {k: v for k, v in os.environ.items() if k not in names}
    env.update({name: str(tmp_path / value) for name, value in variables.items()})
    hub = subprocess.run([sys.executable, "-c", _HUB_CACHE], env=env, capture_output=True, text=True, check=True)
    for name in names:
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, str(tmp_path / value))
    assert str(cache_root()) == hub.stdout


@pytest.mark.parametrize("name", ["model.safetensors", "config.json"])
def test_a_git_lfs_pointer_in_the_hugging_face_cache_asks_for_a_download_not_git(tmp_path, name):
    repo = _cached_model(tmp_path, "Org/Lfs")
    blob = repo / "blobs" / "lfs-pointer"
    _lfs_pointer(blob)
    link = repo / "snapshots" / ("1a2b3c4d" * 5) / name
    os.unlink(link)
    os.symlink(os.path.relpath(blob, link.parent), link)
    error = error_of("Org/Lfs")
    assert error.code == "GDR011"
    assert str(error).endswith(f"/{name}: is a Git LFS pointer, not the weights; help: download the model again "
                               "(`hf download Org/Lfs`): the cache holds the pointer")
