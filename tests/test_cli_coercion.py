"""The pydantic-free option conversion returns exactly what typer's own (pydantic) conversion returns."""

import subprocess
import sys

import pytest

from gdr_check.cli import coercion

pydantic = pytest.importorskip("pydantic")

CASES = [
    (str, "Qwen/Qwen3-Next-80B-A3B-Instruct"), (str, ""), (str, "1,2,4"),
    (int, 8), (int, "8"), (int, "0"), (int, "000123"), (int, "123456789012345678"), (int, "1" * 40), (int, "-5"),
    (list[str], ("a", "b")), (list[str], ["GDR2", "GDR121"]), (list[str], ()),
]
LEFT_TO_TYPER = [(str, 5), (float, "1.5")]
# What pydantic would take ("+8", " 8", "8.0", "1_0", another script's digit) or refuse in its own words: a usage
# error in the CLI's (`Invalid value for --batch: expected a whole number, got '1e9'`).
NOT_WHOLE_NUMBERS = ["+8", " 8", "8.0", "1_0", "\u0663", "1e9", "", "-", "--5"]


@pytest.mark.parametrize("annotation, value", CASES)
def test_plain_values_match_pydantic(annotation, value):
    plain, result = coercion._plain_value(annotation, value)
    assert plain
    expected = pydantic.TypeAdapter(annotation).validate_python(value)
    assert result == expected and type(result) is type(expected)


@pytest.mark.parametrize("annotation, value", LEFT_TO_TYPER)
def test_other_values_are_left_to_typer(annotation, value):
    assert coercion._plain_value(annotation, value) == (False, None)


@pytest.mark.parametrize("value", NOT_WHOLE_NUMBERS)
def test_a_string_that_is_no_whole_number_is_a_usage_error(value):
    with pytest.raises(coercion.click_exceptions.BadParameter) as raised:
        coercion._plain_value(int, value)
    assert raised.value.message == f"expected a whole number, got {value!r}"


def test_a_number_of_thousands_of_digits_is_refused_before_int_converts_it():
    with pytest.raises(coercion.click_exceptions.BadParameter) as raised:
        coercion._plain_value(int, "9" * 5000)
    assert raised.value.message.startswith("expected a whole number of at most 4000 digits, got '9999")


def test_a_check_run_does_not_import_pydantic():
    probe = ("import sys; from gdr_check.cli.main import main; "
             "code = main(['Qwen/Qwen3-Next-80B-A3B-Instruct', '--tp', '2', '--batch', '16', "
             "'--output-format', 'json']); "
             "sys.stderr.write(str(code) + ' ' + str('pydantic' in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.stderr.strip().splitlines()[-1] == "0 False"
