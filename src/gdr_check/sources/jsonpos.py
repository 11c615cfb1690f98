"""Where each key of a JSON document sits (line and column), for diagnostics that point into config.json.

`json` cannot report positions, so this is a small tokenizer over text that `json.loads` has already
accepted: it only has to be right for valid JSON. It is iterative, so nesting depth costs no recursion.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

from ..base.report import KeyLocation

_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*"'  # unrolled: fast on long strings
_LITERAL = r'[^\s,:\[\]{}"]+'
# Tokens, found by `finditer` (which skips the whitespace between them; valid JSON has nothing else there):
#   member: an object member whose value is a scalar or opens a container, with an optional leading comma,
#           so that an index entry `"name": "shard",` costs one match;
#   else a string, a structural character, or a bare literal (number, true, null).
# A string followed by ':' can only be a key, so `member` never matches inside an array.
_TOKEN = re.compile(
    rf'(?:,\s*)?(?P<key>{_STRING})\s*:\s*(?:(?P<scalar>{_STRING}|{_LITERAL})|(?P<open>[{{\[]))'
    rf'|(?P<other>{_STRING}|[{{}}\[\],]|{_LITERAL})'
)

Path = tuple[str | int, ...]


class _Positions:
    """Character offset -> (line, column), both 1-based."""

    def __init__(self, text: str) -> None:
        self._starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def __call__(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self._starts, offset) - 1
        return line + 1, offset - self._starts[line] + 1

    def span(self, start: int, end: int) -> KeyLocation:
        """[start, end) as a KeyLocation; one lookup when it stays on one line (nearly always)."""
        line, column = self(start)
        if line == len(self._starts) or end < self._starts[line]:
            return KeyLocation(line, column, line, column + end - start)
        end_line, end_column = self(end)
        return KeyLocation(line, column, end_line, end_column)


def _key(token: str) -> str:
    # Most keys have no escapes: skip the JSON decoder for them.
    return json.loads(token) if "\\" in token else token[1:-1]


def key_spans(text: str) -> Iterator[tuple[Path, KeyLocation]]:
    """Every object member and array element of `text` as (path, span).

    An object member's path ends with its key and its span runs from the key's opening quote to the end of
    its value; an array element's path ends with its index and its span covers the element.
    """
    positions = _Positions(text)
    span = positions.span
    # Each frame: [is_object, path of the container, element index, start of its own member]
    stack: list[list[Any]] = []
    for match in _TOKEN.finditer(text):
        key = match.group("key")
        if key is not None:
            frame = stack[-1]
            path = frame[1] + (_key(key),)
            start = match.start("key")
            if match.group("scalar") is not None:
                yield path, span(start, match.end())
            else:
                stack.append([match.group("open") == "{", path, 0, start])
            continue
        token = match.group("other")
        first = token[0]
        start = match.start()
        if first == ",":
            if stack and not stack[-1][0]:
                stack[-1][2] += 1
        elif first == "{" or first == "[":
            if stack:
                parent = stack[-1]
                stack.append([first == "{", parent[1] + (parent[2],), 0, start])
            else:
                stack.append([first == "{", (), 0, start])
        elif first == "}" or first == "]":
            frame = stack.pop()
            if frame[1]:
                yield frame[1], span(frame[3], match.end())
        elif stack:  # a scalar element of an array
            frame = stack[-1]
            yield frame[1] + (frame[2],), span(start, match.end())


def dotted_keys(text: str) -> dict[str, KeyLocation]:
    """`key_spans` with paths joined by dots: "text_config.linear_num_value_heads", "layer_types.3"."""
    spans = sorted(key_spans(text), key=lambda item: (item[1].line, item[1].column))
    return {".".join(str(part) for part in path): location for path, location in spans}


def member_spans(text: str, parent: str) -> dict[str, KeyLocation]:
    """Spans of the members of the top-level object `parent` (an index's `weight_map`), by key.

    The same tokens as `key_spans`, with only a depth count: an index can hold ~75k entries, and this is
    the read's hot loop.
    """
    positions = _Positions(text)
    starts, last_line = positions._starts, len(positions._starts)
    found: dict[str, KeyLocation] = {}
    depth, inside = 0, False
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup
        if kind == "scalar":
            if inside and depth == 2:
                start, key_end = match.span("key")
                line = bisect.bisect_right(starts, start)
                column = start - starts[line - 1] + 1
                end = match.end()
                if line == last_line or end < starts[line]:
                    location = KeyLocation(line, column, line, column + end - start)
                else:
                    location = positions.span(start, end)
                found[_key(text[start:key_end])] = location
        elif kind == "open":
            depth += 1
            if depth == 2 and _key(match.group("key")) == parent:
                inside = True
        else:
            first = match.group("other")[0]
            if first == "{" or first == "[":
                depth += 1
            elif first == "}" or first == "]":
                depth -= 1
                if depth < 2:
                    inside = False
    return found


class LazyKeyLocations(dict[str, KeyLocation]):
    """A `dict[str, KeyLocation]` that computes its contents on first use.

    Locating the ~75k entries of a large index costs more than reading all of its shard headers, and only
    the few tensors that get a diagnostic need a location. Every read (`[]`, `get`, `in`, iteration, `len`,
    `==`, `repr`, copies, pickling) fills it first, so it behaves as the plain dict it stands for.
    """

    __slots__ = ("_compute",)

    def __init__(self, source: Any = (), /, **entries: KeyLocation) -> None:
        if callable(source):
            super().__init__()
            self._compute: Callable[[], dict[str, KeyLocation]] | None = source
        else:  # plain dict construction, e.g. from dataclasses.asdict
            super().__init__(source, **entries)
            self._compute = None

    def _filled(self) -> LazyKeyLocations:
        if self._compute is not None:
            compute, self._compute = self._compute, None
            dict.update(self, compute())
        return self

    def __eq__(self, other: object) -> bool:
        other = dict(other) if isinstance(other, LazyKeyLocations) else other
        return dict.__eq__(self._filled(), other)

    def __ne__(self, other: object) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __reduce__(self) -> tuple[type[dict[str, KeyLocation]], tuple[dict[str, KeyLocation]]]:
        return (dict, (dict(self.items()),))

    __hash__ = None


def _filling(name: str) -> Callable[..., Any]:
    method = getattr(dict, name)

    def call(self: LazyKeyLocations, *args: Any, **kwargs: Any) -> Any:
        return method(self._filled(), *args, **kwargs)

    call.__name__ = name
    return call


for _name in (
    "__getitem__", "__contains__", "__iter__", "__len__", "__repr__", "__reversed__", "__or__", "__ror__",
    "__ior__", "__setitem__", "__delitem__", "get", "keys", "values", "items", "copy", "setdefault", "pop",
    "popitem", "update", "clear",
):
    setattr(LazyKeyLocations, _name, _filling(_name))
