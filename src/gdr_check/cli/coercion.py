"""The one module that touches typer's private API; and typer's value coercion without pydantic.

Private names used, each with a fallback for typer versions without it:
- `typer._coercion.RuntimeParam`, `build_runtime_param`: the pydantic-free coercion below;
- `typer._click.exceptions` and `typer._click.Context`: the click exceptions and context of the click typer
  vendors (typer >= 0.20; older typer uses click itself), re-exported as `click_exceptions` and
  `ClickContext` for `cli/main.py`.
Tested range: typer 0.16.0 (the floor in `.ci/floors.txt`, run by `.ci/run`) to 0.29.x, the range
pyproject.toml admits (`typer>=0.16,<0.30`); `tests/test_typer_shim.py` checks the installed typer is in it
and that no other module imports a private typer name. A new typer minor version: run the suite on it, then
raise the bound there and in `TYPER_TESTED`.

Typer 0.29 converts every parameter value through a pydantic `TypeAdapter`, built on first use, so the first
non-flag parameter of a run imports pydantic and builds a schema: ~60 ms of a ~0.6 s check. Even an option
left unset pays, because typer builds the adapter before it looks at the value. `install_plain_coercion`
gives each parameter a coercer that returns, without pydantic, exactly what typer's adapter returns for the
common values (nothing given; a `str` for a `str`; a tuple of `str` for a `list[str]`; a plain ASCII digit
string or an `int` for an `int`; for a parameter with a `parser`, what the parser returns, which is all
typer's adapter does with one) and hands every other value to typer's own coercer, so that any conversion
or error message stays typer's. Typer versions without this machinery (it appeared when typer vendored
click) are left alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

try:
    from typer._coercion import RuntimeParam, build_runtime_param
except ImportError:  # pragma: no cover - an older typer converts values through click, without pydantic
    # mypy checks against the installed typer, where `RuntimeParam` is a class: None stands for "absent".
    RuntimeParam = None  # type: ignore[assignment,misc]

try:  # typer >= 0.20 vendors click
    from typer._click import Context as ClickContext
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - older typer uses click itself
    # mypy checks against the installed typer (>= 0.20); these bind the same names from click itself.
    from click import Context as ClickContext  # type: ignore[assignment]
    from click import exceptions as click_exceptions  # type: ignore[no-redef]

__all__ = ["TYPER_TESTED", "ClickContext", "click_exceptions", "install_plain_coercion", "untyped_flags"]

# The typer versions this module is tested with: lowest, and the first one not admitted (pyproject.toml).
TYPER_TESTED = ((0, 16, 0), (0, 30, 0))

# Longest digit string converted here: int() and pydantic agree on every ASCII digit string, but a huge one
# is left to pydantic (and its limits).
_MAX_DIGITS = 18


def _plain_value(annotation: Any, value: Any) -> tuple[bool, Any]:
    """(True, what typer's pydantic adapter returns for `value`) for the plain cases; (False, None) otherwise."""
    if annotation is str:
        # Typer's adapter: str(value), then pydantic's str validation, which returns a str unchanged (lone
        # surrogates from undecodable arguments included).
        if type(value) is str:
            return True, value
    elif annotation is int:
        if type(value) is int:
            return True, value
        # pydantic also accepts "+8", " 8", "8.0", "1_0" ... (and rejects non-ASCII digits that int() takes):
        # only plain ASCII digit strings are converted here.
        if type(value) is str and value.isascii() and value.isdigit() and len(value) <= _MAX_DIGITS:
            return True, int(value)
    elif annotation == list[str]:
        # Typer's adapter validates each item as a str and returns a new list.
        if type(value) in (tuple, list) and all(type(item) is str for item in value):
            return True, list(value)
    return False, None


if RuntimeParam is not None:

    class PlainCoercion(RuntimeParam):
        """Typer's `RuntimeParam` (which maps a missing value to None or `()` itself) for the plain values."""

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            parser = self.parameter_info.parser
            if parser is not None:  # typer's adapter for a parser calls it on the value, and nothing else
                return parser(value)
            plain, result = _plain_value(self.annotation, value)
            if plain:
                return result
            # Anything else: typer's own coercer, kept for the rest of the run.
            real = build_runtime_param(param.type_descriptor)
            param._runtime_param = real
            return real._coerce_value(value, param=param, ctx=ctx)


def install_plain_coercion(params: Iterable[Any]) -> None:
    """Give each typer parameter that has no coercer yet the pydantic-free one (typer builds its own lazily)."""
    if RuntimeParam is None:
        return
    for param in params:
        descriptor = getattr(param, "type_descriptor", None)
        if descriptor is None or getattr(param, "_runtime_param", False) is not None:
            continue
        if getattr(descriptor, "file_annotation", None) is not None:
            continue  # files are opened by typer without pydantic already
        info = descriptor.parameter_info
        if info.min is not None or info.max is not None:
            continue  # a range: typer's adapter does more than convert
        param._runtime_param = PlainCoercion(parameter_info=descriptor.parameter_info,
                                             annotation=descriptor.annotation)


def untyped_flags(params: Iterable[Any]) -> None:
    """Leave a flag's type out of the help: typer 0.29 shows every option's Python type (`--batch <int>`), a
    flag's too (`--exit-zero <bool>`), which reads as an option that takes a value, and one given a value is
    refused ("does not take a value"). Typer versions without that column (`display_type_rich`) are left alone."""
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None and hasattr(param, "display_type_rich"):
            param.metavar = ""
