"""The check command: exit codes 0/1/2 in every format, many targets, pre-commit file names, the TP matrix,
--output-file and the environment variables."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from cli_checkpoints import clean_output_env, run_cli, write_bad, write_good
from gdr_check.cli.output import FORMATS
from gdr_check.cli.targets import group_targets

TESTS = Path(__file__).resolve().parent
SARIF_SCHEMA = json.loads((TESTS / "schemas" / "sarif-schema-2.1.0.json").read_text())
GITLAB_SCHEMA = json.loads((TESTS / "schemas" / "gitlab-code-quality.json").read_text())
REPORT_SCHEMA = json.loads((resources.files("gdr_check") / "schema" / "report-v1.json").read_text(encoding="utf-8"))


@pytest.fixture
def repo(tmp_path: Path, monkeypatch) -> Path:
    clean_output_env(monkeypatch)
    write_good(tmp_path / "good")
    write_bad(tmp_path / "bad")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text('{"architectures": ')
    monkeypatch.chdir(tmp_path)
    return tmp_path


def assert_parseable(fmt: str, stdout: str, *, fatal: bool) -> None:
    """Whatever happened, stdout is a valid document of the format (empty only for the human formats)."""
    if fmt == "json":
        jsonschema.Draft202012Validator(REPORT_SCHEMA).validate(json.loads(stdout))
    elif fmt == "json-lines":
        records = [json.loads(line) for line in stdout.splitlines()]
        record_schema = {**REPORT_SCHEMA, "anyOf": [{"$ref": "#/$defs/record"}]}
        for record in records:
            jsonschema.Draft202012Validator(record_schema).validate(record)
        assert not fatal or any("error" in record for record in records)
    elif fmt == "sarif":
        document = json.loads(stdout)
        jsonschema.Draft4Validator(SARIF_SCHEMA).validate(document)
        invocation = document["runs"][0]["invocations"][0]
        assert invocation["executionSuccessful"] is (not fatal)
        assert not fatal or invocation["toolExecutionNotifications"]
    elif fmt == "junit":
        root = ET.fromstring(stdout)
        assert root.tag == "testsuites"
        assert not fatal or int(root.get("errors")) >= 1
    elif fmt == "github":
        assert all(line.startswith("::") or re.search(r": (error|warning|info)\[GDR", line)
                   for line in stdout.splitlines())
        assert not fatal or any(line.startswith("::error ") for line in stdout.splitlines())
    elif fmt == "gitlab":
        issues = json.loads(stdout)
        jsonschema.Draft202012Validator(GITLAB_SCHEMA).validate(issues)
        assert len({issue["fingerprint"] for issue in issues}) == len(issues)
        assert not fatal or any(issue["severity"] == "critical" for issue in issues)
    else:
        assert fmt in ("full", "concise"), f"no parse check for {fmt}"


# -- exit codes in every format -------------------------------------------------------------------------------
CASES = {
    # name: (arguments, exit code)
    "clean": (["good"], 0),
    "errors": (["bad"], 1),
    "errors-exit-zero": (["bad", "--exit-zero"], 0),
    "warning": (["good", "--state-dtype", "bfloat16"], 0),
    "warning-error-on-warning": (["good", "--state-dtype", "bfloat16", "--error-on-warning"], 1),
    # `good` is bf16: sglang 0.5.23 rounds beta to bf16 (GDR253, a warning); without it only info notes are left
    "beta-rounding-error-on-warning": (["good", "--error-on-warning"], 1),
    "beta-rounding-fp32-engine": (["good", "--engine", "vllm@0.29", "--error-on-warning", "--ignore", "GDR249"], 0),
    "info-only-error-on-warning": (["good", "--error-on-warning", "--ignore", "GDR253"], 0),
    "errors-ignored": (["bad", "--ignore", "GDR111"], 0),
    "unreadable": (["broken"], 2),
    "unreadable-exit-zero": (["broken", "--exit-zero"], 2),
    "missing-path": (["no-such-dir"], 2),
    "unknown-select": (["good", "--select", "GDR999"], 2),
    "bad-option-value": (["good", "--tp", "two"], 2),
    "unknown-option": (["good", "--frobnicate"], 2),
    "bad-engine": (["good", "--engine", "trtllm"], 2),
    "bad-state-dtype": (["good", "--state-dtype", "int8"], 2),
}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_exit_codes_in_every_format(repo: Path, fmt: str, case: str):
    arguments, expected = CASES[case]
    result = run_cli(*arguments, "--isolated", "--output-format", fmt)
    assert result.exit_code == expected, (result.stdout, result.stderr)
    if expected == 2:
        error_lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
        assert error_lines, result.stderr
        assert "Traceback" not in result.stderr
    assert_parseable(fmt, result.stdout, fatal=expected == 2)


@pytest.mark.parametrize("fmt", FORMATS)
def test_exit_code_2_record_goes_to_the_output_file(repo: Path, fmt: str):
    target = repo / "out" / f"report.{fmt}"
    target.parent.mkdir()
    result = run_cli("good", "--select", "GDR999", "--isolated", "--output-format", fmt, "-o", str(target))
    assert result.exit_code == 2 and result.stdout == ""
    if fmt not in ("full", "concise"):
        assert_parseable(fmt, target.read_text(), fatal=True)


def test_environment_variables_choose_format_and_file(repo: Path, monkeypatch):
    monkeypatch.setenv("GDR_CHECK_OUTPUT_FORMAT", "json-lines")
    monkeypatch.setenv("GDR_CHECK_OUTPUT_FILE", str(repo / "report.jsonl"))
    result = run_cli("bad", "--isolated")
    assert result.exit_code == 1 and result.stdout == ""
    assert json.loads((repo / "report.jsonl").read_text().splitlines()[0])["code"] == "GDR111"
    # an exit-2 run honours them too, although the options were never parsed
    assert run_cli("good", "--tp", "x").exit_code == 2
    assert "error" in json.loads((repo / "report.jsonl").read_text())
    # the command line beats the environment
    assert run_cli("bad", "--isolated", "--output-format", "concise", "-o", "c.txt").exit_code == 1
    assert (repo / "c.txt").read_text().startswith("bad/config.json:12:3: error[GDR111] ")


def test_machine_formats_never_wrap(repo: Path):
    for fmt in ("github", "concise", "json-lines"):
        lines = run_cli("bad", "--isolated", "--output-format", fmt).stdout.splitlines()
        assert any(len(line) > 120 for line in lines)  # long lines stay whole


# -- many targets ---------------------------------------------------------------------------------------------
def test_many_targets_one_exit_code(repo: Path):
    assert run_cli("good", "--isolated").exit_code == 0
    assert run_cli("good", "bad", "--isolated").exit_code == 1
    assert run_cli("bad", "good", "broken", "--isolated").exit_code == 2
    both = json.loads(run_cli("good", "bad", "--isolated", "--output-format", "json").stdout)
    assert [r["source"]["target"] for r in both["results"]] == ["good", "bad"]


def test_unreadable_target_is_one_stderr_line_and_the_others_still_report(repo: Path):
    result = run_cli("broken", "bad", "--isolated")
    assert result.exit_code == 2
    assert [line for line in result.stderr.splitlines() if line.startswith("error:")] == [
        next(line for line in result.stderr.splitlines() if "broken/config.json" in line)]
    assert "error[GDR111]" in result.stdout and "1 could not be read" in result.stdout


def test_a_full_report_file_names_the_targets_that_could_not_be_read(repo: Path):
    # Their stderr lines do not reach a report file: it ends with the same lines (and a report of an unreadable
    # target alone is those lines, not an empty file over the last run's report). On stdout they are not repeated.
    (repo / "report.txt").write_text("the last run's report\n")
    result = run_cli("broken", "bad", "--isolated", "-o", "report.txt")
    assert result.exit_code == 2 and result.stdout == ""
    stderr_errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    report = (repo / "report.txt").read_text().splitlines()
    assert "error[GDR111]" in "\n".join(report) and report[-2].startswith("summary: ")
    assert report[-1:] == stderr_errors and len(stderr_errors) == 1 and "broken/config.json" in stderr_errors[0]
    for quiet in ([], ["-q"]):
        alone = run_cli("broken", "--isolated", "-o", "report.txt", *quiet)
        assert alone.exit_code == 2
        assert (repo / "report.txt").read_text() == stderr_errors[0] + "\n"
    assert "error:" not in run_cli("broken", "--isolated").stdout


def test_pre_commit_file_names_are_grouped_into_checkpoints(repo: Path):
    names = ["bad/config.json", "bad/model-00001-of-00002.safetensors", "bad/model-00002-of-00002.safetensors",
             "bad/model.safetensors.index.json", "good/model.safetensors", "good/config.json", "./good"]
    assert group_targets(names) == ["bad", "good"]
    result = run_cli(*names, "--isolated", "--output-format", "json")
    document = json.loads(result.stdout)
    assert [r["source"]["target"] for r in document["results"]] == ["bad", "good"]
    assert document["results"][0]["source"]["kind"] == "sharded"  # the whole checkpoint, not one shard
    assert result.exit_code == 1


def test_grouping_keeps_directories_repo_ids_and_other_files(repo: Path):
    (repo / "notes.json").write_text("{}")
    assert group_targets(["Qwen/Qwen3-Next-80B-A3B-Instruct", "good/", "notes.json", "config.json"]) == [
        "Qwen/Qwen3-Next-80B-A3B-Instruct", "good", "notes.json", "config.json"]  # no ./config.json here


# -- deployment matrix ----------------------------------------------------------------------------------------
def test_matrix_table_in_full(repo: Path):
    result = run_cli("good", "--tp", "1,2,3,4", "--isolated")
    assert result.exit_code == 1  # tp=3 and tp=4 do not split H=2
    out = result.stdout
    assert out.count("deployment matrix") == 1 and "tp=1, 2, 3, 4" in out
    table = out[out.index("deployment matrix"):].splitlines()
    rows = [line.split() for line in table[3:7]]
    assert [(row[0], row[2]) for row in rows] == [("1", "pass"), ("2", "pass"), ("3", "fail"), ("4", "fail")]
    assert [row[8] for row in rows[:2]] == ["4", "2"]  # value heads per rank
    assert "passes at tp=1, 2" in out
    assert "kernel call per rank" not in out  # one table per matrix, not one per TP size


def test_matrix_in_machine_formats_has_every_result(repo: Path):
    document = json.loads(run_cli("good", "bad", "--tp", "1,2", "--isolated", "--output-format", "json").stdout)
    assert [(r["source"]["target"], r["deployment"]["tp"]) for r in document["results"]] == [
        ("good", 1), ("good", 2), ("bad", 1), ("bad", 2)]
    sarif = json.loads(run_cli("good", "bad", "--tp", "1,2", "--isolated", "--output-format", "sarif",
                               "--show-info").stdout)  # `good` has info notes only
    assert {(r["properties"]["target"], r["properties"]["tp"]) for r in sarif["runs"][0]["results"]} == {
        ("good", 1), ("good", 2), ("bad", 1), ("bad", 2)}


def test_matrix_from_the_config(repo: Path):
    (repo / "pyproject.toml").write_text('[tool.gdr-check]\ntp = [1, 2, 3]\n')
    lines = run_cli("good", "--output-format", "json-lines").stdout.splitlines()
    assert sorted({json.loads(line)["tp"] for line in lines}) == [1, 2, 3]


def test_builtin_matrix(repo: Path):
    result = run_cli("Qwen/Qwen3-Next-80B-A3B-Instruct", "--tp", "1,2,4,8,3", "--isolated")
    assert result.exit_code == 1
    assert "passes at tp=1, 2, 4, 8" in result.stdout


# -- integration files ----------------------------------------------------------------------------------------
def _hook_files_pattern() -> str:
    text = (TESTS.parent / ".pre-commit-hooks.yaml").read_text()
    line = next(line for line in text.splitlines() if line.strip().startswith("files:"))
    return line.split(":", 1)[1].strip().strip("'")


@pytest.mark.parametrize("name,matches", [
    ("config.json", True), ("models/qwen/config.json", True), ("model.safetensors", True),
    ("ckpt/model-00001-of-00041.safetensors", True), ("ckpt/model.safetensors.index.json", True),
    ("ckpt/tokenizer_config.json", False), ("ckpt/generation_config.json", False),
    ("ckpt/pytorch_model.bin", False), ("notes/config.json.bak", False), ("a.safetensors.tmp", False),
])
def test_pre_commit_hook_file_pattern(name: str, matches: bool):
    import re

    assert bool(re.search(_hook_files_pattern(), name)) is matches


def test_pre_commit_hook_and_action_run_the_check_command():
    hook = (TESTS.parent / ".pre-commit-hooks.yaml").read_text()
    assert "entry: gdr-check check" in hook and "require_serial: true" in hook and "language: python" in hook
    yaml = pytest.importorskip("yaml")  # pre-commit's dependency, in the dev extra
    action = yaml.safe_load((TESTS.parent / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    scripts = [step["run"] for step in action["runs"]["steps"] if "run" in step]
    assert any("-m gdr_check check" in script for script in scripts)
    # inputs reach the scripts through the environment, never as `${{ }}` inside `run:`
    # (scripts/ci/action_replay.py runs the steps)
    assert not any("${{" in script for script in scripts)
