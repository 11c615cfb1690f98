"""Small checkpoints and a CLI runner shared by the format, selection and check-command tests.

`good`: a small Qwen3-Next checkpoint (H=2, HV=4): tp 1 and 2 work, tp 3 does not.
`bad`: the same model in two shards whose layer 5 `norm.weight` holds 32 channels where the config says 16
(GDR111, located at the `linear_value_head_dim` line of config.json).
"""

from __future__ import annotations

import io
import os
import sys
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

from checkpoint_builders import qwen3_next_config, qwen_tensors, write_checkpoint
from gdr_check.cli.main import main

# Output knobs that a CI environment may set and that would change what the CLI prints.
OUTPUT_ENV = ("GDR_CHECK_OUTPUT_FORMAT", "GDR_CHECK_OUTPUT_FILE", "GITHUB_STEP_SUMMARY", "FORCE_COLOR",
              "GDR_CHECK_DEBUG")


def write_good(directory: Path) -> Path:
    config = qwen3_next_config()
    return write_checkpoint(directory, config, qwen_tensors(config))


def write_bad(directory: Path) -> Path:
    config = qwen3_next_config()
    tensors = qwen_tensors(config)
    tensors["model.layers.5.linear_attn.norm.weight"] = ("BF16", (32,))
    return write_checkpoint(directory, config, tensors, shards=2)


@dataclass
class CliRun:
    exit_code: int
    stdout: str
    stderr: str


def run_cli(*args: str) -> CliRun:
    """`gdr-check ARGS` in this process, with stdout and stderr captured."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(args))
    return CliRun(code, out.getvalue(), err.getvalue())


def clean_output_env(monkeypatch) -> None:
    for name in OUTPUT_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_COLOR", "1")


def in_repo(monkeypatch, root: Path) -> None:
    """Run from `root`, as CI and pre-commit run from the repository root."""
    monkeypatch.chdir(root)
    assert os.getcwd() == str(root)
    sys.stdout.flush()
