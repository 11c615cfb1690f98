"""`explain --model` takes what `call --model` takes: a checkpoint directory, its config.json, a repo id (from the
local Hugging Face cache, else a built-in description), read by the same library path (`models.check.check_model`,
through `api.model_numbers`); a source without GDN/KDA layers is one line that says so (user test: explain took
built-in model ids only).

The checkpoints are the small Qwen3-Next of `checkpoint_builders` (H = 2, HV = 4, K = V = 16, 4 attention heads):
[q | k | v] is 2*2*16 + 4*16 = 128 wide, qkvz 192, HV*V 64, ba 8.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checkpoint_builders import qwen3_next_config, write_json
from cli_checkpoints import clean_output_env, run_cli, write_good
from fixtures_sources import make_hf_cache_repo
from gdr_check.base.errors import InputError
from gdr_check.pipeline.explain_numbers import ExplainModelError, model_numbers

SMALL = ({"num_k_heads (H)": 2, "num_v_heads (HV)": 4, "mixed_qkv width (2*H*K + HV*V)": 128,
          "out/v width (HV*V)": 64, "in_proj_qkvz width (2*H*K + 2*HV*V)": 192, "in_proj_ba width (2*HV)": 8,
          "num_attention_heads (full attention)": 4},
         {"head_k_dim (K)": 16, "head_v_dim (V)": 16})
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2}
DIVIDE = "AssertionError: 4 is not divisible by 3"


@pytest.fixture
def cwd(tmp_path: Path, monkeypatch) -> Path:
    clean_output_env(monkeypatch)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "no-cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("source", ["ckpt", "ckpt/config.json", "ckpt/model.safetensors", "config-only",
                                    "config-only/config.json"])
def test_a_checkpoint_path_gives_the_models_numbers(cwd: Path, source: str):
    write_good(cwd / "ckpt")
    write_json(cwd / "config-only" / "config.json", qwen3_next_config())
    assert model_numbers(source) == SMALL
    result = run_cli("explain", DIVIDE, "--model", source, "--tp", "3", "--output-format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["reasons"] == [
        "4 = 3 × 1 + 1: tp=3 leaves a remainder; TP sizes that divide 4: 1, 2, 4 (the nearest: 2)",
        "4 is the model's num_v_heads (HV) (unsharded, 4)",
        "4 is the model's num_attention_heads (full attention) (unsharded, 4)"]


def test_the_source_is_the_one_call_reads(cwd: Path):
    write_good(cwd / "ckpt")
    recording = cwd / "recording.json"
    recording.write_text("{}")
    # `call` reads its --model only after the recording: an unreadable recording stops it first, so compare the
    # error a missing checkpoint gives `check` (the same reader) with explain's
    missing = run_cli("explain", DIVIDE, "--model", "missing")
    assert missing.exit_code == 2 and missing.stdout == ""
    check = run_cli("missing")
    assert missing.stderr == check.stderr.replace("error: ", "error: Invalid value for --model: ", 1)


def test_a_built_in_model_still_gives_its_numbers_and_qwen3_5_too(cwd: Path):
    assert model_numbers("Qwen/Qwen3-Next-80B-A3B-Instruct") == (
        {"num_k_heads (H)": 16, "num_v_heads (HV)": 32, "mixed_qkv width (2*H*K + HV*V)": 8192,
         "out/v width (HV*V)": 4096, "in_proj_qkvz width (2*H*K + 2*HV*V)": 12288, "in_proj_ba width (2*HV)": 64,
         "num_attention_heads (full attention)": 16},
        {"head_k_dim (K)": 128, "head_v_dim (V)": 128})
    # Qwen3.5 nests its text model's config (`text_config`): read as `check` and `call` read it
    assert model_numbers("Qwen/Qwen3.5-35B-A3B") == model_numbers("Qwen/Qwen3-Next-80B-A3B-Instruct")
    result = run_cli("explain", "AssertionError: 16 is not divisible by 3", "--model", "Qwen/Qwen3.5-35B-A3B")
    assert result.exit_code == 0, result.stderr
    assert "  - 16 is the model's num_k_heads (H) (unsharded, 16)" in result.stdout


@pytest.mark.parametrize("source", ["llama", "llama/config.json"])
def test_a_source_without_gdn_or_kda_layers_is_one_line(cwd: Path, source: str):
    write_json(cwd / "llama" / "config.json", LLAMA)
    line = (f"{source}: `LlamaForCausalLM` has no GDN or KDA layers, so explain has no linear-attention widths to "
            f"read the numbers with")
    with pytest.raises(ExplainModelError) as raised:
        model_numbers(source)
    assert isinstance(raised.value, InputError) and str(raised.value) == line
    result = run_cli("explain", DIVIDE, "--model", source)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == f"error: Invalid value for --model: {line}\n"


def test_a_linear_attention_model_whose_heads_are_unknown_is_one_line(cwd: Path):
    config = qwen3_next_config()
    del config["linear_num_key_heads"]
    write_json(cwd / "ckpt" / "config.json", config)
    with pytest.raises(ExplainModelError) as raised:
        model_numbers("ckpt")
    assert str(raised.value) == ("ckpt: the model's head counts and sizes are not all known (the config has no "
                                 "`linear_num_key_heads`), so explain has no widths to read the numbers with")


def test_the_readme_shows_the_line_a_model_without_linear_attention_gets(cwd: Path):
    write_json(cwd / "llama" / "config.json", LLAMA)
    result = run_cli("explain", DIVIDE, "--model", "llama/")
    assert result.exit_code == 2
    readme = " ".join((Path(__file__).resolve().parent.parent / "README.md").read_text().split())
    assert f"``{result.stderr.strip()}``" in readme
    assert "`--model` takes what `call --model` takes, read the same way" in readme


def test_a_model_path_in_pyproject_is_relative_to_the_file(cwd: Path, monkeypatch):
    """`model = "ckpt"` names the checkpoint beside pyproject.toml, from any folder below it, as its globs do; a
    repo id is taken when the local Hugging Face cache holds it (user test: only built-in ids were accepted)."""
    write_good(cwd / "ckpt")
    (cwd / "pyproject.toml").write_text('[tool.gdr-check]\nmodel = "ckpt"\n')
    (cwd / "sub").mkdir()
    monkeypatch.chdir(cwd / "sub")
    result = run_cli("explain", DIVIDE, "--tp", "3", "--output-format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["reasons"][1] == "4 is the model's num_v_heads (HV) (unsharded, 4)"
    make_hf_cache_repo(cwd / "no-cache", "acme/small-next",
                       {"config.json": json.dumps(qwen3_next_config()).encode()})
    (cwd / "pyproject.toml").write_text('[tool.gdr-check]\nmodel = "acme/small-next"\n')
    result = run_cli("explain", DIVIDE, "--tp", "3", "--output-format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["reasons"][1] == "4 is the model's num_v_heads (HV) (unsharded, 4)"
    (cwd / "pyproject.toml").write_text('[tool.gdr-check]\nmodel = "ckpt2"\n')
    result = run_cli("explain", DIVIDE)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (
        f"error: {cwd / 'pyproject.toml'}: `tool.gdr-check.model`: path `ckpt2` does not exist; help: check the path, "
        f"or pass a Hugging Face repo id such as `Qwen/Qwen3-Next-80B-A3B-Instruct`\n")
    # only explain reads the key: a check, the pre-commit hook and the Action never fail on it (review)
    assert run_cli(str(cwd / "ckpt"), "-q").exit_code == 0


@pytest.mark.parametrize("model", ["", "  "])
def test_an_empty_model_is_refused_as_an_empty_target_is(cwd: Path, model: str):
    """`--model ""` was taken silently (no numbers, exit 0: user test); `gdr-check ""` says this."""
    result = run_cli("explain", DIVIDE, "--model", model)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == "error: Invalid value for --model: an empty path names no checkpoint\n"
    assert run_cli("").stderr == "error: Invalid value for TARGETS: an empty path names no checkpoint\n"
