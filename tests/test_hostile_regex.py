"""Every regex in the package against 256 KiB of pathological text, under a time limit (no pattern may
backtrack), and `explain` on a 1 MB adversarial paste through the CLI."""

from __future__ import annotations

import dataclasses
import importlib
import multiprocessing
import os
import pkgutil
import re
import string
import time

import pytest

import gdr_check
from rule_patterns import message_pattern

MEGABYTE = 1 << 20
# A pattern that backtracks is quadratic or worse on these texts: at 256 KiB that is ~7e10 steps, minutes, while
# every linear pattern here takes under 0.15 s even on a loaded 2-core machine. At 1 MiB the slowest linear ones
# took 1.4 s, and 2.2-2.4 s at a load of 11-13, against the same 2 s limit: four times the work bought no
# detection, only a margin too thin to hold.
PATHOLOGICAL_SIZE = 1 << 18
LIMIT_S = 2.0
# Packages that import torch/triton at import time hold no pattern of their own that reads data.
_SKIPPED = ("gdr_check.kernel", "gdr_check.pipeline.dryrun", "gdr_check.__main__")


def _pathological() -> dict[str, str]:
    n = PATHOLOGICAL_SIZE
    return {
        "letters": "a" * n,
        "digits-then-junk": "0" * n + "!",
        "blanks-then-junk": " " * n + "!",
        "dotted": "a." * (n // 2) + "!",
        "kebab": "a-" * (n // 2) + "!",
        "unterminated-string": '"' + "\\a" * (n // 2),
        "quotes": '"' * n,
        "layer-names": "layers.1." * (n // 9) + "\n\n",
        "exception-names": "aError" * (n // 6) + "!",
        "numbers": "1e" + "1" * n + "x",
        "sizes": "1." * (n // 2) + "GiBx",
        "brackets": "{[" * (n // 2),
        "colons": ":" * n,
        "code-like": "GDR" + "1" * n,
    }


def _module_patterns() -> list[tuple[str, re.Pattern[str]]]:
    found: list[tuple[str, re.Pattern[str]]] = []
    for info in pkgutil.walk_packages(gdr_check.__path__, "gdr_check."):
        if info.name.startswith(_SKIPPED):
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra
            continue
        for name, value in vars(module).items():
            if isinstance(value, re.Pattern) and isinstance(value.pattern, str):
                found.append((f"{info.name}.{name}", value))
    return sorted(dict(found).items())


PATTERNS = _module_patterns()
# Patterns outside the CLI that still backtrack on crafted data; owned by the checks/models/sources rework
# (strict: the test fails once they are fixed, so that the mark is removed).
KNOWN_QUADRATIC: set[str] = set()


def test_every_pattern_was_found():
    names = {name for name, _ in PATTERNS}
    assert {"gdr_check.cli.explain._RULE_ID", "gdr_check.cli.escape._UNSAFE",
            "gdr_check.sources.jsonpos._TOKEN"} <= names


@pytest.mark.parametrize("name,pattern", [
    pytest.param(name, pattern,
                 marks=pytest.mark.xfail(strict=True, reason="backtracks: a known failure until it is rewritten"))
    if name in KNOWN_QUADRATIC else (name, pattern) for name, pattern in PATTERNS
], ids=[name for name, _ in PATTERNS])
def test_pattern_is_linear_on_pathological_text(name, pattern):
    # In a forked child that reports after each call, so that a pattern that does backtrack is killed at the
    # limit instead of hanging the suite.
    context = multiprocessing.get_context("fork")
    receiving, sending = context.Pipe(duplex=False)
    child = context.Process(target=_time_inputs, args=(pattern, sending))
    child.start()
    slow = None
    try:
        for label in _pathological():
            for method in ("search", "fullmatch"):
                if not receiving.poll(LIMIT_S + 1):
                    slow = f"{method} on {label}"
                    break
                elapsed = receiving.recv()
                if elapsed > LIMIT_S:
                    slow = f"{method} on {label} ({elapsed:.1f} s)"
                    break
            if slow:
                break
    finally:
        child.kill()
        child.join()
    assert slow is None, f"{name} takes more than {LIMIT_S} s: {slow}, {PATHOLOGICAL_SIZE >> 10} KiB"


def _time_inputs(pattern: re.Pattern[str], sending) -> None:
    for text in _pathological().values():
        for method in (pattern.search, pattern.fullmatch):
            started = time.perf_counter()
            method(text)
            sending.send(time.perf_counter() - started)
    os._exit(0)


def _worst_case_paste(message: str, size: int) -> str:
    """A template's literals with each field filled by all of them, repeated, and a last line that fails:
    what made the lazy-wildcard regexes backtrack for minutes."""
    literals = [literal for literal, *_ in string.Formatter().parse(message)]
    filler = "".join(literals) or "x"
    line = ""
    for literal, name, _, _ in string.Formatter().parse(message):
        line += literal + ((filler * (size // len(filler) + 1))[:size] if name else "")
    # `explain` drops control characters from a pasted line: the `#` after the NUL is what fails the match.
    return line + "\x00#"


def _near_miss_rule():
    """The rule with the most fields whose worst-case paste matches no rule (its template ends in a literal)."""
    from gdr_check.checks import RULES
    from gdr_check.cli.explain import explain

    ending_in_literal = [rule for rule in RULES.values() if rule.fields() and not rule.message.endswith("}")]
    ranked = sorted(ending_in_literal, key=lambda rule: len(rule.fields()), reverse=True)
    return next(rule for rule in ranked if explain(_worst_case_paste(rule.message, 50)) is None)


def test_explain_of_a_megabyte_paste_is_fast_and_one_line(capsys):
    from gdr_check.cli.main import main

    rule = _near_miss_rule()
    assert len(rule.fields()) >= 5
    line = _worst_case_paste(rule.message, 2000) + "\n"
    paste = (line * (MEGABYTE // len(line) + 1))[:MEGABYTE]
    started = time.perf_counter()
    code = main(["explain", paste])
    elapsed = time.perf_counter() - started
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and elapsed < 5 * LIMIT_S
    assert err.startswith("error: no rule matches ") and err.count("error:") == 1
    assert len(err.splitlines()[0]) < 300  # the paste is quoted, not echoed
    assert "\x00" in err.splitlines()[0] or "\\x00" in err.splitlines()[0] or "\x00" not in err


@pytest.mark.parametrize("size", [20, 60])
def test_the_linear_matcher_agrees_with_the_template_regex(size):
    """On each template's worst case (small enough for a backtracking regex, used here as the oracle only), what
    the linear matcher reads is what the template's regex reads from the same message: the values."""
    from gdr_check.checks import RULES
    from gdr_check.checks.explanations import _END, _MIN_LITERAL, NAME_FIELDS, _literal_length, match_message

    for rule in RULES.values():
        filled = rule.message.format(**{f: f"<{f}>" for f in rule.fields()})
        for paste in (_worst_case_paste(rule.message, size), _worst_case_paste(rule.message, size)[:-1],
                      "ValueError: " + filled):
            found = match_message(paste)
            if found is None:
                continue
            expected = message_pattern(found.rule).fullmatch(found.matched_message)
            if expected is None:  # read with both ends stripped of `_END`: the oracle is the stripped template's
                stripped = dataclasses.replace(found.rule, message=found.rule.message.rstrip(_END))
                expected = message_pattern(stripped).fullmatch(found.matched_message.rstrip(_END))
            assert expected is not None and expected.groupdict() == found.values, (rule.code, paste[:80])
        def sevens_of(rule) -> dict[str, str]:  # numeric fields (GDR401) read numbers, name fields (GDR409) names
            return {f: "torch.float16" if f in NAME_FIELDS.get(rule.code, ()) else "7" for f in rule.fields()}

        sevens = rule.message.format(**sevens_of(rule))
        # a template with little fixed text is read only from a line naming its code (gdr-check's own reports)
        prefix = f"error[{rule.code}]: " if _literal_length(rule) < _MIN_LITERAL else "ValueError: "
        found = match_message(prefix + sevens)
        assert found is not None and found.rule.message.format(**sevens_of(found.rule)) == sevens


def test_the_cli_matcher_is_linear_on_every_template():
    from gdr_check.checks import RULES
    from gdr_check.cli.explain import explain

    for rule in RULES.values():
        if rule.fields():
            paste = _worst_case_paste(rule.message, 20000)
            started = time.perf_counter()
            explain(paste)
            assert time.perf_counter() - started < LIMIT_S, rule.code
