"""Map pasted text to the rule whose message template it is, in time linear in the text.

`gdr_check.checks.explain.match_message` turns each template into a regex of lazy wildcards (`.+?`) and
fullmatches every line of the paste against every rule: with up to seven wildcards a crafted line of a few
thousand characters backtracks for minutes. This gives the same answer without backtracking: a template is
literals between wildcards that hold one line of at least one character, and placing each literal at its
earliest position after the previous one is exactly the assignment the lazy regex finds first (any later
placement only leaves less room for the rest). A template that repeats a field (a backreference) is matched
with its regex, on lines of bounded length only.
"""

from __future__ import annotations

import string
from functools import cache

from ..checks.explain import Explanation
from ..checks.registry import RULES, Rule

# A pasted message, or traceback, longer than this is cut: the line that names the problem is short.
MAX_PASTE = 64 * 1024
# Lines a backreferencing template's regex may see (quadratic in the worst case: bounded).
MAX_REGEX_LINE = 1024
_SUFFIXES = ("Error", "Exception")


@cache
def _pieces(message: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The literals (one more than the fields) and the fields of a template."""
    literals, fields = [""], []
    for literal, name, _, _ in string.Formatter().parse(message):
        literals[-1] += literal
        if name is not None:
            fields.append(name)
            literals.append("")
    return tuple(literals), tuple(fields)


def _literal_length(rule: Rule) -> int:
    return sum(len(literal) for literal in _pieces(rule.message)[0])


def _without_exception_prefix(line: str) -> str:
    """`ValueError: msg` -> `msg` (what `_EXCEPTION_PREFIX` strips), by scanning rather than backtracking."""
    body = line.lstrip()
    colon = body.find(":")
    if colon <= 0:
        return line
    name = body[:colon].rstrip()
    if not name.endswith(_SUFFIXES) or not all(c.isalnum() or c in "._" for c in name):
        return line
    stem = name[: -len("Error")] if name.endswith("Error") else name[: -len("Exception")]
    if not stem:  # `[\w.]+` needs at least one character before the suffix
        return line
    return body[colon + 1:].lstrip()


def candidates(text: str) -> list[str]:
    """The pasted text, without an exception prefix, and each of its lines (last first), as `match_message`."""
    stripped = text.strip()
    lines = [line.strip() for line in stripped.splitlines() if line.strip()]
    out = [stripped, _without_exception_prefix(stripped)]
    for line in reversed(lines):
        out += [line, _without_exception_prefix(line)]
    return list(dict.fromkeys(out))


def _fullmatch(literals: tuple[str, ...], fields: tuple[str, ...], line: str) -> dict[str, str] | None:
    """The lazy regex's first match of the template against `line`, found by literal search (linear)."""
    if not line.startswith(literals[0]):
        return None
    if not fields:
        return {} if line == literals[0] else None
    values: dict[str, str] = {}
    position = len(literals[0])
    last = literals[-1]
    tail_start = len(line) - len(last)
    if not line.endswith(last):
        return None
    for index, name in enumerate(fields):
        if index == len(fields) - 1:
            end = tail_start
        else:
            end = line.find(literals[index + 1], position + 1)
            if end < 0:
                return None
        if end <= position:
            return None
        values[name] = line[position:end]
        position = end + len(literals[index + 1])
    if position != len(line):
        return None
    return values


def _group(name: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)


def match_message(text: str) -> Explanation | None:
    """The rule whose message template matches a line of `text` (or all of it) as a whole; longest literal
    text wins ties: `checks.explain.match_message`'s answer, in linear time."""
    rules = sorted(RULES.values(), key=_literal_length, reverse=True)
    for candidate in candidates(text[:MAX_PASTE]):
        one_line = "\n" not in candidate  # what the regex's `.` cannot cross
        for rule in rules:
            literals, fields = _pieces(rule.message)
            if not fields:
                if rule.message == candidate:
                    return Explanation(rule, {}, candidate)
                continue
            if not one_line:  # a wildcard holds no line break and no template has one
                continue
            if len(set(fields)) != len(fields):
                if len(candidate) > MAX_REGEX_LINE:
                    continue
                found = rule.message_pattern().fullmatch(candidate)
                if found:
                    return Explanation(rule, dict(found.groupdict()), candidate)
                continue
            values = _fullmatch(literals, fields, candidate)
            if values is not None:
                return Explanation(rule, {_group(k): v for k, v in values.items()}, candidate)
    return None
