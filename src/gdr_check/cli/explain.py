"""`gdr-check explain CODE|NAME|"<pasted error message>"`."""

from __future__ import annotations

import difflib
import re

import typer

from ..checks.explain import Explanation
from ..checks.registry import get
from .escape import dump_json
from .escape import text as safe
from .explain_match import MAX_PASTE, match_message
from .main import app
from .output import Output, tool_info

# How much of an unmatched paste the error line quotes.
_QUOTED = 120


def explain(query: str) -> Explanation | None:
    """A rule by code, name or pasted message; the message matched without backtracking (`.explain_match`)."""
    if len(query) <= 64:  # a code or a name is short: a long paste is no lookup key
        rule = get(query)
        if rule is not None:
            return Explanation(rule)
    return match_message(query)


def _cut(query: str) -> str:
    return query if len(query) <= _QUOTED else query[:_QUOTED] + "…"


def _quoted(query: str) -> str:
    return repr(_cut(query))


def _render_full(found: Explanation) -> str:
    rule = found.rule
    lines = [f"{rule.code} {rule.name} ({rule.severity}): {rule.summary}", ""]
    if found.matched_message:
        lines += [f"matched: {safe(found.matched_message)}"]
        if found.values:
            lines += ["values:  " + ", ".join(f"{k}={safe(v)}" for k, v in found.values.items())]
        lines.append("")
    lines += ["message template:", f"  {rule.message}", "", rule.explanation]
    if rule.causes:
        lines += ["", "when it happens:"] + [f"  - {cause}" for cause in rule.causes]
    if rule.fixes:
        lines += ["", "fix:"] + [f"  - {fix}" for fix in rule.fixes]
    if rule.example is not None:  # an executable example (checks/examples.py), shown as its text
        lines += ["", "example:"] + [f"  {line}" for line in str(rule.example).splitlines()]
    if rule.engines:
        lines += ["", f"engines: {rule.engines}"]
    return "\n".join(lines)


# A query of one code-like or kebab-case token is a rule's code or name, not a pasted message.
_RULE_ID = re.compile(r"^(?:[A-Za-z]{3}[0-9]+|[a-z0-9]+(?:-[a-z0-9]+)+)$")


def _suggestion(token: str) -> str:
    from ..checks import RULES

    close = difflib.get_close_matches(token.lower(), [rule.name for rule in RULES.values()], n=1, cutoff=0.6)
    close = close or difflib.get_close_matches(token.upper(), list(RULES), n=1, cutoff=0.8)
    return (f"; did you mean `{close[0]}`?" if close else "") + " (`gdr-check explain --all` lists every rule)"


@app.command("explain")
def explain_command(
    query: str = typer.Argument(None, help="A rule code (GDR212), name (state-pool-not-4d) or a pasted error message."),
    all_rules: bool = typer.Option(False, "--all", help="Explain every rule."),
    output_format: str = typer.Option("full", "--output-format", envvar="GDR_CHECK_OUTPUT_FORMAT",
                                      help="full or json."),
) -> int:
    """Explain a rule, or map a kernel error message to the rule that reports it."""
    from ..checks import RULES

    out = Output(output_format)
    if all_rules:
        found = [entry for code in sorted(RULES) if (entry := explain(code)) is not None]
    elif query:
        single = explain(query)
        if single is None:
            # Exit 2 like any other bad input (ruff's `rule` does the same): 1 means "problems found".
            if _RULE_ID.match(query.strip()):
                error = "unknown rule"
                token = query.strip()
                suggestion = _suggestion(token) if len(token) <= 64 else ""
                out.error_line(f"unknown rule `{_cut(token)}`{suggestion}")
            else:
                error = "no rule matches"
                out.error_line(f"no rule matches {_quoted(query)}",
                               hint="pass a code (GDR212), a rule name, or the whole error message as printed")
            if output_format == "json":
                out.write(dump_json({"tool": tool_info(), "query": query[:MAX_PASTE], "error": error}))
            raise typer.Exit(2)
        found = [single]
    else:
        raise typer.BadParameter("give a code, a rule name or an error message, or --all", param_hint="QUERY")
    if output_format == "json":
        docs = [f.to_dict() for f in found]
        out.write(dump_json(docs if all_rules else docs[0], indent=2))
    else:
        out.write("\n\n".join(_render_full(f) for f in found))
    return 0
