"""`explain --isolated` ignores the project's `[tool.gdr-check]` (its model, tp, batch and engine), as `--isolated`
does for every other command (user test: `explain` had no such option, so a `model = ...` in pyproject.toml
applied to every `explain` in the project)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_checkpoints import clean_output_env, run_cli

GRID = "RuntimeError: Triton Error [CUDA]: invalid argument"
WITHOUT_MODEL = ["with --model (and --tp, --batch) gdr-check computes the grid B*HV_l and the largest batch that fits "
                 "65535"]


@pytest.fixture
def cwd(tmp_path: Path, monkeypatch) -> Path:
    clean_output_env(monkeypatch)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "no-cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _reasons(*args: str) -> list[str]:
    result = run_cli("explain", GRID, "--output-format", "json", *args)
    assert result.exit_code == 0, result.stderr
    return list(json.loads(result.stdout)["reasons"])


def test_isolated_ignores_the_model_tp_batch_and_engine_of_pyproject(cwd: Path):
    (cwd / "pyproject.toml").write_text('[tool.gdr-check]\nmodel = "Qwen/Qwen3-Next-80B-A3B-Instruct"\ntp = 2\n'
                                        'batch = 5000\nengine = "sglang"\n')
    assert _reasons()[-1] == ("--batch 5000: the grid needs B*HV_l = 5000*16 = 80000, which crosses the limit: this "
                              "is the cause")
    assert _reasons("--isolated") == WITHOUT_MODEL
    # the command line still gives the context
    assert _reasons("--isolated", "--model", "Qwen/Qwen3-Next-80B-A3B-Instruct", "--tp", "4", "--batch", "100") == [
        "HV_l = 8 value heads per rank: the largest batch that launches is 65535 // 8 = 8191",
        "--batch 100: the grid needs B*HV_l = 100*8 = 800, which is within the limit: look for another bad launch "
        "argument"]


def test_isolated_does_not_read_a_broken_pyproject(cwd: Path):
    (cwd / "pyproject.toml").write_text('[tool.gdr-check]\nmodel = 3\n')
    assert run_cli("explain", GRID).exit_code == 2
    assert _reasons("--isolated") == WITHOUT_MODEL


def _isolated_line(*command: str) -> str:
    """`--isolated` and its help, the lines its help wraps onto included (how far it wraps depends on the
    command's longest option name)."""
    result = run_cli(*command, "--help")
    assert result.exit_code == 0
    rows = [line.strip("│ ") for line in result.stdout.splitlines()]
    [start] = [i for i, row in enumerate(rows) if "--isolated" in row]
    words = rows[start].split()
    for row in rows[start + 1:]:
        if not row or row.startswith("-") or set(row) <= set("─╰╯"):
            break
        words += row.split()
    return " ".join(words)


def test_isolated_has_the_same_help_in_every_command(cwd: Path):
    assert _isolated_line("explain") == "--isolated Ignore every pyproject.toml."
    for command in (["check"], ["call"], ["dry-run"]):
        assert _isolated_line(*command) == _isolated_line("explain"), command


def test_the_docs_name_isolated_for_explain():
    root = Path(__file__).resolve().parent.parent
    readme = " ".join((root / "README.md").read_text().split())
    assert "(or `model`, `tp`, `batch`, `engine` in `[tool.gdr-check]`, which `--isolated` ignores)" in readme
    ci = " ".join((root / "docs" / "ci.md").read_text().split())
    assert ("`--isolated` ignores every file. `gdr-check explain` reads `model`, `tp`, `batch` and `engine` from the "
            "working directory's file, and takes `--isolated` too." in ci)
