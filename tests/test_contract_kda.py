"""KDA wrapper checks 1-23 (sglang 0.5.23 `fused_recurrent_kda_packed_decode`) on real tensors.

Base call: B=4, H=HV=4 (Kimi style), K=V=8, `a` [B, HV*K], `dt_bias` [HV*K] (tests/contract_calls.py).
Checks 1-13 are GDN's; 14-21 are KDA's own; 22 is the CUDA fast-path report (info GDR226); 23 is dead.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from contract_calls import (  # noqa: E402
    HV,
    SHARED_WRAPPER_CASES,
    B,
    K,
    call_for,
    check,
    mutated,
    qwen_kda_call,
    with_,
)
from gdr_check import TensorSpec, check_kda_packed_decode  # noqa: E402
from gdr_check.checks import RULES  # noqa: E402

CASES = [
    *SHARED_WRAPPER_CASES,
    ("a-gdn-per-head", "GDR221", 14, "`a` must have shape [B, HV*K] with HV=4, K=8 (got a.shape=(4, 4))."),
    ("a-tp-sharded", "GDR221", 14, "`a` must have shape [B, HV*K] with HV=4, K=8 (got a.shape=(4, 16))."),
    ("b-global", "GDR222", 15, "`b` must have shape [B, HV] with HV=4 (got b.shape=(4, 8))."),
    ("A_log-global", "GDR223", 16, "`A_log` must have 4 elements (got 8)."),
    ("dt_bias-gdn-per-head", "GDR224", 17, "`dt_bias` must have 32 elements (got 4)."),
    ("out-no-token-axis", "GDR216", 18, "`out` must have shape (4, 1, 4, 8) (got out.shape=(4, 4, 8))."),
    ("out-transposed-back", "GDR216", 18, "`out` must have shape (4, 1, 4, 8) (got out.shape=(1, 4, 4, 8))."),
    ("out-global-heads", "GDR216", 18, "`out` must have shape (4, 1, 4, 8) (got out.shape=(4, 1, 8, 8))."),
    ("mixed_qkv-v-only", "GDR217", 19, "Invalid packed `mixed_qkv` last dim=32 for HV=4, V=8."),
    ("mixed_qkv-odd-width", "GDR217", 19, "Invalid packed `mixed_qkv` last dim=35 for HV=4, V=8."),
    ("mixed_qkv-q-not-multiple-of-K", "GDR225", 20,
     "Invalid packed Q size 12: must be divisible by K=8. KDA packed decode requires num_q_heads == num_k_heads "
     "and head_q_dim == head_k_dim."),
    ("mixed_qkv-H-above-HV", "GDR219", 21, "Invalid head config inferred from mixed_qkv: H=8, HV=4."),
    ("mixed_qkv-H-not-dividing-HV", "GDR219", 21, "Invalid head config inferred from mixed_qkv: H=3, HV=4."),
    ("pool-K0", "GDR227", 20,
     "`initial_state` has K=0 (shape (8, 4, 8, 0)): the wrapper raises ZeroDivisionError (integer modulo by "
     "zero) at its Q-size check"),
]


@pytest.mark.parametrize("mutation, code, position, message", CASES, ids=[c[0] for c in CASES])
def test_each_wrapper_check_reports_the_wrappers_exact_message_first(mutation, code, position, message):
    report = check("kda", mutated("kda", mutation))
    first = report.diagnostics[0]
    assert (first.code, first.severity, first.wrapper, first.message) == (code, "error", True, message)
    assert RULES[code].wrapper["kda"] == position
    assert [d.code for d in report.errors] == [code]
    with pytest.raises(ValueError) as raised:
        report.raise_for_errors()
    assert str(raised.value) == message
    assert first.fixes, code


def test_every_kda_wrapper_check_is_triggered():
    positions = {RULES[code].wrapper["kda"] for _, code, _, _ in CASES}
    assert positions == set(range(1, 22))  # 22 is the fast-path report, 23 is dead: below
    assert {code for _, code, _, _ in CASES} | {"GDR226", "GDR220"} == {
        code for code, rule in RULES.items() if "kda" in rule.wrapper}


def _spec_call(K_: int):
    """A KDA call on TensorSpecs (B=1, H=HV=1, V=1) with head dim K_."""
    return dict(
        mixed_qkv=TensorSpec.of((1, 2 * K_ + 1)), a=TensorSpec.of((1, K_)), b=TensorSpec.of((1, 1)),
        A_log=TensorSpec.of((1,), "float32"), dt_bias=TensorSpec.of((K_,), "float32"), scale=K_**-0.5,
        initial_state=TensorSpec.of((2, 1, 1, K_), "float32"), out=TensorSpec.of((1, 1, 1, 1)),
        ssm_state_indices=TensorSpec.of((1,), "int32", values=[1]), use_qk_l2norm_in_kernel=True,
    )


def test_check_23_is_dead_for_every_K_up_to_1024():
    for k in range(1, 1025):
        report = check_kda_packed_decode(**_spec_call(k))
        assert "GDR220" not in report.codes() and not report.errors, (k, report.codes())


def test_check_23_fires_with_its_template_when_BK_were_smaller_than_K(monkeypatch):
    import gdr_check.checks.rules_wrapper as rules_wrapper

    monkeypatch.setattr(rules_wrapper, "next_power_of_2", lambda n: max(1, n // 2))
    first = check_kda_packed_decode(**_spec_call(16)).errors[0]
    assert (first.code, first.message) == ("GDR220", "Packed decode kernel only supports NK=1 (got K=16, BK=8).")


# -- check 22: the CUDA fast path (info GDR226) ------------------------------------------------------------
def _fast_path(report):
    found = [d for d in report.diagnostics if d.code == "GDR226"]
    assert len(found) <= 1
    return found[0] if found else None


def test_fast_path_taken_for_a_covered_kimi_call():
    report = check("kda", qwen_kda_call())  # meta, B=8, K=V=128, bf16/fp32, int32, dense pool
    note = _fast_path(report)
    assert (note.severity, note.wrapper, note.message) == (
        "info", True, "with `use_qk_l2norm_in_kernel=True`, sglang runs its CUDA KDA decode kernel (Triton is skipped)")
    assert report.ok and not report.warnings


def test_fast_path_skipped_lists_every_reason():
    call = qwen_kda_call(B=4)
    call.update(ssm_state_indices=torch.empty(8, dtype=torch.int32, device="meta")[::2],
                initial_state=torch.empty(9, 32, 128, 128, dtype=torch.bfloat16, device="meta"))
    note = _fast_path(check("kda", call))
    assert note.message == (
        "with `use_qk_l2norm_in_kernel=True`, sglang skips its CUDA KDA decode kernel: B=4 < 8; `initial_state` is "
        "bfloat16; `ssm_state_indices` is not contiguous")
    small = _fast_path(check("kda", call_for("kda")))
    assert small.message == (
        "with `use_qk_l2norm_in_kernel=True`, sglang skips its CUDA KDA decode kernel: B=4 < 8; K, V = 8, 8 "
        "(needs 128, 128)")


def test_fast_path_not_reported_without_l2norm_or_under_vllm():
    assert _fast_path(check("kda", with_(qwen_kda_call(), use_qk_l2norm_in_kernel=False))) is None
    assert _fast_path(check("kda", qwen_kda_call(), engine="vllm")) is None
    assert _fast_path(check("gdn", call_for("gdn"))) is None


def test_fast_path_note_is_dropped_when_the_wrapper_stops_earlier():
    # The wrapper raises at its first failing check and never reaches the CUDA fast-path choice (check 22).
    report = check("kda", mutated("kda", "mixed_qkv-transposed", "dt_bias-gdn-per-head"))
    assert report.codes()[:2] == ["GDR202", "GDR224"]
    assert "GDR226" not in report.codes()


# -- several problems, concrete fixes ----------------------------------------------------------------------
def test_independent_problems_are_all_reported_in_wrapper_order():
    report = check("kda", mutated("kda", "out-no-token-axis", "dt_bias-gdn-per-head", "b-global", "a-3d"))
    assert [(d.code, d.message) for d in report.errors] == [
        ("GDR203", "`a` and `b` must be 2D tensors (got a.ndim=3, b.ndim=2)."),
        ("GDR222", "`b` must have shape [B, HV] with HV=4 (got b.shape=(4, 8))."),
        ("GDR224", "`dt_bias` must have 32 elements (got 4)."),
        ("GDR216", "`out` must have shape (4, 1, 4, 8) (got out.shape=(4, 4, 8))."),
    ]
    with pytest.raises(ValueError, match=r"^`a` and `b` must be 2D tensors \(got a\.ndim=3, b\.ndim=2\)\.$"):
        report.raise_for_errors()


def test_gdn_style_gates_given_to_the_kda_kernel():
    report = check("kda", mutated("kda", "a-gdn-per-head", "dt_bias-gdn-per-head"))
    assert [d.code for d in report.errors] == ["GDR221", "GDR224"]
    assert report.errors[0].fixes == [
        "`a` has HV = 4 columns, a GDN-style per-head gate: KDA needs one value per key channel, [B, HV*K] = "
        "[B, 32] (the `f_b_proj` output)"]
    assert report.errors[1].fixes == ["`dt_bias` has HV = 4 elements, a GDN-style per-head bias: KDA needs HV*K = 32"]


def test_kda_gate_sharded_against_an_unsharded_pool_counts_heads_not_columns():
    """`a` has HV/2 heads of K channels (16 columns) while the pool has HV=4: the fix is in heads."""
    call = mutated("kda", "a-tp-sharded")
    call.update(b=torch.zeros(B, HV // 2, dtype=torch.bfloat16), A_log=torch.zeros(HV // 2),
                dt_bias=torch.zeros(HV // 2 * K), out=torch.empty(B, 1, HV // 2, 8, dtype=torch.bfloat16))
    report = check("kda", call)
    assert report.errors[0].message == "`a` must have shape [B, HV*K] with HV=4, K=8 (got a.shape=(4, 16))."
    assert report.errors[0].fixes[0] == (
        "`a` has HV/2 = 2 heads (16 columns = 2*K) (sharded for tp_size=2) but the pool has HV=4 (unsharded): "
        "shard the pool by the same HV split: HV // tp_size = 4 // 2 = 2, a per-layer pool of shape "
        "(S, 2, 8, 8), and size `out` and `A_log`/`dt_bias` with 2 heads too")


def test_kimi_A_log_flattened_but_not_sharded():
    report = check("kda", mutated("kda", "A_log-global"))
    assert report.errors[0].fixes == [
        "`A_log` has 8 = 2*4 elements, the global value heads for tp_size=2: shard it to this rank, "
        "`A_log[rank*4:(rank+1)*4]`"]


def test_kimi_A_log_in_checkpoint_shape_says_flatten_it():
    report = check("kda", mutated("kda", "A_log-kimi-4d"))
    assert [d.code for d in report.errors] == ["GDR205"]
    assert "flatten it, `A_log.reshape(-1)` gives shape (4,)" in report.errors[0].fixes[0]


def test_kda_q_size_fix_names_the_head_layout_requirement():
    report = check("kda", mutated("kda", "mixed_qkv-q-not-multiple-of-K"))
    assert report.errors[0].fixes == [
        "the q block is 12 channels, not a multiple of K=8: KDA needs num_q_heads == num_k_heads and "
        "head_q_dim == head_k_dim; pass exactly [q | k | v]"]

