"""Numbers out of range: values from a config.json, `[tool.gdr-check]` and the command line are
checked against docs/limits.md before use. A config field out of range is GDR108 (exit 1, the value shortened);
an option or a `[tool.gdr-check]` key is one `error:` line naming it and the range (exit 2), in every output
format. Every run stays in seconds and under 300 MiB, whatever the number, through the real CLI: one child
process per case measures time and RSS; the same case in all 8 formats runs in this process (fast)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from checkpoint_builders import qwen3_next_config, qwen_tensors, write_checkpoint
from cli_checkpoints import clean_output_env
from gdr_check.base.files import loads_bounded
from gdr_check.base.limits import LIMITS, LimitError, checked
from gdr_check.base.report import LIMITS_DOCS_URL
from hostile_corpus import FORMATS, Outcome, assert_outcome, run_in_process, run_subprocess

MAX_RSS_MIB = 300
THOUSANDS_OF_DIGITS = "9" * 4200


def _bounded(started: float, outcome: Outcome) -> None:
    assert time.monotonic() - started < 20
    assert 0 < outcome.max_rss_mib < MAX_RSS_MIB


def _checkpoint(root: Path, name: str, key: str, literal: str) -> Path:
    config = qwen3_next_config()
    built = write_checkpoint(root / name, config, qwen_tensors(config))
    raw = json.loads((built / "config.json").read_text())
    raw[key] = "__VALUE__"
    (built / "config.json").write_text(json.dumps(raw).replace('"__VALUE__"', literal))
    return built


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("numbers")
    _checkpoint(root, "layers", "num_hidden_layers", "1000000000")
    _checkpoint(root, "heads", "linear_num_value_heads", "9" * 400)
    _checkpoint(root, "digits", "linear_num_value_heads", THOUSANDS_OF_DIGITS)
    return root


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_billion_layers_is_gdr108_in_every_format(root, fmt):
    started = time.monotonic()
    outcome = run_subprocess("layers", "--isolated", "--output-format", fmt, cwd=root)
    assert_outcome(fmt, outcome, exit_code=1)
    assert "GDR108" in outcome.stdout
    if fmt == "concise":
        assert "`num_hidden_layers` is 1000000000: outside the allowed range 1..65_536 (decoder layers)" \
            in outcome.stdout
    _bounded(started, outcome)


@pytest.mark.parametrize("case,shown", [("heads", "an integer of at least 400 digits"),
                                        ("digits", "an integer of at least 4000 digits")])
def test_a_head_count_that_overflows_a_float_is_gdr108(root, case, shown):
    started = time.monotonic()
    outcome = run_subprocess(case, "--isolated", "--output-format", "concise", cwd=root)
    assert_outcome("concise", outcome, exit_code=1)
    assert f"error[GDR108] `linear_num_value_heads` is {shown}" in outcome.stdout, outcome.stdout
    assert "9" * 100 not in outcome.stdout
    _bounded(started, outcome)


# (option, value, the fragment of the one `error:` line, the format of the child-process run that measures RSS)
OPTION_CASES = [
    ("--batch", "100000000", "batch is 100000000: must be in 0..2**20 (decode batch)", "full"),
    ("--slots", str(2**63), "slots is 9223372036854775808: must be in 1..2**24 (state pool rows)", "json"),
    ("--speculative-tokens", "1000000000", "speculative_tokens is 1000000000: must be in 0..1_024", "sarif"),
    ("--gpu-memory", "1e999GiB", "gpu_memory is 1e999GiB: must be in 1..2**60 (bytes per rank for the state pools)",
     "github"),
    ("--gpu-memory", "1e999", "gpu_memory is 1e999: must be in 1..2**60 (bytes per rank for the state pools)", "junit"),
    ("--tp", "-1", "tp is -1: must be in 1..4_096 (tensor-parallel size)", "full"),
    ("--tp", "9" * 5000, "--tp: expected a whole number or a comma-separated list of them, got '9999", "gitlab"),
    ("--tp", "1,100000", "tp is 100000: must be in 1..4_096 (tensor-parallel size)", "json-lines"),
    ("--tp", "1,,2", "--tp: expected a whole number or a comma-separated list of them, got '1,,2'",
     "concise"),  # no skipping
    ("--tp", "4,", "--tp: expected a whole number or a comma-separated list of them, got '4,'", "full"),
    ("--revision", "", "--revision: names no branch, tag or commit", "json"),
]


@pytest.mark.parametrize("option,value,error,fmt", OPTION_CASES)
def test_options_out_of_range_are_one_error_line(root, option, value, error, fmt):
    started = time.monotonic()
    outcome = run_subprocess("layers", "--isolated", option, value, "--output-format", fmt, cwd=root)
    assert_outcome(fmt, outcome, exit_code=2, error=error)
    assert len(outcome.stderr) < 400  # never the 5000 digits back
    _bounded(started, outcome)


def _every_format(root: Path, *args: str, error: str) -> None:
    """`args` in each output format, in this process: exit 2, exactly one `error:` line holding `error`, the
    format's error document on stdout, no raw control character, never the number echoed whole, in seconds."""
    for fmt in FORMATS:
        started = time.monotonic()
        outcome = run_in_process(*args, "--output-format", fmt, cwd=root)
        assert_outcome(fmt, outcome, exit_code=2, error=error)
        assert len(outcome.stderr) < 400, (fmt, outcome.stderr[:400])
        assert time.monotonic() - started < 15, fmt  # seconds, not the minutes a 1e9-layer loop would take


@pytest.mark.parametrize("option,value,error", [case[:3] for case in OPTION_CASES])
def test_options_out_of_range_in_every_format(root, monkeypatch, option, value, error):
    clean_output_env(monkeypatch)
    _every_format(root, "layers", "--isolated", option, value, error=error)


@pytest.mark.parametrize("table,error", [
    ("batch = 9223372036854775808",
     "`tool.gdr-check.batch`: must be in 0..2**20 (decode batch), got 9223372036854775808"),
    ("batch = 9223372036854775807", "`tool.gdr-check.batch`"),
    ("slots = 100000000000", "`tool.gdr-check.slots`"),
    ("tp = [1, 9223372036854775807]", "`tool.gdr-check.tp`"),
])
def test_pyproject_numbers_out_of_range(tmp_path, root, monkeypatch, table, error):
    (tmp_path / "pyproject.toml").write_text(f"[tool.gdr-check]\n{table}\n")
    started = time.monotonic()
    outcome = run_subprocess(str(root / "layers"), "--output-format", "json", cwd=tmp_path)
    assert_outcome("json", outcome, exit_code=2)
    errors = [line for line in outcome.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and error in errors[0], outcome.stderr
    _bounded(started, outcome)
    clean_output_env(monkeypatch)
    _every_format(tmp_path, str(root / "layers"), error=error)


# Each option, its value and the error it gets, written out (the ranges are docs/limits.md's).
DRY_RUN_ERRORS = {
    ("--steps", "99999999999"): "steps is 99999999999: must be in 1..10_000",
    ("--steps", "0"): "steps is 0: must be in 1..10_000",
    ("--seed", "9" * 30): "seed is 999999999999999999999999999999: must be in 0..9_223_372_036_854_775_807",
    ("--timeout", "nan"): "--timeout: expected a number, got 'nan'",
    ("--timeout", "-1"): "timeout is -1.0: must be in 0.001..604_800",
    ("--timeout", "inf"): "--timeout: expected a number, got 'inf'",
    ("--timeout", "1e999"): "timeout is inf: must be in 0.001..604_800",
}
DRY_RUN_CASES = list(DRY_RUN_ERRORS)


def _dry_run_error(option: str, value: str) -> str:
    return DRY_RUN_ERRORS[(option, value)]


@pytest.mark.parametrize("option,value", DRY_RUN_CASES)
def test_dry_run_numbers(root, option, value):
    outcome = run_subprocess("dry-run", "layers", option, value, "--device", "cpu", cwd=root)
    assert_outcome("full", outcome, exit_code=2, error=_dry_run_error(option, value))


@pytest.mark.parametrize("option,value", DRY_RUN_CASES)
def test_dry_run_numbers_in_every_format(root, monkeypatch, option, value):
    clean_output_env(monkeypatch)
    _every_format(root, "dry-run", "layers", option, value, "--device", "cpu", error=_dry_run_error(option, value))


def test_library_limits_name_key_value_and_range():
    with pytest.raises(LimitError, match=r"^batch is an integer of at least 1000 digits: must be in 0\.\.2\*\*20"):
        checked("batch", 10**1000)
    assert checked("tp", 8) == 8
    for bad in (float("nan"), float("inf"), True, "8", None, -1):
        assert not LIMITS["timeout"].allows(bad)


@pytest.mark.parametrize(("value", "shown"), [(2.5, "2.5"), (2.0, "2.0"), ("2", "'2' (a str)"),
                                           (True, "True (a bool)"), (None, "None")])
def test_a_whole_number_limit_refuses_what_is_no_int_in_a_library_call(value, shown):
    """`Deployment(tp=2.5)` used to pass (2.5 is inside 1..4_096) and size pools for 2.5 ranks."""
    from gdr_check.deployment.settings import Deployment

    with pytest.raises(LimitError) as refused:
        Deployment(tp=value)
    assert str(refused.value) == (f"tp is {shown}: must be a whole number in 1..4_096 (tensor-parallel size); "
                                  f"see {LIMITS_DOCS_URL}")
    assert checked("timeout", 2.5) == 2.5  # a limit of seconds takes a float


def test_any_integer_type_is_a_whole_number():
    numpy = pytest.importorskip("numpy")
    assert checked("tp", numpy.int64(4)) == 4 and type(checked("tp", numpy.int64(4))) is int
    with pytest.raises(LimitError, match=r"^tp is 0: must be in 1\.\.4_096 "):
        checked("tp", numpy.int32(0))


def test_a_huge_negative_integer_says_it_is_negative():
    with pytest.raises(LimitError, match=r"^batch is a negative integer of at least 200 digits: must be in "):
        checked("batch", -(10**200))


def test_a_float_limit_shows_its_range_as_a_float():
    assert LIMITS["scale"].range_text == "0..1e+30"  # GDR245's range: a scale must be positive
    assert LIMITS["lower_bound"].range_text == "-1e+30..1e+30"


def test_dry_run_check_refuses_absurd_numbers_before_running():
    from gdr_check.pipeline.dryrun.driver import dry_run_check

    with pytest.raises(LimitError, match=r"^timeout is nan: must be in 0\.001\.\.604_800"):
        dry_run_check(object(), timeout=float("nan"))


def test_limits_doc_is_generated_from_the_table():
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    script = root / "scripts" / "generate_limits_doc.py"
    checked = subprocess.run([sys.executable, str(script), str(root / "docs" / "limits.md"), "--check"],
                             capture_output=True, text=True)
    assert (checked.returncode, checked.stderr) == (0, "")
    # `--help` prints usage; it is never taken for the page to write.
    usage = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, cwd=root)
    assert usage.returncode == 0 and usage.stdout.startswith("usage: ")
    assert not (root / "--help").exists()


@pytest.mark.parametrize("prefix", ["", "é ", '"\u0663\u0663" '])  # before the number: nothing, a two-byte
def test_a_json_integer_is_bounded_from_its_4001st_digit(prefix):  # letter, Arabic-Indic digits (not ASCII)
    """Python refuses to convert more than 4300 digits; the readers stand in 10**4000 for any integer of more than
    4000 (shown as "an integer of at least 4000 digits", above) and convert every shorter one exactly, wherever
    the run stands in the text and whatever text comes before it."""
    for digits, expected in ((4000, 10**4000 - 1), (4001, 10**4000), (4300, 10**4000), (5000, 10**4000)):
        text = f'[{json.dumps(prefix)}, {"9" * digits}, -{"9" * digits}]'
        assert loads_bounded(text)[1:] == [expected, -expected]
        assert loads_bounded(text, text.encode())[1:] == [expected, -expected]
    # A run that long inside a string is no number: the text loads as it is.
    assert loads_bounded(f'["{"7" * 4001}", 12]') == ["7" * 4001, 12]
