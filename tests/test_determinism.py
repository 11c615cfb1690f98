"""The stable formats (`json`, `json-lines`, `sarif`) are byte-identical for the same inputs (issue 6).

Each run is a separate `python -m gdr_check` process. What must not matter:
- the process: two runs with different hash seeds (set and dict orders that depend on hashing);
- where the checkout lives: the same tree at two absolute locations, each checked from its own root;
- how a target is spelled: absolute or relative from the same directory; only the echo of the argument
  itself (`target`) may differ;
- the sink: `--output-file` holds exactly what stdout would.

The checkpoints cover clean results, diagnostics located at config keys and index lines, two families, a TP
matrix, and a target that cannot be read.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from checkpoint_builders import kimi_config, kimi_tensors, qwen3_next_config, qwen_tensors, write_checkpoint

STABLE_FORMATS = ("json", "json-lines", "sarif")
TARGETS = ("qwen", "qwen-mismatch", "kimi", "missing-shard")
ARGS = ("--tp", "1,2", "--isolated")


def _build(root: Path) -> Path:
    qwen = qwen3_next_config()
    write_checkpoint(root / "qwen", qwen, qwen_tensors(qwen), shards=3)
    # A tensor that disagrees with the config: a diagnostic located at an index line.
    mismatch = qwen_tensors(qwen)
    name = "model.layers.2.linear_attn.in_proj_qkvz.weight"
    mismatch[name] = ("BF16", (mismatch[name][1][0] + 1, mismatch[name][1][1]))
    write_checkpoint(root / "qwen-mismatch", qwen, mismatch, shards=3)
    kimi = kimi_config()
    write_checkpoint(root / "kimi", kimi, kimi_tensors(kimi))
    write_checkpoint(root / "missing-shard", qwen, qwen_tensors(qwen), shards=2)
    (root / "missing-shard" / "model-00002-of-00002.safetensors").unlink()
    return root


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    return _build(tmp_path_factory.mktemp("determinism") / "checkout")


def run(fmt: str, cwd: Path, targets: tuple[str, ...] = TARGETS, *extra: str, seed: str = "0") -> tuple[int, bytes]:
    env = {k: v for k, v in os.environ.items()
           if (not k.startswith(("GDR_CHECK_", "GITHUB_")) or k == "GDR_CHECK_CACHE_DIR")
           and k not in ("TRITON_INTERPRET", "FORCE_COLOR")}
    env["PYTHONHASHSEED"] = seed
    done = subprocess.run([sys.executable, "-m", "gdr_check", *targets, *ARGS, "--output-format", fmt, *extra],
                          cwd=cwd, env=env, capture_output=True, timeout=120)
    assert done.returncode == 2, done.stderr.decode()  # `missing-shard` cannot be read
    assert b"Traceback" not in done.stderr
    return done.returncode, done.stdout


_BASELINES: dict[tuple[Path, str], tuple[int, bytes]] = {}


def baseline(tree: Path, fmt: str) -> tuple[int, bytes]:
    """The plain run from the checkout's root, once per format."""
    if (tree, fmt) not in _BASELINES:
        _BASELINES[tree, fmt] = run(fmt, tree)
    return _BASELINES[tree, fmt]


@pytest.mark.parametrize("fmt", STABLE_FORMATS)
def test_two_processes_with_different_hash_seeds(tree, fmt):
    first = run(fmt, tree, seed="1")
    second = run(fmt, tree, seed="2")
    assert first == second
    assert first[1].strip()


@pytest.mark.parametrize("fmt", STABLE_FORMATS)
def test_the_location_of_the_checkout_does_not_matter(tree, tmp_path, fmt):
    moved = tmp_path / "somewhere" / "else" / "checkout"
    shutil.copytree(tree, moved, symlinks=True)
    here, there = baseline(tree, fmt), run(fmt, moved)
    assert str(tree).encode() not in here[1] and str(moved).encode() not in there[1]
    assert here == there


@pytest.mark.parametrize("fmt", STABLE_FORMATS)
def test_absolute_and_relative_targets(tree, fmt):
    relative = baseline(tree, fmt)
    absolute_targets = tuple(str(tree / target) for target in TARGETS)
    code, text = run(fmt, tree, absolute_targets)
    # Only the echo of each argument may differ: put the argument as typed back, then compare bytes.
    for target, typed in zip(TARGETS, absolute_targets, strict=True):
        text = text.replace(json.dumps(typed).encode(), json.dumps(target).encode())
    assert (code, text) == relative
    assert str(tree).encode() not in text


@pytest.mark.parametrize("fmt", STABLE_FORMATS)
def test_the_output_file_holds_what_stdout_would(tree, tmp_path, fmt):
    out = tmp_path / f"report.{fmt}"
    code, printed = run(fmt, tree, TARGETS, "--output-file", str(out))
    assert printed == b""
    assert (code, out.read_bytes()) == baseline(tree, fmt)
