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


GENERATE = ROOT / "scripts" / "generate_rules_doc.py"


def generate_rules_doc(index: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(GENERATE), str(index), *flags], check=False, capture_output=True,
                          text=True, timeout=120)


def test_docs_are_up_to_date():
    done = generate_rules_doc(ROOT / "docs" / "rules.md", "--check")
    assert done.returncode == 0, done.stderr


def test_rules_doc_has_an_index_and_one_page_per_rule(tmp_path):
    index = tmp_path / "rules.md"
    assert generate_rules_doc(index).returncode == 0
    pages = tmp_path / "rules"
    assert sorted(p.name for p in pages.iterdir()) == sorted(f"{code}.md" for code in RULES)
    text = index.read_text(encoding="utf-8")
    for code, rule in RULES.items():
        assert f"| [{code}](rules/{code}.md) | `{rule.name}` | {rule.severity} |" in text
        page = (pages / f"{code}.md").read_text(encoding="utf-8")
        assert page.startswith(f"# {code} `{rule.name}`\n\n[All rules](../rules.md) · {code[:4]}xx: ")
        assert rule.message in page


def test_rules_doc_check_reports_stale_missing_and_extra_pages(tmp_path):
    index = tmp_path / "rules.md"
    assert generate_rules_doc(index).returncode == 0
    assert generate_rules_doc(index, "--check").returncode == 0
    pages = tmp_path / "rules"
    (pages / "GDR212.md").write_text("# edited by hand\n", encoding="utf-8")
    (pages / "GDR001.md").unlink()
    (pages / "GDR999.md").write_text("# a rule that no longer exists\n", encoding="utf-8")
    done = generate_rules_doc(index, "--check")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"{pages / 'GDR001.md'} is missing",
        f"{pages / 'GDR212.md'} is out of date",
        f"{pages / 'GDR999.md'} is not a rule page",
        f"run `python scripts/generate_rules_doc.py {index}`",
    ]
    # Writing again restores the edited and missing pages and removes the extra one.
    assert generate_rules_doc(index).returncode == 0
    assert generate_rules_doc(index, "--check").returncode == 0
    assert not (pages / "GDR999.md").exists()
