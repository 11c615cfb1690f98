"""`call` and `dry-run` through the real CLI in every output format: one `Run` rendered by the same pipeline as
`check`, every machine format valid (SARIF 2.1.0, report-v1.json, JUnit XML, GitLab code quality), selection and
exit codes as `check` has them."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import replace
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

import gdr_check.pipeline.dryrun.driver as runner_api
from cli_checkpoints import clean_output_env, run_cli
from gdr_check.cli.output import FORMATS
from test_call_command import QWEN, B, T, expected_call, write_recording
from test_dryrun import KERNEL_EXTRA, qwen3_next_config, qwen_tensors, write_checkpoint

TESTS = Path(__file__).parent
SARIF_SCHEMA = json.loads((TESTS / "schemas" / "sarif-schema-2.1.0.json").read_text())
GITLAB_SCHEMA = json.loads((TESTS / "schemas" / "gitlab-code-quality.json").read_text())
REPORT_SCHEMA = json.loads((resources.files("gdr_check") / "schema" / "report-v1.json").read_text(encoding="utf-8"))
GATES_MESSAGE = "`a`/`b` sharded by a different TP than the pool (gates fit tp=4, pool fits tp=2)"


def codes_in(fmt: str, text: str) -> list[str]:
    """The rule codes a report in `fmt` names, each format read its own way after validating it."""
    if fmt == "json":
        document = json.loads(text)
        jsonschema.Draft202012Validator(REPORT_SCHEMA).validate(document)
        return [d["code"] for d in document["diagnostics"]]
    if fmt == "json-lines":
        records = [json.loads(line) for line in text.splitlines()]
        record_schema = {**REPORT_SCHEMA, "anyOf": [{"$ref": "#/$defs/record"}]}
        for record in records:
            jsonschema.Draft202012Validator(record_schema).validate(record)
        return [r["code"] for r in records]
    if fmt == "sarif":
        document = json.loads(text)
        jsonschema.Draft4Validator(SARIF_SCHEMA).validate(document)
        return [r["ruleId"] for r in document["runs"][0]["results"]]
    if fmt == "junit":
        root = ET.fromstring(text)
        return [case.get("name").split(".")[1].split(" ")[0] for case in root.iter("testcase")
                if case.find("failure") is not None]
    if fmt == "gitlab":
        issues = json.loads(text)
        jsonschema.Draft202012Validator(GITLAB_SCHEMA).validate(issues)
        return [issue["check_name"] for issue in issues]
    if fmt == "github":
        return [line.split("(")[1].split(")")[0] for line in text.splitlines() if line.startswith("::")]
    return [code for code in ("GDR161", "GDR253", "GDR321") if f"[{code}]" in text]  # full, concise


# -- call ------------------------------------------------------------------------------------------------------------
@pytest.fixture
def gates_recording(tmp_path: Path, monkeypatch) -> str:
    """A call sized for tp=2 but with the gates of tp=4: GDR161 against the model at tp=4 (an error)."""
    clean_output_env(monkeypatch)
    monkeypatch.chdir(tmp_path)
    call = replace(expected_call(tp=2), a=T((B, 8)), b=T((B, 8)))
    return write_recording(tmp_path / "rec.json", call)


@pytest.mark.parametrize("fmt", FORMATS)
def test_call_in_every_format(gates_recording: str, fmt: str, tmp_path: Path):
    report = tmp_path / f"report.{fmt}"
    outcome = run_cli("call", gates_recording, "--model", QWEN, "--tp", "4", "--output-format", fmt,
                      "-o", str(report))
    assert outcome.exit_code == 1, outcome.stderr
    assert outcome.stdout == ""  # the report went to -o
    text = report.read_text()
    assert "GDR161" in codes_in(fmt, text)
    if fmt == "full":  # the call sections stay in the human report
        # GDR253: bf16 beta
        assert "call #0" in text and "summary: 1 call(s) checked: 3 error(s), 1 warning(s), 0 note(s)" in text
    if fmt == "concise":  # at the call's `a` in the recording (line 5, one call per line)
        assert f"{gates_recording}:5:196: error[GDR161] {GATES_MESSAGE}" in text
    if fmt == "json":
        document = json.loads(text)
        assert document["command"] == "call" and document["source"] == gates_recording
        assert document["calls"][0]["diagnostics"] == document["diagnostics"]
        assert document["model"]["target"] == QWEN and document["exit_code"] == 1


def test_call_selection_and_exit_codes(gates_recording: str):
    ignored = run_cli("call", gates_recording, "--model", QWEN, "--tp", "4", "--output-format", "json",
                      "--ignore", "GDR161")
    document = json.loads(ignored.stdout)
    assert "GDR161" not in [d["code"] for d in document["diagnostics"]]
    assert ignored.exit_code == (1 if any(d["severity"] == "error" for d in document["diagnostics"]) else 0)
    only_note = run_cli("call", gates_recording, "--model", QWEN, "--tp", "4", "--output-format", "json",
                        "--select", "GDR253")
    assert only_note.exit_code == 0  # the errors are not selected: the beta-rounding note alone is left
    assert [d["code"] for d in json.loads(only_note.stdout)["diagnostics"]] == ["GDR253"]
    assert run_cli("call", gates_recording, "--model", QWEN, "--tp", "4", "--exit-zero").exit_code == 0
    bad = run_cli("call", gates_recording, "--select", "GDR9999")
    assert bad.exit_code == 2 and bad.stderr.startswith("error: --select: ")


def test_call_selection_from_pyproject(gates_recording: str, tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text('[tool.gdr-check]\nignore = ["GDR161"]\nexit-zero = true\n')
    outcome = run_cli("call", gates_recording, "--model", QWEN, "--tp", "4", "--output-format", "concise")
    assert "GDR161" not in outcome.stdout and outcome.exit_code == 0
    isolated = run_cli("call", gates_recording, "--model", QWEN, "--tp", "4", "--output-format", "concise",
                       "--isolated")
    assert "error[GDR161]" in isolated.stdout and isolated.exit_code == 1


def test_a_warning_fails_the_call_with_error_on_warning(tmp_path: Path, monkeypatch):
    clean_output_env(monkeypatch)
    call = replace(expected_call(tp=4), initial_state=T((B + 1, 8, 128, 128), "bfloat16"))
    path = write_recording(tmp_path / "rec.json", call)
    plain = run_cli("call", path, "--model", QWEN, "--tp", "4", "--output-format", "json")
    severities = {d["severity"] for d in json.loads(plain.stdout)["diagnostics"]}
    assert plain.exit_code == 0 and severities == {"warning"}  # GDR249 (bf16 state) and GDR253 (bf16 beta)
    assert run_cli("call", path, "--model", QWEN, "--tp", "4", "--error-on-warning").exit_code == 1


# -- dry-run ---------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gdn_checkpoint(tmp_path_factory) -> Path:
    config = qwen3_next_config(layers=4, H=2, HV=4, K=16, V=16)
    return write_checkpoint(tmp_path_factory.mktemp("run_formats") / "gdn", config, qwen_tensors(config))


@pytest.fixture(scope="module")
def child_outcome(gdn_checkpoint: Path):
    """One real dry-run child (the Triton interpreter on CPU, B=1, one step), replayed for every format below:
    the CLI, the library and the renderers run each time; only the seconds of the child are shared."""
    if not KERNEL_EXTRA:
        pytest.skip("the kernel extra (torch, triton) is not installed")
    outcomes = []
    real = runner_api.run_child

    def recording(plan, **options):
        outcomes.append(real(plan, **options))
        return outcomes[-1]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runner_api, "run_child", recording)
        first = run_cli("dry-run", str(gdn_checkpoint), "--batch", "1", "--steps", "1", "--device", "cpu",
                        "--isolated", "--output-format", "json")
    assert first.exit_code == 0, first.stderr
    assert json.loads(first.stdout)["passed"] is True
    return outcomes[0]


@pytest.mark.parametrize("fmt", FORMATS)
def test_dry_run_in_every_format(gdn_checkpoint: Path, child_outcome, fmt: str, monkeypatch):
    clean_output_env(monkeypatch)
    monkeypatch.chdir(gdn_checkpoint.parent)  # as CI runs from the repository root: relative paths in reports
    monkeypatch.setattr(runner_api, "run_child", lambda plan, **options: child_outcome)
    args = ["dry-run", gdn_checkpoint.name, "--batch", "1", "--steps", "1", "--device", "cpu", "--isolated",
            "--output-format", fmt]
    outcome = run_cli(*args)
    assert outcome.exit_code == 0, outcome.stderr
    codes = codes_in(fmt, outcome.stdout)
    # GDR321 (bf16 run as fp16 in the interpreter) and GDR253 (sglang 0.5.23 rounds the bf16 beta) are warnings:
    # alerts and failed test cases in every format
    assert {"GDR321", "GDR253"} <= set(codes) or fmt in ("sarif", "github", "gitlab") and codes == []
    if fmt == "full":  # the step table and the verdict stay in the human report
        assert "steps: errors relative to the largest float64 reference value" in outcome.stdout
        assert "dry-run passed: 1 step(s) verified" in outcome.stdout
    if fmt == "json":
        document = json.loads(outcome.stdout)
        assert document["command"] == "dry-run" and document["launched"] is True and len(document["steps"]) == 1
    assert run_cli(*args, "--error-on-warning").exit_code == 1
    assert run_cli(*args, "--error-on-warning", "--ignore", "GDR321").exit_code == 1  # GDR253 is left
    assert run_cli(*args, "--error-on-warning", "--ignore", "GDR321,GDR253").exit_code == 0


def test_dry_run_that_cannot_launch_fails_in_every_format(tmp_path: Path, monkeypatch):
    """A deployment with errors is refused before any child runs: exit 1 whatever the format, and with
    `--exit-zero` 0; an unreadable checkpoint is exit 2 and the format's error record."""
    clean_output_env(monkeypatch)
    monkeypatch.chdir(tmp_path)
    config = qwen3_next_config(layers=4, H=2, HV=4, K=16, V=16)
    checkpoint = write_checkpoint(tmp_path / "gdn", config, qwen_tensors(config))
    for fmt in FORMATS:
        refused = run_cli("dry-run", str(checkpoint), "--tp", "3", "--isolated", "--output-format", fmt)
        assert refused.exit_code == 1, (fmt, refused.stderr)
        assert codes_in(fmt, refused.stdout) or fmt in ("full", "concise")
        assert run_cli("dry-run", str(checkpoint), "--tp", "3", "--isolated", "--exit-zero",
                       "--output-format", fmt).exit_code == 0
    missing = run_cli("dry-run", str(tmp_path / "missing"), "--output-format", "json")
    assert missing.exit_code == 2 and missing.stderr.count("\n") == 1
    document = json.loads(missing.stdout)
    jsonschema.Draft202012Validator(REPORT_SCHEMA).validate(document)
    assert document["error"]["code"].startswith("GDR0")


KIMI = "moonshotai/Kimi-Linear-48B-A3B-Instruct"


@pytest.mark.parametrize("ranks", [(), ("--ranks", "all", "--tp", "2")], ids=["one-rank", "ranks-all"])
@pytest.mark.parametrize("case", ["kimi-engine-vllm", "kimi-backend-vllm", "llama"])
def test_dry_run_with_nothing_to_run_says_why_in_every_format(tmp_path: Path, monkeypatch, case: str,
                                                             ranks: tuple[str, ...]):
    """Exit 1 with nothing run is GDR314, an error every format shows (it was an exit 1 with "0 error(s)"), and
    `--exit-zero` makes it 0 as for any error. `--backend vllm` is GDR314 whether or not vLLM is installed."""
    clean_output_env(monkeypatch)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "no-cache"))  # the built-in description, not a cached copy
    monkeypatch.chdir(tmp_path)
    if case == "llama":
        (tmp_path / "llama").mkdir()
        (tmp_path / "llama" / "config.json").write_text(json.dumps({
            "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
            "num_hidden_layers": 2, "num_attention_heads": 4}))
        args = ["llama"]
        message = "nothing to dry-run: `LlamaForCausalLM` has no GDN or KDA layers"
    else:
        args = [KIMI, "--engine" if case == "kimi-engine-vllm" else "--backend", "vllm"]
        message = ("nothing to dry-run: under vLLM 0.33 the decode step calls its own "
                   "`fused_recurrent_kda_packed_decode` (another argument list), not the contract's packed decode "
                   "kernel")
    args += ["--device", "cpu", "--isolated", *ranks]
    for fmt in FORMATS:
        outcome = run_cli("dry-run", *args, "--output-format", fmt)
        assert outcome.exit_code == 1, (fmt, outcome.stderr)
        if fmt in ("full", "concise"):
            assert "error[GDR314]" in outcome.stdout and message in " ".join(outcome.stdout.split()), outcome.stdout
            assert "1 error(s)" in outcome.stdout + outcome.stderr
        else:
            codes = codes_in(fmt, outcome.stdout)  # json: validated against report-v1.json, `--ranks all`'s too
            assert codes == ["GDR314"], (fmt, outcome.stdout)
            assert message in outcome.stdout.replace("\\`", "`"), (fmt, outcome.stdout)
        if fmt == "json":
            document = json.loads(outcome.stdout)
            assert document["refused_because"] == ["GDR314"] and document["passed"] is False
            assert [d["message"] for d in document["diagnostics"]] == [message]
        assert run_cli("dry-run", *args, "--exit-zero", "--output-format", fmt).exit_code == 0
