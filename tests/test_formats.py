"""Every output format on the same diagnostics: golden files for the text formats, schema validation for
SARIF (the pinned OASIS 2.1.0 schema) and for our json / json-lines documents (src/gdr_check/schema/report-v1.json).

The golden run checks `ckpt` (the `bad` checkpoint) at tp 2 and 3 with a bfloat16 state pool, reporting:
GDR111 (config/weights mismatch at a config.json line), GDR121 (a TP error), GDR249 (a kernel-argument
warning) and GDR131 (an info note); GDR253 (the bf16 beta rounding, a warning under sglang 0.5.23) is ignored
so that the run has one warning and one note. Regenerate with GDR_CHECK_UPDATE_GOLDEN=1 after an intended change.
"""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from cli_checkpoints import clean_output_env, run_cli, write_bad, write_good
from gdr_check.cli.formats.github import escape_data, escape_property, workflow_command

TESTS = Path(__file__).resolve().parent
GOLDEN = TESTS / "golden"
SARIF_SCHEMA = json.loads((TESTS / "schemas" / "sarif-schema-2.1.0.json").read_text())
REPORT_SCHEMA = json.loads((resources.files("gdr_check") / "schema" / "report-v1.json").read_text(encoding="utf-8"))
GOLDEN_ARGS = ("ckpt", "--tp", "2,3", "--state-dtype", "bfloat16", "--ignore", "GDR122,GDR123,GDR253",
               "--isolated")
TEXT_FORMATS = {"full": "txt", "concise": "txt", "github": "txt", "json-lines": "jsonl", "junit": "xml",
                "gitlab": "json"}


@pytest.fixture
def repo(tmp_path: Path, monkeypatch) -> Path:
    clean_output_env(monkeypatch)
    write_bad(tmp_path / "ckpt")
    write_good(tmp_path / "good")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def compare_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("GDR_CHECK_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"missing golden file {path}: run with GDR_CHECK_UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), f"{name} differs from the golden file"


@pytest.mark.parametrize("fmt", sorted(TEXT_FORMATS))
def test_golden_text_formats(repo: Path, fmt: str):
    result = run_cli(*GOLDEN_ARGS, "--output-format", fmt)
    assert result.exit_code == 1, result.stderr
    compare_golden(f"matrix.{fmt}.{TEXT_FORMATS[fmt]}", result.stdout)
    assert str(repo) not in result.stdout  # no absolute paths


def test_golden_github_step_summary(repo: Path, monkeypatch):
    summary = repo / "summary.md"
    summary.write_text("previous step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert run_cli(*GOLDEN_ARGS, "--output-format", "github").exit_code == 1
    text = summary.read_text()
    assert text.startswith("previous step\n")  # appended, never replaced
    compare_golden("matrix.github-summary.md", text.removeprefix("previous step\n"))


def test_concise_summary_goes_to_stderr(repo: Path):
    result = run_cli(*GOLDEN_ARGS, "--output-format", "concise")
    assert "summary:" not in result.stdout
    assert result.stderr.strip().splitlines()[-1] == "summary: 2 checked: 3 error(s), 1 warning(s), 1 note(s)"
    for line in result.stdout.splitlines():
        path, line_no, column, rest = line.split(":", 3)
        assert path == "ckpt/config.json" and int(line_no) >= 1 and int(column) >= 1
        assert re.match(r" (error|warning|info)\[GDR[0-9]{3}\] ", rest), line


# -- github ---------------------------------------------------------------------------------------------------
def test_github_escaping_follows_the_actions_toolkit():
    assert escape_data("100% done\r\nnext") == "100%25 done%0D%0Anext"
    assert escape_data("%0A") == "%250A"  # `%` first, so an escape in the text is not decoded
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    assert escape_data("a:b,c") == "a:b,c"  # the message keeps `:` and `,`
    line = workflow_command("error", "two\nlines", {"title": "gdr-check (GDR001)", "file": "dir,x/a:b.json"})
    assert line == "::error title=gdr-check (GDR001),file=dir%2Cx/a%3Ab.json::two%0Alines"


def test_github_annotations_are_deduplicated_and_one_line_each(repo: Path):
    result = run_cli(*GOLDEN_ARGS, "--output-format", "github")
    commands = [line for line in result.stdout.splitlines() if line.startswith("::")]
    assert len(commands) == len(set(commands))
    # GDR111 fires at tp=2 and tp=3 at the same config line: one annotation.
    assert sum("(GDR111)" in line for line in commands) == 1
    levels = {line.split(" ", 1)[0] for line in commands}
    assert levels == {"::error", "::warning"}  # the info note (GDR131) is no annotation without --show-info
    gdr111 = next(line for line in commands if "(GDR111)" in line)
    assert gdr111.startswith("::error title=gdr-check (GDR111),file=ckpt/config.json,line=12,col=3,endLine=12,")
    # the concise report follows for the log (GitHub shows only 10 annotations per step)
    log = result.stdout.split("\n::")[-1]
    assert "ckpt/config.json:12:3: error[GDR111] " in log
    assert "ckpt/config.json:1:1: info[GDR131] " in log  # the log still lists the note


# -- junit ----------------------------------------------------------------------------------------------------
def test_junit_structure(repo: Path):
    root = ET.fromstring(run_cli(*GOLDEN_ARGS, "--output-format", "junit").stdout)
    assert root.tag == "testsuites" and root.get("name") == "gdr-check"
    cases = root.findall("./testsuite/testcase")
    assert int(root.get("tests")) == len(cases) == 5
    failures = [case for case in cases if case.find("failure") is not None]
    assert int(root.get("failures")) == len(failures) == 4  # three errors and one warning; the info passes
    assert {case.get("name") for case in cases} >= {"gdr-check.GDR111 [tp=2]", "gdr-check.GDR131 [tp=2]"}
    assert [suite.get("name") for suite in root.findall("testsuite")] == ["ckpt/config.json"]


def test_junit_clean_checkpoint_is_one_passing_case(repo: Path):
    root = ET.fromstring(run_cli("good", "--isolated", "--select", "GDR1", "--ignore", "GDR131",
                                 "--output-format", "junit").stdout)
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("1", "0", "0")
    assert root.find("./testsuite").get("name") == "good/config.json"


# -- sarif ----------------------------------------------------------------------------------------------------
def validate_sarif(document: dict) -> None:
    jsonschema.Draft4Validator(SARIF_SCHEMA).validate(document)
    # What GitHub code scanning requires beyond the schema (no empty required strings either).
    assert document["$schema"] and document["version"] == "2.1.0"
    for run in document["runs"]:
        driver = run["tool"]["driver"]
        assert driver["name"] == "gdr-check" and driver["version"]
        rule_ids = [rule["id"] for rule in driver["rules"]]
        for rule in driver["rules"]:
            assert rule["id"] and rule["name"]
            assert 0 < len(rule["shortDescription"]["text"]) <= 1024
            assert 0 < len(rule["fullDescription"]["text"]) <= 1024
            assert rule["help"]["text"] and rule["help"]["markdown"]
            assert rule["defaultConfiguration"]["level"] in ("note", "warning", "error")
        for result in run["results"]:
            assert result["message"]["text"]
            assert result["ruleId"] in rule_ids
            assert rule_ids[result["ruleIndex"]] == result["ruleId"]
            assert 1 <= len(result["locations"]) <= 10
            physical = result["locations"][0]["physicalLocation"]
            uri = physical["artifactLocation"]["uri"]
            assert uri and not uri.startswith(("/", "file:")), uri  # relative to the repository root
            assert physical["region"]["startLine"] >= 1
            assert result["partialFingerprints"]["primaryLocationLineHash"]


def sarif_of(*args: str) -> dict:
    result = run_cli(*args, "--output-format", "sarif")
    document = json.loads(result.stdout)
    validate_sarif(document)
    return document


def test_sarif_is_valid_and_complete(repo: Path):
    document = sarif_of(*GOLDEN_ARGS)
    run = document["runs"][0]
    results = run["results"]
    # the info note GDR131 is no result (it would stay an open alert forever) unless --show-info
    assert [r["ruleId"] for r in results] == ["GDR111", "GDR249", "GDR111", "GDR121"]
    assert [r["level"] for r in results] == ["error", "warning", "error", "error"]
    rules = run["tool"]["driver"]["rules"]
    assert {rule["id"] for rule in rules} == {"GDR111", "GDR121", "GDR249"}
    assert [rule["id"] for rule in rules] == sorted(rule["id"] for rule in rules)
    assert all(results[i]["ruleIndex"] == [rule["id"] for rule in rules].index(results[i]["ruleId"])
               for i in range(len(results)))
    mismatch = results[0]
    region = mismatch["locations"][0]["physicalLocation"]["region"]
    assert mismatch["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "ckpt/config.json"
    assert (region["startLine"], region["startColumn"], region["endLine"]) == (12, 3, 12)
    assert "model-00002-of-00002.safetensors" in mismatch["message"]["text"]  # the shard, in words
    argument = results[1]["locations"][0]
    assert argument["physicalLocation"]["artifactLocation"]["uri"] == "ckpt/config.json"
    assert argument["logicalLocations"] == [{"name": "initial_state", "kind": "parameter"}]
    assert run["invocations"] == [{"executionSuccessful": True, "exitCode": 1}]


def fingerprints(document: dict) -> list[str]:
    return [r["partialFingerprints"]["primaryLocationLineHash"] for r in document["runs"][0]["results"]]


def test_sarif_fingerprints_are_stable_across_checkouts_and_line_moves(tmp_path: Path, monkeypatch):
    clean_output_env(monkeypatch)
    found = []
    for name in ("checkout-a", "checkout-b"):
        root = tmp_path / name
        write_bad(root / "ckpt")
        monkeypatch.chdir(root)
        found.append(fingerprints(sarif_of(*GOLDEN_ARGS)))
    assert found[0] == found[1]
    assert len(set(found[0])) == len(found[0])  # every result its own identity (GDR111 at two TP sizes)
    # Reformatting config.json moves every line: the fingerprints stay.
    config = tmp_path / "checkout-b" / "ckpt" / "config.json"
    config.write_text("\n\n" + json.dumps(json.loads(config.read_text()), indent=4) + "\n")
    moved = sarif_of(*GOLDEN_ARGS)
    assert moved["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] != 12
    assert fingerprints(moved) == found[0]


def test_sarif_builtin_model_without_files(repo: Path):
    document = sarif_of("Qwen/Qwen3-Next-80B-A3B-Instruct", "--tp", "3", "--isolated")
    results = document["runs"][0]["results"]
    assert results and all(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                           == "Qwen/Qwen3-Next-80B-A3B-Instruct" for r in results)


def test_sarif_unreadable_target_has_a_notification(repo: Path):
    (repo / "broken").mkdir()
    (repo / "broken" / "config.json").write_text("{not json")
    result = run_cli("good", "broken", "--isolated", "--output-format", "sarif")
    assert result.exit_code == 2
    document = json.loads(result.stdout)
    validate_sarif(document)
    invocation = document["runs"][0]["invocations"][0]
    assert invocation["executionSuccessful"] is False and invocation["exitCode"] == 2
    notification = invocation["toolExecutionNotifications"][0]
    assert notification["level"] == "error" and notification["descriptor"]["id"] == "GDR020"
    assert "broken/config.json" in notification["message"]["text"]


# -- json and json-lines --------------------------------------------------------------------------------------
def validate_report(document: dict) -> None:
    jsonschema.Draft202012Validator(REPORT_SCHEMA).validate(document)


def validate_record(record: dict) -> None:
    jsonschema.Draft202012Validator({**REPORT_SCHEMA, "anyOf": [{"$ref": "#/$defs/record"}]}).validate(record)


def test_report_schema_is_a_valid_schema():
    jsonschema.Draft202012Validator.check_schema(REPORT_SCHEMA)


def test_json_single_and_matrix_documents_match_the_schema(repo: Path):
    single = json.loads(run_cli("ckpt", "--isolated", "--output-format", "json").stdout)
    validate_report(single)
    assert single["deployment"]["tp"] == 1 and "results" not in single
    matrix = json.loads(run_cli(*GOLDEN_ARGS, "--output-format", "json").stdout)
    validate_report(matrix)
    assert [(r["source"]["target"], r["deployment"]["tp"]) for r in matrix["results"]] == [("ckpt", 2), ("ckpt", 3)]
    assert [d["code"] for d in matrix["results"][1]["diagnostics"]] == ["GDR111", "GDR121"]


def test_json_lines_records_match_the_schema(repo: Path):
    lines = run_cli(*GOLDEN_ARGS, "--output-format", "json-lines").stdout.splitlines()
    records = [json.loads(line) for line in lines]
    for record in records:
        validate_record(record)
    assert [(r["target"], r["tp"], r["code"]) for r in records] == [
        ("ckpt", 2, "GDR111"), ("ckpt", 2, "GDR131"), ("ckpt", 2, "GDR249"), ("ckpt", 3, "GDR111"),
        ("ckpt", 3, "GDR121")]
    single = json.loads(run_cli("ckpt", "--isolated", "--output-format", "json").stdout)
    # the same fields as the json document's diagnostics, plus schema_version, target and tp
    assert {k: v for k, v in records[0].items() if k not in ("schema_version", "target", "tp")} == {
        **single["diagnostics"][0], "bindings": records[0]["bindings"]}


def test_unreadable_target_in_json_formats(repo: Path):
    result = run_cli("good", "missing-dir", "--isolated", "--output-format", "json")
    document = json.loads(result.stdout)
    validate_report(document)
    broken = document["results"][-1]
    assert broken["error"]["code"] == "GDR001" and broken["diagnostics"][0]["code"] == "GDR001"
    lines = run_cli("good", "missing-dir", "--isolated", "--output-format", "json-lines").stdout.splitlines()
    last = json.loads(lines[-1])
    validate_record(last)
    assert last["target"] == "missing-dir" and last["error"]["code"] == "GDR001" and last["code"] == "GDR001"
