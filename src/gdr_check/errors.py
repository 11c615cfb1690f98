"""The one base class of "bad input" errors, and the typed errors of the GDR0xx rules.

`InputError` is what the library raises for input it cannot use (an unreadable checkpoint, a bad recording, a
bad config file): the CLI prints `str(error)`, one line, and exits 2. `code` names the rule (GDR0xx) or the
kind of input ("recording", "config"); `path` the file, when there is one. The library never raises CLI
exceptions.

`SourceError` is an `InputError` tied to one GDR0xx rule: each rule of `gdr_check.sources.rules` is a
subclass that declares the rule and its fields, and the import fails when a field of the rule's message is not
among them (or a field is neither in the message nor a location part). `registry.Violation` is the same
for rules reported rather than raised (GDR3xx, GDR101).
"""

from __future__ import annotations

import inspect
import os
from typing import TYPE_CHECKING, Any, ClassVar

from .report import Location

if TYPE_CHECKING:
    from .registry import Rule
    from .report import Diagnostic
    from .sources.checkpoint import KeyLocation

# Values come from files written by strangers: keep each one short and printable so that the message stays
# one readable line whatever a header holds.
_MAX_VALUE_CHARS = 160
# Fields that may be given without appearing in the message: they locate the error.
LOCATION_FIELDS = frozenset({"line", "column", "tensor", "shard"})


def declared_fields(owner: type, rule: Rule, optional: frozenset[str] = frozenset()) -> frozenset[str]:
    """The fields `owner` declares (its own annotations but `rule` and `fields`), checked against `rule`'s message
    template: every template field must be declared, and a declared field must be in the template or
    `optional`. Called when the class is created, so a typo fails at import."""
    fields = frozenset(inspect.get_annotations(owner)) - {"rule", "fields"}
    template = set(rule.fields())
    if template - fields:
        raise TypeError(f"{owner.__name__}: {rule.code}'s message uses {sorted(template - fields)}, "
                        f"which are not among its fields {sorted(fields)}")
    if fields - template - optional:
        raise TypeError(f"{owner.__name__}: fields {sorted(fields - template - optional)} are not in "
                        f"{rule.code}'s message")
    return fields


def declared_rule(owner: type, optional: frozenset[str] = frozenset()) -> tuple[Rule, frozenset[str]]:
    """The `rule` a rule-bound class declares in its own body (TypeError when it declares none) and its fields,
    checked against the rule's message (`declared_fields`)."""
    rule = owner.__dict__.get("rule")
    if rule is None:
        raise TypeError(f"{owner.__name__} declares no rule")
    return rule, declared_fields(owner, rule, optional)


def check_values(owner: type, rule: Rule, fields: frozenset[str], values: Any) -> None:
    """Raise TypeError unless `values` gives every field of `rule`'s message and nothing `fields` lacks."""
    unknown = set(values) - fields
    missing = set(rule.fields()) - set(values)
    if unknown or missing:
        raise TypeError(f"{owner.__name__} ({rule.code}): unknown fields {sorted(unknown)}, missing {sorted(missing)}")


class InputError(Exception):
    """Bad input: the CLI reports `str(self)` as one line and exits 2."""

    code: str = "input"
    path: str | None = None


def not_utf8(raw: bytes | bytearray, error: UnicodeDecodeError, at: str | None = "offset") -> str:
    """Why `raw` is not text: its first byte that is not UTF-8, and where (`at`: what the offset counts from, as
    "header offset"; None: no offset, where the caller names a line and column)."""
    where = f" at {at} {error.start}" if at else ""
    return f"not valid UTF-8 (byte 0x{raw[error.start]:02x}{where})"


def display_path(path: str | os.PathLike[str]) -> str:
    """`path` relative to the working directory when it lies below it, else absolute."""
    absolute = os.path.abspath(os.fspath(path))
    try:
        relative = os.path.relpath(absolute)
    except ValueError:  # another drive on Windows
        return absolute
    return absolute if relative.startswith("..") else relative


def printable(value: Any, limit: int = _MAX_VALUE_CHARS) -> str:
    """`value` as text without control characters or line breaks, shortened to about `limit` characters."""
    text = str(value)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    if text.isprintable():
        return text
    return "".join(
        ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii")
        for ch in text
    )


def described(value: Any) -> str:
    """`value` as a wrong-type refusal shows it: short and printable, with its type ("3 (an int)"; None alone)."""
    if value is None:
        return "None"
    kind = type(value).__name__
    return f"{printable(repr(value), 80)} ({'an' if kind[:1].lower() in 'aeiou' else 'a'} {kind})"


class SourceError(InputError):
    """The checkpoint cannot be read. `str(e)` is one line: the file, the rule's message, and the fix.

    Raise a subclass, one per GDR0xx rule (`MalformedIndexes(path, reason=...)`); its message is the rule's
    template filled with the fields, so the one-line error and the rule's docs never drift apart.
    """

    rule: ClassVar[Rule]
    fields: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        rule, cls.fields = declared_rule(cls, LOCATION_FIELDS)
        cls.code = rule.code

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        /,
        *,
        fix: str | None = None,
        location: KeyLocation | None = None,
        **values: Any,
    ) -> None:
        rule = self.rule
        check_values(type(self), rule, self.fields, values)
        self.name = rule.name
        self.path = display_path(path) if path is not None else None
        self.values = {key: printable(value) for key, value in values.items()}
        self.message = rule.message.format(**self.values)
        self.fixes: list[str] = [printable(fix, 400)] if fix else list(rule.fixes[:1])
        # Template values that are also parts of the location (`line`, `tensor`, ...) serve both.
        self.line: int | None = location.line if location else values.get("line")
        self.column: int | None = location.column if location else values.get("column")
        self.end_line: int | None = location.end_line if location else None
        self.end_column: int | None = location.end_column if location else None
        self.tensor: str | None = values.get("tensor")
        self.shard: str | None = values.get("shard")
        where = printable(self.path, 400) if self.path else None
        # Prefix the file unless the message already names it (`path ... does not exist`).
        text = f"{where}: {self.message}" if where and f"`{where}`" not in self.message else self.message
        if self.fixes and not self.message.endswith(self.fixes[0]):  # a message may end with its own fix
            text += f"; help: {self.fixes[0]}"
        super().__init__(text)

    def diagnostic(self) -> Diagnostic:
        """The error as a `Diagnostic` of its rule, located at the file (and line) it names."""
        location = Location(
            file=self.path, line=self.line, column=self.column, end_line=self.end_line,
            end_column=self.end_column, tensor=self.tensor, shard=self.shard,
        )
        return self.rule.located(dict(self.values), list(self.fixes), location)
