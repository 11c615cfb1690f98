"""A stdout whose encoding lacks box drawing (PYTHONIOENCODING=ascii, a Latin-1 terminal): the human report draws
its tables with ASCII boxes, as rich draws typer's help there, instead of an escape for every border character.
Text read from data is never rewritten into look-alikes: what the encoding lacks is escaped. A report file is
UTF-8 whatever stdout's encoding."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

CONFIG = ('{"model_type": "qwen3_next", "hidden_size": 2048, "num_hidden_layers": 4, "layer_types": '
          '["linear_attention", "linear_attention", "linear_attention", "full_attention"], "linear_num_key_heads": '
          '16, "linear_num_value_heads": 32, "linear_key_head_dim": 128, "linear_value_head_dim": 128, '
          '"linear_conv_kernel_dim": 4, "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256, '
          '"torch_dtype": "bfloat16", "vocab_size": 151936}')


def run(tmp_path, encoding, *args):
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith(("GDR_CHECK_", "GITHUB_", "FORCE_COLOR")) or k == "GDR_CHECK_CACHE_DIR"}
    environment.update(NO_COLOR="1", PYTHONIOENCODING=encoding, HF_HOME=str(tmp_path / "hf"),
                       HF_HUB_CACHE=str(tmp_path / "hf" / "hub"))
    done = subprocess.run([sys.executable, "-m", "gdr_check", *args, "--isolated"], cwd=tmp_path, env=environment,
                          capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr  # warnings only
    return done.stdout.decode(encoding)  # strictly: a byte the encoding lacks fails the test


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_the_tables_are_drawn_in_ascii_on_a_narrow_stdout(tmp_path, encoding):
    report = run(tmp_path, encoding, "Qwen/Qwen3-Next-80B-A3B-Instruct", "--tp", "4").splitlines()
    assert "argument          | shape                 | dtype | strides" in report
    assert "------------------+-----------------------+-------+---------------------------------" in report
    assert not any("\\u25" in line for line in report)  # no escaped border


def test_data_is_escaped_not_rewritten(tmp_path):
    folder = tmp_path / "m\u2264\u25031"  # a name holding a less-or-equal sign and a box-drawing bar
    folder.mkdir()
    (folder / "config.json").write_text(CONFIG)
    report = run(tmp_path, "ascii", folder.name, "--tp", "4")
    assert "m\\u2264\\u25031" in report
    assert "m<=" not in report and "m\u2264|1" not in report


def test_a_report_file_keeps_its_utf8_tables(tmp_path):
    run(tmp_path, "ascii", "Qwen/Qwen3-Next-80B-A3B-Instruct", "--tp", "4", "-o", "report.txt")
    report = (tmp_path / "report.txt").read_text(encoding="utf-8").splitlines()
    assert "argument          \u2503 shape                 \u2503 dtype \u2503 strides" in report
