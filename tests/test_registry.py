"""The registry: stable, well-formed rules, and docs generated from it."""

import re
import subprocess
import sys
from pathlib import Path

from gdr_check.checks import RULES
from gdr_check.checks.registry import CATEGORIES


def test_codes_names_and_severities_are_well_formed():
    names = set()
    for code, rule in RULES.items():
        assert re.fullmatch(r"GDR\d{3}", code) and code[:4] in CATEGORIES
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", rule.name)
        assert rule.severity in ("error", "warning", "info")
        assert rule.summary and rule.message and rule.explanation, code
        names.add(rule.name)
    assert len(names) == len(RULES)


def test_wrapper_rules_cover_both_wrappers_in_order():
    for variant, count in (("gdn", 20), ("kda", 23)):
        positions = sorted(r.wrapper[variant] for r in RULES.values() if variant in r.wrapper)
        # K = 0 shares the Q-size position (ZeroDivisionError instead of ValueError).
        assert sorted(set(positions)) == list(range(1, count + 1)), variant


def test_non_wrapper_messages_follow_the_rustc_style():
    for rule in RULES.values():
        if rule.wrapper:
            continue
        assert not rule.message.endswith("."), rule.code
        assert not rule.message[0].isupper(), rule.code


ROOT = Path(__file__).resolve().parents[1]


def test_docs_are_up_to_date():
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "generate_rules_doc.py"),
                           str(ROOT / "docs" / "rules.md"), "--check"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
