"""Resolve a rule from its code, its name, or a pasted runtime error message."""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from typing import Any

from .registry import RULES, Rule, get

# What users paste: "ValueError: <message>", possibly a whole traceback.
_EXCEPTION_PREFIX = re.compile(r"^\s*(?:[\w.]+(?:Error|Exception)\s*:\s*)")


@dataclass
class Explanation:
    rule: Rule
    values: dict[str, str] = field(default_factory=dict)
    matched_message: str | None = None

    def to_dict(self) -> dict[str, Any]:
        rule = self.rule
        return {
            "code": rule.code,
            "name": rule.name,
            "severity": rule.severity,
            "summary": rule.summary,
            "message_template": rule.message,
            "explanation": rule.explanation,
            "causes": list(rule.causes),
            "fixes": list(rule.fixes),
            "example": str(rule.example) if rule.example is not None else "",
            "engines": rule.engines,
            "wrapper": dict(rule.wrapper),
            "values": self.values,
            "matched_message": self.matched_message,
        }


def _literal_length(rule: Rule) -> int:
    return sum(len(literal) for literal, *_ in string.Formatter().parse(rule.message))


def _candidates(text: str) -> list[str]:
    """The pasted text, without an exception prefix, and each of its lines (last first: tracebacks end there)."""
    stripped = text.strip()
    lines = [line.strip() for line in stripped.splitlines() if line.strip()]
    out = [stripped, _EXCEPTION_PREFIX.sub("", stripped)]
    for line in reversed(lines):
        out += [line, _EXCEPTION_PREFIX.sub("", line)]
    return list(dict.fromkeys(out))


def match_message(text: str) -> Explanation | None:
    """The rule whose message template matches `text` as a whole; longest literal text wins ties."""
    rules = sorted(RULES.values(), key=_literal_length, reverse=True)
    for candidate in _candidates(text):
        for rule in rules:
            if not rule.fields() and rule.message != candidate:
                continue
            found = rule.message_pattern().fullmatch(candidate)
            if found:
                return Explanation(rule, dict(found.groupdict()), candidate)
    return None


def explain(query: str) -> Explanation | None:
    """A rule by code (`GDR212`), name (`state-pool-not-4d`) or pasted message."""
    rule = get(query)
    if rule is not None:
        return Explanation(rule)
    return match_message(query)
