"""A rule's message template as a regex, the tests' oracle for a message a rule wrote (tests only)."""

from __future__ import annotations

import re
import string

from gdr_check.base.registry import Rule


def message_pattern(rule: Rule) -> re.Pattern[str]:
    """Each `{field}` of the template becomes a named wildcard. It backtracks on crafted text: tests use it on
    short lines; `checks.explain` matches pasted text without it."""
    parts, seen = [], set()
    for literal, name, _, _ in string.Formatter().parse(rule.message):
        parts.append(re.escape(literal))
        if name:
            group = re.sub(r"\W", "_", name)
            parts.append(f"(?P={group})" if group in seen else f"(?P<{group}>.+?)")
            seen.add(group)
    return re.compile("".join(parts))
