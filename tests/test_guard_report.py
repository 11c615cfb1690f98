"""`gdr-check call REPORT.json` on a served worker's guard report (the engine plugins' GDR_CHECK_REPORT): the
findings it holds, the worker it came from, and one line for a report that does not hold what the plugins
write. The report here is written by hand in the plugins' format; tests/test_plugins.py reads one a (stand-in)
vLLM worker wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gdr_check.base.report import Diagnostic
from gdr_check.cli.main import main

FINDING = {"code": "GDR242", "name": "duplicate-slot-indices", "severity": "error",
           "message": "slot 2 is used by rows 2, 3 of one batch", "fixes": ["give row 3 its own slot"],
           "notes": ["in layer 4"], "wrapper": False, "location": None, "bindings": {}, "summary": ""}
REPORT = {"schema_version": 1, "tool": {"name": "gdr-check", "version": "0.1.0"}, "command": "guard",
          "source": {"engine": "sglang@0.5.23", "model": "Qwen/Qwen3-Next-80B-A3B-Instruct", "tp": 4, "rank": 2,
                     "pid": 123},
          "guard": {"mode": "record", "compared_with_model": True, "state_dtype": None, "calls": 1440,
                    "functions": [], "unlisted_faults": 0, "dropped_diagnostics": 0},
          "diagnostics": [FINDING], "summary": {"error": 1, "warning": 0, "info": 0}}


def _write(tmp_path: Path, document: object) -> Path:
    path = tmp_path / "report-2.json"
    path.write_text(json.dumps(document))
    return path


def test_the_report_reads_as_its_findings(tmp_path, capsys):
    path = _write(tmp_path, REPORT)
    assert main(["call", str(path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == [
        f"{path}: guard report, 1440 call(s) checked in the worker",
        "  note  guard report of a served worker: sglang@0.5.23, TP rank 2 of 4, model "
        "Qwen/Qwen3-Next-80B-A3B-Instruct",
        "  note  the guard ran in record mode"]
    assert "error[GDR242]: slot 2 is used by rows 2, 3 of one batch" in out
    assert out[-1] == "summary: 1440 call(s) checked: 1 error(s), 0 warning(s), 0 note(s)"


def test_the_json_document_of_a_report(tmp_path, capsys):
    schema = json.loads((Path(__file__).resolve().parents[1] / "src/gdr_check/schema/report-v1.json").read_text())
    path = _write(tmp_path, REPORT)
    assert main(["call", str(path), "--output-format", "json"]) == 1
    document = json.loads(capsys.readouterr().out)
    pytest.importorskip("jsonschema").validate(document, schema)
    assert document["command"] == "call" and document["exit_code"] == 1
    assert [Diagnostic(**{k: v for k, v in d.items() if k != "url"}).code for d in document["diagnostics"]] == [
        "GDR242"]


def test_rule_selection_applies(tmp_path, capsys):
    assert main(["call", str(_write(tmp_path, REPORT)), "--ignore", "GDR242"]) == 0


@pytest.mark.parametrize(("change", "message"), [
    ({"diagnostics": {}}, "guard report: `diagnostics` must be a list"),
    ({"schema_version": 2}, "guard report schema_version 2 is not supported; this gdr-check reads version 1"),
    ({"diagnostics": [{**FINDING, "code": "E1"}]}, "guard report: `diagnostics[0].code` must be a rule code such as "
                                                   "GDR241"),
    ({"diagnostics": [{**FINDING, "severity": "fatal"}]}, "guard report: `diagnostics[0].severity` must be one of "
                                                          "error, warning, info"),
    ({"diagnostics": [{**FINDING, "notes": "in layer 4"}]}, "guard report: `diagnostics[0].notes` must be a list of "
                                                            "strings"),
    ({"diagnostics": [FINDING] * 4097}, "guard report: `diagnostics` holds 4097 entries; a guard report holds at "
                                        "most 4096"),
])
def test_a_report_that_is_not_what_the_plugins_write_is_one_line(change, message, tmp_path, capsys):
    path = _write(tmp_path, {**REPORT, **change})
    assert main(["call", str(path)]) == 2
    assert capsys.readouterr().err == f"error: {path}: {message}\n"


def test_control_characters_in_a_report_are_not_echoed(tmp_path, capsys):
    path = _write(tmp_path, {**REPORT, "diagnostics": [{**FINDING, "message": "slot \x1b[2J2"}]})
    assert main(["call", str(path), "--output-format", "concise"]) == 1
    assert "\x1b" not in capsys.readouterr().out


@pytest.mark.parametrize("option", [["--model", "Qwen/Qwen3-Next-80B-A3B-Instruct"], ["--index", "0"]])
def test_options_for_recordings_are_refused_with_a_report(option, tmp_path, capsys):
    path = _write(tmp_path, REPORT)
    assert main(["call", str(path), *option]) == 2
    assert capsys.readouterr().err == (
        f"error: {path}: a guard report holds the guard's findings, not calls: {option[0]} applies to a recording "
        "(GDR_CHECK_CAPTURE, `gdr_check.capture`)\n")
