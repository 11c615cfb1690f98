"""Names that are not UTF-8: a checkpoint directory whose name holds bytes that no encoding can
decode reaches Python as surrogate escapes; every format shows them as `\\xNN` escapes and stays valid UTF-8
(JSON and SARIF included), through the real CLI in a subprocess, where stdout is a byte stream."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from checkpoint_builders import qwen3_next_config, qwen_tensors, write_checkpoint
from hostile_corpus import FORMATS, assert_outcome, run_subprocess

RAW_NAME = b"ck-\xff\xfe-\xe9"
SHOWN = "ck-\\xff\\xfe-\\xe9"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("names")
    config = qwen3_next_config()
    tensors = qwen_tensors(config)
    tensors["model.layers.5.linear_attn.norm.weight"] = ("BF16", (32,))  # a finding that points at a file
    built = write_checkpoint(root / "ck", config, tensors)
    os.rename(os.fsencode(built), os.fsencode(root) + b"/" + RAW_NAME)
    return root, os.fsdecode(RAW_NAME)


@pytest.mark.parametrize("fmt", FORMATS)
def test_undecodable_directory_name_in_every_format(checkpoint, fmt):
    root, name = checkpoint
    outcome = run_subprocess(name, "--isolated", "--output-format", fmt, cwd=root)
    document = assert_outcome(fmt, outcome, exit_code=1)
    assert SHOWN in outcome.stdout.replace("\\\\", "\\") or "%FF%FE-%E9" in outcome.stdout, outcome.stdout[:400]
    if fmt in ("json", "json-lines", "gitlab"):
        assert SHOWN in str(document).replace("\\\\", "\\")


def test_undecodable_name_as_the_report_path(checkpoint):
    root, name = checkpoint
    os.makedirs(os.fsencode(root) + b"/" + RAW_NAME + b"/deeper", exist_ok=True)  # -o creates no folder
    outcome = run_subprocess(name, "--isolated", "--output-format", "json", "-o", name + "/deeper/r.json", cwd=root)
    assert outcome.exit_code == 1 and outcome.stdout == "" and outcome.stderr == ""
    assert (Path(os.fsdecode(os.fsencode(root) + b"/" + RAW_NAME + b"/deeper/r.json"))).read_text().startswith("{")


def test_undecodable_name_that_cannot_be_written_is_one_escaped_line(checkpoint):
    root, name = checkpoint
    outcome = run_subprocess(name, "--isolated", "--output-format", "sarif", "-o", name, cwd=root)
    assert_outcome("sarif", outcome, exit_code=2, error=f"cannot write `{SHOWN}`: is a directory", report="")
