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

import os
from typing import Any

# Values come from files written by strangers: keep each one short and printable so that the message stays
# one readable line whatever a header holds.
_MAX_VALUE_CHARS = 160


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
