"""Reads that block or do not end, and nested or mistyped structure: FIFOs, /dev/zero and multi-GB
sparse files as a recording, a `pyproject.toml` or a cache ref are refused before reading (fstat, O_NONBLOCK,
a cap); JSON and TOML nested too deeply, non-UTF-8 TOML and recordings with non-dtype strings are one
`error:` line; all through the real CLI, in seconds."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from checkpoint_builders import qwen3_next_config, qwen_tensors, write_checkpoint
from gdr_check.base.limits import UnreadableInput, read_bounded
from hostile_corpus import assert_outcome, run_subprocess

GIB = 1 << 30


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("reads")
    config = qwen3_next_config()
    write_checkpoint(root / "ck", config, qwen_tensors(config))
    return root


def _sparse(path: Path, size: int = 4 * GIB) -> Path:
    with open(path, "wb") as handle:
        handle.truncate(size)
    return path


def _recording(path: Path, dtype: str = "bfloat16") -> Path:
    tensor = {"shape": [4, 8], "stride": [8, 1], "dtype": dtype, "device": "cuda:0"}
    names = ("mixed_qkv", "a", "b", "A_log", "dt_bias", "initial_state", "out", "ssm_state_indices")
    call = {"variant": "gdn", "scale": 0.35, **{name: tensor for name in names}}
    path.write_text(json.dumps({"schema_version": 1, "kind": "gdr-check-capture",
                                "calls": [{"index": 0, "call": call}]}))
    return path


def test_read_bounded_refuses_devices_fifos_and_sparse_giants(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, reason in ((Path("/dev/zero"), "not a regular file"), (fifo, "not a regular file"),
                         (tmp_path, "not a regular file"),
                         (_sparse(tmp_path / "big"), f"too large ({4 * GIB} bytes; the limit is 256)")):
        started = time.monotonic()
        with pytest.raises(UnreadableInput, match=f"^{re.escape(reason)}"):
            read_bounded(path, 256)
        assert time.monotonic() - started < 1
    (tmp_path / "small").write_bytes(b"abc")
    assert read_bounded(tmp_path / "small", 3) == b"abc"


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "sparse", "nested", "bad-dtype", "huge-dim", "nan-scale"])
def test_hostile_recordings(tmp_path, kind):
    path = tmp_path / "rec.json"
    if kind == "fifo":
        os.mkfifo(path)
        expected = "cannot read the recording: not a regular file"
    elif kind == "dev-zero":
        path = Path("/dev/zero")
        expected = "cannot read the recording: not a regular file"
    elif kind == "sparse":
        _sparse(path)
        expected = "cannot read the recording: too large"
    elif kind == "nested":
        path.write_text("[" * 200_000 + "]" * 200_000)
        expected = "not valid JSON: nested too deeply"
    elif kind == "bad-dtype":
        _recording(path, dtype="rm -rf /")
        expected = "`calls[0].call.mixed_qkv.dtype` is 'rm -rf /': not a dtype"
    elif kind == "huge-dim":
        _recording(path)
        document = json.loads(path.read_text())
        document["calls"][0]["call"]["a"]["shape"] = [4, 10**300]
        path.write_text(json.dumps(document))
        expected = "`calls[0].call.a.shape` holds an integer of at least 300 digits"
    else:
        _recording(path)
        path.write_text(path.read_text().replace('"scale": 0.35', '"scale": NaN'))
        expected = "`calls[0].call.scale` is nan: must be a finite number"
    started = time.monotonic()
    for fmt in ("full", "json"):
        outcome = run_subprocess("call", str(path), "--output-format", fmt, cwd=tmp_path)
        assert_outcome(fmt, outcome, exit_code=2, error=expected)
    assert time.monotonic() - started < 20


@pytest.mark.parametrize("kind,expected", [
    ("fifo", "cannot read it: not a regular file"),
    ("sparse", "cannot read it: too large"),
    ("non-utf8", "not valid UTF-8 (byte 0xff"),
    ("nested", "not valid TOML"),
    ("digits", "an integer at line 3 has more than 4300 digits, past anything a setting takes"),
])
@pytest.mark.parametrize("fmt", ["concise", "sarif"])
def test_hostile_pyproject(tmp_path, root, kind, expected, fmt):
    path = tmp_path / "pyproject.toml"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "sparse":
        _sparse(path)
    elif kind == "non-utf8":
        path.write_bytes(b"[tool.gdr-check]\nengine = \"\xff\"\n")
    elif kind == "digits":  # Python converts at most 4300 digits, and its error says neither key nor line
        path.write_text("[tool.gdr-check]\nengine = \"sglang\"\ntp = " + "9" * 5000 + "\n")
    else:
        path.write_text("[tool.gdr-check]\nx = " + "[" * 5000 + "]" * 5000 + "\n")
    started = time.monotonic()
    outcome = run_subprocess(str(root / "ck"), "--config", str(path), "--output-format", fmt, cwd=tmp_path)
    assert_outcome(fmt, outcome, exit_code=2, error=expected)
    assert time.monotonic() - started < 20


@pytest.mark.parametrize("kind", ["fifo", "sparse"])
def test_a_blocking_or_giant_refs_main_is_refused_unread(tmp_path, kind):
    repo = tmp_path / "hub" / "models--org--tiny"
    config = qwen3_next_config()
    write_checkpoint(repo / "snapshots" / ("a" * 40), config, qwen_tensors(config))
    (repo / "refs").mkdir()
    if kind == "fifo":
        os.mkfifo(repo / "refs" / "main")
    else:
        _sparse(repo / "refs" / "main")
    started = time.monotonic()
    for fmt in ("full", "json", "github"):
        outcome = run_subprocess("org/tiny", "--isolated", "--output-format", fmt, cwd=tmp_path,
                                 env={"HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"})
        assert_outcome(fmt, outcome, exit_code=2, error="refs/main")
    assert time.monotonic() - started < 20
