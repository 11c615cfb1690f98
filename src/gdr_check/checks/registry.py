"""The one registry of checks, ruff-style: each rule is a declarative unit with a stable code.

A rule declares its code (`GDR` + three digits, grouped by hundreds), kebab-case name, default severity,
message template, explanation, typical causes and generic fixes. Rules that examine a kernel call or a
model carry a `check` function; rules raised by readers (GDR0xx) or the dry-run (GDR3xx) are declared here
and reported where they are detected. Docs are generated from these declarations.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import string
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from ..report import Diagnostic, Location, Severity

CATEGORIES: dict[str, str] = {
    "GDR0": "File and format integrity",
    "GDR1": "Model config, layer map and tensor parallelism",
    "GDR2": "Kernel preconditions",
    "GDR3": "Dry-run results",
}


@dataclass
class Finding:
    """What a check function returns: the values for the message template and the concrete fixes."""

    values: dict[str, Any] = field(default_factory=dict)
    fixes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    argument: str | None = None
    location: Location | None = None
    severity: Severity | None = None


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    severity: Severity
    summary: str
    message: str
    explanation: str
    fixes: tuple[str, ...] = ()
    causes: tuple[str, ...] = ()
    example: str = ""
    engines: str = ""
    # Position of this check in each reference wrapper ("gdn"/"kda" -> 1-based index); empty when the
    # wrapper does not check it.
    wrapper: Mapping[str, int] = field(default_factory=dict)
    scope: str = "call"
    check: Callable[[Any], Finding | Iterable[Finding] | None] | None = None

    @property
    def is_wrapper_check(self) -> bool:
        return bool(self.wrapper)

    def fields(self) -> list[str]:
        return [name for _, name, _, _ in string.Formatter().parse(self.message) if name]

    def diagnostic(self, finding: Finding | None = None, **values: Any) -> Diagnostic:
        finding = finding or Finding()
        return self.diagnostic_with(finding, {**finding.values, **values} if values else finding.values, {})

    def diagnostic_with(self, finding: Finding, values: Mapping[str, Any], bindings: dict[str, Any]) -> Diagnostic:
        """The diagnostic for `finding`, its message filled from `values`; `bindings` (a dict the diagnostic
        takes over) gets every int, float, str or tuple of `values` on top: `{**bindings, **those}` in one
        step, which is what the contract engine needs for each of its diagnostics."""
        for key, value in values.items():
            if isinstance(value, (int, float, str, tuple)):
                bindings[key] = value
        location = finding.location
        if location is None and finding.argument:
            location = Location(argument=finding.argument)
        # Positional, in the field order `_DIAGNOSTIC_FIELDS` pins: passing ten keywords costs as much as the
        # rest of the constructor (the runtime guard builds a diagnostic for every finding of every call).
        return Diagnostic(
            self.code,
            self.name,
            finding.severity or self.severity,
            self.message.format_map(values) if self._template_has_fields else self.message,
            list(finding.fixes),
            bool(self.wrapper),
            list(finding.notes),
            location,
            bindings,
            self.summary,
        )

    @functools.cached_property
    def _template_has_fields(self) -> bool:
        # A message without braces is its own formatted text: skipping `format` saves a fifth of the cost of
        # a diagnostic. (A cached_property writes the instance dict directly, so it works on a frozen class.)
        return "{" in self.message or "}" in self.message

    def message_pattern(self) -> re.Pattern[str]:
        """The message template as a regex: each `{field}` becomes a named wildcard."""
        parts, seen = [], set()
        for literal, name, _, _ in string.Formatter().parse(self.message):
            parts.append(re.escape(literal))
            if name:
                group = re.sub(r"\W", "_", name)
                parts.append(f"(?P={group})" if group in seen else f"(?P<{group}>.+?)")
                seen.add(group)
        return re.compile("".join(parts))


_DIAGNOSTIC_FIELDS = ("code", "name", "severity", "message", "fixes", "wrapper", "notes", "location", "bindings",
                      "summary")
if tuple(f.name for f in dataclasses.fields(Diagnostic)) != _DIAGNOSTIC_FIELDS:  # Rule.diagnostic_with relies on it
    raise RuntimeError("report.Diagnostic's fields changed: update Rule.diagnostic_with")

RULES: dict[str, Rule] = {}
_BY_NAME: dict[str, Rule] = {}
_CODE = re.compile(r"^GDR\d{3}$")
_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


def _register(rule: Rule) -> Rule:
    if not _CODE.match(rule.code):
        raise ValueError(f"bad rule code {rule.code!r}")
    if not _NAME.match(rule.name):
        raise ValueError(f"bad rule name {rule.name!r}")
    if rule.code in RULES or rule.name in _BY_NAME:
        raise ValueError(f"duplicate rule {rule.code} {rule.name}")
    RULES[rule.code] = rule
    _BY_NAME[rule.name] = rule
    return rule


def declare(code: str, name: str, *, severity: Severity = "error", scope: str = "call", **fields: Any) -> Rule:
    """Register a rule that is reported where it is detected (a reader, the dry-run)."""
    for key in ("fixes", "causes"):
        if key in fields:
            fields[key] = tuple(fields[key])
    return _register(Rule(code=code, name=name, severity=severity, scope=scope, **fields))


def rule(code: str, name: str, *, severity: Severity = "error", scope: str = "call", **fields: Any):
    """Decorator: register a rule whose check function examines a call or model context."""

    def wrap(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
        declare(code, name, severity=severity, scope=scope, check=check, **fields)
        return check

    return wrap


def get(code_or_name: str) -> Rule | None:
    key = code_or_name.strip()
    return RULES.get(key.upper()) or _BY_NAME.get(key.lower())


def rules_in_scope(scope: str) -> list[Rule]:
    return sorted((r for r in RULES.values() if r.scope == scope), key=lambda r: r.code)


def findings_of(result: Finding | Iterable[Finding] | None) -> list[Finding]:
    if result is None:
        return []
    if isinstance(result, Finding):
        return [result]
    return list(result)
