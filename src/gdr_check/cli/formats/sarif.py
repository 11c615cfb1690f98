"""`--output-format sarif`: a SARIF 2.1.0 log that GitHub code scanning accepts.

One run holds every (target, TP size) result. Each result points at a file relative to the working directory
(run gdr-check from the repository root): the config key or index line, or, for a diagnostic without a file
(a kernel argument, a TP rule), the checkpoint's `config.json` or index, naming the argument, key or tensor
as a logical location. Fingerprints hash the code, that path and the key/tensor/argument (plus the TP size),
never line numbers or absolute paths, so an alert keeps its identity across runs. Info notes are no results
unless `--show-info`: nothing can be changed to close them, so they would stay open alerts forever.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import PurePath
from typing import Any
from urllib.parse import quote

from ...base import registry
from ...base.identity import tool_info
from ...base.registry import CATEGORIES
from ...base.report import Diagnostic, rule_url
from ...checks.docs import render_rule
from ...pipeline.results import FatalError, Run, TargetResult
from ...pipeline.selection import known_rules
from ..escape import dump_json
from .common import alerts, tp_suffix, where
from .options import RenderOptions

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
LEVEL = {"error": "error", "warning": "warning", "info": "note"}
# GitHub's own severity scale for non-security alerts.
PROBLEM_SEVERITY = {"error": "error", "warning": "warning", "info": "recommendation"}
GITHUB_TEXT_LIMIT = 1024


# -- rules ----------------------------------------------------------------------------------------------------
def _limit(text: str, limit: int = GITHUB_TEXT_LIMIT) -> str:
    """At most `limit` characters, cut at a sentence end when there is one."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    sentence_end = cut.rfind(". ")
    return cut[: sentence_end + 1] if sentence_end > limit // 2 else cut.rstrip() + "…"


def _capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


def _category(code: str) -> str:
    return next((title for prefix, title in CATEGORIES.items() if code.startswith(prefix)), "gdr-check")


def rule_descriptor(rule: Any) -> dict[str, Any]:
    """A reportingDescriptor built from the registry; the same text as `gdr-check explain` and docs/rules/."""

    summary = rule.summary or rule.name.replace("-", " ")
    help_lines = [rule.explanation] + ([""] + [f"Fix: {fix}" for fix in rule.fixes] if rule.fixes else [])
    descriptor: dict[str, Any] = {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": _limit(_capitalised(summary))},
        "fullDescription": {"text": _limit(rule.explanation or summary)},
        "help": {"text": "\n".join(help_lines).strip() or summary, "markdown": render_rule(rule)},
        "defaultConfiguration": {"level": LEVEL[rule.severity]},
        "properties": {"tags": [_category(rule.code)], "precision": "very-high",
                       "problem.severity": PROBLEM_SEVERITY[rule.severity]},
    }
    descriptor["helpUri"] = rule_url(rule.code)  # absolute: the rule's page in this release
    return descriptor


def _rules_for(codes: list[str]) -> list[dict[str, Any]]:
    known_rules()
    return [rule_descriptor(registry.RULES[code]) for code in codes if code in registry.RULES]


# -- locations ------------------------------------------------------------------------------------------------
def artifact_uri(path: str) -> str:
    """A relative path as a relative URI (what GitHub resolves against the repository root); an absolute
    path as a file URI."""
    if os.path.isabs(path):
        return "file://" + quote(os.fsencode(PurePath(os.path.abspath(path)).as_posix()), safe="/-._~!$&'()*+,;=:@")
    # A name that was not UTF-8 keeps its bytes, percent-encoded (fsencode undoes surrogateescape).
    return quote(os.fsencode(PurePath(path).as_posix()), safe="/-._~!$&'()*+,;=:@")


def stable_path(path: str) -> str:
    """The path part of a fingerprint: relative paths as they are; an absolute one by its last two parts, so
    that a different checkout directory does not change the fingerprint."""
    parts = PurePath(path).parts
    return PurePath(path).as_posix() if not os.path.isabs(path) else "/".join(parts[-2:])


def _logical(diagnostic: Diagnostic) -> list[dict[str, str]]:
    location = diagnostic.location
    if location is None:
        return []
    for name, kind in ((location.argument, "parameter"), (location.json_key, "member"), (location.tensor, "variable")):
        if name:
            return [{"name": name, "kind": kind}]
    return []


def location(result: TargetResult, diagnostic: Diagnostic) -> dict[str, Any]:
    place = where(result, diagnostic)
    line, column = place.start
    region: dict[str, int] = {"startLine": line, "startColumn": column}
    if place.end_line is not None:
        region["endLine"] = place.end_line
    if place.end_column is not None:
        region["endColumn"] = place.end_column
    # A built-in description has no file: the target (a repo id) is the artifact.
    found: dict[str, Any] = {"physicalLocation": {"artifactLocation": {"uri": artifact_uri(place.path or place.target)},
                                                  "region": region}}
    logical = _logical(diagnostic)
    if logical:
        found["logicalLocations"] = logical
    return found


def fingerprint(result: TargetResult, diagnostic: Diagnostic) -> str:
    place = where(result, diagnostic)
    loc = diagnostic.location
    anchor = next((x for x in ((loc.json_key, loc.tensor, loc.argument) if loc else ()) if x), "")
    parts = [diagnostic.code, stable_path(place.path or place.target), anchor, str(result.deployment_tp or "")]
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()[:32]


def message_text(run: Run, result: TargetResult, diagnostic: Diagnostic) -> str:
    """The message first (GitHub shows its first sentence), then where in the checkpoint, notes and help."""
    text = diagnostic.message
    loc = diagnostic.location
    if loc is not None and loc.tensor and loc.shard:
        text += f" (tensor `{loc.tensor}` in `{loc.shard}`)"
    elif loc is not None and loc.argument and not loc.file:
        text += f" (kernel argument `{loc.argument}`)"
    text += tp_suffix(run, result)
    extra = [f"note: {note}" for note in diagnostic.notes] + [f"help: {fix}" for fix in diagnostic.fixes]
    return "\n".join([text, *extra])


# -- the log --------------------------------------------------------------------------------------------------
def _driver(codes: list[str]) -> dict[str, Any]:
    info = tool_info()
    return {"name": info["name"], "version": info["version"], "semanticVersion": info["version"],
            "rules": _rules_for(codes)}


def _notification(error: FatalError, result: TargetResult | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {"level": "error", "message": {"text": error.message}, "descriptor": {"id": error.code}}
    if result is not None and error.diagnostic is not None:
        found["locations"] = [location(result, error.diagnostic)]
    return found


def log(run: Run, options: RenderOptions) -> dict[str, Any]:
    pairs = list(alerts(run, options))
    codes = sorted({diagnostic.code for _, diagnostic in pairs})
    index = {code: i for i, code in enumerate(c for c in codes if c in _known_codes())}
    seen: dict[str, int] = {}
    results: list[dict[str, Any]] = []
    for result, diagnostic in pairs:
        hashed = fingerprint(result, diagnostic)
        seen[hashed] = seen.get(hashed, 0) + 1  # GitHub's `hash:occurrence` form keeps repeats apart
        entry: dict[str, Any] = {"ruleId": diagnostic.code}
        if diagnostic.code in index:
            entry["ruleIndex"] = index[diagnostic.code]
        entry.update({
            "level": LEVEL[diagnostic.severity],
            "message": {"text": message_text(run, result, diagnostic)},
            "locations": [location(result, diagnostic)],
            "partialFingerprints": {"primaryLocationLineHash": f"{hashed}:{seen[hashed]}"},
            "properties": {"target": result.target, "tp": result.deployment_tp, "name": diagnostic.name},
        })
        results.append(entry)
    notifications = [_notification(r.error, r) for r in run.results if r.error is not None]
    invocation: dict[str, Any] = {"executionSuccessful": not notifications, "exitCode": run.exit_code}
    if notifications:
        invocation["toolExecutionNotifications"] = notifications
    return {"$schema": SCHEMA_URI, "version": SARIF_VERSION, "runs": [{
        "tool": {"driver": _driver(codes)}, "invocations": [invocation], "columnKind": "unicodeCodePoints",
        "results": results,
    }]}


def _known_codes() -> set[str]:
    return set(known_rules())


def render(run: Run, options: RenderOptions) -> str:
    return dump_json(log(run, options), indent=2) + "\n"


def render_fatal(error: FatalError) -> str:
    document = {"$schema": SCHEMA_URI, "version": SARIF_VERSION, "runs": [{
        "tool": {"driver": _driver([])},
        "invocations": [{"executionSuccessful": False, "exitCode": 2,
                         "toolExecutionNotifications": [_notification(error)]}],
        "results": [],
    }]}
    return dump_json(document, indent=2) + "\n"
