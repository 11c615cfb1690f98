"""Which rules a run reports: `select`, `extend-select` and `ignore`, layered the way ruff layers them.

A selector is `ALL`, a code prefix (`GDR`, `GDR2`, `GDR21`), a full code (`GDR213`) or a rule's kebab-case
name (`state-pool-not-4d`). Selections come in layers, lowest priority first: the built-in default (every
rule), `[tool.gdr-check]`, each matching `[[tool.gdr-check.overrides]]` entry, then the command line.

For one code, each layer decides as follows:
- a layer that sets `select` starts from nothing (it replaces whatever the layers below chose);
- otherwise it starts from the decision of the layers below;
- among the layer's selectors that match the code, the most specific one decides (a full code or name beats
  `GDR21`, which beats `GDR2`, which beats `GDR` and `ALL`); at equal specificity `ignore` wins.

So `select = ["GDR2"], ignore = ["GDR25"]` reports GDR2xx but not GDR25x, and `ignore = ["GDR2"],
extend-select = ["GDR213"]` keeps GDR213 alone of the GDR2xx rules.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import field

from .. import checks
from ..base.records import dataclass
from ..base.registry import CATEGORIES, without_superseded
from ..base.report import Diagnostic

ALL = "ALL"
_CODE_PREFIX = re.compile(r"^GDR\d{0,3}$")
_FULL_CODE_SPECIFICITY = len("GDR000")


class SelectorError(ValueError):
    """A selector that names no rule. `str(e)` is one line with a suggestion when one is close."""


@dataclass(frozen=True)
class Selector:
    text: str  # as the user wrote it, for messages
    prefix: str  # codes that start with this are selected ("" for ALL)
    specificity: int

    def matches(self, code: str) -> bool:
        return code.startswith(self.prefix)


@dataclass(frozen=True)
class RuleSelection:
    """One layer of selection: `select` is None when the layer does not set it."""

    select: tuple[Selector, ...] | None = None
    extend_select: tuple[Selector, ...] = ()
    ignore: tuple[Selector, ...] = ()

    @property
    def is_empty(self) -> bool:
        return self.select is None and not self.extend_select and not self.ignore


@dataclass(frozen=True)
class Selection:
    """The layers of one target, lowest priority first; the default layer (every rule) is implicit."""

    layers: tuple[RuleSelection, ...] = field(default_factory=tuple)

    def is_selected(self, code: str) -> bool:
        enabled = True  # the default layer selects every rule
        for layer in self.layers:
            decision = _layer_decision(layer, code)
            if decision is not None:
                enabled = decision
            elif layer.select is not None:
                enabled = False
        return enabled

    def filter(self, diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
        """The selected diagnostics, less those a selected one supersedes (`Rule.supersedes`)."""
        return without_superseded([d for d in diagnostics if self.is_selected(d.code)])

    def codes(self, all_codes: Iterable[str]) -> list[str]:
        return sorted(code for code in all_codes if self.is_selected(code))


def _layer_decision(layer: RuleSelection, code: str) -> bool | None:
    """True/False when one of the layer's selectors matches `code`, else None."""
    best: tuple[int, int, bool] | None = None
    enabling = (*(layer.select or ()), *layer.extend_select)
    # The tie-breaker (0 for select, 1 for ignore) makes ignore win at equal specificity.
    for selectors, tie, enable in ((enabling, 0, True), (layer.ignore, 1, False)):
        for selector in selectors:
            if selector.matches(code):
                rank = (selector.specificity, tie, enable)
                if best is None or rank[:2] > best[:2]:
                    best = rank
    return None if best is None else best[2]


# -- parsing --------------------------------------------------------------------------------------------------
class _EveryRule(Mapping[str, object]):
    """`gdr_check.checks.RULES`, read when first looked into: it registers every rule module, so a run whose
    selection names no rule never loads the rule modules it does not report from (the pasted-log, launch and
    dry-run rules on a checkpoint's check)."""

    def __getitem__(self, code: str) -> object:
        return checks.RULES[code]

    def __iter__(self) -> Iterator[str]:
        return iter(checks.RULES)

    def __len__(self) -> int:
        return len(checks.RULES)


_EVERY_RULE = _EveryRule()


def known_rules() -> Mapping[str, object]:
    """Every rule, code -> Rule (registered on first use: see `_EveryRule`)."""
    return _EVERY_RULE


def _categories() -> tuple[str, ...]:
    return tuple(CATEGORIES)


def parse_selector(text: str, rules: Mapping[str, object] | None = None) -> Selector:
    """`ALL`, a code or prefix (case-insensitive), or a rule name -> Selector. Raises SelectorError."""
    rules = known_rules() if rules is None else rules
    token = text.strip()
    if token.upper() == ALL:
        return Selector(token, "", 0)
    upper = token.upper()
    if _CODE_PREFIX.match(upper):
        # A category with no rule yet (GDR3) is still a valid prefix: new rules will land there.
        if any(code.startswith(upper) for code in rules) or upper in ("GDR", *_categories()):
            return Selector(token, upper, len(upper))
        raise SelectorError(f"`{token}` selects no rule{_prefix_suggestion(upper, rules)}")
    by_name = {getattr(rule, "name", ""): code for code, rule in rules.items()}
    code = by_name.get(token.lower())
    if code is not None:
        return Selector(token, code, _FULL_CODE_SPECIFICITY)
    raise SelectorError(f"unknown rule selector `{token}`{_suggestion(token, rules)}")


# What a selector can be, for the hints of a selector that selects nothing.
_FORMS = "use a code like GDR213, a prefix like GDR2, ALL, or a rule name; see `gdr-check explain --all`"


def _prefix_suggestion(prefix: str, rules: Mapping[str, object]) -> str:
    """For a code prefix that selects nothing: the longest shorter prefix that does (GDR29 -> GDR2), else the
    categories. (A close code by spelling, GDR409 for GDR9, would select something else entirely.)"""
    shorter = next((prefix[:end] for end in range(len(prefix) - 1, 3, -1)
                    if any(code.startswith(prefix[:end]) for code in rules)), None)
    if shorter is not None:
        return f"; did you mean `{shorter}`? ({_FORMS})"
    categories = _categories()
    return f" (the categories are {categories[0]} to {categories[-1]}; {_FORMS})"


def _suggestion(token: str, rules: Mapping[str, object]) -> str:
    names = [getattr(rule, "name", "") for rule in rules.values()]
    close = difflib.get_close_matches(token.lower(), names, n=1, cutoff=0.6)
    close = close or difflib.get_close_matches(token.upper(), list(rules), n=1, cutoff=0.8)
    hint = f"; did you mean `{close[0]}`?" if close else ""
    return f"{hint} ({_FORMS})"


def split_selectors(values: Iterable[str] | None) -> list[str]:
    """Repeated options and comma-separated lists both work: ["GDR1,GDR2", "GDR3"] -> three tokens."""
    tokens: list[str] = []
    for value in values or ():
        tokens.extend(part.strip() for part in value.split(",") if part.strip())
    return tokens


def parse_selectors(values: Iterable[str] | None, rules: Mapping[str, object] | None = None) -> tuple[Selector, ...]:
    rules = known_rules() if rules is None else rules
    return tuple(parse_selector(token, rules) for token in split_selectors(values))


def rule_selection(select: Sequence[str] | None, extend_select: Sequence[str] | None = None,
                   ignore: Sequence[str] | None = None, rules: Mapping[str, object] | None = None) -> RuleSelection:
    """A layer from lists of selector strings; `select=None` leaves the layers below in place."""
    rules = known_rules() if rules is None else rules
    return RuleSelection(
        select=None if select is None else parse_selectors(select, rules),
        extend_select=parse_selectors(extend_select, rules),
        ignore=parse_selectors(ignore, rules),
    )
