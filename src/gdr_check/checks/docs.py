"""Render the rules reference from the registry (the developer script `scripts/generate_rules_doc.py` writes it
to `docs/rules.md`; `explain` and SARIF use the per-rule text)."""

from __future__ import annotations

from typing import Iterable

from .registry import CATEGORIES, RULE_SET, Rule, RuleSet

def _wrapper_positions(rule: Rule) -> str:
    names = {"gdn": "GDN", "kda": "KDA"}
    return ", ".join(f"{names[v]} check {n}" for v, n in sorted(rule.wrapper.items()))


def render_rule(rule: Rule) -> str:
    lines = [f"### {rule.code} `{rule.name}`", ""]
    lines.append(f"*{rule.summary}.* Default severity: **{rule.severity}**."
                 + (f" Enforced by the reference wrapper ({_wrapper_positions(rule)})." if rule.wrapper else ""))
    lines += ["", "**Message**", "", "```text", rule.message, "```", "", "**What it means**", "", rule.explanation]
    if rule.causes:
        lines += ["", "**When it happens**", ""] + [f"- {cause}" for cause in rule.causes]
    if rule.example is not None:
        lines += ["", "**Example**", "", "```python", example_text(rule), "```"]
    if rule.fixes:
        lines += ["", "**Fix**", ""] + [f"- {fix}" for fix in rule.fixes]
    if rule.engines:
        lines += ["", f"**Engines:** {rule.engines}"]
    return "\n".join(lines) + "\n"


def example_text(rule: Rule) -> str:
    return str(rule.example) if rule.example is not None else ""


def _wrapper_orders(rules: RuleSet) -> Iterable[str]:
    for variant, steps in rules.wrapper_orders.items():
        checks = [" = ".join(step) if isinstance(step, tuple) else step for step in steps]
        yield f"- {variant.upper()} wrapper, checks 1-{len(steps)}: " + ", ".join(checks)


def render(rules: RuleSet = RULE_SET) -> str:
    out = [
        "# gdr-check rules",
        "",
        "Generated from the rule registry by `python scripts/generate_rules_doc.py docs/rules.md`; do not edit by hand.",
        "Wrapper-enforced kernel rules quote the reference wrapper's message exactly (sglang 0.5.23).",
        "",
        "| code | name | severity | summary |",
        "|---|---|---|---|",
    ]
    ordered = sorted(rules.rules.values(), key=lambda r: r.code)
    out += [f"| {r.code} | [`{r.name}`](#{r.code.lower()}-{r.name}) | {r.severity} | {r.summary} |" for r in ordered]
    for prefix, title in CATEGORIES.items():
        group = [r for r in ordered if r.code.startswith(prefix)]
        if group:
            out += ["", f"## {prefix}xx: {title}", ""]
            if prefix == "GDR2":
                from .examples import BASE_TEXT

                out += ["The reference wrappers check in this order (codes sharing a check joined by `=`):", ""]
                out += list(_wrapper_orders(rules))
                out += ["", f"Each example below is a packed-decode call that changes {BASE_TEXT}.", ""]
            out += [render_rule(r) for r in group]
    return "\n".join(out).rstrip() + "\n"
