"""A stdout whose encoding lacks the report's characters (PYTHONIOENCODING=ascii, a Latin-1 terminal): table
borders and the report's symbols are written in ASCII, as rich draws its own ASCII boxes (and typer's help),
and anything else as escapes; never a crash, never a mojibake of `\\u2503` in every table row."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gdr_check.cli.escape import for_encoding


def test_box_drawing_becomes_rich_s_ascii_box():
    assert for_encoding("a ┃ b\n━━╇━━\nc │ d\n╭─╮\n╰─╯", "ascii") == "a | b\n--+--\nc | d\n+-+\n+-+"


def test_the_report_s_symbols_become_ascii_and_data_is_escaped():
    assert for_encoding("≤ 2 × 8 … → é", "ascii") == "<= 2 x 8 ... -> \\xe9"
    assert for_encoding("≤ 2 × 8 … → é", "latin-1") == "<= 2 × 8 ... -> é"  # what Latin-1 has stays


def test_text_the_encoding_takes_is_unchanged():
    assert for_encoding("┃ é ≤", "utf-8") == "┃ é ≤"


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_the_full_report_on_a_narrow_stdout(tmp_path, encoding):
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("GDR_CHECK_", "GITHUB_", "FORCE_COLOR"))}
    environment.update(NO_COLOR="1", PYTHONIOENCODING=encoding, HF_HOME=str(tmp_path / "hf"),
                       HF_HUB_CACHE=str(tmp_path / "hf" / "hub"))
    done = subprocess.run([sys.executable, "-m", "gdr_check", "Qwen/Qwen3-Next-80B-A3B-Instruct", "--tp", "4",
                           "--isolated"], cwd=tmp_path, env=environment, capture_output=True, timeout=120, check=False)
    report = done.stdout.decode(encoding)  # strictly: a byte the encoding lacks fails the test
    assert done.returncode == 0, done.stderr  # warnings only
    assert "argument          | shape                | dtype | strides" in report.splitlines()
    assert "------------------+----------------------+-------+" in report
    assert "\\u2" not in report  # no escaped border or symbol
