"""Render the rules reference from the registry: the index `docs/rules.md` and one page per rule under
`docs/rules/` (written by the developer script `scripts/generate_rules_doc.py`); `explain` and SARIF use the
per-rule text."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from ..base.registry import CATEGORIES, RULE_SET, Rule, RuleSet
from ..base.variants import variant_spec
from .examples import BASE_TEXT

# The pages live in a folder beside the index named after it: docs/rules.md -> docs/rules/<CODE>.md.
INDEX_NAME = "rules.md"
PAGES_DIR = "rules"
# Rule texts cite the project's reference pages as `docs/<page>.md §N` / `U<n>`; on a rule page they become links.
_DOCS_CITATION = re.compile(r"\bdocs/(kernel-contract|models|engines)\.md\b")


def _wrapper_positions(rule: Rule) -> str:
    return ", ".join(f"{variant_spec(v).label} check {n}" for v, n in sorted(rule.wrapper.items()))


def _rule_body(rule: Rule, prose: Callable[[str], str] = str) -> list[str]:
    lines = [f"*{rule.summary}.* Default severity: **{rule.severity}**."
             + (f" Enforced by the reference wrapper ({_wrapper_positions(rule)})." if rule.wrapper else "")]
    lines += ["", "**Message**", "", "```text", rule.message, "```"]
    lines += ["", "**What it means**", "", prose(rule.explanation)]
    if rule.causes:
        lines += ["", "**When it happens**", ""] + [f"- {prose(cause)}" for cause in rule.causes]
    if rule.example is not None:
        lines += ["", "**Example**", "", "```python", example_text(rule), "```"]
    if rule.fixes:
        lines += ["", "**Fix**", ""] + [f"- {prose(fix)}" for fix in rule.fixes]
    if rule.engines:
        lines += ["", f"**Engines:** {prose(rule.engines)}"]
    if rule.supersedes:
        codes = ", ".join(rule.supersedes)
        lines += ["", f"**Replaces** {codes} in the same report when both are found: one cause, said once."]
    replaced_by = [other.code for other in RULE_SET.rules.values() if rule.code in other.supersedes]
    if replaced_by:
        lines += ["", f"**Replaced by** {', '.join(replaced_by)} in the same report when both are found."]
    return lines


def example_text(rule: Rule) -> str:
    return str(rule.example) if rule.example is not None else ""


def _wrapper_orders(rules: RuleSet) -> Iterable[str]:
    for variant, steps in rules.wrapper_orders.items():
        checks = [" = ".join(step) if isinstance(step, tuple) else step for step in steps]
        yield f"- {variant_spec(variant).label} wrapper, checks 1-{len(steps)}: " + ", ".join(checks)


def render_rule(rule: Rule) -> str:
    """One rule as a Markdown section (SARIF help text)."""
    return "\n".join([f"### {rule.code} `{rule.name}`", ""] + _rule_body(rule)) + "\n"


def _category(rule: Rule) -> str:
    return next((f"{prefix}xx: {title}" for prefix, title in CATEGORIES.items() if rule.code.startswith(prefix)), "")


def _link_citations(text: str) -> str:
    return _DOCS_CITATION.sub(lambda m: f"[docs/{m[1]}.md](../{m[1]}.md)", text)


def render_rule_page(rule: Rule, index_name: str = INDEX_NAME) -> str:
    """The page `docs/rules/<CODE>.md`: the rule's text under a title, with a link back to the index."""
    header = [f"# {rule.code} `{rule.name}`", "", f"[All rules](../{index_name}) · {_category(rule)}", ""]
    if rule.code.startswith("GDR2") and rule.example is not None:
        header += [f"The example is a packed-decode call that changes {BASE_TEXT}.", ""]
    return "\n".join(header + _rule_body(rule, _link_citations)) + "\n"


def rule_page_name(code: str) -> str:
    return f"{code}.md"


def render_pages(index_name: str = INDEX_NAME, rules: RuleSet = RULE_SET) -> dict[str, str]:
    """File name (inside `docs/rules/`) -> page text, one per registered rule."""
    return {rule_page_name(code): render_rule_page(rules.rules[code], index_name) for code in sorted(rules.rules)}


def render_index(pages_dir: str = PAGES_DIR, rules: RuleSet = RULE_SET) -> str:
    """`docs/rules.md`: every rule, grouped by category, linking to its page."""
    out = [
        "# gdr-check rules",
        "",
        "Generated from the rule registry by `python scripts/generate_rules_doc.py docs/rules.md`; do not edit by",
        f"hand. Each rule has its own page under [{pages_dir}/]({pages_dir}/). Wrapper-enforced kernel rules quote",
        "the reference wrapper's message exactly (sglang 0.5.23).",
    ]
    ordered = sorted(rules.rules.values(), key=lambda r: r.code)
    for prefix, title in CATEGORIES.items():
        group = [r for r in ordered if r.code.startswith(prefix)]
        if group:
            out += ["", f"## {prefix}xx: {title}", ""]
            if prefix == "GDR2":
                out += ["The reference wrappers check in this order (codes sharing a check joined by `=`):", ""]
                out += list(_wrapper_orders(rules))
                out += [""]
            out += ["| code | name | severity | summary |", "|---|---|---|---|"]
            out += [f"| [{r.code}]({pages_dir}/{rule_page_name(r.code)}) | `{r.name}` | {r.severity} | {r.summary} |"
                    for r in group]
    return "\n".join(out) + "\n"
