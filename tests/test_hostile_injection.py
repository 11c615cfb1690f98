"""Terminal and CI-log injection: text from data reaches every output format escaped.

Each case puts `EVIL` (terminal escapes, bidi reversal, line breaks followed by GitHub workflow commands, the
legacy `##[` form) into one place a checkpoint, a config or a recording can hold text, and runs the real CLI
in all eight formats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checkpoint_builders import qwen3_next_config, qwen_tensors, write_checkpoint
from cli_checkpoints import clean_output_env, run_cli
from gdr_check.pipeline.capture import SCHEMA_VERSION, dump_recording
from hostile_corpus import EVIL, FORMATS, assert_outcome, tree


def _architecture(root: Path) -> tuple[list[str], int, str | None]:
    config = qwen3_next_config()
    config["architectures"] = ["Qwen3NextForCausalLM" + EVIL]
    return [str(write_checkpoint(root / "ck", config, qwen_tensors(qwen3_next_config())))], 0, None


def _layer_types(root: Path) -> tuple[list[str], int, str | None]:
    config = qwen3_next_config()
    config["layer_types"] = [EVIL] * config["num_hidden_layers"]
    return [str(write_checkpoint(root / "ck", config, qwen_tensors(qwen3_next_config())))], 1, None


def _tensor_and_shard_name(root: Path) -> tuple[list[str], int, str | None]:
    config = qwen3_next_config()
    checkpoint = write_checkpoint(root / "ck", config, qwen_tensors(config), shards=2)
    index_file = checkpoint / "model.safetensors.index.json"
    index = json.loads(index_file.read_text())
    index["weight_map"][f"model.layers.5.linear_attn.norm{EVIL}.weight"] = f"missing{EVIL}.safetensors"
    index_file.write_text(json.dumps(index))
    return [str(checkpoint)], 2, "listed in the index does not exist"


def _directory_name(root: Path) -> tuple[list[str], int, str | None]:
    config = qwen3_next_config()
    tensors = qwen_tensors(config)
    tensors["model.layers.5.linear_attn.norm.weight"] = ("BF16", (32,))  # GDR111: a finding names the path
    name = EVIL.replace("/", "_")
    return [str(write_checkpoint(root / name, config, tensors))], 1, None


def _pyproject_selector(root: Path) -> tuple[list[str], int, str | None]:
    config = qwen3_next_config()
    checkpoint = write_checkpoint(root / "ck", config, qwen_tensors(config))
    (root / "pyproject.toml").write_text("[tool.gdr-check]\nselect = [" + json.dumps(EVIL) + "]\n")
    return [str(checkpoint), "--config", str(root / "pyproject.toml")], 2, "unknown rule selector"


def _recording_fields(root: Path) -> tuple[list[str], int, str | None]:
    from gdr_check.deployment.settings import Deployment
    from gdr_check.pipeline.model_check import check_builtin

    call = check_builtin("Qwen/Qwen3-Next-80B-A3B-Instruct", Deployment(tp=4, batch=8)).call.to_dict()
    # Free-text fields: the recorded function's name and its caller (values of typed fields are the readers'
    # to validate).
    document = {"schema_version": SCHEMA_VERSION, "kind": "gdr-check-capture",
                "calls": [{"index": 0, "function": EVIL, "caller": EVIL, "engine": "sglang", "call": call}]}
    (root / "rec.json").write_text(dump_recording(document))
    return ["call", str(root / "rec.json")], 0, None


def _strings(value: object) -> list[str]:
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return [value] if isinstance(value, str) else []


CASES = {"architecture": _architecture, "layer-types": _layer_types, "tensor-and-shard-name": _tensor_and_shard_name,
         "directory-name": _directory_name, "pyproject-selector": _pyproject_selector,
         "recording-fields": _recording_fields}


@pytest.mark.parametrize("case", list(CASES))
def test_data_is_escaped_in_every_format(case, tmp_path, monkeypatch):
    clean_output_env(monkeypatch)
    monkeypatch.chdir(tmp_path)
    args, exit_code, error = CASES[case](tmp_path)
    is_call = args[0] == "call"
    before = tree(tmp_path)
    for fmt in FORMATS:
        outcome = run_cli(*args, "--output-format", fmt,
                          *([] if is_call else ["--isolated"] * (case != "pyproject-selector")))
        document = assert_outcome(fmt, outcome, exit_code=exit_code, error=error)
        if fmt == "json" and case == "architecture":  # a machine format keeps the data exact
            assert any(EVIL in text for text in _strings(document))
        if fmt == "full" or (fmt == "concise" and exit_code == 2):  # shown escaped, not dropped
            assert "\\x1b]0;pwned\\x07" in outcome.stdout + outcome.stderr
    assert tree(tmp_path) == before  # nothing written but the (absent) report


def test_github_summary_and_annotations_stay_inside_their_lines(tmp_path, monkeypatch):
    clean_output_env(monkeypatch)
    args, _, _ = _layer_types(tmp_path)
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    outcome = run_cli(*args, "--isolated", "--output-format", "github")
    assert_outcome("github", outcome, exit_code=1)
    annotations = [line for line in outcome.stdout.splitlines() if line.startswith("::")]
    assert annotations and all(line.startswith("::error title=gdr-check (GDR107),file=") for line in annotations)
    assert "%0A::add-mask::secret%0D%0A::stop-commands::tok%0A#\\x23[add-mask]x|\\x85\\x9b" in annotations[0]
    text = summary.read_text(encoding="utf-8")
    assert "\x1b" not in text and "\u202e" not in text and "\\x1b]0;pwned" in text
    rows = [line for line in text.splitlines() if line.startswith("| error | GDR107")]
    assert rows and all(line.count(" | ") == 3 and line.endswith(" |") for line in rows)  # the pipe escaped


def test_escaping_rules():
    from gdr_check.cli.escape import dump_json, neutralise_log, text
    from gdr_check.cli.formats.github import escape_data, escape_property

    assert text("a\x1b[2Jb\u202ec\nd\udce9") == "a\\x1b[2Jb\\u202ec\\nd\\xe9"
    assert neutralise_log("ok\n  ::add-mask::x\nz ##[group]") == "ok\n  \\x3a:add-mask::x\nz #\\x23[group]"
    assert escape_data("50%\n::x\x1b") == "50%25%0A::x\\x1b"
    assert escape_property("a:b,c") == "a%3Ab%2Cc"
    assert json.loads(dump_json({"p\udcff": "##[x"})) == {"p\\xff": "##[x"}


def test_show_settings_escapes_target_names(tmp_path, monkeypatch):
    clean_output_env(monkeypatch)
    monkeypatch.chdir(tmp_path)
    args, _, _ = _directory_name(tmp_path)
    outcome = run_cli(*args, "--isolated", "--show-settings")
    assert_outcome("full", outcome, exit_code=0)
    assert "\\x1b]0;pwned\\x07" in outcome.stdout and "\\n::add-mask::secret" in outcome.stdout
