"""`explain`: codes, names and pasted wrapper messages map to their rule; unknown input exits 1."""

import json

import pytest

from gdr_check.checks import RULES
from gdr_check.checks.explanations import _MIN_LITERAL, NAME_FIELDS, _literal_length, explain
from gdr_check.cli.main import main
from rule_patterns import message_pattern

WRAPPER_MESSAGES = {
    "`mixed_qkv` must be a 2D tensor (got ndim=3).": "GDR201",
    "`initial_state` must be a 4D tensor (got ndim=5).": "GDR212",
    "`a`/`b` must have shape [B, HV] with HV=32 (got a.shape=(8, 16), b.shape=(8, 16)).": "GDR214",
    "`A_log` and `dt_bias` must have 16 elements (got A_log.numel()=32, dt_bias.numel()=32).": "GDR215",
    "`out` must have shape (8, 1, 32, 128) (got out.shape=(1, 8, 32, 128)).": "GDR216",
    "Invalid packed `mixed_qkv` last dim=4096 for HV=32, V=128.": "GDR217",
    "Invalid packed Q size 100: must be divisible by K=128.": "GDR218",
    "Invalid head config inferred from mixed_qkv: H=24, HV=16.": "GDR219",
    "Mismatched batch sizes: mixed_qkv.shape[0]=8, a.shape[0]=16, b.shape[0]=8.": "GDR210",
    "`ssm_state_indices` must have shape [B] (got (16,); expected (8,)).": "GDR211",
    "`a` must have shape [B, HV*K] with HV=32, K=128 (got a.shape=(8, 32)).": "GDR221",
    "`b` must have shape [B, HV] with HV=8 (got b.shape=(8, 32)).": "GDR222",
    "`A_log` must have 8 elements (got 32).": "GDR223",
    "`dt_bias` must have 4096 elements (got 32).": "GDR224",
    ("Invalid packed Q size 100: must be divisible by K=128. KDA packed decode requires num_q_heads == "
     "num_k_heads and head_q_dim == head_k_dim."): "GDR225",
    "All inputs must be on the same device.": "GDR209",
    "`A_log`/`dt_bias` must be 1D tensors.": "GDR205",
    "Packed decode kernel only supports NK=1 (got K=300, BK=256).": "GDR220",
}


@pytest.mark.parametrize("message, code", WRAPPER_MESSAGES.items())
def test_wrapper_messages_map_to_their_rule(message, code):
    found = explain(message)
    assert found is not None and found.rule.code == code
    assert message_pattern(found.rule).fullmatch(message)


def test_values_are_read_back_from_the_message():
    found = explain("Invalid head config inferred from mixed_qkv: H=24, HV=16.")
    assert found.values == {"H": "24", "HV": "16"}


def test_traceback_and_exception_prefix_are_accepted():
    pasted = ('Traceback (most recent call last):\n  File "x.py", line 3, in <module>\n'
              "ValueError: `initial_state` must be a 4D tensor (got ndim=3).\n")
    assert explain(pasted).rule.code == "GDR212"


def test_kda_q_size_prefers_the_longer_template():
    gdn = explain("Invalid packed Q size 100: must be divisible by K=128.")
    assert gdn.rule.code == "GDR218"


@pytest.mark.parametrize("query", ["GDR212", "gdr212", "state-pool-not-4d"])
def test_code_and_name_lookup(query):
    assert explain(query).rule.code == "GDR212"


def test_every_rule_message_round_trips_through_explain():
    def filled(rule) -> dict[str, str]:  # a number in each field; a dtype where the rule reads a name
        return {name: "torch.bfloat16" if name in NAME_FIELDS.get(rule.code, ()) else "7" for name in rule.fields()}

    for rule in RULES.values():
        text = rule.message.format(**filled(rule))
        # A template with little fixed text is read only from a line naming its code, as gdr-check prints it.
        generic = _literal_length(rule) < _MIN_LITERAL
        found = explain(f"error[{rule.code}]: {text}" if generic else text)
        assert found is not None, rule.code
        # Several templates can read the same text only when they are the same rule.
        assert found.rule.message.format(**filled(found.rule)) == text
        if generic:
            bare = explain(text)
            assert bare is None or bare.rule.code != rule.code, rule.code


def test_cli_explain_json(capsys):
    assert main(["explain", "`initial_state` must be a 4D tensor (got ndim=5).", "--output-format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["code"] == "GDR212" and doc["name"] == "state-pool-not-4d"
    assert doc["explanation"] and doc["fixes"] and doc["values"] == {"ndim": "5"}


def test_cli_explain_full(capsys):
    assert main(["explain", "GDR214"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("GDR214 gate-heads-mismatch-value-heads (error)")
    assert "fix:" in out


def test_cli_explain_unknown_message_exits_2_with_a_hint(capsys):
    # 2 like any bad input: exit code 1 means "problems found"
    assert main(["explain", "CUDA out of memory"]) == 2
    captured = capsys.readouterr()
    assert captured.err == ("error: no rule matches 'CUDA out of memory': pass a code (GDR212), a rule name, "
                            "or the whole error message as printed\n")
    assert captured.out == ""


@pytest.mark.parametrize("query,line", [
    ("GDR999", "error: unknown rule `GDR999` (`gdr-check explain --all` lists every rule)\n"),
    ("state-pool-not-4e", ("error: unknown rule `state-pool-not-4e`; did you mean `state-pool-not-4d`? "
                           "(`gdr-check explain --all` lists every rule)\n")),
    # a code cut short: the rules it begins, not the nearest spelling (difflib's was GDR321)
    ("GDR21", ("error: unknown rule `GDR21`; 10 rule(s) start with `GDR21`: `GDR210`, `GDR211`, `GDR212`, "
               "`GDR213`, ... (`gdr-check explain --all` lists every rule)\n")),
    ("gdr22", ("error: unknown rule `gdr22`; 9 rule(s) start with `GDR22`: `GDR220`, `GDR221`, `GDR222`, "
               "`GDR223`, ... (`gdr-check explain --all` lists every rule)\n")),
    ("GDR2411", ("error: unknown rule `GDR2411`; did you mean `GDR241`? (`gdr-check explain --all` lists every "
                 "rule)\n")),
    ("GDR9", "error: unknown rule `GDR9` (`gdr-check explain --all` lists every rule)\n"),  # not GDR409's spelling
])
def test_cli_explain_unknown_code_or_name_exits_2_with_one_line(capsys, query, line):
    assert main(["explain", query]) == 2
    captured = capsys.readouterr()
    assert captured.err == line and captured.out == ""


def test_cli_explain_all_takes_no_query(capsys):
    assert main(["explain", "--all", "GDR212"]) == 2  # it would explain every rule and drop the query silently
    captured = capsys.readouterr()
    assert captured.err == ("error: Invalid value for --all: it explains every rule, so it takes no query "
                            "(got 'GDR212')\n")
    assert main(["explain", "--all", "a\nb"]) == 2
    assert capsys.readouterr().err.endswith("(got 'a\\nb')\n")  # escaped once, as the other explain errors
    assert captured.out == ""


def test_cli_explain_unknown_code_in_json_still_writes_a_document(capsys):
    assert main(["explain", "GDR999", "--output-format", "json"]) == 2
    document = json.loads(capsys.readouterr().out)
    assert (document["query"], document["error"]) == ("GDR999", "unknown rule")


def test_cli_explain_all_json_lists_every_rule(capsys):
    assert main(["explain", "--all", "--output-format", "json"]) == 0
    docs = json.loads(capsys.readouterr().out)
    assert [d["code"] for d in docs] == sorted(RULES)


def test_cli_bad_flag_exits_2_with_one_line(capsys):
    assert main(["explain", "--bogus"]) == 2
    captured = capsys.readouterr()
    # The wording is the parser's: typer's own (0.29+) or click's (typer 0.16 at the dependency floors, click 8.2+).
    assert captured.err in ("error: No such option: --bogus\n", "error: No such option '--bogus'.\n")
    assert captured.out == ""
