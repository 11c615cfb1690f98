"""Slots and memory per request under sglang's pool strategy and speculative decoding.

Expected numbers are computed by hand from Qwen3-Next-80B's published geometry (models.md section 2): 36 GDN
layers of 16 key / 32 value heads, K = V = 128, W = 4; sglang keeps the SSM state in fp32 and the conv state in bf16.
"""

from __future__ import annotations

import pytest

from gdr_check.cli.main import main
from gdr_check.deployment.settings import Deployment, tracking_slots
from gdr_check.pipeline.model_check import check_builtin

QWEN3_NEXT = "Qwen/Qwen3-Next-80B-A3B-Instruct"
L, H, HV, K, V, W = 36, 16, 32, 128, 128, 4
CONV_SLOT = (W - 1) * (2 * H * K + HV * V) * 2  # 3 x 8192 channels x bf16 = 48 KiB
SSM_SLOT = HV * V * K * 4  # 2 MiB
SLOT = L * (CONV_SLOT + SSM_SLOT)
GIB = 2 ** 30


def only(result, code: str):
    found = [d for d in result.report if d.code == code]
    assert len(found) == 1, (code, [(d.code, d.message) for d in result.report])
    return found[0]


def test_tracking_slots_follow_sglang():
    assert tracking_slots("no_buffer") == 0
    assert tracking_slots("extra_buffer") == 2
    assert tracking_slots("extra_buffer", overlap=False) == 1
    assert tracking_slots("extra_buffer", lazy=True) == 1


def test_extra_buffer_with_draft_tokens_per_request():
    T = 3
    result = check_builtin(QWEN3_NEXT, Deployment(batch=64, mamba_strategy="extra_buffer", speculative_tokens=T,
                                                  gpu_memory=20 * GIB))
    plan = result.pool
    speculative = L * (T * SSM_SLOT + (2 * H * K + HV * V) * (T + W - 2) * 2)
    assert plan.slot_bytes == SLOT == 77266944
    assert plan.speculative_bytes_per_request == speculative
    assert plan.bytes_per_request == 3 * SLOT + speculative
    fit = 20 * GIB // (3 * SLOT + speculative) - 1
    assert plan.requests_that_fit == fit == 45
    error = only(result, "GDR136")
    assert error.severity == "error"
    assert error.message == ("a 20 GiB budget holds 45 requests per rank with 3 state slot(s) (1 + 2 ping-pong, "
                             "extra_buffer) and the verify state of 3 draft token(s), fewer than the batch of 64")
    assert any("Not enough space for mamba ping pong idx" in note for note in error.notes)
    no_buffer_fit = 20 * GIB // (SLOT + speculative) - 1
    assert f"`--mamba-radix-cache-strategy no_buffer`: {no_buffer_fit} requests fit in the same budget" in error.fixes


def test_extra_buffer_in_a_budget_that_holds_no_request_offers_no_batch_of_0():
    result = check_builtin(QWEN3_NEXT, Deployment(batch=8, mamba_strategy="extra_buffer", gpu_memory=100))
    error = only(result, "GDR136")
    # 8 requests of 3 slots and row 0 (one slot): 25 slots of 73.6875 MiB = 1.799 GiB; one request and row 0:
    # 4 slots, 294.75 MiB (the wheel counted row 0 as a whole request: 27 slots and 6).
    assert 25 * SLOT / 2**30 == pytest.approx(1.799, abs=5e-4) and 4 * SLOT / 2**20 == 294.75
    assert error.fixes[:2] == [
        "raise `--mamba-full-memory-ratio` until the state pool gets 1.799 GiB per rank",
        "not even one request fits: one needs 294.75 MiB per rank (a request and the reserved row 0): raise the "
        "budget to at least that"]
    # no_buffer holds none either (100 B < 2 slots): it is not offered as a fix
    assert not any("lower the batch to" in fix or "no_buffer" in fix for fix in error.fixes)


def test_a_batch_that_fits_gets_only_the_plan():
    result = check_builtin(QWEN3_NEXT, Deployment(batch=8, mamba_strategy="extra_buffer", gpu_memory=20 * GIB))
    assert result.pool.bytes_per_request == 3 * SLOT
    assert "GDR136" not in result.report.codes()
    info = only(result, "GDR135")
    assert info.message == ("each request holds 3 state slot(s) (1 + 2 ping-pong, extra_buffer): "
                            "221.062 MiB per rank")


def test_defaults_add_nothing():
    result = check_builtin(QWEN3_NEXT, Deployment())
    assert result.pool.slots_per_request == 1 and result.pool.speculative_bytes_per_request == 0
    assert not {"GDR135", "GDR136"} & set(result.report.codes())


def test_vllm_strategy_is_not_modelled():
    result = check_builtin(QWEN3_NEXT, Deployment(engine="vllm", speculative_tokens=2))
    assert result.pool is None
    assert "not modelled" in only(result, "GDR135").notes[0]


def test_cli_flags(capsys):
    code = main([QWEN3_NEXT, "--speculative-tokens", "3", "--mamba-strategy", "extra_buffer",
                 "--gpu-memory", "20GiB", "--batch", "64", "--output-format", "concise"])
    out = capsys.readouterr().out
    assert code == 1 and "GDR136" in out


def test_cli_rejects_an_unknown_strategy(capsys):
    assert main([QWEN3_NEXT, "--mamba-strategy", "bogus"]) == 2
    assert capsys.readouterr().err == ("error: Invalid value for --mamba-strategy: unknown mamba strategy 'bogus'; "
                                       "expected one of: no_buffer, extra_buffer\n")


def test_one_request_count_per_report_where_the_strategy_is_modelled(capsys):
    """GDR132 counts plain slots (26 of 73.688 MiB in 2 GiB); with ping-pong slots GDR136 counts 8 and replaces
    it in the report (`Rule.supersedes`), unless GDR136 is not selected."""
    args = [QWEN3_NEXT, "--batch", "64", "--mamba-strategy", "extra_buffer", "--gpu-memory", "2GiB",
            "--output-format", "concise", "--select", "GDR132,GDR136"]
    assert main(args) == 1
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("]")[0].rsplit("[", 1)[1] for line in lines if "[GDR13" in line] == ["GDR136"]
    assert "holds 8 requests per rank" in lines[0]
    assert main([*args, "--ignore", "GDR136"]) == 0  # a warning: the run passes, and the budget is still said
    assert "warning[GDR132] a 2 GiB budget holds the state of 26 requests per rank, fewer than the batch of 64" \
        in capsys.readouterr().out
    both = check_builtin(QWEN3_NEXT, Deployment(batch=64, mamba_strategy="extra_buffer", gpu_memory=2 * GIB))
    assert {"GDR132", "GDR136"} <= set(both.report.codes())  # the check finds both; the report shows one
    assert only(both, "GDR136").fixes[-2:] == ["raise TP to split the state across more ranks",
                                                "halve the SSM state with `--mamba-ssm-dtype bfloat16`, at some "
                                                "accuracy cost (GDR249)"]


def test_the_header_budget_line_counts_as_the_pool_plan(capsys):
    main([QWEN3_NEXT, "--speculative-tokens", "3", "--mamba-strategy", "extra_buffer", "--gpu-memory", "20GiB"])
    assert "  state budget: 45 request(s) fit in 20480 MiB per rank at 439.875 MiB each\n" in capsys.readouterr().out


def test_an_empty_batch_pool_is_one_slot():
    note = only(check_builtin(QWEN3_NEXT, Deployment(batch=0)), "GDR131").notes[-1]
    assert note == "the pool of 1 slot takes 73.688 MiB per rank"


def test_the_pool_of_a_batch_under_extra_buffer_has_its_ping_pong_rows():
    # The wheel showed a 9-row pool (GDR131: 9 slots) for 8 requests of 3 slots each and counted row 0 as a whole
    # request (GDR135: 9 rows x 3 slots): 8 x 3 slots and row 0 are 25 rows; the verify buffers keep 8 + 1 rows.
    T = 3
    result = check_builtin(QWEN3_NEXT, Deployment(batch=8, mamba_strategy="extra_buffer", speculative_tokens=T))
    assert result.deployment.num_slots == 25
    assert result.call.initial_state.shape == (25, HV, V, K)
    assert result.pools["ssm_pool"].shape == (L, 25, HV, V, K)
    speculative = L * (T * SSM_SLOT + (2 * H * K + HV * V) * (T + W - 2) * 2)
    assert result.pool.bytes_for_batch == 8 * (3 * SLOT + speculative) + SLOT + speculative
    info = only(result, "GDR135")
    needed = (8 * (3 * SLOT + speculative) + SLOT + speculative) / 2**30
    assert f"a batch of 8 needs {needed:.3f} GiB per rank (25 pool rows, row 0 reserved; verify state for 9 rows)" \
        in info.notes
    assert f"the pool of 25 slots takes {25 * SLOT / 2**30:.3f} GiB per rank" in only(result, "GDR131").notes
    # vLLM's strategies are not modelled: one slot per request, B + 1 rows
    assert check_builtin(QWEN3_NEXT, Deployment(engine="vllm", batch=8, mamba_strategy="extra_buffer")
                         ).deployment.num_slots == 9


def test_the_one_slot_footprint_says_how_many_slots_a_request_holds_under_extra_buffer():
    # GDR131's figure is one slot; beside GDR135's it read as a second, smaller per-request number (review).
    result = check_builtin(QWEN3_NEXT, Deployment(batch=8, mamba_strategy="extra_buffer"))
    assert f"under extra_buffer a request holds 3 such slots, {3 * SLOT / 2**20:.3f} MiB (GDR135)" \
        in only(result, "GDR131").notes
    assert not any("such slots" in note for note in only(check_builtin(QWEN3_NEXT, Deployment()), "GDR131").notes)


def test_vllms_conv_state_window_holds_the_draft_tokens():
    # vLLM's `gated_delta_net_state_shape(..., num_spec)` gives (W - 1 + num_spec, conv dim / tp); the wheel showed
    # W - 1 rows whatever the draft tokens (second user test). sglang keeps the drafts' windows apart.
    width = (2 * H * K + HV * V) // 4
    drafted = check_builtin(QWEN3_NEXT, Deployment(engine="vllm", tp=4, speculative_tokens=2))
    assert drafted.pools["conv_state"].shape == (9, W - 1 + 2, width)
    assert drafted.memory.conv_bytes_per_layer == (W - 1 + 2) * width * 2
    assert check_builtin(QWEN3_NEXT, Deployment(engine="vllm", tp=4)).pools["conv_state"].shape == (9, W - 1, width)
    sglang = check_builtin(QWEN3_NEXT, Deployment(tp=4, speculative_tokens=2))
    assert sglang.pools["conv_pool"].shape == (L, 9, width, W - 1)


def test_slots_too_few_for_the_ping_pong_rows_of_extra_buffer():
    # 8 requests of 1 + 2 slots and slot 0 need 25 rows; --slots 9 was silent (the decode call's slots 1..8 fit).
    result = check_builtin(QWEN3_NEXT, Deployment(batch=8, slots=9, mamba_strategy="extra_buffer"))
    error = only(result, "GDR137")
    assert error.severity == "error"
    assert error.message == ("a batch of 8 needs 25 slots under extra_buffer (3 per request and slot 0), but the "
                             "pool has 9 slots (0..8)")
    assert error.notes[:2] == [
        "sglang 0.5.23 gives each request 1 + 2 ping-pong slots under extra_buffer: 8 x 3 + 1 = 25 slots",
        "the pool of 9 slots holds 2 such requests; sglang 0.5.23 stops at allocation with `AssertionError: Not "
        "enough space for mamba ping pong idx, try to increase --mamba-full-memory-ratio.` (GDR405)"]
    # each flag names its CLI: `--slots` is gdr-check's, `--mamba-radix-cache-strategy` sglang's (review)
    assert error.fixes == ["grow the pool to at least 25 slots (gdr-check `--slots 25`, or no `--slots`: under "
                           "extra_buffer the default is batch x 3 + 1)",
                           "lower the batch to 2",
                           "serve with sglang `--mamba-radix-cache-strategy no_buffer` (in gdr-check `--mamba-strategy "
                           "no_buffer`): one slot per request, so 9 slots hold the batch of 8"]
    assert "GDR241" not in result.report.codes()  # the decode call's slots fit: GDR137 is the only report
    # enough rows, the default, no_buffer and vLLM (whose strategies are not modelled): nothing
    for deployment in (Deployment(batch=8, slots=25, mamba_strategy="extra_buffer"),
                       Deployment(batch=8, mamba_strategy="extra_buffer"), Deployment(batch=8, slots=9),
                       Deployment(engine="vllm", batch=8, slots=9, mamba_strategy="extra_buffer")):
        assert "GDR137" not in check_builtin(QWEN3_NEXT, deployment).report.codes(), deployment


def test_slots_fewer_than_the_batch_under_extra_buffer_are_said_once(capsys):
    """The decode call's slots past a 4-slot pool (GDR241 on rows 3-7) are the same too-small pool: GDR137 replaces
    them in the report, with the rows extra_buffer needs (25), not the 9 the call alone needs."""
    args = [QWEN3_NEXT, "--batch", "8", "--slots", "4", "--mamba-strategy", "extra_buffer", "--output-format",
            "concise"]
    assert main(args) == 1
    errors = [line for line in capsys.readouterr().out.splitlines() if "error[" in line]
    assert errors == [f"{QWEN3_NEXT}: error[GDR137] a batch of 8 needs 25 slots under extra_buffer (3 per request "
                      "and slot 0), but the pool has 4 slots (0..3)"]
    error = only(check_builtin(QWEN3_NEXT, Deployment(batch=8, slots=4, mamba_strategy="extra_buffer")), "GDR137")
    assert error.fixes == ["grow the pool to at least 25 slots (gdr-check `--slots 25`, or no `--slots`: under "
                           "extra_buffer the default is batch x 3 + 1)", "lower the batch to 1"]
