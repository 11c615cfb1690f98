"""Every rule's executable example fires exactly its own rule and no other error (but those it declares).

The examples are declared with the rules (`Rule.example`) and shown on the rule pages (docs/rules/<CODE>.md), so
this verifies every docs example, and a rule declared without an example fails here. A rule whose check no input
can trigger (GDR220, mirrored from the wrapper although BK >= K always) has an example marked unreachable: the
test asserts that it stays quiet instead.
"""

from __future__ import annotations

import functools

import pytest

from gdr_check.base.registry import RULE_SET
from gdr_check.checks import RULES
from gdr_check.checks.docs import render_pages
from gdr_check.pipeline.example_runner import run_example
from rule_patterns import message_pattern


@pytest.mark.parametrize("code", sorted(RULES))
def test_each_rules_example_fires_exactly_that_rule(code):
    rule = RULES[code]
    example = rule.example
    assert example is not None, f"{code} has no executable example"
    diagnostics = run_example(example, RULE_SET)
    codes = [d.code for d in diagnostics]
    errors = sorted({d.code for d in diagnostics if d.severity == "error"})
    if getattr(example, "reachable", True):
        assert code in codes, (code, [(d.code, d.message) for d in diagnostics])
        # Only its own error, and the errors the example declares it necessarily gets too (a call the model
        # comparison explains that the wrapper also rejects).
        also = set(getattr(example, "also", ()))
        assert set(errors) - {code} == also, (code, [(d.code, d.message) for d in diagnostics])
        # The diagnostic is the rule's: its message is the template filled in.
        mine = next(d for d in diagnostics if d.code == code)
        assert message_pattern(rule).fullmatch(mine.message), mine.message
    else:
        assert code not in codes and not errors, (code, codes)
    # docs/rules/<CODE>.md shows this very example (test_registry checks the pages are current)
    assert str(example) in _pages()[f"{code}.md"]


@functools.lru_cache(maxsize=1)
def _pages() -> dict[str, str]:
    return render_pages()
