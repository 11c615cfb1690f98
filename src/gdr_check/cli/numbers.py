"""How the command line reads a number: ASCII digits (a minus sign where the option takes negative numbers; a
decimal point and exponent for a decimal), in one wording on every typer version, where typer's own
conversion takes "1_0", "+8" or other scripts' digits and words its refusals as pydantic or click does.
Ranges are the caller's: `limits.checked` against docs/limits.md.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import typer

from ..base.limits import shorten

# Longest digit string read: a longer one is no value of any range in docs/limits.md, and int() of thousands of
# digits is slow (Python refuses past 4300).
MAX_DIGITS = 4000
_DECIMAL = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


def whole_number(option: str) -> Callable[[Any], int]:
    """A typer `parser` for `option`: an int from ASCII digits, else one usage line naming the option."""

    def parse(value: Any) -> int:
        if isinstance(value, int) and not isinstance(value, bool):  # a default
            return value
        text = str(value)
        digits = text[1:] if text.startswith("-") else text
        if not (digits.isascii() and digits.isdigit()) or len(digits) > MAX_DIGITS:
            raise typer.BadParameter(f"expected a whole number, got {shorten(text)!r}", param_hint=option)
        return int(text)

    return parse


def decimal_number(option: str) -> Callable[[Any], float]:
    """A typer `parser` for `option`: a float from an ASCII decimal (1800, 2.5, 1e3), else one usage line."""

    def parse(value: Any) -> float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):  # a default
            return float(value)
        text = str(value)
        if len(text) > MAX_DIGITS or not _DECIMAL.fullmatch(text):
            raise typer.BadParameter(f"expected a number, got {shorten(text)!r}", param_hint=option)
        return float(text)

    return parse
