"""Rule selection (select / extend-select / ignore, ruff's layering) and `[tool.gdr-check]` discovery."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_checkpoints import clean_output_env, run_cli, write_good
from gdr_check.cli.formats import FORMATS
from gdr_check.pipeline.pyproject_config import ConfigError, discover, find_config_file, load_config
from gdr_check.pipeline.selection import (
    RuleSelection,
    Selection,
    SelectorError,
    known_rules,
    parse_selector,
    rule_selection,
    split_selectors,
)

RULES = known_rules()


def selected(*layers: RuleSelection, codes=("GDR111", "GDR121", "GDR213", "GDR249", "GDR253")) -> list[str]:
    return Selection(tuple(layers)).codes(codes)


def layer(select=None, extend=None, ignore=None) -> RuleSelection:
    return rule_selection(select, extend, ignore, rules=RULES)


# -- selectors ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,prefix,specificity", [
    ("ALL", "", 0), ("all", "", 0), ("GDR", "GDR", 3), ("GDR2", "GDR2", 4), ("GDR21", "GDR21", 5),
    ("GDR213", "GDR213", 6), ("gdr213", "GDR213", 6), ("state-pool-strided-last-dim", "GDR213", 6),
    ("GDR3", "GDR3", 4),  # a category: valid even before its rules exist
])
def test_selector_forms(text: str, prefix: str, specificity: int):
    selector = parse_selector(text, RULES)
    assert (selector.prefix, selector.specificity) == (prefix, specificity)


@pytest.mark.parametrize("text,expected", [
    ("GDR999", "`GDR999` selects no rule"),
    ("GDR9", "`GDR9` selects no rule"),
    ("E501", "unknown rule selector `E501`"),
    ("state-pool-not-4", "did you mean `state-pool-not-4d`?"),
])
def test_unknown_selectors_are_errors_with_a_hint(text: str, expected: str):
    with pytest.raises(SelectorError) as caught:
        parse_selector(text, RULES)
    assert expected in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("text,hint", [
    # a code close in spelling would select something else entirely (GDR9 was offered GDR409)
    ("GDR9", " (the categories are GDR0 to GDR5; use a code like GDR213"),
    ("GDR29", "; did you mean `GDR2`? (use a code"),
    ("GDR299", "; did you mean `GDR2`? (use a code"),
])
def test_a_prefix_that_selects_nothing_is_pointed_at_a_shorter_one_or_the_categories(text: str, hint: str):
    from gdr_check.pipeline.selection import known_rules

    with pytest.raises(SelectorError) as caught:
        parse_selector(text, known_rules())
    assert str(caught.value).startswith(f"`{text}` selects no rule{hint}")


def test_comma_separated_and_repeated_values():
    assert split_selectors(["GDR1,GDR2", " GDR3 ", "", "GDR213,"]) == ["GDR1", "GDR2", "GDR3", "GDR213"]


# -- precedence -----------------------------------------------------------------------------------------------
def test_default_is_every_rule():
    assert selected() == ["GDR111", "GDR121", "GDR213", "GDR249", "GDR253"]


def test_select_replaces_the_default():
    assert selected(layer(select=["GDR2"])) == ["GDR213", "GDR249", "GDR253"]


def test_more_specific_selector_wins_within_a_layer():
    assert selected(layer(select=["GDR2"], ignore=["GDR25"])) == ["GDR213", "GDR249"]
    assert selected(layer(ignore=["GDR2"], extend=["GDR213"])) == ["GDR111", "GDR121", "GDR213"]
    assert selected(layer(select=["ALL"], ignore=["GDR"])) == []  # GDR is more specific than ALL


def test_ignore_wins_at_equal_specificity():
    assert selected(layer(select=["GDR2"], ignore=["GDR2"])) == []
    assert selected(layer(select=["GDR249"], ignore=["low-precision-states"])) == []


def test_command_line_select_replaces_the_config_selection():
    config = layer(select=["GDR1"], ignore=["GDR121"])
    assert selected(config) == ["GDR111"]
    assert selected(config, layer(select=["GDR2"])) == ["GDR213", "GDR249", "GDR253"]


def test_extend_select_and_ignore_adjust_the_layers_below():
    config = layer(select=["GDR1"], ignore=["GDR121"])
    assert selected(config, layer(extend=["GDR249"])) == ["GDR111", "GDR249"]
    assert selected(config, layer(extend=["GDR121"])) == ["GDR111", "GDR121"]  # a later layer re-enables
    assert selected(config, layer(ignore=["GDR111"])) == []


def test_unregistered_codes_follow_their_prefix():
    assert Selection((layer(select=["GDR3"]),)).is_selected("GDR399")
    assert not Selection((layer(ignore=["GDR3"]),)).is_selected("GDR399")


# -- pyproject.toml -------------------------------------------------------------------------------------------
def write_pyproject(directory: Path, body: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "pyproject.toml"
    path.write_text(body)
    return path


def test_discovery_walks_up_from_the_checked_path(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    project = write_pyproject(tmp_path / "project", '[tool.gdr-check]\nselect = ["GDR1"]\n')
    write_pyproject(tmp_path / "project" / "models", '[project]\nname = "models"\n')  # no table: skipped
    checkpoint = tmp_path / "project" / "models" / "a"
    checkpoint.mkdir(parents=True)
    assert find_config_file(checkpoint) == project
    assert discover([str(checkpoint)]) == project
    assert discover(["Qwen/Qwen3-Next-80B-A3B-Instruct"], cwd=tmp_path / "project") == project  # then the cwd
    assert discover(["Qwen/Qwen3-Next-80B-A3B-Instruct"], cwd=tmp_path) is None


def test_first_target_with_a_config_wins(tmp_path: Path):
    first = write_pyproject(tmp_path / "one", "[tool.gdr-check]\n")
    write_pyproject(tmp_path / "two", "[tool.gdr-check]\n")
    assert discover([str(tmp_path / "elsewhere"), str(tmp_path / "one"), str(tmp_path / "two")]) == first


def test_every_key_is_read(tmp_path: Path):
    path = write_pyproject(tmp_path, """
[tool.gdr-check]
select = ["GDR1", "GDR2"]
extend-select = ["GDR0"]
ignore = ["beta-rounded-to-gate-dtype"]
output-format = "concise"
engine = "vllm"
tp = [1, 2, 4, 8]
batch = 16
slots = 32
state-dtype = "bfloat16"
gpu-memory = "20GiB"
exit-zero = false
error-on-warning = true

[[tool.gdr-check.overrides]]
paths = ["legacy/*"]
ignore = ["GDR111"]
""")
    config = load_config(path)
    assert (config.output_format, config.engine, config.tp, config.batch, config.slots) == (
        "concise", "vllm", [1, 2, 4, 8], 16, 32)
    assert (config.state_dtype, config.gpu_memory, config.exit_zero, config.error_on_warning) == (
        "bfloat16", "20GiB", False, True)
    assert not Selection(tuple(config.layers_for(str(tmp_path / "x")))).is_selected("GDR253")
    assert Selection(tuple(config.layers_for(str(tmp_path / "x")))).is_selected("GDR111")
    (tmp_path / "legacy" / "m1").mkdir(parents=True)
    legacy = Selection(tuple(config.layers_for(str(tmp_path / "legacy" / "m1"))))
    assert not legacy.is_selected("GDR111") and legacy.is_selected("GDR121")


@pytest.mark.parametrize("body,key,problem", [
    ('slect = ["GDR1"]', "tool.gdr-check.slect", "unknown key"),
    ('extend_select = ["GDR1"]', "tool.gdr-check.extend_select", "did you mean `extend-select`?"),
    ('select = "GDR1"', "tool.gdr-check.select", "expected an array of strings, got a string"),
    ('exclude = ["a", 1]', "tool.gdr-check.exclude", "expected an array of strings, got an integer at index 1"),
    ('select = ["GDR999"]', "tool.gdr-check.select", "`GDR999` selects no rule"),
    ('ignore = ["nonsense-rule"]', "tool.gdr-check.ignore", "unknown rule selector `nonsense-rule`"),
    ("tp = [0]", "tool.gdr-check.tp", "must be in 1..4_096 (tensor-parallel size), got 0"),
    ('tp = "4"', "tool.gdr-check.tp", "expected a TP size in 1..4_096 or a non-empty array of them"),
    ('batch = "8"', "tool.gdr-check.batch", "expected an integer, got a string"),
    ('exit-zero = "yes"', "tool.gdr-check.exit-zero", "expected true or false"),
    ('output-format = "xml"', "tool.gdr-check.output-format", "unknown value 'xml'"),
    ('engine = "trtllm"', "tool.gdr-check.engine", "expected one of: sglang, vllm"),
    ('state-dtype = "fp8"', "tool.gdr-check.state-dtype",
     "unknown state dtype 'fp8'; expected one of: float32, bfloat16, float16"),
    ('[[tool.gdr-check.overrides]]\nignore = ["GDR1"]', "tool.gdr-check.overrides[0].paths", "required"),
    ('[[tool.gdr-check.overrides]]\npaths = ["a"]\ntp = 2', "tool.gdr-check.overrides[0].tp", "unknown key"),
])
def test_bad_config_is_one_line_naming_file_and_key(tmp_path: Path, monkeypatch, body: str, key: str, problem: str):
    monkeypatch.chdir(tmp_path)
    path = write_pyproject(tmp_path, f"[tool.gdr-check]\n{body}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path, output_formats=FORMATS)  # as the CLI reads it: `output-format` must name a renderer
    message = str(caught.value)
    assert message.startswith(f"pyproject.toml: `{key}`: ") and problem in message and "\n" not in message


def test_the_library_leaves_output_format_to_the_renderers(tmp_path: Path):
    """The library renders nothing: without the CLI's format names it reads `output-format` as given."""
    path = write_pyproject(tmp_path, '[tool.gdr-check]\noutput-format = "xml"\n')
    assert load_config(path).output_format == "xml"


def test_invalid_toml_names_the_file(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_pyproject(tmp_path, "[tool.gdr-check\n")
    with pytest.raises(ConfigError, match=r"^pyproject.toml: not valid TOML"):
        find_config_file(tmp_path)


# -- through the command line ---------------------------------------------------------------------------------
@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    clean_output_env(monkeypatch)
    write_good(tmp_path / "models" / "good")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def codes_reported(*args: str) -> list[str]:
    result = run_cli(*args, "--output-format", "json-lines")
    return [json.loads(line)["code"] for line in result.stdout.splitlines()]


def test_config_applies_and_command_line_wins(project: Path):
    write_pyproject(project, '[tool.gdr-check]\nselect = ["GDR2"]\noutput-format = "concise"\ntp = 2\n'
                             'state-dtype = "bfloat16"\n')
    assert codes_reported("models/good") == ["GDR249", "GDR253"]
    assert codes_reported("models/good", "--select", "GDR1") == ["GDR131"]
    assert codes_reported("models/good", "--ignore", "GDR253") == ["GDR249"]
    assert codes_reported("models/good", "--isolated", "--tp", "1") == ["GDR131", "GDR253"]
    concise = run_cli("models/good")  # output-format and tp from the file
    assert concise.stdout.splitlines() == [
        "models/good/config.json:1:1: warning[GDR249] `initial_state` is bfloat16: "
        "the state is rounded to bfloat16 at every step",
        "models/good/config.json:1:1: warning[GDR253] sglang 0.5.23 rounds beta = sigmoid(b) to bfloat16 before the "
        "update: the state drifts from fp32 beta, more with longer contexts"]


@pytest.mark.parametrize("value, problem", [
    ('"0GiB"', "must be in 1..2**60 (bytes per rank for the state pools), got 0GiB"),
    ('"lots"', "not a size: 'lots' (e.g. 80GiB, 141GB or a byte count)")])
def test_a_bad_gpu_memory_in_the_file_says_what_is_wrong_with_it(project: Path, value: str, problem: str):
    write_pyproject(project, f"[tool.gdr-check]\ngpu-memory = {value}\n")
    # every command that reads the file refuses it, as it refuses any other bad key (explain took it: user test)
    for args in (["models/good"], ["explain", "GDR121"]):
        result = run_cli(*args)
        assert (result.exit_code, result.stdout, result.stderr) == (
            2, "", f"error: pyproject.toml: `tool.gdr-check.gpu-memory`: {problem}\n")


def test_an_empty_model_in_the_file_is_refused_by_every_command(project: Path):
    """`model = ""` named the file's own folder: explain said it was no checkpoint, check took it (user test)."""
    write_pyproject(project, '[tool.gdr-check]\nmodel = ""\n')
    for args in (["models/good"], ["explain", "GDR121"]):
        result = run_cli(*args)
        assert (result.exit_code, result.stdout, result.stderr) == (
            2, "", "error: pyproject.toml: `tool.gdr-check.model`: empty: name a built-in model, a cached repo id or "
                   "a checkpoint\n")


def test_config_found_from_the_checked_path_not_the_cwd(project: Path, monkeypatch):
    write_pyproject(project / "models", '[tool.gdr-check]\nselect = ["GDR253"]\n')
    elsewhere = project / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert codes_reported(str(project / "models" / "good")) == ["GDR253"]


def test_overrides_by_path(project: Path):
    write_good(project / "models" / "legacy" / "old")
    write_pyproject(project, '[tool.gdr-check]\nselect = ["GDR131", "GDR253"]\n\n'
                             '[[tool.gdr-check.overrides]]\npaths = ["models/legacy/*"]\nignore = ["GDR253"]\n')
    lines = run_cli("models/good", "models/legacy/old", "--output-format", "json-lines").stdout.splitlines()
    assert [(json.loads(line)["target"], json.loads(line)["code"]) for line in lines] == [
        ("models/good", "GDR131"), ("models/good", "GDR253"), ("models/legacy/old", "GDR131")]


def test_explicit_config_file_and_bad_config_exit_2(project: Path):
    other = write_pyproject(project / "conf", '[tool.gdr-check]\nselect = ["GDR253"]\n')
    assert codes_reported("models/good", "--config", str(other)) == ["GDR253"]
    write_pyproject(project, '[tool.gdr-check]\nselct = ["GDR1"]\n')
    result = run_cli("models/good")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.splitlines()[0] == (
        "error: pyproject.toml: `tool.gdr-check.selct`: unknown key (expected one of: select, extend-select, "
        "ignore, output-format, engine, tp, batch, slots, model, state-dtype, gpu-memory, exit-zero, "
        "error-on-warning, exclude, extend-exclude, overrides)")
    as_json = run_cli("models/good", "--output-format", "json")
    assert as_json.exit_code == 2 and json.loads(as_json.stdout)["error"]["code"] == "config"


@pytest.mark.parametrize("content", ['[tool.ruff]\nline-length = 100\n', 'tool = 3\n', ''],
                         ids=["another-tool", "tool-not-a-table", "empty"])
def test_a_config_file_given_without_the_table_is_an_error(project: Path, content):
    """A file named with --config is meant to hold the settings: without `[tool.gdr-check]` its defaults would
    pass for them."""
    other = project / "other.toml"
    other.write_text(content)
    result = run_cli("models/good", "--config", "other.toml")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr.splitlines()[-1] == "error: other.toml: no [tool.gdr-check] table (given with --config)"


def test_a_discovered_pyproject_whose_tool_is_no_table_is_no_crash(project: Path):
    write_pyproject(project, "tool = 3\n")
    assert run_cli("models/good").exit_code in (0, 1)


def test_unknown_code_on_the_command_line_exits_2(project: Path):
    result = run_cli("models/good", "--isolated", "--select", "GDR2,GDR299")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("error: --select: `GDR299` selects no rule")
    sarif = run_cli("models/good", "--isolated", "--ignore", "typo-rule", "--output-format", "sarif")
    assert sarif.exit_code == 2
    notification = json.loads(sarif.stdout)["runs"][0]["invocations"][0]["toolExecutionNotifications"][0]
    assert notification["descriptor"]["id"] == "usage" and "--ignore" in notification["message"]["text"]


def test_config_and_isolated_together_are_a_usage_error(project: Path):
    write_pyproject(project, "[tool.gdr-check]\ntp = 2\n")
    result = run_cli("models/good", "--config", "pyproject.toml", "--isolated")  # (it ran at tp 1, silently)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == ("error: Invalid value for --isolated: it ignores every settings file, and --config names "
                             "one: give one of them\n")


@pytest.mark.parametrize("line, problem", [
    ("batch = -1", "`tool.gdr-check.batch`: must be in 0..2**20 (decode batch), got -1"),
    ("slots = 0", "`tool.gdr-check.slots`: must be in 1..2**24 (state pool rows), got 0"),
    ("tp = -2", "`tool.gdr-check.tp`: must be in 1..4_096 (tensor-parallel size), got -2")])
def test_a_number_out_of_range_in_the_file_names_the_range_as_the_command_line_does(project: Path, line: str,
                                                                                     problem: str):
    write_pyproject(project, f"[tool.gdr-check]\n{line}\n")
    result = run_cli("models/good")
    assert (result.exit_code, result.stderr) == (2, f"error: pyproject.toml: {problem}\n")


@pytest.mark.parametrize("given", [".", "absolute"])
def test_a_folder_given_as_config_is_named_by_its_path_not_dot(project: Path, given: str):
    result = run_cli("--config", str(project) if given == "absolute" else ".", "models/good")
    assert (result.exit_code, result.stderr) == (
        2, f"error: {project}: is a folder: the configuration is a pyproject.toml file\n")
