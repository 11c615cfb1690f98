"""How text read from data (file and directory names, config values, tensor names, recordings, pasted text) is
shown, one rule per kind of output. The renderers apply these; call sites never escape.

- Text for people (`full`, `concise`, the log lines of `github`, JUnit details, stderr): every C0/C1 control
  character, DEL, line/paragraph separator and bidi override/isolate/mark is shown as an escape (`\\x1b`,
  `\\u202e`), so data can neither drive the terminal, reorder what is shown, nor start a line of its own.
- Names that were not UTF-8 (bytes kept by `surrogateescape`, e.g. from `os.fsdecode`) are shown with
  `backslashreplace` (`\\xe9`) in every format, the JSON ones included, so output is always valid UTF-8.
- CI logs run some lines as commands: a line starting with `::` (GitHub workflow commands, after leading
  blanks) and `##[` anywhere on a line (the legacy form). `neutralise_log` defuses both in text that holds
  data; the JSON formats rewrite `##[` as `#\\u0023[` (the same string), and their lines never start with `::`.
"""

from __future__ import annotations

import json
import re
from typing import Any

# C0 (tab and newline included: data must not lay out the report), DEL, C1, U+2028/2029 (line breaks to some
# terminals and editors), bidi marks, embeddings, overrides and isolates, and lone surrogates.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_SURROGATES = re.compile("[\ud800-\udfff]")
_LEGACY_COMMAND = "##["
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if char in _NAMED:
        return _NAMED[char]
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8, kept by surrogateescape
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def text(value: object) -> str:
    """`value` as one line of safe text: controls, separators, bidi and undecodable bytes escaped."""
    shown = value if isinstance(value, str) else str(value)
    return _UNSAFE.sub(_escaped, shown) if _UNSAFE.search(shown) else shown


def text_with_breaks(value: object) -> str:
    """`text`, but `\r` and `\n` kept: for a format that escapes line breaks its own way (GitHub's `%0A`)."""
    shown = value if isinstance(value, str) else str(value)
    return "\n".join("\r".join(text(part) for part in line.split("\r")) for line in shown.split("\n"))


def lines(block: str) -> str:
    """A multi-line block whose line breaks are its own (a child's stderr): each line made safe."""
    return "\n".join(text(line) for line in block.split("\n"))


def utf8(value: str) -> str:
    """`value` with undecodable bytes (lone surrogates) as backslash escapes; everything else as it is."""
    if not _SURROGATES.search(value):
        return value
    return _SURROGATES.sub(_escaped, value)


def document(value: Any) -> Any:
    """A JSON-ready document whose strings (keys included) are valid Unicode: see `utf8`."""
    if isinstance(value, str):
        return utf8(value)
    if isinstance(value, dict):
        return {utf8(k) if isinstance(k, str) else k: document(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [document(item) for item in value]
    return value


def json_text(serialised: str) -> str:
    """Serialised JSON with the legacy CI-command marker rewritten inside strings (`#` as `\\u0023`: the same
    value; `##[` cannot occur outside a string)."""
    return serialised.replace(_LEGACY_COMMAND, "#\\u0023[") if _LEGACY_COMMAND in serialised else serialised


def neutralise_log(block: str) -> str:
    """Lines that a CI runner would take for a command made inert: a leading `::` (after blanks) becomes
    `\\x3a:`, and `##[` becomes `#\\x23[`. Meant for text whose every line starts with data or a fixed label."""
    if "::" not in block and _LEGACY_COMMAND not in block:
        return block
    out = []
    for line in block.split("\n"):
        body = line.lstrip()
        if body.startswith("::"):
            indent = line[: len(line) - len(body)]
            line = indent + "\\x3a" + body[1:]
        out.append(line.replace(_LEGACY_COMMAND, "#\\x23["))
    return "\n".join(out)


def xml_text(serialised: str) -> str:
    """Serialised XML with the legacy CI-command marker as a character reference (`#` as `&#35;`)."""
    return serialised.replace(_LEGACY_COMMAND, "#&#35;[") if _LEGACY_COMMAND in serialised else serialised


def dump_json(value: Any, **options: Any) -> str:
    """`json.dumps` for the JSON formats: undecodable bytes as escapes (valid UTF-8 whatever the names), and
    the legacy CI-command marker rewritten (see `json_text`)."""

    return json_text(json.dumps(document(value), **options))
