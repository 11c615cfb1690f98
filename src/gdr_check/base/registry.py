"""The one registry of checks, ruff-style: each rule is a declarative unit with a stable code.

A rule declares its code (`GDR` + three digits, grouped by hundreds), kebab-case name, default severity,
message template, explanation, typical causes, generic fixes and an executable example (an input that triggers
it; tests/test_rule_examples.py runs every one). Rules that examine a kernel call or a model carry a `check`
function; rules raised by readers (GDR0xx) or the dry-run (GDR3xx) are declared here and reported where they
are detected. Docs are generated from these declarations.

The rules live in a `RuleSet`; `RULE_SET` is the package's, and the module-level `RULES`, `declare`, `rule`,
`get` and `rules_in_scope` are its. A rule set also holds each reference wrapper's order of checks, declared
once per variant as a tuple of codes (`declare_wrapper_order`): the rules' positions ("check N") and the
contract engine's all-clear fast path (`checks.call_plan`) are derived from it.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
import string
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import field
from typing import (
    Any,
    ClassVar,
    Protocol,
    TypeVar,
    Union,
)

from .records import dataclass
from .report import Diagnostic, Location, Severity

CATEGORIES: dict[str, str] = {
    "GDR0": "File and format integrity",
    "GDR1": "Model config, layer map and tensor parallelism",
    "GDR2": "Kernel preconditions",
    "GDR3": "Dry-run results",
    "GDR4": "Errors pasted from engine logs",
    "GDR5": "Engine launch: start-up memory and limits",
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


# What a check function returns: nothing, one finding, or several.
CheckResult = Finding | Iterable[Finding] | None
# A check function, whatever context it takes; `RuleSet.rule` hands it back with its own signature.
CheckT = TypeVar("CheckT", bound=Callable[[Any], CheckResult])


class Example(Protocol):
    """An executable example of a rule: a small input that triggers it (and no other error), as data.

    `text` is what the docs show; `gdr_check.pipeline.example_runner.run_example` runs the input through the stage that
    reports the rule (the contract engine for a call, the model check for a config, ...), which may sit above
    the rules, so the example itself only describes its input."""

    @property
    def text(self) -> str: ...


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
    example: Example | None = None
    engines: str = ""
    # Position of this check in each reference wrapper ("gdn"/"kda" -> 1-based index); empty when the
    # wrapper does not check it. Derived from the rule set's wrapper orders, never written by hand.
    wrapper: Mapping[str, int] = field(default_factory=dict)
    scope: str = "call"
    check: Callable[[Any], CheckResult] | None = None
    # A wrapper rule's pass predicate: a Python expression that is true only when `check` finds nothing
    # (it may be false spuriously). It may assume that the predicates of the checks before it in each
    # wrapper's order hold. Its names: `ctx`, `c` (the call), the call's tensors `mixed_qkv`, `a`, `b`,
    # `A_log`, `dt_bias`, `state`, `out`, `indices`, the context's `B`, `HV`, `V`, `K`, `qkv_dim`, `qk_dim`
    # (`qkv_dim - HV * V`, the q and k channels; 0 when either is unknown), and the
    # globals of the module that defines `check`. An expression, not a function: the engine joins the
    # predicates of a wrapper into one compiled function (`call_plan`), as fast as a hand-written one.
    clear: str = ""
    # Codes this rule's finding replaces in the same report when both are reported: the same cause counted more
    # fully (GDR136's requests with the engine's extra slots, over GDR132's plain ones). Applied after the rule
    # selection (`without_superseded`), so ignoring this rule brings the other back.
    supersedes: tuple[str, ...] = ()
    # The check reads where the tensors lie (storages, offsets), not only their shapes: a verdict kept per call
    # signature (the checked kernels, the runtime guard) judges this rule again on every call.
    by_address: bool = False
    # Text of the lines an engine or PyTorch prints after this rule's message that name the same error on their
    # own (`cudaErrorIllegalAddress` after `CUDA error: an illegal memory access was encountered`): a paste that
    # lost the message's line is still read as this rule, and says the line is missing (pasted rules only).
    follow_on: tuple[str, ...] = ()

    def fields(self) -> list[str]:
        return [name for _, name, _, _ in string.Formatter().parse(self.message) if name]

    def diagnostic(self, finding: Finding | None = None, **values: Any) -> Diagnostic:
        finding = finding or Finding()
        return self.diagnostic_with(finding, {**finding.values, **values} if values else finding.values, {})

    def located(self, values: dict[str, Any], fixes: list[str], location: Location) -> Diagnostic:
        """The diagnostic of a rule reported outside a check function (a reader's `SourceError`), at `location`."""
        return self.diagnostic(Finding(values=values, fixes=fixes, location=location))

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


_CODE = re.compile(r"^GDR\d{3}$")
_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")

# One step of a wrapper: a code, or the codes that share one position (K = 0 fails at the Q-size check with
# a ZeroDivisionError instead of its ValueError: GDR227 shares GDR218's step).
Step = Union[str, "tuple[str, ...]"]

class RuleSet:
    """Rules by code and name, and the reference wrappers' orders of checks."""

    def __init__(self) -> None:
        self.rules: dict[str, Rule] = {}
        self.by_name: dict[str, Rule] = {}
        self.wrapper_orders: dict[str, tuple[Step, ...]] = {}
        self._positions: dict[str, dict[str, int]] = {}  # code -> {variant: position}

    # -- declaring -------------------------------------------------------------------------------------
    def declare_wrapper_order(self, variant: str, steps: Sequence[Step]) -> tuple[Step, ...]:
        """Declare the checks of `variant`'s reference wrapper, in the order it makes them, before their
        rules: each rule declared afterwards gets its 1-based position from here."""
        if variant in self.wrapper_orders:
            raise ValueError(f"the {variant} wrapper order is declared twice")
        steps = tuple(steps)
        for position, step in enumerate(steps, 1):
            for code in (step,) if isinstance(step, str) else step:
                if code in self.rules:
                    raise ValueError(f"{code} is declared before the {variant} wrapper order that places it")
                if variant in self._positions.setdefault(code, {}):
                    raise ValueError(f"{code} appears twice in the {variant} wrapper order")
                self._positions[code][variant] = position
        self.wrapper_orders[variant] = steps
        return steps

    def declare(self, code: str, name: str, *, severity: Severity = "error", scope: str = "call",
                **fields: Any) -> Rule:
        """Register a rule that is reported where it is detected (a reader, the dry-run)."""
        for key in ("fixes", "causes"):
            if key in fields:
                fields[key] = tuple(fields[key])
        if "wrapper" in fields:
            raise ValueError(f"{code}: wrapper positions come from the wrapper order, not the rule")
        wrapper = dict(self._positions.get(code, {}))
        rule = Rule(code=code, name=name, severity=severity, scope=scope, wrapper=wrapper, **fields)
        if not _CODE.match(rule.code):
            raise ValueError(f"bad rule code {rule.code!r}")
        if not _NAME.match(rule.name):
            raise ValueError(f"bad rule name {rule.name!r}")
        if rule.code in self.rules or rule.name in self.by_name:
            raise ValueError(f"duplicate rule {rule.code} {rule.name}")
        if rule.clear and not wrapper:
            raise ValueError(f"{code} has a pass predicate but no wrapper order places it")
        if rule.clear and rule.severity != "error":
            raise ValueError(f"{code}: only error-raising wrapper rules have pass predicates")
        if wrapper and rule.severity == "error" and rule.check is not None and not rule.clear:
            raise ValueError(f"{code}: an error-raising wrapper rule needs its pass predicate (`clear=`)")
        if rule.clear:
            compile(rule.clear, f"<{code} clear>", "eval")  # a syntax error fails at import
        self.rules[rule.code] = rule
        self.by_name[rule.name] = rule
        return rule

    def rule(self, code: str, name: str, *, severity: Severity = "error", scope: str = "call", **fields: Any
             ) -> Callable[[CheckT], CheckT]:
        """Decorator: register a rule whose check function examines a call or model context; the function
        comes back unchanged, with its own signature."""

        def wrap(check: CheckT) -> CheckT:
            self.declare(code, name, severity=severity, scope=scope, check=check, **fields)
            return check

        return wrap

    # -- reading ---------------------------------------------------------------------------------------
    def get(self, code_or_name: str) -> Rule | None:
        key = code_or_name.strip()
        # Names in any case, with underscores for hyphens (`State_Pool_Not_4D`), as codes in any case.
        return self.rules.get(key.upper()) or self.by_name.get(key.lower().replace("_", "-"))

    def in_scope(self, scope: str) -> list[Rule]:
        return sorted((r for r in self.rules.values() if r.scope == scope), key=lambda r: r.code)

    def wrapper_steps(self, variant: str) -> list[tuple[Rule, ...]]:
        """The rules of each step of `variant`'s wrapper, in its order; fails on a code with no rule."""
        steps = []
        for step in self.wrapper_orders[variant]:
            codes = (step,) if isinstance(step, str) else step
            missing = [code for code in codes if code not in self.rules]
            if missing:
                raise LookupError(f"the {variant} wrapper order names undeclared rules: {', '.join(missing)}")
            steps.append(tuple(self.rules[code] for code in codes))
        return steps


_DIAGNOSTIC_FIELDS = ("code", "name", "severity", "message", "fixes", "wrapper", "notes", "location", "bindings",
                      "summary")
if tuple(f.name for f in dataclasses.fields(Diagnostic)) != _DIAGNOSTIC_FIELDS:  # Rule.diagnostic_with relies on it
    raise RuntimeError("report.Diagnostic's fields changed: update Rule.diagnostic_with")

RULE_SET = RuleSet()
RULES: dict[str, Rule] = RULE_SET.rules
declare = RULE_SET.declare
rule = RULE_SET.rule
get = RULE_SET.get
rules_in_scope = RULE_SET.in_scope
declare_wrapper_order = RULE_SET.declare_wrapper_order


class Violation:
    """One finding of a rule that is reported outside a check function (the dry-run's GDR3xx, GDR101), typed.

    A subclass per rule sets `rule = declare(...)` and annotates one field per field of the rule's message;
    the class is refused at import when the two differ, and an instance at construction when a field is
    missing or unknown: `OutputMismatch(kernel=..., step=..., ...).diagnostic(argument="out")`.
    """

    rule: ClassVar[Rule]
    fields: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _, cls.fields = declared_rule(cls)

    def __init__(self, **values: Any) -> None:
        check_values(type(self), self.rule, self.fields, values)
        self.values = values

    def finding(self, *, fixes: Iterable[str] = (), notes: Iterable[str] = (), argument: str | None = None,
                location: Location | None = None) -> Finding:
        return Finding(dict(self.values), list(fixes), list(notes), argument, location)

    def diagnostic(self, **where: Any) -> Diagnostic:
        return self.rule.diagnostic(self.finding(**where))


def findings_of(result: CheckResult) -> list[Finding]:
    if result is None:
        return []
    if isinstance(result, Finding):
        return [result]
    return list(result)


def without_superseded(diagnostics: list[Diagnostic], rules: RuleSet | None = None) -> list[Diagnostic]:
    """`diagnostics` less those whose code another one's rule supersedes (`Rule.supersedes`)."""
    table = (rules or RULE_SET).rules
    replaced = {old for d in diagnostics if (rule := table.get(d.code)) is not None for old in rule.supersedes}
    return [d for d in diagnostics if d.code not in replaced] if replaced else diagnostics
