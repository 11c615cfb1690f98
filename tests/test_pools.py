"""The state pool as sglang sizes it: `check` (GDR135-137) and `launch` read one implementation.

Expected numbers are computed here from sglang's own formulas (sglang 0.5.23 wheel, `sglang/srt/`):
- `mem_cache/kv_cache_configurator.py:227-229` (ratio base 3), `:3062-3088` (`_calculate_mamba_ratio`: 1 with the
  radix cache off, else 3 + `get_mamba_tracking_slots`, `mem_cache/allocation_sizing.py:11-19`: 2 under extra_buffer
  with the overlap schedule, 1 without it or lazily);
- `:3379-3385` (pool K = (budget - slot) // slot), `:3359-3369` (with D draft tokens:
  (budget - slot (1 + D)) // (slot (1 + D / ratio))), `:3392-3403` (K <= 0 stops start-up);
- `:3119-3160` (`resolve_max_num_reqs`: at most K // ratio running requests, a warning below the requested number,
  start-up stops at 0);
- `arg_groups/overrides.py:438-487` (`auto` -> extra_buffer for `_MAMBA_EXTRA_BUFFER_ARCHS` with the overlap schedule
  and the Triton backend, else no_buffer with the overlap schedule off); 0.5.13's `server_args.py:1225-1228` (auto ->
  no_buffer always); 0.5.16's overrides.py adds KimiLinearForCausalLM; the cap warning first appears in 0.5.17.
Qwen3-Next-80B's published geometry: 36 GDN layers of 16 key / 32 value heads, K = V = 128, W = 4; sglang keeps the
SSM state in fp32 and the conv state in bf16.
"""

from __future__ import annotations

import json

import pytest

from gdr_check.cli.deployment_flags import check_command
from gdr_check.cli.main import main
from gdr_check.deployment.settings import Deployment
from gdr_check.deployment.state_pool import counted_slots, tracking_slots
from gdr_check.pipeline.model_check import check_builtin

QWEN3_NEXT = "Qwen/Qwen3-Next-80B-A3B-Instruct"
KIMI = "moonshotai/Kimi-Linear-48B-A3B-Instruct"
L, H, HV, K, V, W = 36, 16, 32, 128, 128, 4
CONV_SLOT = (W - 1) * (2 * H * K + HV * V) * 2  # 3 x 8192 channels x bf16 = 48 KiB
SSM_SLOT = HV * V * K * 4  # 2 MiB
SLOT = L * (CONV_SLOT + SSM_SLOT)
GIB = 2 ** 30


def only(result, code: str):
    found = [d for d in result.report if d.code == code]
    assert len(found) == 1, (code, [(d.code, d.message) for d in result.report])
    return found[0]


def sglang_pool(budget: int, slot: int, ratio: int, draft: int = 0) -> int:
    """kv_cache_configurator.py:3359-3385, in its floating-point arithmetic."""
    if draft:
        return int((float(budget) - slot * (1 + draft)) // (slot * (1 + draft / ratio)))
    return int((float(budget) - slot) // slot)


def test_the_slots_counted_per_request_follow_sglang():
    assert SLOT == 77266944
    assert [tracking_slots(s) for s in ("no_buffer", "extra_buffer", "extra_buffer_lazy")] == [0, 2, 1]
    assert tracking_slots("extra_buffer", overlap=False) == 1
    assert counted_slots("no_buffer") == 3 and counted_slots("extra_buffer") == 5
    assert counted_slots("extra_buffer", overlap=False) == 4 and counted_slots("extra_buffer_lazy") == 4
    assert counted_slots("extra_buffer", radix_cache=False) == 1


@pytest.mark.parametrize(("model", "engine", "strategy", "counted"), [
    (QWEN3_NEXT, "sglang@0.5.13", "no_buffer", 3),  # auto -> no_buffer in every case before 0.5.14
    (QWEN3_NEXT, "sglang@0.5.14", "extra_buffer", 5),
    (QWEN3_NEXT, "sglang", "extra_buffer", 5),
    (KIMI, "sglang@0.5.15", "no_buffer", 3),  # KimiLinearForCausalLM joins the list in 0.5.16
    (KIMI, "sglang@0.5.16", "extra_buffer", 5),
    (QWEN3_NEXT, "vllm", "none", 1),  # vLLM's strategies are not modelled: one slot per request
])
def test_auto_resolves_as_each_release_does(model, engine, strategy, counted):
    settings = check_builtin(model, Deployment(engine=engine, batch=8)).settings
    assert (settings.pool.strategy, settings.slots_per_request) == (strategy, counted)
    assert settings.num_slots == 8 * counted + 1  # the fewest rows from which the engine serves the batch


def test_auto_without_the_overlap_schedule_is_no_buffer_and_the_radix_cache_off_counts_one():
    settings = check_builtin(QWEN3_NEXT, Deployment(overlap_schedule=False)).settings
    assert (settings.pool.strategy, settings.pool.overlap, settings.slots_per_request) == ("no_buffer", False, 3)
    assert check_builtin(QWEN3_NEXT, Deployment(radix_cache=False)).settings.slots_per_request == 1
    lazy = check_builtin(QWEN3_NEXT, Deployment(mamba_strategy="extra_buffer_lazy")).settings
    assert (lazy.pool.held_slots, lazy.slots_per_request) == (2, 4)


def test_a_budget_that_caps_the_batch_is_a_warning_with_sglangs_numbers():
    budget = 20 * GIB
    pool = sglang_pool(budget, SLOT, 5)
    assert (pool, pool // 5) == (276, 55)
    result = check_builtin(QWEN3_NEXT, Deployment(batch=64, gpu_memory=budget))
    warning = only(result, "GDR136")
    assert warning.severity == "warning"
    assert warning.message == ("a 20 GiB budget gives a pool of 276 slots, which serves 55 running requests per rank "
                               "at 5 state slot(s) counted per request (3 for the radix cache + 2 ping-pong: "
                               "extra_buffer with the overlap schedule), fewer than the batch of 64")
    assert ("sglang logs: max_running_requests is capped to 55 by the mamba state cache (max_mamba_cache_size=276, "
            "5 state slots per request).") in warning.notes
    # 64 x 5 slots and row 0: 321 slots
    need = 321 * SLOT
    assert sglang_pool(need, SLOT, 5) == 320 and sglang_pool(need - 1, SLOT, 5) == 319
    assert warning.fixes[0] == (f"raise `--mamba-full-memory-ratio` until the state pool gets {need / GIB:.3f} GiB "
                                "per rank, or set `--max-mamba-cache-size 320`")
    assert warning.fixes[1] == ("serve with `--mamba-radix-cache-strategy no_buffer --disable-overlap-schedule` (in "
                                f"gdr-check `--mamba-strategy no_buffer`): 3 slots counted per request, "
                                f"{sglang_pool(budget, SLOT, 3) // 3} requests")
    assert "GDR132" not in result.report.codes() or "GDR136" in result.report.codes()


def test_draft_tokens_size_the_pool_jointly_with_the_verify_state():
    T, budget = 3, 20 * GIB
    pool = sglang_pool(budget, SLOT, 5, T)
    assert (pool, pool // 5) == (171, 34)
    result = check_builtin(QWEN3_NEXT, Deployment(batch=64, speculative_tokens=T, gpu_memory=budget))
    assert (result.pool.pool_size, result.pool.requests_that_fit) == (171, 34)
    assert only(result, "GDR136").message.startswith("a 20 GiB budget gives a pool of 171 slots, which serves 34 ")
    assert result.pool.bytes_per_request == (5 + T) * SLOT


def test_the_cap_is_silent_before_sglang_0_5_17():
    warning = only(check_builtin(QWEN3_NEXT, Deployment(engine="sglang@0.5.16", batch=64, gpu_memory=20 * GIB)),
                   "GDR136")
    assert "sglang 0.5.16 caps the running requests at 55 without a warning" in warning.notes


def test_a_pool_that_serves_no_request_or_is_empty_stops_start_up():
    # 4 slots: K = 3, 3 // 5 = 0 requests
    error = only(check_builtin(QWEN3_NEXT, Deployment(batch=8, gpu_memory=4 * SLOT)), "GDR136")
    assert error.severity == "error"
    assert ("sglang 0.5.23 stops at start-up: `RuntimeError: Hybrid (mamba/linear-attention) state cache is too "
            "small to serve any requests. max_mamba_cache_size=3, mamba_ratio=5, resulting max_num_reqs=0.`"
            ) in error.notes
    assert error.fixes[2].startswith("not even one request fits: one needs ")
    empty = only(check_builtin(QWEN3_NEXT, Deployment(batch=8, gpu_memory=100)), "GDR136")
    assert empty.severity == "error" and ("sglang 0.5.23 stops at start-up: `RuntimeError: Not enough GPU memory for "
                                          "hybrid (mamba/linear-attention) state cache. Computed "
                                          "max_mamba_cache_size=-1`") in empty.notes


def test_a_batch_the_pool_serves_gets_only_the_plan():
    result = check_builtin(QWEN3_NEXT, Deployment(batch=8, mamba_strategy="extra_buffer", gpu_memory=20 * GIB))
    assert not {"GDR136", "GDR137"} & set(result.report.codes())
    info = only(result, "GDR135")
    assert info.message == ("sglang 0.5.23 counts 5 state slot(s) per running request (3 for the radix cache + 2 "
                            "ping-pong: extra_buffer with the overlap schedule) when it sizes the state pool: "
                            f"{5 * SLOT / 2**20:.3f} MiB per rank")
    assert "a 20 GiB budget gives a pool of 276 and serves 55 requests" in info.notes


def test_defaults_add_nothing():
    result = check_builtin(QWEN3_NEXT, Deployment())
    assert result.pool.slots_per_request == 5
    assert not {"GDR135", "GDR136", "GDR137"} & set(result.report.codes())


def test_vllm_strategy_is_not_modelled():
    result = check_builtin(QWEN3_NEXT, Deployment(engine="vllm", speculative_tokens=2))
    assert result.pool is None
    info = only(result, "GDR135")
    assert info.message == ("vLLM 0.33 counts 1 state slot(s) per running request (its pool strategies are not "
                            "modelled) when it sizes the state pool: one slot per rank")


def test_cli_flags(capsys):
    code = main([QWEN3_NEXT, "--speculative-tokens", "3", "--gpu-memory", "4GiB", "--batch", "64",
                 "--output-format", "concise"])
    out = capsys.readouterr().out
    assert code == 0 and "warning[GDR136] a 4 GiB budget gives a pool of " in out


def test_cli_rejects_an_unknown_strategy(capsys):
    assert main([QWEN3_NEXT, "--mamba-strategy", "bogus"]) == 2
    assert capsys.readouterr().err == ("error: Invalid value for --mamba-strategy: unknown mamba strategy 'bogus'; "
                                       "expected one of: auto, no_buffer, extra_buffer, extra_buffer_lazy\n")


def test_one_request_count_per_report_where_the_strategy_is_modelled(capsys):
    """GDR132 counts plain slots (26 of 73.688 MiB in 2 GiB); sglang's pool (K = 26) serves 26 // 5 = 5: GDR136
    replaces it in the report (`Rule.supersedes`), unless GDR136 is not selected."""
    assert sglang_pool(2 * GIB, SLOT, 5) == 26
    args = [QWEN3_NEXT, "--batch", "64", "--gpu-memory", "2GiB", "--output-format", "concise",
            "--select", "GDR132,GDR136"]
    assert main(args) == 0  # warnings: sglang serves a smaller batch
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("]")[0].rsplit("[", 1)[1] for line in lines if "[GDR13" in line] == ["GDR136"]
    assert "a pool of 26 slots, which serves 5 running requests" in lines[0]
    assert main([*args, "--ignore", "GDR136"]) == 0
    assert "warning[GDR132] a 2 GiB budget holds the state of 26 requests per rank, fewer than the batch of 64" \
        in capsys.readouterr().out
    both = check_builtin(QWEN3_NEXT, Deployment(batch=64, gpu_memory=2 * GIB))
    assert {"GDR132", "GDR136"} <= set(both.report.codes())  # the check finds both; the report shows one
    assert only(both, "GDR136").fixes[-2:] == ["raise TP to split the state across more ranks",
                                                "halve the SSM state with `--mamba-ssm-dtype bfloat16`, at some "
                                                "accuracy cost (GDR249)"]


def test_the_header_budget_line_counts_as_the_pool_plan(capsys):
    main([QWEN3_NEXT, "--speculative-tokens", "3", "--gpu-memory", "20GiB"])
    assert 8 * SLOT / 2**20 == 589.5  # 5 counted slots and 3 draft tokens' slots
    assert "  state budget: 34 request(s) fit in 20480 MiB per rank at 589.5 MiB each\n" in capsys.readouterr().out


def test_an_empty_batch_pool_is_one_slot():
    note = only(check_builtin(QWEN3_NEXT, Deployment(batch=0)), "GDR131").notes[1]
    assert note == "the pool of 1 slot takes 73.688 MiB per rank"


def test_the_one_slot_footprint_says_how_many_slots_sglang_counts():
    # GDR131's figure is one slot; beside GDR135's it read as a second, smaller per-request number (review).
    note = ("sglang counts 5 such slots per running request (3 for the radix cache + 2 ping-pong: extra_buffer with "
            f"the overlap schedule), {5 * SLOT / 2**20:.3f} MiB, when it sizes the pool (GDR135)")
    assert note in only(check_builtin(QWEN3_NEXT, Deployment(batch=8)), "GDR131").notes
    vllm = only(check_builtin(QWEN3_NEXT, Deployment(engine="vllm")), "GDR131").notes
    assert not any("such slots" in line for line in vllm)


def test_slots_that_cap_the_batch_are_a_warning_and_an_empty_serving_pool_an_error():
    result = check_builtin(QWEN3_NEXT, Deployment(batch=8, slots=9))
    warning = only(result, "GDR137")
    assert warning.severity == "warning"
    assert warning.message == ("a pool of 9 slots (0..8) serves 1 running requests at 5 slots each (3 for the radix "
                               "cache + 2 ping-pong: extra_buffer with the overlap schedule), fewer than the batch "
                               "of 8")
    assert warning.notes[1] == ("sglang logs: max_running_requests is capped to 1 by the mamba state cache "
                                "(max_mamba_cache_size=8, 5 state slots per request).")
    assert warning.fixes == [
        "grow the pool to at least 41 slots (gdr-check `--slots 41`, or no `--slots`)", "lower the batch to 1",
        "serve with `--mamba-radix-cache-strategy no_buffer --disable-overlap-schedule` (in gdr-check "
        "`--mamba-strategy no_buffer`): 3 slots counted per request, 2 requests"]
    error = only(check_builtin(QWEN3_NEXT, Deployment(batch=8, slots=4)), "GDR137")
    assert error.severity == "error" and "max_mamba_cache_size=3, mamba_ratio=5, resulting max_num_reqs=0" \
        in error.notes[1]
    for deployment in (Deployment(batch=8, slots=41), Deployment(batch=8),
                       Deployment(batch=8, slots=9, radix_cache=False),
                       Deployment(engine="vllm", batch=8, slots=9)):
        assert "GDR137" not in check_builtin(QWEN3_NEXT, deployment).report.codes()


def test_slots_fewer_than_the_batch_are_said_once(capsys):
    """The decode call's out-of-range slots (GDR241) and the pool's cap (GDR137) are one cause: GDR137 says it."""
    args = [QWEN3_NEXT, "--batch", "8", "--slots", "4", "--output-format", "concise"]
    main(args)
    lines = [line for line in capsys.readouterr().out.splitlines() if "[GDR" in line]
    assert any("error[GDR137] a pool of 4 slots (0..3) serves 0 running requests" in line for line in lines)
    assert not any("GDR241" in line for line in lines)


def test_vllms_conv_state_window_holds_the_draft_tokens():
    # vLLM's `gated_delta_net_state_shape(..., num_spec)` gives (W - 1 + num_spec, conv dim / tp); the wheel showed
    # W - 1 rows whatever the draft tokens (second user test). sglang keeps the drafts' windows apart.
    width = (2 * H * K + HV * V) // 4
    drafted = check_builtin(QWEN3_NEXT, Deployment(engine="vllm", tp=4, speculative_tokens=2))
    assert drafted.pools["conv_state"].shape == (9, W - 1 + 2, width)
    assert drafted.memory.conv_bytes_per_layer == (W - 1 + 2) * width * 2
    assert check_builtin(QWEN3_NEXT, Deployment(engine="vllm", tp=4)).pools["conv_state"].shape == (9, W - 1, width)
    sglang = check_builtin(QWEN3_NEXT, Deployment(tp=4, speculative_tokens=2))
    assert sglang.pools["conv_pool"].shape == (L, 8 * 5 + 1, width, W - 1)


def test_launch_and_check_read_one_pool_arithmetic():
    """`gdr-check launch` sizes sglang's pool from the rest memory; `check` from `--gpu-memory`: the same budget gives
    the same pool, strategy and cap in both (deployment/state_pool.py)."""
    from gdr_check.checks.examples import config_checkpoint
    from gdr_check.checks.rules_launch import launch_context
    from gdr_check.deployment.launch_command import parse_launch, split_command
    from gdr_check.deployment.launch_memory import GPUS, GiB
    from gdr_check.models.adapters import select_adapter
    from gdr_check.models.builtin import get_builtin
    from gdr_check.models.description import describe

    config = get_builtin(QWEN3_NEXT).config_copy()
    checkpoint = config_checkpoint(config)
    selection = select_adapter(checkpoint.config, checkpoint.tensors)
    model = describe(checkpoint, selection.adapter, selection.identity)
    command = parse_launch(split_command(f"sglang serve --model-path {QWEN3_NEXT} --tp 2 --mem-fraction-static 0.85 "
                                         "--max-running-requests 512"))
    plan = launch_context(command, model, config, GPUS["h100"], 60 * GiB).plan
    budget = plan.rest_bytes * 0.9 / 1.9  # --mamba-full-memory-ratio 0.9: r / (1 + r) of the rest memory
    slot = L * ((W - 1) * (2 * H * K + HV * V) // 2 * 2 + HV // 2 * V * K * 4)  # TP 2: half the heads
    assert plan.per_slot_bytes == slot and plan.ratio == 5
    assert plan.pool_size == sglang_pool(budget, slot, 5) and plan.cap == plan.pool_size // 5
    check = check_builtin(QWEN3_NEXT, Deployment(tp=2, batch=512, gpu_memory=int(budget))).pool
    assert (check.pool_size, check.requests_that_fit, check.slots_per_request) == (plan.pool_size, plan.cap, 5)


@pytest.mark.parametrize(("switches", "rows"), [
    ([], 8 * (3 + 2) + 1),  # auto -> extra_buffer (overlap on): 3 radix slots + 2 ping-pong slots per request
    (["--disable-overlap-schedule"], 8 * 3 + 1),  # auto -> no_buffer without the overlap schedule: 3 radix slots
    (["--disable-radix-cache"], 8 * 1 + 1),  # the radix cache off: one slot per request, whatever the strategy
    (["--disable-overlap-schedule", "--disable-radix-cache"], 8 * 1 + 1),
])
def test_checks_switches_are_sglangs_and_size_the_pool_as_launch_does(capsys, switches, rows):
    """`check` takes sglang's two switches under sglang's names (the table `launch` shows its `check` line from),
    and the default pool follows them: batch x the slots sglang counts + slot 0."""
    assert main([QWEN3_NEXT, "--batch", "8", *switches, "--output-format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["deployment"]["num_slots"] == rows
    shown = check_command(QWEN3_NEXT, Deployment(batch=8, overlap_schedule="--disable-overlap-schedule" not in switches,
                                                 radix_cache="--disable-radix-cache" not in switches))
    assert shown == " ".join(["gdr-check", QWEN3_NEXT, "--tp", "1", "--batch", "8", "--engine", "sglang", *switches])
