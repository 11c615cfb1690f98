"""`gdr-check call`: recorded calls through the contract, and with `--model` compared with the model's call.

Round trips capture real torch calls through the stand-in engine (tests/fake_engine); the cause-by-cause
comparisons use recordings written from TensorSpecs. Qwen3-Next-80B at tp=4 (built in, offline): H_l=4,
HV_l=8, K=V=128, `mixed_qkv` width 2048 (qkvz: 3072).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

import gdr_check
from checkpoint_builders import qwen3_5_config, write_json
from fake_engine import install
from gdr_check.base.tensor_spec import TensorSpec
from gdr_check.call.packed_call import PackedDecodeCall
from gdr_check.cli.main import main
from gdr_check.deployment.settings import Deployment
from gdr_check.pipeline.capture import SCHEMA_VERSION, dump_recording
from gdr_check.pipeline.model_check import check_builtin, check_model

QWEN = "Qwen/Qwen3-Next-80B-A3B-Instruct"
KIMI = "moonshotai/Kimi-Linear-48B-A3B-Instruct"
B = 2
T = TensorSpec.of


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_json(capsys, *argv: str) -> tuple[int, dict]:
    code, out, _ = run(capsys, *argv, "--output-format", "json")
    return code, json.loads(out)


def codes_of(document: dict, index: int = 0) -> list[str]:
    return [d["code"] for d in document["calls"][index]["diagnostics"]]


def expected_call(repo: str = QWEN, tp: int = 4) -> PackedDecodeCall:
    return check_builtin(repo, Deployment(tp=tp, batch=B)).call


def write_recording(path, *calls: PackedDecodeCall, engine: str = "sglang") -> str:
    document = {"schema_version": SCHEMA_VERSION, "kind": "gdr-check-capture", "calls": [
        {"index": i, "function": None, "engine": engine, "variant": c.variant, "call": c.to_dict()}
        for i, c in enumerate(calls)]}
    path.write_text(dump_recording(document))
    return str(path)


# -- capture, then check -------------------------------------------------------------------------------------------
def torch_call(*, width: int = 2048, gate_heads: int = 8) -> dict:
    """Qwen3-Next tp=4 shapes on the CPU (B=2, three slots); skips where torch is not installed."""
    torch = pytest.importorskip("torch")
    bf16 = torch.bfloat16
    return dict(
        mixed_qkv=torch.zeros(B, width, dtype=bf16), a=torch.zeros(B, gate_heads, dtype=bf16),
        b=torch.zeros(B, gate_heads, dtype=bf16), A_log=torch.zeros(8), dt_bias=torch.zeros(8, dtype=bf16),
        scale=128 ** -0.5, initial_state=torch.empty(3, 8, 128, 128), out=torch.empty(B, 1, 8, 128, dtype=bf16),
        ssm_state_indices=torch.tensor([1, 2], dtype=torch.int32),
    )


@pytest.fixture
def record(monkeypatch, tmp_path):
    """record(**torch_call options) -> path of a recording of one call through the sglang stand-in."""
    engine = install(monkeypatch)

    def recorder(name: str = "rec.json", **options) -> str:
        path = tmp_path / name
        with gdr_check.capture(path):
            engine.gdn_caller.forward_decode(**torch_call(**options))
        return str(path)

    return recorder


def test_a_correct_call_passes_alone_and_against_the_model(record, capsys):
    path = record()
    code, out, err = run(capsys, "call", path)
    assert code == 0 and "call #0" in out and "error[" not in out and err == ""
    code, document = run_json(capsys, "call", path, "--model", QWEN, "--tp", "4")
    assert code == 0 and document["summary"]["errors"] == 0
    assert not [c for c in codes_of(document) if c.startswith("GDR16") or c.startswith("GDR17")]
    assert all(not row["differences"] for row in document["calls"][0]["comparison"])


def test_gates_for_another_tp_and_qkvz_are_named(record, capsys):
    path = record(width=3072, gate_heads=4)  # gates for tp=8, pool for tp=4, qkvz instead of qkv
    code, out, err = run(capsys, "call", path, "--model", QWEN, "--tp", "4")
    assert code == 1 and err == ""
    assert "`a`/`b` sharded by a different TP than the pool (gates fit tp=8, pool fits tp=4)" in out
    assert "qkvz passed instead of qkv (width 3072 includes z; inferred H = 8 = 2*H_l)" in out
    code, document = run_json(capsys, "call", path, "--model", QWEN, "--tp", "4")
    assert code == 1 and {"GDR214", "GDR161", "GDR164"} <= set(codes_of(document))
    wrapper = next(d for d in document["calls"][0]["diagnostics"] if d["code"] == "GDR214")
    assert wrapper["fixes"] == [] and any("GDR161" in note for note in wrapper["notes"])
    rows = {row["argument"]: row for row in document["calls"][0]["comparison"]}
    assert rows["a"]["differences"] == ["shape"] and rows["a"]["expected"]["shape"] == [B, 8]


def test_qkvz_passes_every_wrapper_check_and_only_the_comparison_catches_it(record, capsys):
    path = record(width=3072)
    code, document = run_json(capsys, "call", path)
    assert code == 0 and document["summary"]["errors"] == 0  # docs/kernel-contract.md §7.1
    code, document = run_json(capsys, "call", path, "--model", QWEN, "--tp", "4")
    errors = [d["code"] for d in document["calls"][0]["diagnostics"] if d["severity"] == "error"]
    assert code == 1 and errors == ["GDR164"]


# -- one cause at a time ----------------------------------------------------------------------------------------------
def _for_tp(tp: int, **changes) -> PackedDecodeCall:
    return replace(expected_call(tp=tp), **changes)


CASES = {
    "mixed_qkv global width": (
        lambda: _for_tp(4, mixed_qkv=T((B, 8192))),
        "GDR162", "`mixed_qkv` not sharded (width 8192 is the global width; at tp=4 a rank's width is 2048)"),
    "gates tp=4, the rest tp=2": (
        lambda: _for_tp(2, a=T((B, 8)), b=T((B, 8))),
        "GDR161", "`a`/`b` sharded by a different TP than the pool (gates fit tp=4, pool fits tp=2)"),
    "everything for tp=2": (
        lambda: _for_tp(2),
        "GDR163", "the call is sized for tp=2, not tp=4"),
    "pool unsharded": (
        lambda: _for_tp(4, initial_state=T((B + 1, 32, 128, 128), "float32")),
        "GDR162", "`initial_state` not sharded (32 value heads, the global HV; at tp=4 a rank holds HV_l=8)"),
    "l2norm off": (
        lambda: _for_tp(4, use_qk_l2norm_in_kernel=False),
        "GDR168", f"`use_qk_l2norm_in_kernel` is False, but sglang decodes `{QWEN}` with True"),
    "full-attention scale": (
        lambda: _for_tp(4, scale=256 ** -0.5),
        "GDR169", "`scale` is 0.0625 instead of K**-0.5 = 0.0883883 (head_dim**-0.5: the full-attention "
                  "`head_dim` 256)"),
    "KDA kernel for a GDN model": (
        lambda: _for_tp(4, variant="kda"),
        "GDR170", f"the KDA kernel was called for `{QWEN}`, a GDN model"),
    "fused ba unsplit": (
        lambda: _for_tp(4, a=T((B, 16))),
        "GDR160", f"`a` is bf16[2,16], but `{QWEN}` at tp=4 expects bf16[2,8]"),
}


@pytest.mark.parametrize("case", CASES)
def test_each_cause_is_named(case, tmp_path, capsys):
    build, code, message = CASES[case]
    path = write_recording(tmp_path / "rec.json", build())
    exit_code, document = run_json(capsys, "call", path, "--model", QWEN, "--tp", "4")
    diagnostics = document["calls"][0]["diagnostics"]
    found = [d for d in diagnostics if d["code"] == code]
    assert found and found[0]["message"] == message, [d["message"] for d in diagnostics]
    assert exit_code == 1


def test_superseded_contract_rules_are_dropped(tmp_path, capsys):
    path = write_recording(tmp_path / "rec.json", _for_tp(4, use_qk_l2norm_in_kernel=False, scale=1.0))
    _, alone = run_json(capsys, "call", path)
    _, compared = run_json(capsys, "call", path, "--model", QWEN, "--tp", "4")
    assert {"GDR250", "GDR255"} <= set(codes_of(alone))
    assert not {"GDR250", "GDR255"} & set(codes_of(compared))
    assert {"GDR168", "GDR169"} <= set(codes_of(compared))
    scale = next(d for d in compared["calls"][0]["diagnostics"] if d["code"] == "GDR169")
    assert scale["message"].endswith("(no scaling)")


def test_a_bf16_state_is_a_warning_not_an_error(tmp_path, capsys):
    state = T((B + 1, 8, 128, 128), "bfloat16")
    path = write_recording(tmp_path / "rec.json", _for_tp(4, initial_state=state))
    code, document = run_json(capsys, "call", path, "--model", QWEN, "--tp", "4")
    [found] = [d for d in document["calls"][0]["diagnostics"] if d["code"] == "GDR166"]
    assert code == 0 and found["severity"] == "warning"
    assert found["message"] == f"`initial_state` is bfloat16 where sglang keeps the state of `{QWEN}` in float32"
    code, document = run_json(capsys, "call", path, "--model", QWEN, "--tp", "4", "--state-dtype", "bfloat16")
    assert "GDR166" not in codes_of(document)


def test_kimi_a_log_in_its_checkpoint_shape(tmp_path, capsys):
    call = replace(expected_call(KIMI), A_log=T((1, 1, 32, 1), "float32"))
    path = write_recording(tmp_path / "rec.json", call)
    code, document = run_json(capsys, "call", path, "--model", KIMI, "--tp", "4")
    messages = {d["code"]: d["message"] for d in document["calls"][0]["diagnostics"]}
    assert code == 1 and "GDR205" in messages  # the wrapper's own check
    assert messages["GDR165"] == ("`A_log` has shape [1, 1, 32, 1] instead of [8] (the checkpoint shape "
                                  "[1, 1, H, 1] of Kimi's `A_log`, not flattened)")
    assert messages["GDR162"] == "`A_log` not sharded (32 value heads, the global HV; at tp=4 a rank holds HV_l=8)"


def _small_qwen3_5(tmp_path) -> tuple[str, dict[int, PackedDecodeCall]]:
    """A Qwen3.5-0.8B-like config (H = HV = 16, K = V = 128: [q | k | v] 3072 wide at tp=2, 1536 at tp=4; with z
    4096 and 2048) and its expected calls at tp 2 and 4."""
    directory = write_json(tmp_path / "ck" / "config.json", qwen3_5_config(
        hidden=1024, layers=24, H=16, HV=16, K=128, V=128, heads=8, kv_heads=2)).parent
    return str(directory), {tp: check_model(str(directory), Deployment(tp=tp, batch=B)).call for tp in (2, 4)}


def test_qkvz_is_named_only_for_the_width_of_the_call_s_own_tp(tmp_path, capsys):
    """GDR164 names the qkvz projection only when the width is [q | k | v] plus z of the TP the other arguments
    fit, and gives that TP's [q | k | v] width. The qkvz width of another TP (2048: tp=4's, against tp=2's
    3072) is that TP's shard (GDR161), said in those words, not 'z included' beside a width of neither TP."""
    model, calls = _small_qwen3_5(tmp_path)
    other = write_recording(tmp_path / "other.json", replace(calls[2], mixed_qkv=T((B, 2048))))
    code, document = run_json(capsys, "call", other, "--model", model, "--tp", "2")
    found = {d["code"]: d for d in document["calls"][0]["diagnostics"] if d["code"].startswith("GDR16")}
    assert code == 1 and list(found) == ["GDR161"]
    assert found["GDR161"]["message"] == (
        "`mixed_qkv` sharded by a different TP than the pool (it fits tp=4, pool fits tp=2)")
    assert found["GDR161"]["notes"][0] == (
        "`mixed_qkv` has width 2048 = 2*H_l*K + 2*HV_l*V at tp=4: q, k, v and z of tp=4 (its [q | k | v] is 1536)")
    assert found["GDR161"]["fixes"] == [
        "size every per-head argument for the TP the layer runs at (tp=2: H_l=8, HV_l=8)",
        "pass the conv1d output of [q | k | v] only, z split off: width 3072 at tp=2"]
    own = write_recording(tmp_path / "own.json", replace(calls[2], mixed_qkv=T((B, 4096))))
    code, document = run_json(capsys, "call", own, "--model", model, "--tp", "2")
    [qkvz] = [d for d in document["calls"][0]["diagnostics"] if d["code"] == "GDR164"]
    assert code == 1 and "GDR161" not in codes_of(document)
    assert qkvz["message"] == "qkvz passed instead of qkv (width 4096 includes z; the wrapper rejects the width)"
    assert qkvz["notes"][0] == ("width 4096 = 2*8*128 + 2*8*128: q, k, v and z of tp=2; the kernel needs "
                                "[q | k | v], width 3072")


# -- the command's edges ---------------------------------------------------------------------------------------------
def test_identical_calls_are_shown_once_and_index_selects_one(tmp_path, capsys):
    good, bad = expected_call(), _for_tp(4, mixed_qkv=T((B, 3072)))
    path = write_recording(tmp_path / "rec.json", good, good, bad)
    code, out, _ = run(capsys, "call", path, "--model", QWEN, "--tp", "4")
    assert code == 1 and "call #0 (and 1 identical: #1)" in out and "call #2" in out
    assert "3 call(s) checked, 2 distinct" in out
    code, document = run_json(capsys, "call", path, "--model", QWEN, "--tp", "4", "--index", "1")
    assert code == 0 and [c["index"] for c in document["calls"]] == [1]


def _with_slots(call: PackedDecodeCall, *slots: int) -> PackedDecodeCall:
    spec = call.ssm_state_indices
    return replace(call, ssm_state_indices=replace(spec, shape=(len(slots),), values=slots))


def test_calls_are_identical_only_when_everything_shown_is(tmp_path, capsys):
    """A section stands for the calls it lists: 'identical' ones agree in everything it shows (the slot values
    too), and calls that differ only in recorded values are listed as alike, with what differs. Calls #2 and #3
    below (slots [1, 2, -1, 4] and [1, 2, 3, 4]) were 'identical'."""
    call = check_builtin(QWEN, Deployment(tp=4, batch=4)).call
    same, padded = _with_slots(call, 1, 2, 3, 4), _with_slots(call, 1, 2, -1, 4)
    path = write_recording(tmp_path / "rec.json", same, same, padded, same)
    code, out, _ = run(capsys, "call", path)
    assert code == 0 and ("4 call(s) checked, 2 distinct, shown in 1 section (calls that differ only in recorded "
                          "values share one)") in out
    assert "call #0 (and 3 alike: #1, #3 identical; #2 with other values of `ssm_state_indices`)" in out
    path = write_recording(tmp_path / "rec.json", same, same)
    code, out, _ = run(capsys, "call", path)
    assert "call #0 (and 1 identical: #1)" in out
    path = write_recording(tmp_path / "rec.json", same, padded, padded)
    code, out, _ = run(capsys, "call", path)
    assert "call #0 (and 2 alike: #1, #2 with other values of `ssm_state_indices`)" in out
    # slot 21 of the 21-row pool (4 requests x 5 slots sglang counts + row 0): other diagnostics, its own section
    out_of_range = _with_slots(call, 1, 2, 3, 4 * 5 + 1)
    path = write_recording(tmp_path / "rec.json", same, out_of_range)
    code, out, _ = run(capsys, "call", path)
    assert code == 1 and "2 call(s) checked, 2 distinct" in out and "call #1 " in out


@pytest.mark.parametrize("content, fragment", [
    ("{", "not valid JSON"),
    ('["calls"]', "top level is a list"),
    ('{"calls": []}', "not a gdr-check recording"),
    ('{"schema_version": 1, "kind": "other", "calls": []}',
     "not a gdr-check recording: its `kind` is 'other', not 'gdr-check-capture'"),
    ('{"schema_version": 2, "calls": []}', "schema_version 2 is not supported"),
    ('{"schema_version": 1, "calls": []}', "no recorded calls (was the kernel called inside `gdr_check.capture()`?)"),
    ('{"schema_version": 1, "max_calls": 0, "calls_seen": 3, "calls": []}',
     "no recorded calls: the capture saw 3 calls and kept none (its `max_calls` was 0)"),
    # a capture with room for calls keeps every call it saw or notes why not: an empty one says what the file holds
    ('{"schema_version": 1, "max_calls": 256, "calls_seen": 4, "calls": []}',
     "no recorded calls: `calls_seen` is 4 and `max_calls` is 256, but `calls` is empty: the file is "
     "inconsistent (edited after the capture wrote it?)"),
    ('{"schema_version": 1, "calls_seen": 3, "calls": []}',
     "no recorded calls: `calls_seen` is 3 but `calls` is empty, and there is no `max_calls` to say why: the file "
     "is inconsistent (edited after the capture wrote it?)"),
    ('{"schema_version": 1, "max_calls": 256, "calls_seen": 2, "calls": [], "unrecorded": [{"function": "f", '
     '"reason": "TypeError: bad"}]}',
     "no recorded calls: the capture saw 2 calls and could describe none of them (`unrecorded`: TypeError: bad)"),
    ('{"schema_version": 1, "calls": [{"call": {"variant": "gdn"}}]}', "has no `mixed_qkv`"),
    ('{"schema_version": 1, "calls": [{"call": {"variant": "xyz"}}]}', "`calls[0].call.variant`"),
])
def test_malformed_recordings_exit_2_with_one_line(tmp_path, capsys, content, fragment):
    path = tmp_path / "rec.json"
    path.write_text(content)
    code, out, err = run(capsys, "call", str(path))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and fragment in err and "Traceback" not in err
    code, out, err = run(capsys, "call", str(path), "--output-format", "json")
    assert code == 2 and json.loads(out)["error"]["code"] == "recording" and err.count("\n") == 1


def test_a_recording_named_to_check_is_pointed_at_call(tmp_path, capsys):
    """Without the `call` subcommand a recording is no model config: say which command reads it."""
    path = write_recording(tmp_path / "calls-0.json", expected_call())
    code, out, err = run(capsys, path)
    assert (code, out) == (2, "")
    assert err.splitlines()[0] == (f"error: `{path}` is not a checkpoint: it is a recording of kernel calls, not a "
                                   "model config (`gdr-check call` checks one); help: pass the model directory, its "
                                   "`config.json` or its `.safetensors` files")
    report = tmp_path / "report.json"
    assert run(capsys, "call", path, "--output-format", "json", "-o", str(report))[0] == 0
    code, out, err = run(capsys, str(report))
    assert (code, out) == (2, "")
    assert err.splitlines()[0].startswith(f"error: `{report}` is not a checkpoint: it is a gdr-check report, not a "
                                          "model config; help: ")


def _edited(tmp_path, *entries: dict, **top) -> str:
    path = tmp_path / "rec.json"
    path.write_text(dump_recording({"schema_version": 1, "kind": "gdr-check-capture", "calls": list(entries), **top}))
    return str(path)


@pytest.mark.parametrize("indices, line", [
    ([-5], "`calls[0].index` must be a whole number >= 0 (got -5)"),
    ([1.5], "`calls[0].index` must be a whole number >= 0 (got 1.5)"),
    (["0"], "`calls[0].index` must be a whole number >= 0 (got '0')"),
    ([True], "`calls[0].index` must be a whole number >= 0 (got True)"),
    ([None], "`calls[0].index` must be a whole number >= 0 (got None)"),
    ([0, 1, 0], "`calls[2].index` is 0, as is `calls[0].index`: each call's index must be unique"),
    ([..., 0], "`calls[1].index` is 0, as is the position of `calls[0]` (it has no `index`): each call's index must "
               "be unique"),
    ([1, ...], "the position of `calls[1]` (it has no `index`) is 1, as is `calls[0].index`: each call's index "
               "must be unique"),
])
def test_an_edited_calls_index_must_be_a_unique_whole_number(tmp_path, capsys, indices, line):
    """It names the call in the report and for --index: `call #-5` or two `#0`s used to be printed."""
    call = expected_call().to_dict()
    path = _edited(tmp_path, *({"call": call} if i is ... else {"index": i, "call": call} for i in indices))
    assert run(capsys, "call", path) == (2, "", f"error: {path}: {line}\n")


@pytest.mark.parametrize("seen", ["x", -1, 2.5, True])
def test_calls_seen_must_be_a_whole_number(tmp_path, capsys, seen):
    path = _edited(tmp_path, {"index": 0, "call": expected_call().to_dict()}, calls_seen=seen)
    assert run(capsys, "call", path) == (2, "", f"error: {path}: `calls_seen` must be a whole number >= 0 "
                                                f"(got {seen!r})\n")


def test_a_gdn_call_carrying_lower_bound_is_refused(tmp_path, capsys):
    path = _edited(tmp_path, {"index": 0, "call": {**expected_call().to_dict(), "lower_bound": -5.0}})
    assert run(capsys, "call", path) == (2, "", f"error: {path}: `calls[0].call.lower_bound` is -5.0, but the call "
                                                "is a GDN call: the GDN kernel has no lower_bound (only KDA calls "
                                                "take one)\n")


@pytest.mark.parametrize("index, shown", [("1", "'1' (a str)"), (True, "True (a bool)"), (1.0, "1.0 (a float)")])
def test_check_recording_refuses_an_index_that_is_no_whole_number(tmp_path, index, shown):
    """`index=True` used to check call 1, `index="1"` to raise a TypeError from `<=`."""
    from gdr_check.pipeline.call_check import CallIndexError, check_recording

    path = write_recording(tmp_path / "rec.json", expected_call(), expected_call())
    with pytest.raises(CallIndexError) as refused:
        check_recording(path, index=index)
    assert isinstance(refused.value, TypeError)
    assert str(refused.value) == (f"index is {shown}: must be a whole number (a call's position in the "
                                  "recording), or None for every call")
    assert [c.recorded.index for c in check_recording(path, index=1).results[0].record.calls] == [1]


def test_a_recorded_scale_is_read_in_magnitude_and_judged_by_gdr245(tmp_path, capsys):
    """docs/limits.md's scale range is GDR245's: a negative recorded scale is the call's error, not the file's."""
    path = _edited(tmp_path, {"index": 0, "call": {**expected_call().to_dict(), "scale": -1.0}})
    code, document = run_json(capsys, "call", path)
    assert code == 1 and [d["message"] for d in document["calls"][0]["diagnostics"] if d["code"] == "GDR245"] == [
        "`scale` is -1.0; not positive: the kernel needs a positive float (typically K**-0.5 = 0.08838834764831845)"]
    path = _edited(tmp_path, {"index": 0, "call": {**expected_call().to_dict(), "scale": -1e31}})
    assert run(capsys, "call", path) == (2, "", f"error: {path}: `calls[0].call.scale` is -1e+31: must be a finite "
                                                "number of at most 1e+30 in magnitude\n")


def test_every_format_counts_the_calls_checked(tmp_path, capsys):
    """The concise summary said `1 checked` (the one recording) where the full one says 3 calls."""
    path = write_recording(tmp_path / "rec.json", expected_call(), expected_call(), expected_call())
    line = "summary: 3 call(s) checked: 0 error(s), 3 warning(s), 0 note(s)"
    assert run(capsys, "call", path)[1].splitlines()[-1] == line
    assert run(capsys, "call", path, "--output-format", "concise")[2].splitlines()[-1] == line
    assert run(capsys, "call", path, "--output-format", "concise", "--index", "2")[2].splitlines()[-1] == (
        "summary: 1 call(s) checked: 0 error(s), 1 warning(s), 0 note(s)")


def test_malformed_tensor_fields_exit_2(tmp_path, capsys):
    document = json.loads(dump_recording({"schema_version": 1, "calls": [
        {"index": 0, "call": expected_call().to_dict()}]}))
    document["calls"][0]["call"]["a"]["shape"] = ["2", 8]
    path = tmp_path / "rec.json"
    path.write_text(json.dumps(document))
    code, _, err = run(capsys, "call", str(path))
    assert code == 2 and "`calls[0].call.a.shape` must be a list of integers" in err


def test_each_call_s_findings_point_at_its_lines_in_the_recording(tmp_path, capsys):
    """Concise, GitHub and SARIF locations tell the calls apart: each finding points at its call's argument."""
    good, bad = expected_call(), _for_tp(4, mixed_qkv=T((B, 3072)))
    path = write_recording(tmp_path / "rec.json", good, bad)
    lines = Path(path).read_text().splitlines()
    code, document = run_json(capsys, "call", path, "--model", QWEN, "--tp", "4")
    [wrong] = [d for d in document["diagnostics"] if d["code"] == "GDR164"]
    location = wrong["location"]
    assert (location["file"], location["json_key"]) == (path, "calls[1].call.mixed_qkv")
    assert lines[location["line"] - 1][location["column"] - 1:].startswith('"mixed_qkv": {')
    assert '"index": 1' in lines[location["line"] - 1]  # the second call's line, not the first's
    beta = sorted((d["location"]["json_key"], d["location"]["line"]) for d in document["diagnostics"]
                  if d["code"] == "GDR253")
    assert [key for key, _ in beta] == ["calls[0].call.b", "calls[1].call.b"] and beta[0][1] < beta[1][1]


def test_quiet_prints_the_diagnostics_only(tmp_path, capsys):
    path = write_recording(tmp_path / "rec.json", _for_tp(4, mixed_qkv=T((B, 3072))))
    code, out, err = run(capsys, "call", path, "--model", QWEN, "--tp", "4", "-q", "--output-format", "concise")
    assert code == 1 and err == ""  # no summary line
    assert [line.split(" ", 2)[1] for line in out.splitlines()] == ["warning[GDR253]", "error[GDR164]"]
    code, out, _ = run(capsys, "call", path, "--model", QWEN, "--tp", "4", "--quiet")
    assert code == 1 and "call #0" not in out and out.startswith("warning[GDR253]: ")


def test_recorded_values_must_fill_their_shape(tmp_path, capsys):
    """A capture records every index value: fewer (or more) than the shape holds is a damaged recording."""
    document = json.loads(dump_recording({"schema_version": 1, "calls": [
        {"index": 0, "call": expected_call().to_dict()}]}))
    indices = document["calls"][0]["call"]["ssm_state_indices"]
    indices["values"] = indices["values"][:-1]
    path = tmp_path / "rec.json"
    path.write_text(json.dumps(document))
    code, _, err = run(capsys, "call", str(path))
    count = len(indices["values"])
    assert count == 1  # B = 2
    assert code == 2 and (f"`calls[0].call.ssm_state_indices.values` holds 1 value for shape "
                          f"{indices['shape']} ({count + 1} elements)") in err


@pytest.mark.parametrize("value, expected", [
    # (4.5 was shown and checked as a slot; a TensorSpec with it is GDR228)
    (4.5, "holds 4.5 (slot indices are whole numbers)"),
    ("4", "holds '4' (slot indices are whole numbers)"),
    (None, "holds None (slot indices are whole numbers)"),
    # (10**30 in an int32 tensor was read, shown and checked as a slot: no capture writes one)
    (10**30, "holds 1000000000000000000000000000000, which int32 cannot hold (-2147483648..2147483647)"),
    (2**31, "holds 2147483648, which int32 cannot hold (-2147483648..2147483647)")])
def test_recorded_slot_values_must_be_whole_numbers_that_fit_their_dtype(tmp_path, capsys, value, expected):
    document = json.loads(dump_recording({"schema_version": 1, "calls": [
        {"index": 0, "call": expected_call().to_dict()}]}))
    document["calls"][0]["call"]["ssm_state_indices"]["values"][-1] = value
    path = tmp_path / "rec.json"
    path.write_text(json.dumps(document))
    code, out, err = run(capsys, "call", str(path))
    assert (code, out) == (2, "") and f"`calls[0].call.ssm_state_indices.values` {expected}" in err


def test_a_recording_that_is_not_utf8_is_named_so(tmp_path, capsys):
    path = tmp_path / "rec.json"
    path.write_bytes(b'{"a": "\xff"}')
    code, out, err = run(capsys, "call", str(path))
    assert (code, out) == (2, "") and err == f"error: {path}: not valid UTF-8 (byte 0xff at offset 7)\n"


def test_a_skipped_target_without_its_fields_is_noted_in_words(record, capsys, tmp_path):
    document = json.loads(dump_recording({"schema_version": 1, "skipped_targets": [{"reason": 5}], "calls": [
        {"index": 0, "call": expected_call().to_dict()}]}))
    path = tmp_path / "rec.json"
    path.write_text(json.dumps(document))
    code, out, _ = run(capsys, "call", str(path))
    assert "capture skipped a target it did not name: no reason recorded" in out


@pytest.mark.parametrize("argv, fragment", [
    (["call", "{missing}"], "cannot read the recording"),
    (["call", "{rec}", "--index", "5"], "there is no call 5"),
    (["call", "{rec}", "--model", "{missing}"], "does not exist"),
    (["call", "{rec}", "--output-format", "xml"], "unknown format 'xml'"),
    (["call", "{rec}", "--tp", "4"], "pass --model too"),
])
def test_usage_and_input_errors_exit_2_with_one_line(tmp_path, capsys, argv, fragment):
    rec = write_recording(tmp_path / "rec.json", expected_call())
    names = {"rec": rec, "missing": str(tmp_path / "missing")}
    code, out, err = run(capsys, *[arg.format(**names) for arg in argv])
    assert code == 2 and err.count("\n") <= 2 and fragment in err and "Traceback" not in err


@pytest.mark.parametrize(("options", "message"), [
    (["--tp", "4"], "error: Invalid value for --tp: --tp describes the model's deployment: pass --model too"),
    (["--state-dtype", "float32"],
     "error: Invalid value for --state-dtype: --state-dtype describes the model's deployment: pass --model too"),
    (["--tp", "4", "--state-dtype", "float32"], "error: Invalid value for --tp/--state-dtype: --tp and --state-dtype "
                                                 "describe the model's deployment: pass --model too"),
])
def test_a_deployment_option_without_a_model_names_the_option_given(tmp_path, capsys, options, message):
    # The wheel said "Invalid value: --tp and --state-dtype ..." to a user who had passed --tp alone.
    rec = write_recording(tmp_path / "rec.json", expected_call())
    code, out, err = run(capsys, "call", rec, *options)
    assert (code, out, err) == (2, "", message + "\n")


def test_a_model_without_linear_layers_is_refused_as_explain_refuses_it(tmp_path, capsys):
    """The recorded calls cannot be a plain transformer's: comparing them with one is a wrong --model, exit 2 with
    one line, as `explain --model` says of it (not a skipped comparison and exit 0)."""
    llama = tmp_path / "llama"
    llama.mkdir()
    write_json(llama / "config.json", {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                                        "num_hidden_layers": 4})
    path = write_recording(tmp_path / "rec.json", expected_call())
    code, out, err = run(capsys, "call", path, "--model", str(llama))
    assert (code, out) == (2, "")
    assert err == (f"error: Invalid value for --model: {llama}: `LlamaForCausalLM` has no GDN or KDA layers, so it "
                   f"makes no packed-decode call to compare the recorded calls with\n")
    # the library raises its own error, never a CLI one
    with pytest.raises(gdr_check.pipeline.call_check.CallModelError):
        gdr_check.pipeline.call_check.check_recording(path, target=str(llama))


# -- which engine release each call is checked for, and why ---------------------------------------------------------
def _profile_of_calls(document: dict) -> list[tuple[str, str, str]]:
    return [(c["engine"], c["engine_profile"], c["engine_profile_reason"]) for c in document["calls"]]


def test_each_call_names_its_engine_profile_and_why(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no [tool.gdr-check] above the recording but the one written below
    call = expected_call()
    recorded = write_recording(tmp_path / "rec.json", call, engine="vllm@0.20.0")
    _, document = run_json(capsys, "call", recorded)
    assert _profile_of_calls(document) == [("vllm@0.20.0", "vllm@0.20", "recorded")]
    assert document["notes"] == ["engine profile vllm@0.20: the engine the capture recorded (vllm@0.20.0)"]
    _, document = run_json(capsys, "call", recorded, "--engine", "sglang@0.5.21")
    assert _profile_of_calls(document) == [("sglang@0.5.21", "sglang@0.5.20", "flag")]
    assert document["notes"] == [
        "engine profile sglang@0.5.20: --engine sglang@0.5.21; sglang 0.5.21 is checked as sglang 0.5.20, the "
        "profile of its release epoch (its wheel was verified against it)"]
    # A recording that names no engine: [tool.gdr-check]'s, else the default (nothing is installed here).
    unnamed = write_recording(tmp_path / "unnamed.json", call, engine=None)
    _, document = run_json(capsys, "call", unnamed, "--isolated")
    assert _profile_of_calls(document) == [("sglang", "sglang@0.5.23", "default")]
    assert document["notes"] == ["engine profile sglang@0.5.23: gdr-check's default (no --engine, no engine "
                                 "recorded or configured, none installed)"]
    (tmp_path / "pyproject.toml").write_text('[tool.gdr-check]\nengine = "vllm@0.27.1"\n')
    _, document = run_json(capsys, "call", unnamed)
    assert _profile_of_calls(document) == [("vllm@0.27.1", "vllm@0.27", "config")]
    # The library's `engine=` is an argument, not a default.
    run = gdr_check.check_recording(unnamed, engine="vllm")
    (checked,) = run.results[0].record.calls
    assert (checked.engine, checked.to_dict()["engine_profile"], checked.engine_reason) == (
        "vllm", "vllm@0.33", "argument")
