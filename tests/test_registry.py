"""The registry: stable, well-formed rules, and docs generated from it."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from gdr_check.base.registry import CATEGORIES, Finding, RuleSet
from gdr_check.call.packed_call import CallContext
from gdr_check.checks import RULES
from gdr_check.checks.call_plan import call_plan
from gdr_check.checks.contract import _diagnostics
from gdr_check.checks.docs import render_index, render_pages
from gdr_check.checks.examples import CallExample, tensor
from gdr_check.checks.rules_wrapper import GDN_WRAPPER_ORDER, KDA_WRAPPER_ORDER


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
        assert len(positions) == count + 1, variant
    assert RULES["GDR227"].wrapper == {"gdn": RULES["GDR218"].wrapper["gdn"], "kda": RULES["GDR225"].wrapper["kda"]}


def test_positions_are_derived_from_the_order_tuples():
    for variant, order in (("gdn", GDN_WRAPPER_ORDER), ("kda", KDA_WRAPPER_ORDER)):
        for position, step in enumerate(order, 1):
            for code in (step,) if isinstance(step, str) else step:
                assert RULES[code].wrapper[variant] == position, (variant, code)
        placed = {code for step in order for code in ((step,) if isinstance(step, str) else step)}
        assert placed == {code for code, rule in RULES.items() if variant in rule.wrapper}


def test_non_wrapper_messages_follow_the_rustc_style():
    for rule in RULES.values():
        if rule.wrapper or rule.scope == "pasted":  # quoted as the wrapper or the engine prints them
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


# -- adding a wrapper check: the rule, its place in the order tuple, its example; nothing else ------------------
def _throwaway_rules(with_new_check: bool) -> RuleSet:
    """A small rule set shaped like the real one: a wrapper of three checks, then (optionally) a new check
    between the first two. Only the lines marked NEW differ between the two sets."""
    rules = RuleSet()
    order = ["GDR291", "GDR293"]
    if with_new_check:
        order.insert(1, "GDR292")  # NEW: its position in the order
    rules.declare_wrapper_order("gdn", (*order, ("GDR294", "GDR295")))

    @rules.rule("GDR291", "toy-mixed-qkv-not-2d", summary="s", message="`mixed_qkv` must be 2D.", explanation="e",
                clear="mixed_qkv.ndim == 2", example=CallExample({"mixed_qkv": tensor(4, 1, 64)}))
    def toy_ndim(ctx):
        return None if ctx.call.mixed_qkv.ndim == 2 else Finding()

    if with_new_check:  # NEW: the rule, with its pass predicate and its example
        @rules.rule("GDR292", "toy-b-not-fp32", summary="s", message="`b` must be {want} (got {dtype}).",
                    explanation="e", clear="b.dtype == 'float32'",
                    example=CallExample({"b": tensor(4, 4, dtype="bfloat16")}))
        def toy_b_dtype(ctx):
            dtype = ctx.call.b.dtype
            return None if dtype == "float32" else Finding({"want": "float32", "dtype": dtype})

    @rules.rule("GDR293", "toy-state-not-4d", summary="s", message="`initial_state` must be 4D.", explanation="e",
                clear="state.ndim == 4", example=CallExample({"initial_state": tensor(2, 8, 4, 8, 8)}))
    def toy_state(ctx):
        return None if ctx.call.initial_state.ndim == 4 else Finding()

    @rules.rule("GDR294", "toy-q-size", summary="s", message="bad Q size.", explanation="e",
                clear="K > 0 and (qkv_dim - HV * V) // 2 % K == 0",
                example=CallExample({"mixed_qkv": tensor(4, 56)}))
    def toy_q(ctx):
        return Finding() if ctx.K and (ctx.qkv_dim - ctx.HV * ctx.V) // 2 % ctx.K else None

    @rules.rule("GDR295", "toy-k-zero", summary="s", message="K is 0.", explanation="e", clear="K > 0",
                example=CallExample({"initial_state": tensor(8, 4, 8, 0)}))
    def toy_k(ctx):
        return Finding() if ctx.K == 0 else None

    return rules


def _codes(rules: RuleSet, example: CallExample, fast_path: bool = True) -> list[str]:
    ctx = CallContext.build(example.call(), example.engine)
    return [d.code for d in _diagnostics(ctx, fast_path, rules)]


def test_adding_a_wrapper_check_needs_only_the_rule_its_position_and_its_example():
    before, after = _throwaway_rules(False), _throwaway_rules(True)
    # The order, positions and report order follow the tuple.
    assert [after.rules[c].wrapper for c in ("GDR291", "GDR292", "GDR293", "GDR294", "GDR295")] == [
        {"gdn": 1}, {"gdn": 2}, {"gdn": 3}, {"gdn": 4}, {"gdn": 4}]
    assert before.rules["GDR293"].wrapper == {"gdn": 2}
    assert [r.code for r in call_plan(after, "gdn").rules] == ["GDR291", "GDR292", "GDR293", "GDR294", "GDR295"]
    # The fast path covers it, answers no on its example and yes on the base call.
    plan = call_plan(after, "gdn")
    assert plan.covered == {"GDR291", "GDR292", "GDR293", "GDR294", "GDR295"} and plan.after_clear == ()
    bad = after.rules["GDR292"].example
    assert not plan.clear(CallContext.build(bad.call()))
    assert plan.clear(CallContext.build(CallExample().call()))
    assert call_plan(before, "gdn").clear(CallContext.build(bad.call()))  # the old set did not check it
    # Each example fires exactly its rule, with and without the fast path; the new one's message is filled.
    for code, rule in after.rules.items():
        assert _codes(after, rule.example) == _codes(after, rule.example, fast_path=False) == [code]
    ctx = CallContext.build(bad.call())
    assert [d.message for d in _diagnostics(ctx, rules=after)] == ["`b` must be float32 (got bfloat16)."]
    # The docs list it in the order and show its example on its page.
    index, pages = render_index(rules=after), render_pages(rules=after)
    assert "- GDN wrapper, checks 1-4: GDR291, GDR292, GDR293, GDR294 = GDR295" in index
    assert "| [GDR292](rules/GDR292.md) | `toy-b-not-fp32` |" in index
    assert "GDN check 2" in pages["GDR292.md"] and "b = bfloat16 [4, 4]" in pages["GDR292.md"]


def test_a_wrapper_rule_without_its_predicate_or_position_is_refused_at_declaration():
    rules = RuleSet()
    rules.declare_wrapper_order("gdn", ("GDR291",))
    with pytest.raises(ValueError, match="needs its pass predicate"):
        rules.rule("GDR291", "toy", summary="s", message="m", explanation="e")(lambda ctx: None)
    with pytest.raises(ValueError, match="no wrapper order places it"):
        rules.rule("GDR299", "toy-free", summary="s", message="m", explanation="e", clear="True")(lambda ctx: None)
    with pytest.raises(SyntaxError):
        rules.rule("GDR291", "toy", summary="s", message="m", explanation="e", clear="a ==")(lambda ctx: None)
    late = RuleSet()
    late.declare("GDR291", "toy", summary="s", message="m", explanation="e")
    with pytest.raises(ValueError, match="declared before"):
        late.declare_wrapper_order("gdn", ("GDR291",))
    with pytest.raises(LookupError, match="undeclared rules: GDR291"):
        call_plan(rules, "gdn")


# -- typed violations: a template field and the class's fields are checked against each other at import ----------
def test_a_typed_violation_with_a_field_its_message_lacks_fails_when_its_class_is_created():
    from gdr_check.base.registry import Violation
    from gdr_check.base.source_error import SourceError

    rules = RuleSet()
    rule = rules.declare("GDR391", "toy-child-died", scope="dryrun", summary="s", explanation="e",
                         message="the child {how}; last line: {last_line}")

    class ChildDied(Violation):
        rule = rules.rules["GDR391"]
        how: str
        last_line: str

    assert ChildDied(how="exited", last_line="boom").diagnostic().message == "the child exited; last line: boom"
    with pytest.raises(TypeError, match=r"GDR391's message uses \['last_line'\]"):
        class Typo(Violation):
            rule = rules.rules["GDR391"]
            how: str
            lastline: str
    with pytest.raises(TypeError, match=r"unknown fields \['lastline'\], missing \['last_line'\]"):
        ChildDied(how="exited", lastline="boom")
    source = rules.declare("GDR091", "toy-unreadable", scope="source", summary="s", explanation="e",
                           message="cannot read `{file}`: {reason}")
    with pytest.raises(TypeError, match=r"fields \['raeson'\] are not in GDR091's message"):
        class Unreadable(SourceError):
            rule = source
            file: str
            reason: str
            raeson: str
    assert rule.code == "GDR391"


def test_every_rule_code_named_in_rule_texts_and_docs_exists():
    """A rule's explanation, causes and fixes, and the user docs, name other rules by code; each must be a rule
    (GDR403 once named a GDR230-GDR233 that never existed)."""
    texts = {f"{code} {field}": str(getattr(rule, field) or "") for code, rule in RULES.items()
             for field in ("summary", "message", "explanation", "causes", "fixes", "engines")}
    texts.update({str(path.relative_to(ROOT)): path.read_text(encoding="utf-8")
                  for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]})
    unknown = {(where, code) for where, text in texts.items() for code in re.findall(r"\bGDR\d{3}\b", text)
               if code not in RULES}
    assert unknown == {("README.md", "GDR999")}  # its example of a code that is no rule
