"""The pydantic-free option conversion returns exactly what typer's own (pydantic) conversion returns."""

import subprocess
import sys

import pytest

from gdr_check.cli import coercion

pydantic = pytest.importorskip("pydantic")

CASES = [
    (str, "Qwen/Qwen3-Next-80B-A3B-Instruct"), (str, ""), (str, "1,2,4"),
    (int, 8), (int, "8"), (int, "0"), (int, "000123"), (int, "123456789012345678"),
    (list[str], ("a", "b")), (list[str], ["GDR2", "GDR121"]), (list[str], ()),
]
LEFT_TO_TYPER = [(int, "+8"), (int, " 8"), (int, "8.0"), (int, "1_0"), (int, "٣"), (int, "1" * 40), (str, 5)]


@pytest.mark.parametrize("annotation, value", CASES)
def test_plain_values_match_pydantic(annotation, value):
    plain, result = coercion._plain_value(annotation, value)
    assert plain
    expected = pydantic.TypeAdapter(annotation).validate_python(value)
    assert result == expected and type(result) is type(expected)


@pytest.mark.parametrize("annotation, value", LEFT_TO_TYPER)
def test_other_values_are_left_to_typer(annotation, value):
    assert coercion._plain_value(annotation, value) == (False, None)


def test_a_check_run_does_not_import_pydantic():
    probe = ("import sys; from gdr_check.cli.main import main; "
             "code = main(['Qwen/Qwen3-Next-80B-A3B-Instruct', '--tp', '2', '--batch', '16', "
             "'--output-format', 'json']); "
             "sys.stderr.write(str(code) + ' ' + str('pydantic' in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.stderr.strip().splitlines()[-1] == "0 False"
