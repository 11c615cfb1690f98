"""Where a key of a JSON document sits, found when asked for: `KeyLocator` is the `config_keys` of a checkpoint
and the locator of a recording's calls.

A config under the size cap can hold an array of millions of numbers, or objects nested hundreds deep with
thousands of members each, that no diagnostic ever points at. Locating every member and element up front
(`jsonpos.dotted_keys`) built a location and a path per element: gigabytes for a 15 MB file. Here nothing is
located until a key is asked for, and then only the containers on its path are scanned, each once:

- the members of an object (its keys and where each value starts and ends), when a key inside it is asked for;
- the elements of an array, when an element is asked for;

and every value that is not on the path is skipped with one regular-expression match per bracket inside it
(numbers, strings, whitespace and punctuation between brackets are consumed by the match). Lines and columns
are counted for the keys asked for only. Memory is what the containers on the asked paths hold, never a path
per element; the text is valid JSON (`json.loads` accepted it), so the scanner only has to be right for valid
JSON.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

from ..base.report import KeyLocation
from .jsonpos import _key

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_SCALAR = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[^\s,:\[\]{}"]+')
_SPACE = re.compile(r"[\s,:]*")
# Everything up to the next bracket that is not inside a string: the text between brackets and up to 4096 whole
# strings, in one match (a bounded repeat: an unbounded one keeps a backtracking entry per string).
_FILLER = re.compile(r'[^"\[\]{}]*(?:"[^"\\]*(?:\\.[^"\\]*)*"[^"\[\]{}]*){0,4096}')

# A container's children: for an object, key -> (start of the member's key, end of its value, start of the
# value); for an array, the same per index.
Children = dict[str, tuple[int, int, int]] | list[tuple[int, int, int]]


def _end_of_value(text: str, start: int) -> int:
    """The offset just past the JSON value that starts at `start`."""
    first = text[start]
    if first == '"':
        match = _STRING.match(text, start)
        assert match is not None
        return match.end()
    if first not in "[{":
        match = _SCALAR.match(text, start)
        assert match is not None
        return match.end()
    depth, position = 1, start + 1
    skip = _FILLER.match
    while True:
        position = skip(text, position).end()  # type: ignore[union-attr]
        char = text[position]
        if char == '"':  # (the filler stops after 4096 strings: its memory stays bounded)
            continue
        depth += 1 if char in "[{" else -1
        position += 1
        if depth == 0:
            return position


def _children(text: str, start: int) -> Children:
    """The members (object) or elements (array) of the container whose bracket is at `start`."""
    is_object = text[start] == "{"
    members: dict[str, tuple[int, int, int]] = {}
    elements: list[tuple[int, int, int]] = []
    position = _SPACE.match(text, start + 1).end()  # type: ignore[union-attr]
    while text[position] not in "]}":
        if is_object:
            key = _STRING.match(text, position)
            assert key is not None
            value = _SPACE.match(text, key.end()).end()  # type: ignore[union-attr]
            end = _end_of_value(text, value)
            members[_key(key.group())] = (position, end, value)
        else:
            end = _end_of_value(text, position)
            elements.append((position, end, position))
        position = _SPACE.match(text, end).end()  # type: ignore[union-attr]
    return members if is_object else elements


def _location(text: str, start: int, end: int) -> KeyLocation:
    """[start, end) as 1-based lines and columns, counted for this span only."""
    line = text.count("\n", 0, start) + 1
    column = start - (text.rfind("\n", 0, start) + 1) + 1
    end_line = line + text.count("\n", start, end)
    end_column = end - (text.rfind("\n", 0, end) + 1) + 1
    return KeyLocation(line, column, end_line, end_column)


class KeyLocator(Mapping[str, KeyLocation]):
    """The location of a dotted key ("text_config.linear_num_value_heads", "layer_types.3") of a JSON object's
    text, as `jsonpos.dotted_keys` gives it, found on first use and kept. Iterating over it (or `len`) locates
    every member and element, as `dotted_keys` does: for tests and small documents only."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._containers: dict[int, Children] = {}  # container start offset -> its children
        self._found: dict[str, KeyLocation | None] = {}
        root = _SPACE.match(text).end()  # type: ignore[union-attr]
        self._root = root if root < len(text) and text[root] in "[{" else None

    def _kids(self, start: int) -> Children:
        known = self._containers.get(start)
        if known is None:
            known = self._containers[start] = _children(self._text, start)
        return known

    def _span(self, dotted: str) -> tuple[int, int, int] | None:
        """(start, end, value start) of `dotted`: each part a key of an object or an index of an array. A key
        that holds a dot is tried whole as well (the longest key that matches first)."""
        if self._root is None:
            return None
        parts = dotted.split(".")
        container, index = self._root, 0
        span: tuple[int, int, int] | None = None
        while index < len(parts):
            if self._text[container] not in "[{":
                return None
            kids = self._kids(container)
            span = None
            if isinstance(kids, dict):
                for stop in range(len(parts), index, -1):  # "a.b" as one key before "a" then "b"
                    candidate = kids.get(".".join(parts[index:stop]))
                    if candidate is not None:
                        span, index = candidate, stop
                        break
            else:
                part = parts[index]
                if part.isdigit() and len(part) <= 18 and int(part) < len(kids):
                    span, index = kids[int(part)], index + 1
            if span is None:
                return None
            container = span[2]
        return span

    def __getitem__(self, dotted: str) -> KeyLocation:
        if dotted not in self._found:
            span = self._span(dotted) if isinstance(dotted, str) and dotted else None
            self._found[dotted] = _location(self._text, span[0], span[1]) if span is not None else None
        found = self._found[dotted]
        if found is None:
            raise KeyError(dotted)
        return found

    def __contains__(self, dotted: object) -> bool:
        try:
            self[dotted]  # type: ignore[index]
        except KeyError:
            return False
        return True

    def _walk(self) -> Iterator[str]:
        """Every dotted key, containers before their contents (iteratively: depth costs no recursion)."""
        if self._root is None:
            return
        stack: list[tuple[str, int]] = [("", self._root)]
        while stack:
            prefix, container = stack.pop()
            kids = self._kids(container)
            items = kids.items() if isinstance(kids, dict) else enumerate(kids)
            for name, (_start, _end, value) in items:
                dotted = f"{prefix}{name}"
                yield dotted
                if self._text[value] in "[{":
                    stack.append((dotted + ".", value))

    def __iter__(self) -> Iterator[str]:
        return self._walk()

    def __len__(self) -> int:
        return sum(1 for _ in self._walk())

    def __bool__(self) -> bool:  # (`keys or {}` must not count every element)
        return self._root is not None and self._text[_SPACE.match(self._text, self._root + 1).end()] not in "]}"  # type: ignore[union-attr]
