"""GDN wrapper checks 1-20 (sglang 0.5.23 `fused_recurrent_gated_delta_rule_packed_decode`) on real tensors.

Each bad call breaks one check of the base call (B=4, H=2, HV=4, K=V=8; tests/contract_calls.py). The
expected messages are the contract's templates (docs/kernel-contract.md §2) rendered by hand; the oracle test
checks the same calls against the real wrapper.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from contract_calls import (  # noqa: E402
    HV,
    SHARED_WRAPPER_CASES,
    B,
    K,
    V,
    call_for,
    check,
    mutated,
    qwen_gdn_call,
    with_,
)
from gdr_check import TensorSpec, check_packed_decode  # noqa: E402
from gdr_check.checks import RULES  # noqa: E402

# (mutation, code, wrapper position, exact message)
CASES = [
    *SHARED_WRAPPER_CASES,
    ("gates-tp-sharded", "GDR214", 14,
     "`a`/`b` must have shape [B, HV] with HV=4 (got a.shape=(4, 2), b.shape=(4, 2))."),
    ("ba-unsplit", "GDR214", 14, "`a`/`b` must have shape [B, HV] with HV=4 (got a.shape=(4, 4), b.shape=(4, 8))."),
    ("A_log-global", "GDR215", 15,
     "`A_log` and `dt_bias` must have 4 elements (got A_log.numel()=8, dt_bias.numel()=4)."),
    ("dt_bias-kda-per-channel", "GDR215", 15,
     "`A_log` and `dt_bias` must have 4 elements (got A_log.numel()=4, dt_bias.numel()=32)."),
    ("out-no-token-axis", "GDR216", 16, "`out` must have shape (4, 1, 4, 8) (got out.shape=(4, 4, 8))."),
    ("out-transposed-back", "GDR216", 16, "`out` must have shape (4, 1, 4, 8) (got out.shape=(1, 4, 4, 8))."),
    ("out-global-heads", "GDR216", 16, "`out` must have shape (4, 1, 4, 8) (got out.shape=(4, 1, 8, 8))."),
    ("mixed_qkv-v-only", "GDR217", 17, "Invalid packed `mixed_qkv` last dim=32 for HV=4, V=8."),
    ("mixed_qkv-odd-width", "GDR217", 17, "Invalid packed `mixed_qkv` last dim=35 for HV=4, V=8."),
    ("mixed_qkv-q-not-multiple-of-K", "GDR218", 18, "Invalid packed Q size 12: must be divisible by K=8."),
    ("mixed_qkv-H-above-HV", "GDR219", 19, "Invalid head config inferred from mixed_qkv: H=8, HV=4."),
    ("mixed_qkv-H-not-dividing-HV", "GDR219", 19, "Invalid head config inferred from mixed_qkv: H=3, HV=4."),
    ("pool-K0", "GDR227", 18,
     "`initial_state` has K=0 (shape (8, 4, 8, 0)): the wrapper raises ZeroDivisionError (integer modulo by "
     "zero) at its Q-size check"),
]


@pytest.mark.parametrize("mutation, code, position, message", CASES, ids=[c[0] for c in CASES])
def test_each_wrapper_check_reports_the_wrappers_exact_message_first(mutation, code, position, message):
    report = check("gdn", mutated("gdn", mutation))
    first = report.diagnostics[0]
    assert (first.code, first.severity, first.wrapper, first.message) == (code, "error", True, message)
    assert RULES[code].wrapper["gdn"] == position
    # One cause, one error: later checks reason about the call as the fix would present it.
    assert [d.code for d in report.errors] == [code]
    assert not report.ok
    with pytest.raises(ValueError) as raised:
        report.raise_for_errors()
    assert str(raised.value) == message
    assert first.fixes, code


def test_every_gdn_wrapper_check_but_the_dead_one_is_triggered():
    positions = {RULES[code].wrapper["gdn"] for _, code, _, _ in CASES}
    assert positions == set(range(1, 20))
    assert {code for _, code, _, _ in CASES} == {
        code for code, rule in RULES.items() if "gdn" in rule.wrapper and code != "GDR220"}


def _spec_call(K_: int, **overrides):
    """A GDN call on TensorSpecs (B=1, H=HV=1, V=1) with head dim K_."""
    call = dict(
        mixed_qkv=TensorSpec.of((1, 2 * K_ + 1)), a=TensorSpec.of((1, 1)), b=TensorSpec.of((1, 1)),
        A_log=TensorSpec.of((1,), "float32"), dt_bias=TensorSpec.of((1,), "float32"), scale=K_**-0.5,
        initial_state=TensorSpec.of((2, 1, 1, K_), "float32"), out=TensorSpec.of((1, 1, 1, 1)),
        ssm_state_indices=TensorSpec.of((1,), "int32", values=[1]), use_qk_l2norm_in_kernel=True,
    )
    call.update(overrides)
    return call


def test_check_20_is_dead_for_every_K_up_to_1024():
    for k in range(1, 1025):
        report = check_packed_decode(**_spec_call(k))
        assert "GDR220" not in report.codes(), k
        assert not report.errors, (k, report.codes())


def test_check_20_fires_with_its_template_when_BK_were_smaller_than_K(monkeypatch):
    """The dead check is wired: with a (hypothetical) smaller tile it reports the wrapper's message."""
    import gdr_check.checks.rules_wrapper as rules_wrapper

    monkeypatch.setattr(rules_wrapper, "next_power_of_2", lambda n: max(1, n // 2))
    report = check_packed_decode(**_spec_call(8))
    first = report.errors[0]
    assert (first.code, first.wrapper, first.message) == (
        "GDR220", True, "Packed decode kernel only supports NK=1 (got K=8, BK=4).")


# -- several problems at once: every one reported, in the wrapper's order --------------------------------------
def test_independent_problems_are_all_reported_in_wrapper_order():
    call = mutated("gdn", "pool-kv-transposed", "indices-2d", "A_log-kimi-4d", "out-head-slice",
                   "mixed_qkv-transposed")
    report = check("gdn", call)
    assert [(d.code, d.message) for d in report.errors] == [
        ("GDR202", "`mixed_qkv` must be contiguous in the last dim."),
        ("GDR205", "`A_log`/`dt_bias` must be 1D tensors."),
        ("GDR207", "`ssm_state_indices` must be 1D for packed decode (got ndim=2)."),
        ("GDR208", "`out` must be contiguous."),
        ("GDR213", "`initial_state` must be contiguous in the last dim."),
    ]
    assert all(d.wrapper for d in report.errors)
    with pytest.raises(ValueError, match="^`mixed_qkv` must be contiguous in the last dim\\.$"):
        report.raise_for_errors()


def test_late_checks_are_reported_after_early_ones():
    report = check("gdn", mutated("gdn", "a-3d", "out-no-token-axis", "mixed_qkv-q-not-multiple-of-K"))
    assert [(d.code, d.message) for d in report.errors] == [
        ("GDR203", "`a` and `b` must be 2D tensors (got a.ndim=3, b.ndim=2)."),
        ("GDR216", "`out` must have shape (4, 1, 4, 8) (got out.shape=(4, 4, 8))."),
        ("GDR218", "Invalid packed Q size 12: must be divisible by K=8."),
    ]


def test_a_quantity_that_cannot_be_derived_skips_the_checks_that_need_it():
    """A 2-D pool gives no HV, V, K: the shape checks that need them are skipped, nothing crashes."""
    report = check("gdn", with_(call_for("gdn"), initial_state=torch.zeros(8, HV * V * K)))
    assert [d.code for d in report.errors] == ["GDR212"]
    assert report.errors[0].message == "`initial_state` must be a 4D tensor (got ndim=2)."


# -- single cause, single error, with the concrete fix ---------------------------------------------------------
def test_token_axis_mixed_qkv_gives_only_check_1_and_a_squeeze_fix():
    report = check("gdn", mutated("gdn", "mixed_qkv-token-axis"))
    assert [d.code for d in report.errors] == ["GDR201"]
    assert report.errors[0].fixes == ["reshape to [B, D]: `mixed_qkv.squeeze(1)` gives shape (4, 64)"]


def test_kimi_A_log_gives_only_check_5_and_flatten_it():
    report = check("gdn", mutated("gdn", "A_log-kimi-4d"))
    assert [d.code for d in report.errors] == ["GDR205"]
    assert report.errors[0].fixes == [
        "`A_log` has the Kimi checkpoint layout [1, 1, H, 1] (1, 1, 4, 1): flatten it, `A_log.reshape(-1)` "
        "gives shape (4,)"]


def test_stacked_pool_gives_only_check_12_and_pass_pool_layer_id():
    report = check("gdn", mutated("gdn", "stacked-pool"))
    assert [d.code for d in report.errors] == ["GDR212"]
    assert report.errors[0].fixes == [
        "this looks like the stacked pool [layers=3, slots=8, HV=4, V=8, K=8]: pass pool[layer_id], "
        "shape (8, 4, 8, 8)"]
    # Qwen3-Next sized, on the meta device: 36 layers of [9, 32, 128, 128].
    call = qwen_gdn_call()
    report = check("gdn", with_(call, initial_state=torch.empty(36, 9, 32, 128, 128, device="meta")))
    assert [d.code for d in report.errors] == ["GDR212"]
    assert "pass pool[layer_id], shape (9, 32, 128, 128)" in report.errors[0].fixes[0]


def _qwen_tp2_per_rank(**overrides):
    """Qwen3-Next per-rank at TP 2: H_l=8, HV_l=16, K=V=128 (meta)."""
    call = qwen_gdn_call(HV=16, H=8)
    call.update(overrides)
    return call


def test_gates_sharded_against_an_unsharded_pool_say_shard_the_pool():
    """Gates, A_log, dt_bias and out have HV/tp heads; only the pool is unsharded (HV=32)."""
    call = _qwen_tp2_per_rank(initial_state=torch.empty(9, 32, 128, 128, device="meta"))
    report = check("gdn", call)
    first = report.errors[0]
    assert first.message == "`a`/`b` must have shape [B, HV] with HV=32 (got a.shape=(8, 16), b.shape=(8, 16))."
    assert first.fixes[0] == (
        "`a`/`b` have HV/2 = 16 heads (sharded for tp_size=2) but the pool has HV=32 (unsharded): shard the pool "
        "by the same HV split: HV // tp_size = 32 // 2 = 16, a per-layer pool of shape (S, 16, 128, 128), and "
        "size `out` and `A_log`/`dt_bias` with 16 heads too")
    # The other per-head inputs disagree with the pool for the same reason, and say so.
    assert [d.code for d in report.errors] == ["GDR214", "GDR215", "GDR216", "GDR217"]
    assert "shard the pool by the same HV split (HV // tp_size = 32 // 2 = 16)" in report.errors[1].fixes[0]


def test_gates_computed_with_num_k_heads_are_named():
    """H=16 key heads, HV=32 value heads: gates of 16 columns, while A_log and out have HV=32."""
    call = qwen_gdn_call()
    call.update(a=torch.empty(8, 16, dtype=torch.bfloat16, device="meta"),
                b=torch.empty(8, 16, dtype=torch.bfloat16, device="meta"))
    report = check("gdn", call)
    assert [d.code for d in report.errors] == ["GDR214"]
    assert report.errors[0].fixes[0] == (
        "`a`/`b` have 16 columns = H, the number of key heads (num_k_heads, inferred from `mixed_qkv`): they were "
        "computed with num_k_heads; the gate needs one value per value head (HV=32)")


def test_global_width_mixed_qkv_against_a_per_rank_pool():
    """Qwen3-Next TP 2: the unsharded conv output (width 8192) with the per-rank pool (HV=16) reads H=24."""
    report = check("gdn", _qwen_tp2_per_rank(mixed_qkv=torch.empty(8, 8192, dtype=torch.bfloat16, device="meta")))
    assert [(d.code, d.message) for d in report.errors] == [
        ("GDR219", "Invalid head config inferred from mixed_qkv: H=24, HV=16.")]
    assert report.errors[0].fixes[0] == (
        "`mixed_qkv` has 2x the width this pool implies (8192 = 2*4096): it looks unsharded while the pool is "
        "per-rank for tp=2; pass this rank's conv output [q | k | v] of width 4096")


def test_qkvz_instead_of_qkv_is_named():
    # Qwen3.5-0.8B (H = HV = 16, K = V = 128): qkvz is 8192 wide and reads H=24, HV=16.
    call = qwen_gdn_call(HV=16, H=16)
    call["mixed_qkv"] = torch.empty(8, 8192, dtype=torch.bfloat16, device="meta")
    report = check("gdn", call)
    assert [(d.code, d.message) for d in report.errors] == [
        ("GDR219", "Invalid head config inferred from mixed_qkv: H=24, HV=16.")]
    assert ("the width 8192 includes an extra HV*V = 2048 block: it looks like the `qkvz` projection "
            "(z included); pass only [q | k | v], width 6144") in report.errors[0].fixes
    # H = HV = 3, K = V = 8: qkvz (96 wide) fails the Q-size check, and qkvz is the only explanation.
    call = call_for("gdn", H=3, HV=3)
    call["mixed_qkv"] = torch.zeros(B, 2 * 3 * K + 2 * 3 * V, dtype=torch.bfloat16)
    report = check("gdn", call)
    assert [(d.code, d.message) for d in report.errors] == [
        ("GDR218", "Invalid packed Q size 36: must be divisible by K=8.")]
    assert report.errors[0].fixes == [
        "the width 96 includes an extra HV*V = 24 block: it looks like the `qkvz` projection (z included); "
        "pass only [q | k | v], width 72"]


def test_fused_ba_passed_unsplit_is_named():
    report = check("gdn", mutated("gdn", "ba-unsplit"))
    assert report.errors[0].fixes[0] == (
        "`b` has 2*4 = 8 columns: the fused `ba` projection was passed unsplit; split it into `b` and `a` "
        "(Qwen3-Next stores b first in each key-head group)")


def test_kda_dt_bias_given_to_the_gdn_kernel_is_named():
    report = check("gdn", mutated("gdn", "dt_bias-kda-per-channel"))
    assert ("`dt_bias` has HV*K = 32 elements, a KDA per-channel parameter: use the KDA kernel for KDA models"
            in report.errors[0].fixes)


def test_only_v_block_is_named():
    report = check("gdn", mutated("gdn", "mixed_qkv-v-only"))
    assert report.errors[0].fixes[0] == (
        "the width 32 equals HV*V = 4*8: only the v block was passed; pass the conv output of [q | k | v]")


def test_strided_views_name_the_stride():
    report = check("gdn", mutated("gdn", "b-interleaved"))
    assert report.errors[0].fixes == [
        "`b` steps 2 elements between columns (strides (8, 2)), e.g. every other column of a fused output: "
        "split the fused tensor into contiguous column blocks, or pass `b.contiguous()`"]
    report = check("gdn", mutated("gdn", "pool-kv-transposed"))
    assert report.errors[0].fixes[0].startswith("the pool is a transposed view of a [.., K, V] buffer")


def test_device_mismatch_names_the_odd_tensor():
    report = check("gdn", mutated("gdn", "indices-on-meta"))
    assert report.errors[0].fixes == ["move `ssm_state_indices` (meta) to cpu, the device of `mixed_qkv`"]
    assert report.errors[0].location.argument == "ssm_state_indices"


def test_the_transposed_view_of_a_contiguous_out_passes_check_8():
    """A size-1 axis does not count: [1, B, HV, V].transpose(0, 1) is contiguous (and the right shape)."""
    out = torch.empty(1, B, HV, V, dtype=torch.bfloat16).transpose(0, 1)
    assert check("gdn", with_(call_for("gdn"), out=out)).ok
