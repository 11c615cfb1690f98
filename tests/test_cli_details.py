"""The command-line details users of ruff expect: info notes kept out of alert formats, `-oFILE`,
`--statistics`, `-q`/`-s`, `--list-models` in JSON, absolute versioned rule URLs, the GitLab code-quality format
and the progress bar on a terminal's stderr."""

from __future__ import annotations

import io
import json
import sys
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from cli_checkpoints import clean_output_env, run_cli, write_bad, write_good
from gdr_check import __version__
from gdr_check.base.report import LIMITS_DOCS_URL, PROJECT_URL, RULE_DOCS_URL
from gdr_check.cli import progress

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
REPORT_SCHEMA = json.loads((resources.files("gdr_check") / "schema" / "report-v1.json").read_text(encoding="utf-8"))
GITLAB_SCHEMA = json.loads((TESTS / "schemas" / "gitlab-code-quality.json").read_text())
# `ckpt` at tp 2 and 3: GDR111 twice, GDR131 (info) and GDR249 (warning) at tp 2, GDR121 at tp 3. GDR253 (the
# bf16 beta rounding, a warning under sglang 0.5.23) is ignored: these tests are about errors, one warning and
# one info note.
ARGS = ("ckpt", "--tp", "2,3", "--state-dtype", "bfloat16", "--ignore", "GDR122,GDR123,GDR253", "--isolated")


@pytest.fixture
def repo(tmp_path: Path, monkeypatch) -> Path:
    clean_output_env(monkeypatch)
    monkeypatch.delenv("CI_PROJECT_DIR", raising=False)
    write_bad(tmp_path / "ckpt")
    write_good(tmp_path / "good")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text('{"architectures": ')
    monkeypatch.chdir(tmp_path)
    return tmp_path


def schema_def(name: str) -> dict:
    return {**REPORT_SCHEMA, "anyOf": [{"$ref": f"#/$defs/{name}"}]}


# -- info notes are no alerts ---------------------------------------------------------------------------------
def test_info_notes_are_no_alerts_unless_show_info(repo: Path):
    def codes(fmt: str, *extra: str) -> list[str]:
        result = run_cli(*ARGS, "--output-format", fmt, *extra)
        assert result.exit_code == 1
        if fmt == "sarif":
            return [r["ruleId"] for r in json.loads(result.stdout)["runs"][0]["results"]]
        if fmt == "gitlab":
            return [issue["check_name"] for issue in json.loads(result.stdout)]
        return [line.split("(", 1)[1].split(")", 1)[0] for line in result.stdout.splitlines() if line.startswith("::")]

    assert codes("sarif") == ["GDR111", "GDR249", "GDR111", "GDR121"]
    assert codes("sarif", "--show-info") == ["GDR111", "GDR131", "GDR249", "GDR111", "GDR121"]
    assert codes("gitlab") == ["GDR111", "GDR249", "GDR111", "GDR121"]
    assert codes("gitlab", "--show-info") == ["GDR111", "GDR131", "GDR249", "GDR111", "GDR121"]
    assert codes("github") == ["GDR111", "GDR249", "GDR121"]  # one annotation per finding, whatever the TP size
    assert codes("github", "--show-info") == ["GDR111", "GDR131", "GDR249", "GDR121"]
    shown = json.loads(run_cli(*ARGS, "--output-format", "sarif", "--show-info").stdout)["runs"][0]
    assert shown["results"][1]["level"] == "note"
    assert "GDR131" in {rule["id"] for rule in shown["tool"]["driver"]["rules"]}


def test_summary_still_counts_the_notes(repo: Path):
    result = run_cli(*ARGS, "--output-format", "github")
    assert result.stderr == "summary: 2 checked: 3 error(s), 1 warning(s), 1 note(s)\n"
    assert "ckpt/config.json:1:1: info[GDR131] " in result.stdout  # the log lists it, as no annotation


def test_notes_stay_out_of_alerts_when_a_checkpoint_has_nothing_else(repo: Path):
    # `good` under sglang 0.5.23 has the GDR253 warning (bf16 beta rounding) and the GDR131 note: without the
    # warning, nothing is left for the alert formats
    result = run_cli("good", "--isolated", "--output-format", "sarif", "--ignore", "GDR253")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["runs"][0]["results"] == []
    assert json.loads(run_cli("good", "--isolated", "--output-format", "gitlab", "--ignore", "GDR253").stdout) == []
    warned = json.loads(run_cli("good", "--isolated", "--output-format", "sarif").stdout)["runs"][0]["results"]
    assert [(r["ruleId"], r["level"]) for r in warned] == [("GDR253", "warning")]


# -- -oFILE ---------------------------------------------------------------------------------------------------
def test_attached_short_option_value_is_the_output_file(repo: Path):
    written = []
    for spelling in (["-oa.jsonl"], ["-o", "b.jsonl"], ["--output-file=c.jsonl"], ["--output-file", "d.jsonl"]):
        result = run_cli(*ARGS, "--output-format", "json-lines", *spelling)
        assert result.exit_code == 1 and result.stdout == ""
    for name in ("a", "b", "c", "d"):
        written.append((repo / f"{name}.jsonl").read_text())
    assert len(set(written)) == 1 and written[0].count("\n") == 5


def test_attached_short_option_value_takes_the_exit_2_record_too(repo: Path):
    # an unknown rule stops the run before the options are parsed: the record still goes to the file
    (repo / "out").mkdir()
    result = run_cli("good", "--isolated", "--output-format", "json", "--select", "GDR999", "-oout/r.json")
    assert result.exit_code == 2 and result.stdout == ""
    assert json.loads((repo / "out" / "r.json").read_text())["error"]["code"] == "usage"


# -- --statistics, -q, -s -------------------------------------------------------------------------------------
def test_statistics_text(repo: Path):
    result = run_cli(*ARGS, "--statistics")
    assert result.exit_code == 1  # the exit code does not change
    assert result.stdout == (
        "2  GDR111  error    config-weight-mismatches      the config and the weights disagree\n"
        "1  GDR121  error    tp-not-dividing-linear-heads  the TP size does not divide the linear-attention heads\n"
        "1  GDR131  info     linear-state-footprints       linear-attention state per request\n"
        "1  GDR249  warning  low-precision-states          the recurrent state is kept in 16-bit precision\n")
    assert result.stderr == ""


def test_statistics_json(repo: Path):
    result = run_cli(*ARGS, "--statistics", "--output-format", "json")
    rows = json.loads(result.stdout)
    jsonschema.Draft202012Validator(schema_def("statistics")).validate(rows)
    assert [(row["code"], row["count"]) for row in rows] == [("GDR111", 2), ("GDR121", 1), ("GDR131", 1),
                                                             ("GDR249", 1)]
    assert rows[0] == {"code": "GDR111", "name": "config-weight-mismatches", "severity": "error",
                       "summary": "the config and the weights disagree", "count": 2}


def test_statistics_of_a_clean_run_is_empty(repo: Path):
    clean = ("good", "--isolated", "--select", "GDR1", "--ignore", "GDR131", "--statistics")
    assert run_cli(*clean).stdout == ""
    assert run_cli(*clean, "--output-format", "json").stdout == "[]\n"


def test_quiet_prints_the_diagnostics_only(repo: Path):
    concise = run_cli(*ARGS, "--output-format", "concise")
    quiet = run_cli(*ARGS, "--output-format", "concise", "-q")
    assert (quiet.exit_code, quiet.stdout, quiet.stderr) == (1, concise.stdout, "")
    full = run_cli(*ARGS, "--quiet")
    assert full.exit_code == 1 and full.stderr == ""
    headings = [line for line in full.stdout.splitlines() if line and not line.startswith((" ", "help:"))]
    mismatch = "config says 16 channels per value head but `model.layers.5.linear_attn.norm.weight` holds 32"
    assert headings == [
        f"error[GDR111]: {mismatch} [tp=2]",
        "info[GDR131]: each request holds 8.25 KiB of linear-attention state per rank: 6 layers x (384 B conv + "
        "1 KiB SSM) [tp=2]",
        "warning[GDR249]: `initial_state` is bfloat16: the state is rounded to bfloat16 at every step [tp=2]",
        f"error[GDR111]: {mismatch} [tp=3]",
        "error[GDR121]: tp=3 does not divide `linear_num_key_heads`=2; TP sizes that work: 1, 2 [tp=3]",
    ]
    # without a header, a diagnostic about a kernel argument says which checkpoint it is about
    assert "  --> ckpt/config.json:1:1, kernel argument `initial_state`" in full.stdout.splitlines()
    assert "summary:" not in full.stdout and "deployment matrix" not in full.stdout
    assert run_cli("good", "--isolated", "-q", "--select", "GDR1", "--ignore", "GDR131").stdout == ""


def test_quiet_keeps_the_error_lines(repo: Path):
    result = run_cli("broken", "good", "--isolated", "-q", "--output-format", "concise")
    assert result.exit_code == 2
    assert [line.split(":")[0] for line in result.stderr.splitlines()] == ["error"]


def test_silent_prints_nothing_but_errors(repo: Path):
    for fmt in ("full", "concise", "github", "json", "sarif", "gitlab"):
        result = run_cli(*ARGS, "--output-format", fmt, "--silent")
        assert (result.exit_code, result.stdout, result.stderr) == (1, "", ""), fmt
    assert run_cli("good", "--isolated", "-s").exit_code == 0
    broken = run_cli("broken", "--isolated", "-s")
    assert broken.exit_code == 2 and broken.stdout == ""
    assert broken.stderr.startswith("error: broken/config.json: invalid JSON at line 1, column 19")
    # a report file asked for is still written
    written = run_cli(*ARGS, "--output-format", "json", "-s", "-o", "r.json")
    assert (written.exit_code, written.stdout, written.stderr) == (1, "", "")
    assert len(json.loads((repo / "r.json").read_text())["results"]) == 2


# -- --list-models --------------------------------------------------------------------------------------------
def test_list_models_json(repo: Path):
    from gdr_check.models import list_builtin

    result = run_cli("--list-models", "--output-format", "json")
    assert result.exit_code == 0
    document = json.loads(result.stdout)
    jsonschema.Draft202012Validator(schema_def("modelList")).validate(document)
    assert [m["repo_id"] for m in document["models"]] == [m.repo_id for m in list_builtin()]
    assert set(document["confidence_levels"]) == {"V", "S", "U"}
    thinking = next(m for m in document["models"] if m["repo_id"] == "Qwen/Qwen3-Next-80B-A3B-Thinking")
    assert (thinking["confidence"], thinking["unverified"], thinking["notes"]) == (
        "U", ["all fields"], ["assumed identical to the Instruct model"])
    instruct = document["models"][0]
    assert instruct["model_type"] == "qwen3_next" and instruct["config"]["linear_num_value_heads"] == 32


def test_list_models_text_explains_the_confidence_tags(repo: Path):
    result = run_cli("--list-models")
    lines = result.stdout.splitlines()
    assert lines[1:5] == [
        "The tag after each model is the weakest source among its values:",
        "  V  verified: every value read from a released config.json or safetensors header",
        "  S  secondary: some values from a single secondary source (a model card, a paper)",
        "  U  unverified: some values assumed (e.g. from a sibling model); check the real config.json",
    ]
    assert lines[6].split() == ["Qwen/Qwen3-Next-80B-A3B-Instruct", "Qwen3NextForCausalLM", "V"]
    kimi = next(line for line in lines if line.startswith("moonshotai/Kimi-Linear-48B-A3B-Base"))
    assert kimi.split()[2:] == ["S", "not", "verified:", "num_attention_heads", "(S),", "model_max_length", "(S)"]


def test_list_models_refuses_a_target_it_would_not_check(repo: Path):
    result = run_cli("good", "--list-models")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == ("error: Invalid value for --list-models: it lists the built-in models and checks nothing, "
                             "so it takes no target (got 'good')\n")


@pytest.mark.parametrize("mode", ["--list-models", "--statistics"])
def test_a_listing_refuses_a_format_it_cannot_write(repo: Path, monkeypatch, mode: str):
    # They write a text table or JSON: asked for SARIF or JUnit, a usage error (in that format), never the text
    # table in a file named for it. A format from pyproject.toml is the report's: there they write the table.
    targets = [] if mode == "--list-models" else list(ARGS)
    result = run_cli(*targets, mode, "--output-format", "sarif", "-o", "listing.sarif")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (f"error: Invalid value for --output-format: {mode} writes full, concise, github or json, "
                             "not 'sarif'\n")
    usage = json.loads((repo / "listing.sarif").read_text())["runs"][0]["invocations"][0]
    assert usage["toolExecutionNotifications"][0]["descriptor"]["id"] == "usage"
    monkeypatch.setenv("GDR_CHECK_OUTPUT_FORMAT", "junit")
    assert run_cli(*targets, mode).stderr == (f"error: Invalid value for GDR_CHECK_OUTPUT_FORMAT: {mode} writes full, "
                                              "concise, github or json, not 'junit'\n")
    monkeypatch.delenv("GDR_CHECK_OUTPUT_FORMAT")
    table = run_cli(*targets, mode).stdout
    assert table != "" and all(run_cli(*targets, mode, "--output-format", fmt).stdout == table
                               for fmt in ("concise", "github"))  # (github: the GitHub Action's default)


def test_list_models_to_a_file(repo: Path):
    result = run_cli("--list-models", "--output-format", "json", "-o", "models.json")
    assert result.exit_code == 0 and result.stdout == ""
    assert json.loads((repo / "models.json").read_text())["models"]


# -- rule URLs ------------------------------------------------------------------------------------------------
def test_rule_urls_are_absolute_and_versioned(repo: Path):
    expected = f"https://github.com/gdr-check/gdr-check/blob/v{__version__}/docs/rules/GDR111.md"
    document = json.loads(run_cli("ckpt", "--isolated", "--output-format", "json").stdout)
    jsonschema.Draft202012Validator(REPORT_SCHEMA).validate(document)
    assert document["diagnostics"][0]["url"] == expected
    sarif = json.loads(run_cli(*ARGS, "--output-format", "sarif").stdout)
    rules = sarif["runs"][0]["tool"]["driver"]["rules"]
    assert {rule["id"]: rule["helpUri"] for rule in rules}["GDR111"] == expected
    assert all(rule["helpUri"] == f"{RULE_DOCS_URL}/{rule['id']}.md" for rule in rules)


def test_every_rule_url_names_a_page_of_the_rules_reference():
    from gdr_check.base.report import rule_url
    from gdr_check.checks import RULES

    for rule in RULES.values():
        page = rule_url(rule.code).split(f"/blob/v{__version__}/", 1)[1]
        assert (ROOT / page).is_file(), page


def test_the_project_home_is_one_constant():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["urls"]["Homepage"] == PROJECT_URL
    assert project["version"] == __version__  # the URL's version is the released one
    assert PROJECT_URL in (ROOT / "README.md").read_text()
    assert RULE_DOCS_URL == f"{PROJECT_URL}/blob/v{__version__}/docs/rules"


# -- gitlab ---------------------------------------------------------------------------------------------------
def gitlab(*args: str) -> list[dict]:
    result = run_cli(*args, "--output-format", "gitlab")
    issues = json.loads(result.stdout)
    jsonschema.Draft202012Validator(GITLAB_SCHEMA).validate(issues)
    return issues


def test_gitlab_issue_fields(repo: Path):
    issues = gitlab(*ARGS)
    assert issues[0] == {
        "check_name": "GDR111",
        "description": "GDR111: config says 16 channels per value head but `model.layers.5.linear_attn.norm.weight` "
                       "holds 32 [tp=2]",
        "severity": "major",
        "fingerprint": issues[0]["fingerprint"],
        "location": {"path": "ckpt/config.json",
                     "positions": {"begin": {"line": 12, "column": 3}, "end": {"line": 12, "column": 30}}},
    }
    assert [issue["severity"] for issue in issues] == ["major", "minor", "major", "major"]
    assert len({issue["fingerprint"] for issue in issues}) == len(issues)


def test_gitlab_fingerprints_are_stable_across_runs_checkouts_and_line_moves(tmp_path: Path, monkeypatch):
    clean_output_env(monkeypatch)
    monkeypatch.delenv("CI_PROJECT_DIR", raising=False)
    found = []
    for name in ("checkout-a", "checkout-b"):
        write_bad(tmp_path / name / "ckpt")
        monkeypatch.chdir(tmp_path / name)
        found.append([issue["fingerprint"] for issue in gitlab(*ARGS)])
        assert found[-1] == [issue["fingerprint"] for issue in gitlab(*ARGS)]  # the same run twice
    assert found[0] == found[1]
    config = tmp_path / "checkout-b" / "ckpt" / "config.json"
    config.write_text("\n\n" + json.dumps(json.loads(config.read_text()), indent=4) + "\n")
    moved = gitlab(*ARGS)
    assert moved[0]["location"]["positions"]["begin"]["line"] != 12
    assert [issue["fingerprint"] for issue in moved] == found[0]


def test_gitlab_paths_are_relative_to_the_project(repo: Path, monkeypatch):
    absolute = gitlab(str(repo / "ckpt"), "--isolated")
    assert absolute[0]["location"]["path"] == "ckpt/config.json"
    monkeypatch.setenv("CI_PROJECT_DIR", str(repo.parent))
    assert gitlab(str(repo / "ckpt"), "--isolated")[0]["location"]["path"] == f"{repo.name}/ckpt/config.json"


def test_gitlab_unreadable_target_is_a_critical_issue(repo: Path):
    issues = gitlab("broken", "ckpt", "--isolated")
    broken = next(issue for issue in issues if issue["check_name"] == "GDR020")
    assert broken["severity"] == "critical"
    assert broken["location"]["path"] == "broken/config.json"


# -- progress -------------------------------------------------------------------------------------------------
class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("targets,stream,quiet,expected", [
    (3, Terminal(), False, True),
    (1, Terminal(), False, False),  # one target: too quick for a bar
    (3, io.StringIO(), False, False),  # a pipe or a file: CI logs, pre-commit
    (3, Terminal(), True, False),  # --quiet and --silent
])
def test_progress_only_for_many_targets_on_a_terminal(monkeypatch, targets, stream, quiet, expected):
    monkeypatch.delenv("TERM", raising=False)
    assert progress.wanted(targets, stream, quiet=quiet) is expected


def test_progress_not_on_a_dumb_terminal(monkeypatch):
    monkeypatch.setenv("TERM", "dumb")
    assert not progress.wanted(3, Terminal())


def test_progress_draws_on_a_terminal_and_names_the_target(monkeypatch):
    monkeypatch.delenv("TERM", raising=False)
    stream = Terminal()
    with progress.target_progress(2, stream=stream) as step:
        step(0, "models/a")
        step(1, "models/\x1b[31mb")
    drawn = stream.getvalue()
    assert "checking" in drawn and "2/2" in drawn
    assert drawn.endswith("\x1b[2K")  # transient: the bar is erased at the end
    assert "\x1b[31m" not in drawn  # a control character in a name is not sent to the terminal
    assert "models/?[31mb" in drawn


def test_no_progress_when_stderr_is_not_a_terminal(repo: Path):
    result = run_cli("good", "ckpt", "--isolated", "--output-format", "concise")
    # GDR253 (bf16 beta rounding under sglang 0.5.23) is a warning for each checkpoint
    assert result.stderr == "summary: 2 checked: 1 error(s), 2 warning(s), 2 note(s)\n"


def test_the_ci_guide_documents_every_format_and_the_gitlab_job():
    from gdr_check.cli.formats import FORMATS

    text = (ROOT / "docs" / "ci.md").read_text()
    assert all(f"| `{fmt}`" in text for fmt in FORMATS), FORMATS
    assert "reports:\n      codequality: gl-code-quality-report.json" in text
    assert "--output-format gitlab -o gl-code-quality-report.json" in text


def test_silent_wins_over_statistics(repo: Path):
    result = run_cli(*ARGS, "--statistics", "-s")
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", "")
    written = run_cli(*ARGS, "--statistics", "-s", "-o", "stats.txt")
    assert written.stdout == "" and (repo / "stats.txt").read_text().startswith("2  GDR111  error ")


def test_progress_through_the_cli_goes_to_a_terminal_stderr_only(repo: Path, monkeypatch):
    from contextlib import redirect_stderr, redirect_stdout

    from gdr_check.cli.main import main

    monkeypatch.delenv("TERM", raising=False)
    for extra, drawn in (((), True), (("-q",), False)):
        out, err = io.StringIO(), Terminal()
        with redirect_stdout(out), redirect_stderr(err):
            assert main(["good", "ckpt", "--isolated", "--output-format", "json", *extra]) == 1
        assert len(json.loads(out.getvalue())["results"]) == 2  # stdout holds the document alone
        assert ("checking" in err.getvalue() and "2/2" in err.getvalue()) is drawn


@pytest.mark.parametrize("args", [
    ("good", "--isolated"),  # the report
    ("good", "--isolated", "--output-format", "sarif", "--tp", "x"),  # the record of a bad option
    ("--list-models", "--output-format", "json"),
])
def test_unwritable_output_file_is_one_line_and_exit_2(repo: Path, args):
    (repo / "taken").write_text("a file, not a directory")
    result = run_cli(*args, "-o", "taken/report.txt")
    assert result.exit_code == 2 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[-1] == "error: cannot write `taken/report.txt`: `taken` is not a directory"
    assert len(lines) == (2 if "--tp" in args else 1)  # the bad option's own line first


def test_the_header_shows_a_dimension_the_config_garbles_as_unknown(tmp_path, monkeypatch):
    from checkpoint_builders import qwen3_next_config

    clean_output_env(monkeypatch)
    config = qwen3_next_config()
    config["linear_num_value_heads"] = "32"  # a string: GDR108 names it, the header must not print None
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps(config))
    monkeypatch.chdir(tmp_path)
    run = run_cli("m", "--isolated")
    heads = next(line for line in run.stdout.splitlines() if line.strip().startswith("heads"))
    assert heads.split(None, 1)[1] == "H=2 HV=? K=16 V=16 conv=4"
    assert "None" not in run.stdout and "GDR108" in run.stdout


# -- numbers on the command line: one wording for every command ---------------------------------------------------
@pytest.mark.parametrize("args, line", [
    (("good", "--batch", "1e9"), "Invalid value for --batch: expected a whole number, got '1e9'"),
    (("good", "--speculative-tokens", "x"), "Invalid value for --speculative-tokens: expected a whole number, got 'x'"),
    (("good", "--tp", "1_6"), "Invalid value for --tp: expected a whole number or a comma-separated list of them, got "
                              "'1_6'"),
    (("good", "--tp", "\u0664"), "Invalid value for --tp: expected a whole number or a comma-separated list of them, "
                                  "got '\u0664'"),  # an Arabic-Indic four, which int() takes
    (("good", "--tp", "+4"), "Invalid value for --tp: expected a whole number or a comma-separated list of them, got "
                             "'+4'"),
    (("good", "--tp", "0"), f"tp is 0: must be in 1..4_096 (tensor-parallel size); see {LIMITS_DOCS_URL}"),
    (("explain", "GDR212", "--tp", "0"), f"tp is 0: must be in 1..4_096 (tensor-parallel size); see {LIMITS_DOCS_URL}"),
    (("explain", "GDR212", "--tp", "99999"),
     f"tp is 99999: must be in 1..4_096 (tensor-parallel size); see {LIMITS_DOCS_URL}"),
    (("explain", "GDR212", "--tp", "1.5"), "Invalid value for --tp: expected a whole number, got '1.5'"),
    (("explain", "GDR212", "--batch", "-1"), f"batch is -1: must be in 0..2**20 (decode batch); see {LIMITS_DOCS_URL}"),
    (("call", "rec.json", "--tp", "0"), f"tp is 0: must be in 1..4_096 (tensor-parallel size); see {LIMITS_DOCS_URL}"),
    (("call", "rec.json", "--index", "x"), "Invalid value for --index: expected a whole number, got 'x'"),
    (("dry-run", "good", "--tp", "0"), f"tp is 0: must be in 1..4_096 (tensor-parallel size); see {LIMITS_DOCS_URL}"),
    (("dry-run", "good", "--steps", "x"), "Invalid value for --steps: expected a whole number, got 'x'"),
    (("dry-run", "good", "--timeout", "soon"), "Invalid value for --timeout: expected a number, got 'soon'"),
    (("dry-run", "good", "--seed", "-5"),
     f"seed is -5: must be in 0..9_223_372_036_854_775_807 (random seed); see {LIMITS_DOCS_URL}"),
], ids=lambda value: " ".join(value) if isinstance(value, tuple) else "")
def test_a_bad_number_is_one_line_in_the_words_of_every_other_usage_error(repo: Path, args, line):
    """Every command, every typer version: typer's own conversion words its refusals as pydantic (typer 0.29) or
    click (older typer) does, and takes "1_6", "+4" and other scripts' digits."""
    result = run_cli(*args)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr.splitlines()[-1] == f"error: {line}"


def test_the_header_counts_one_slot_in_the_singular(repo: Path):
    result = run_cli("good", "--batch", "0", "--isolated")  # an empty batch: the pool is the reserved row alone
    assert ", batch=0, 1 slot (slot 0 reserved), " in result.stdout
    # a Qwen3-Next checkpoint: sglang counts 3 + 2 slots per request (`auto` -> extra_buffer): 8 x 5 + 1 rows
    assert ", batch=8, 41 slots (slot 0 reserved), " in run_cli("good", "--isolated").stdout


@pytest.mark.parametrize("command", [[], ["dry-run"], ["call"]])
def test_a_bad_format_from_the_environment_names_the_variable(command, monkeypatch, tmp_path):
    clean_output_env(monkeypatch)
    listed = "expected one of: full, concise, json, json-lines, sarif, github, junit, gitlab"
    monkeypatch.setenv("GDR_CHECK_OUTPUT_FORMAT", "xml")
    run = run_cli(*command, str(tmp_path))
    assert (run.exit_code, run.stderr) == (
        2, f"error: Invalid value for GDR_CHECK_OUTPUT_FORMAT: unknown format 'xml'; {listed}\n")
    run = run_cli(*command, str(tmp_path), "--output-format", "xml")  # the command line's own value: the option
    assert (run.exit_code, run.stderr) == (2, f"error: Invalid value for --output-format: unknown format 'xml'; "
                                              f"{listed}\n")
