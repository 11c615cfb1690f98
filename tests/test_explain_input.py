"""What `explain` reads of a paste and says about it (first user test of the wheel): a paste cut at the 64 KiB
cap is named with the lines read, standard input whose tail holds no whole line is not called empty, and a
format `explain` does not write leaves stdout empty."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from cli_checkpoints import clean_output_env, run_cli

ERROR = "AssertionError: 16 is not divisible by 3"
NOISE = "(VllmWorker TP0 pid=101) INFO 11-30 10:00:03 [loader.py:100] loading shard {} of 400\n"
NO_MATCH_HINT = "pass a code (GDR212), a rule name, or the whole error message as printed"


@pytest.fixture
def cwd(tmp_path: Path, monkeypatch) -> Path:
    clean_output_env(monkeypatch)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _stdin(monkeypatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


def _log(lines: int, last: str = ERROR) -> bytes:
    return ("".join(NOISE.format(i) for i in range(lines)) + last + "\n").encode()


# -- standard input that is not empty is never called empty ------------------------------------------------
def test_stdin_whose_last_line_is_longer_than_the_cap_says_so(cwd: Path, monkeypatch):
    _stdin(monkeypatch, b"x" * 70000 + b"\n")
    result = run_cli("explain", "-")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == ("error: no rule matches: the last 64 KiB of the 70001 bytes of standard input hold no "
                             "complete line (its last line is longer than 64 KiB): pass the lines that name the "
                             "error\n")
    _stdin(monkeypatch, b"x" * 70000)  # no final newline: the same
    assert run_cli("explain", "-").stderr == result.stderr.replace("70001 bytes", "70000 bytes")


def test_stdin_whose_last_line_is_longer_than_the_cap_in_json(cwd: Path, monkeypatch):
    _stdin(monkeypatch, b"x" * 70000 + b"\n")
    result = run_cli("explain", "-", "--output-format", "json")
    assert result.exit_code == 2
    document = json.loads(result.stdout)
    assert {key: document[key] for key in ("query", "error", "note")} == {
        "query": "", "error": "no rule matches",
        "note": "the last 64 KiB of the 70001 bytes of standard input hold no complete line (its last line is longer "
                "than 64 KiB)"}


def test_blank_stdin_is_read_as_the_same_argument_would_be(cwd: Path, monkeypatch):
    # Not empty: no rule matches it, in the words (and exit code) of the same text given as an argument.
    _stdin(monkeypatch, b"\n\n")
    piped = run_cli("explain", "-")
    assert (piped.exit_code, piped.stdout) == (2, "")
    assert piped.stderr == f"error: no rule matches '\\n\\n': {NO_MATCH_HINT}\n"
    assert (run_cli("explain", "\n\n").exit_code, run_cli("explain", "\n\n").stderr) == (2, piped.stderr)


# -- a paste cut at the cap says what was read -----------------------------------------------------------
def test_a_log_cut_at_the_cap_notes_the_lines_read(cwd: Path, monkeypatch):
    data = _log(3000)
    _stdin(monkeypatch, data)
    result = run_cli("explain", "-")
    assert result.exit_code == 0, result.stderr
    first = 3001 - len(data[-64 * 1024:].split(b"\n", 1)[1].splitlines()) + 1
    assert result.stdout.startswith(
        f"note: only the last 64 KiB of the {len(data)} bytes of standard input were read (lines {first}-3001): an "
        f"error before line {first} is not explained\n\nGDR401 tp-does-not-divide (error): ")
    assert "matched (line 3001): 16 is not divisible by 3" in result.stdout


def test_a_log_cut_at_the_cap_notes_the_lines_read_in_json(cwd: Path, monkeypatch):
    data = _log(3000) + b"CUDA error: an illegal memory access was encountered\n"
    _stdin(monkeypatch, data)
    result = run_cli("explain", "-", "--output-format", "json")
    assert result.exit_code == 0, result.stderr
    documents = json.loads(result.stdout)
    assert [(d["code"], d["line"]) for d in documents] == [("GDR401", 3001), ("GDR403", 3002)]
    first = 3002 - len(data[-64 * 1024:].split(b"\n", 1)[1].splitlines()) + 1
    # every document of the list carries it
    assert [d["note"] for d in documents] == 2 * [
        f"only the last 64 KiB of the {len(data)} bytes of standard input were read (lines {first}-3002): an error "
        f"before line {first} is not explained"]


def test_a_cut_at_a_line_start_keeps_that_line(cwd: Path, monkeypatch):
    line = "I" * 63 + "\n"  # 64 bytes: 2048 lines fill 128 KiB, and the last 64 KiB start on line 1025
    _stdin(monkeypatch, (line * 2047 + ERROR.ljust(63) + "\n").encode())
    result = run_cli("explain", "-", "--output-format", "json")
    document = json.loads(result.stdout)
    assert (document["line"], document["note"]) == (2048, (
        "only the last 64 KiB of the 131072 bytes of standard input were read (lines 1025-2048): an error before "
        "line 1025 is not explained"))


def test_a_small_log_gets_no_note(cwd: Path, monkeypatch):
    _stdin(monkeypatch, _log(3))
    result = run_cli("explain", "-", "--output-format", "json")
    assert "note" not in json.loads(result.stdout)
    _stdin(monkeypatch, _log(3))
    assert run_cli("explain", "-").stdout.startswith("GDR401 tp-does-not-divide (error): ")


def test_a_cut_log_without_a_known_error_names_the_part_read(cwd: Path, monkeypatch):
    data = _log(1200, last="nothing to see")
    _stdin(monkeypatch, data)
    result = run_cli("explain", "-")
    assert (result.exit_code, result.stdout) == (2, "")
    first = 1201 - len(data[-64 * 1024:].split(b"\n", 1)[1].splitlines()) + 1
    assert result.stderr == (f"error: no rule matches the last 64 KiB of the {len(data)} bytes of standard input "
                             f"(lines {first}-1201; an error before line {first} is not read): {NO_MATCH_HINT}\n")


def test_an_argument_over_the_cap_notes_the_lines_read(cwd: Path):
    paste = _log(500).decode() + "padding " * 3000  # the error on line 501, within the first 64 KiB
    assert len(paste) > 64 * 1024 > len(_log(500))
    result = run_cli("explain", paste)
    assert result.exit_code == 0, result.stderr
    last = len(paste[:64 * 1024].splitlines())
    assert result.stdout.startswith(
        f"note: only the first 64 KiB of the {len(paste)} characters given were read (lines 1-{last}): an error after "
        f"line {last} is not explained\n\nGDR401 tp-does-not-divide (error): ")
    missed = "padding " * 9000 + "\n" + ERROR  # the error past the cap
    result = run_cli("explain", missed, "--output-format", "json")
    assert result.exit_code == 2
    assert json.loads(result.stdout)["note"] == (
        f"only the first 64 KiB of the {len(missed)} characters given were read (lines 1-1): an error after line 1 "
        "is not explained")
    assert result.stderr == (f"error: no rule matches the first 64 KiB of the {len(missed)} characters given (lines "
                             f"1-1; an error after line 1 is not read): {NO_MATCH_HINT}\n")


# -- a format explain does not write leaves stdout empty ---------------------------------------------------
@pytest.mark.parametrize("fmt", ["sarif", "junit", "gitlab", "github", "json-lines", "concise"])
@pytest.mark.parametrize("args", [("GDR212",), ("GDR212", "--tp", "x"), ("--all",), ("-",)],
                         ids=["code", "bad-tp", "all", "stdin"])
def test_a_refused_format_writes_nothing_to_stdout(cwd: Path, monkeypatch, fmt: str, args: tuple[str, ...]):
    _stdin(monkeypatch, _log(1))
    result = run_cli("explain", *args, "--output-format", fmt)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == f"error: Invalid value for --output-format: explain writes full or json, not '{fmt}'\n"


@pytest.mark.parametrize("fmt", ["sarif", "json"])
def test_an_option_explain_does_not_take_leaves_no_report_file(cwd: Path, fmt: str):
    # `-o` is not an explain option: the usage error wrote a SARIF document to x.sarif all the same (user test).
    result = run_cli("explain", "GDR212", "--output-format", fmt, "-o", "x.report")
    # (click's own words for the refusal differ between its releases: "No such option: -o", "... '-o'.")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    if fmt == "sarif":  # not a format explain writes: nothing
        assert result.stdout == ""
    else:  # explain's own json: the error as its document, on stdout
        assert "-o" in json.loads(result.stdout)["error"]["message"]
    assert result.stderr.startswith("error: No such option") and "-o" in result.stderr
    assert not (cwd / "x.report").exists()


def test_an_explain_usage_error_ignores_a_report_format_explain_does_not_write(cwd: Path, monkeypatch):
    monkeypatch.setenv("GDR_CHECK_OUTPUT_FORMAT", "sarif")
    result = run_cli("explain", "GDR212", "--tp", "0")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("error: tp is 0: must be in 1..4_096")
