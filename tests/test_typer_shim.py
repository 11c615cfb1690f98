"""typer's private API is used in one module, `cli/coercion.py`, for a stated and tested typer range."""

from __future__ import annotations

import ast
import re
from importlib.metadata import version
from pathlib import Path

from gdr_check.cli import coercion
from package_source import source_files

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _release(text: str) -> tuple[int, ...]:
    parts = [int(part) for part in re.findall(r"\d+", text)[:3]]
    return tuple(parts + [0] * (3 - len(parts)))


def test_installed_typer_is_in_the_tested_range() -> None:
    lowest, first_excluded = coercion.TYPER_TESTED
    assert lowest <= _release(version("typer")) < first_excluded


def test_pyproject_admits_exactly_the_tested_range() -> None:
    lowest, first_excluded = coercion.TYPER_TESTED
    line = next(line for line in PYPROJECT.read_text(encoding="utf-8").splitlines() if '"typer' in line)
    bounds = re.search(r'"typer>=([\d.]+),<([\d.]+)"', line)
    assert bounds is not None, line
    assert (_release(bounds[1]), _release(bounds[2])) == (lowest, first_excluded)


def test_only_the_shim_imports_private_typer_names() -> None:
    importers = set()
    for source in (source for source in source_files() if source.mentions("typer")):
        for node in source.nodes:
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(name.startswith("typer._") for name in names):
                importers.add(source.relative)
    assert importers == {"cli/coercion.py"}


def test_the_shim_finds_typers_private_names() -> None:
    # typer 0.29 has both: the pydantic-free coercion is installed and click's exceptions are typer's own.
    if _release(version("typer")) >= (0, 20, 0):
        assert coercion.click_exceptions.__name__ == "typer._click.exceptions"
        assert coercion.RuntimeParam is not None
    else:
        assert coercion.click_exceptions.__name__ == "click.exceptions"


def test_the_help_shows_no_type_after_a_flag_and_names_the_arguments(monkeypatch) -> None:
    # Typer 0.29 shows each option's type, a flag's too (`--exit-zero <bool>`), which reads as an option taking a
    # value (`--exit-zero true` then takes `true` for a target). Optional arguments keep typer's brackets.
    from cli_checkpoints import clean_output_env, run_cli

    clean_output_env(monkeypatch)
    monkeypatch.setenv("COLUMNS", "120")
    for command, usage in (("check", "[TARGETS]..."), ("call", "RECORDING"), ("dry-run", "TARGET"),
                           ("explain", "[QUERY]")):
        shown = run_cli(command, "--help").stdout
        assert "<bool>" not in shown
        assert any(line.strip().startswith(f"Usage: gdr-check {command}") and usage in line.upper()
                   for line in shown.splitlines())  # (typer 0.29 writes an optional argument in lower case)
        flag = next(line for line in shown.splitlines() if "--help" in line)
        assert "Show this message and exit." in flag and "<" not in flag
    assert "<bool>" not in run_cli("--help").stdout
