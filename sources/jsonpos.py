"""Where each key of a JSON document sits (line and column), for diagnostics that point into config.json.

`json` cannot report positions, so this is a small tokenizer over text that `json.loads` has already
accepted: it only has to be right for valid JSON. It is iterative, so nesting depth costs no recursion.
"""

from __future__ import annotations

import bisect
import json
import re
from typing import Iterator

from .checkpoint import KeyLocation

# One token after optional whitespace: a string, a structural character, or a bare literal (number, true...).
_TOKEN = re.compile(r'[ \t\r\n]*(?:("(?:[^"\\]|\\.)*")|([{}\[\],:])|([^ \t\r\n,:\[\]{}"]+))', re.S)

Path = tuple[str | int, ...]


class _Positions:
    """Character offset -> (line, column), both 1-based."""

    def __init__(self, text: str) -> None:
        self._starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def __call__(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self._starts, offset) - 1
        return line + 1, offset - self._starts[line] + 1


def key_spans(text: str) -> Iterator[tuple[Path, KeyLocation]]:
    """Every object member and array element of `text` as (path, span).

    An object member's path ends with its key and its span runs from the key's opening quote to the end of
    its value; an array element's path ends with its index and its span covers the element.
    """
    position = _Positions(text)
    # Each frame: [is_object, path of the container, pending key, start of the pending member, element index,
    # start of the container's own member (its key, or itself in an array)]
    stack: list[list] = []
    expecting_key = False
    at = 0
    n = len(text)

    def span(start: int, end: int) -> KeyLocation:
        line, column = position(start)
        end_line, end_column = position(end)
        return KeyLocation(line, column, end_line, end_column)

    def member(frame: list, value_start: int) -> tuple[Path, int]:
        if frame[0]:
            return frame[1] + (frame[2],), frame[3]
        return frame[1] + (frame[4],), value_start

    while at < n:
        match = _TOKEN.match(text, at)
        if match is None or match.end() == at:
            break
        at = match.end()
        string, punct, literal = match.groups()
        start = match.start(1) if string else match.start(2) if punct else match.start(3)
        if punct == ",":
            if stack and stack[-1][0]:
                expecting_key = True
            elif stack:
                stack[-1][4] += 1
            continue
        if punct == ":":
            continue
        if string is not None and expecting_key:
            stack[-1][2] = json.loads(string)
            stack[-1][3] = start
            expecting_key = False
            continue
        if punct in ("{", "["):
            path, member_start = member(stack[-1], start) if stack else ((), start)
            stack.append([punct == "{", path, None, member_start, 0, member_start])
            expecting_key = punct == "{"
            continue
        if punct in ("}", "]"):
            frame = stack.pop()
            if frame[1]:
                yield frame[1], span(frame[5], at)
            expecting_key = False
            continue
        # A scalar value (string or literal) inside a container.
        if stack:
            path, member_start = member(stack[-1], start)
            yield path, span(member_start, at)


def dotted_keys(text: str) -> dict[str, KeyLocation]:
    """`key_spans` with paths joined by dots: "text_config.linear_num_value_heads", "layer_types.3"."""
    spans = sorted(key_spans(text), key=lambda item: (item[1].line, item[1].column))
    return {".".join(str(part) for part in path): location for path, location in spans}
