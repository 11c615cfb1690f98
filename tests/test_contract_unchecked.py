"""GDR240+: what the kernels assume but the wrappers do not check (docs/kernel-contract.md §7, U1-U18), and the
engine profiles (sglang: skip index < 0, slot 0 reserved; vLLM: skip index <= 0)."""

from __future__ import annotations

import math

import pytest

from gdr_check.engines.profiles import UnknownEngineError

torch = pytest.importorskip("torch")

from contract_calls import HV, B, K, S, V, awkward_call, call_for, check, indices, qwen_gdn_call, qwen_kda_call, with_  # noqa: E402
from gdr_check.checks import RULES  # noqa: E402

VARIANTS = ["gdn", "kda"]
EXPECTED_SCALE = K**-0.5  # 0.3535533905932738


def only(report, code):
    """The diagnostics of one code."""
    return [d for d in report.diagnostics if d.code == code]


def errors(report):
    return [(d.code, d.message) for d in report.errors]


def test_every_unchecked_rule_is_not_a_wrapper_rule():
    for code, rule in RULES.items():
        if code.startswith("GDR2") and int(code[3:]) >= 240:
            assert not rule.wrapper, code


# -- U1: inner [HV, V, K] layout ------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", VARIANTS)
def test_permuted_pool_is_an_error(variant):
    pool = torch.zeros(S, V, HV, K).permute(0, 2, 1, 3)  # stored [S, V, HV, K]
    report = check(variant, with_(call_for(variant), initial_state=pool))
    assert errors(report) == [
        ("GDR240", "`initial_state` inner strides are (8, 32, 1), the kernel assumes (64, 8, 1)")]
    assert report.errors[0].fixes == [
        "the pool is a permuted view (head stride 8 < row stride 32, e.g. stored [S, V, HV, K]): store it "
        "physically as [S, HV, V, K]"]
    assert not report.errors[0].wrapper and report.errors[0].severity == "error"


@pytest.mark.parametrize("variant", VARIANTS)
def test_K_padded_pool_is_an_error(variant):
    pool = torch.zeros(S, HV, V, K + 4)[..., :K]
    report = check(variant, with_(call_for(variant), initial_state=pool))
    assert errors(report) == [
        ("GDR240", "`initial_state` inner strides are (96, 12, 1), the kernel assumes (64, 8, 1)")]
    assert report.errors[0].fixes == [
        "the pool is padded in K (row stride 12 > K=8): allocate it with V rows of exactly K=8 elements"]


def test_the_contracts_observed_bad_pools_at_full_size():
    """U1's two observed layouts (HV=8, K=V=128), on the meta device."""
    call = qwen_gdn_call(HV=8, H=4)
    permuted = torch.empty_strided((9, 8, 128, 128), (131072, 128, 1024, 1), device="meta")
    padded = torch.empty_strided((9, 8, 128, 128), (147456, 18432, 144, 1), device="meta")
    assert errors(check("gdn", with_(call, initial_state=permuted))) == [
        ("GDR240", "`initial_state` inner strides are (128, 1024, 1), the kernel assumes (16384, 128, 1)")]
    report = check("gdn", with_(call, initial_state=padded))
    assert errors(report) == [
        ("GDR240", "`initial_state` inner strides are (18432, 144, 1), the kernel assumes (16384, 128, 1)")]
    assert "padded in K (row stride 144 > K=128)" in report.errors[0].fixes[0]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("pool", [
    lambda: torch.zeros(S, HV + 2, V, K)[:, :HV],  # a wider per-slot page
    lambda: torch.zeros(2 * S, HV, V, K)[::2],  # backing[::2]
    lambda: torch.zeros(S, 1, V, K).expand(S, 1, V, K),  # HV = 1 (any head stride)
], ids=["head-page", "every-other-slot", "single-head"])
def test_page_padded_slot_pitch_is_fine(variant, pool):
    pool = pool()
    hv = pool.shape[1]
    call = call_for(variant, HV=hv, H=1) if hv == 1 else call_for(variant)
    call["initial_state"] = pool
    assert check(variant, call).ok


# -- U3: slot in range ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", VARIANTS)
def test_out_of_range_slot_is_an_error(variant):
    report = check(variant, with_(call_for(variant), ssm_state_indices=indices((1, 2, 8, 7))))
    assert errors(report) == [
        ("GDR241", "`ssm_state_indices` holds slot 8 at row 2, but the pool has 8 slots (0..7)")]
    assert report.errors[0].fixes == ["grow the pool to at least 9 slots, or fix the slot table (largest index 8)"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_out_of_range_slots_past_the_third_are_counted_not_dropped(variant):
    # 3 rows are listed; the 10 others are counted on the last one (the report was silently capped at 3)
    call = call_for(variant, B=16, S=4, slots=list(range(1, 17)))
    found = only(check(variant, call), "GDR241")
    assert [d.message for d in found] == [
        f"`ssm_state_indices` holds slot {row + 1} at row {row}, but the pool has 4 slots (0..3)" for row in (3, 4, 5)]
    assert [d.notes[0] for d in found[2:]] == [
        "and 10 more rows with a slot outside 0..3, not listed (the first 3 are)"]
    assert not any("more row" in note for d in found[:2] for note in d.notes)


@pytest.mark.parametrize("variant", VARIANTS)
def test_exactly_three_out_of_range_slots_have_no_count(variant):
    found = only(check(variant, call_for(variant, B=6, S=4, slots=[1, 2, 3, 4, 5, 6])), "GDR241")
    assert len(found) == 3 and not any("more row" in note for d in found for note in d.notes)


def test_a_one_slot_pool_is_one_slot():
    call = call_for("gdn")
    call["initial_state"] = torch.empty(1, *call["initial_state"].shape[1:])
    found = [d.message for d in check("gdn", with_(call, ssm_state_indices=indices((0, 1, -1, -1)))).errors
             if d.code == "GDR241"]
    assert found == ["`ssm_state_indices` holds slot 1 at row 1, but the pool has 1 slot (0..0)"]


def test_out_of_range_is_judged_against_the_pool_slots_even_for_a_strided_pool():
    call = call_for("gdn")
    call["initial_state"] = torch.zeros(2 * S, HV, V, K)[::2]
    call["ssm_state_indices"] = indices((1, 2, 3, 8))  # storage has 16 slots, the view 8
    assert [d.code for d in check("gdn", call).errors] == ["GDR241"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_negative_indices_are_skipped_not_out_of_range(variant):
    assert check(variant, with_(call_for(variant), ssm_state_indices=indices((-1, 2, -7, -1)))).ok


# -- U5: duplicates -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", VARIANTS)
def test_duplicate_slots_are_an_error(variant):
    report = check(variant, with_(call_for(variant), ssm_state_indices=indices((1, 2, 2, 1))))
    assert errors(report) == [
        ("GDR242", "slot 1 is used by rows 0, 3 of one batch"),
        ("GDR242", "slot 2 is used by rows 1, 2 of one batch"),
    ]
    assert report.errors[0].fixes == ["give row 3 its own slot"]
    report = check(variant, with_(call_for(variant), ssm_state_indices=indices((5, 5, 5, 1))))
    assert errors(report) == [("GDR242", "slot 5 is used by rows 0, 1, 2 of one batch")]
    assert report.errors[0].fixes == ["give rows 1, 2 their own slots"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_stride_0_expanded_index_tensor_is_a_duplicate(variant):
    expanded = torch.tensor([3], dtype=torch.int32).expand(B)
    assert expanded.stride() == (0,)
    report = check(variant, with_(call_for(variant), ssm_state_indices=expanded))
    assert errors(report) == [("GDR242", "slot 3 is used by rows 0..3 of one batch")]
    assert report.errors[0].fixes == [
        "`ssm_state_indices` has stride 0 (an expanded tensor): every row names the same slot; build a real [B] "
        "tensor of distinct slots"]
    # Without the values (meta device, or the fast mode) the stride alone proves it.
    meta = qwen_gdn_call()
    meta["ssm_state_indices"] = torch.empty(1, dtype=torch.int32, device="meta").expand(8)
    assert errors(check("gdn", meta)) == [("GDR242", "slot ? is used by rows 0..7 of one batch")]
    fast = check(variant, with_(call_for(variant), ssm_state_indices=expanded), read_values=False)
    assert [d.code for d in fast.errors] == ["GDR242"]
    # An expanded padding row (-1 everywhere) is fine.
    skipped = torch.tensor([-1], dtype=torch.int32).expand(B)
    assert check(variant, with_(call_for(variant), ssm_state_indices=skipped)).ok


# -- U6: index dtype ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype, name", [(torch.float32, "float32"), (torch.uint8, "uint8"), (torch.int16, "int16")])
def test_index_dtypes_other_than_int32_int64_are_errors(variant, dtype, name):
    report = check(variant, with_(call_for(variant), ssm_state_indices=indices(dtype=dtype)))
    assert errors(report) == [
        ("GDR243", f"`ssm_state_indices` has dtype {name}; the kernel expects int32 or int64")]
    assert report.errors[0].fixes == [f"convert with `.to(torch.int32)` (got {name})"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_bool_indices_are_an_error(variant):
    report = check(variant, with_(call_for(variant), ssm_state_indices=torch.tensor([True, False, False, False])))
    assert ("GDR243", "`ssm_state_indices` has dtype bool; the kernel expects int32 or int64") in errors(report)


def test_uint8_cannot_hold_the_skip_sentinel():
    # One cause, one error: the wrapped -1 (255) is explained by the dtype rule, not as an out-of-range slot.
    report = check("gdn", with_(call_for("gdn"), ssm_state_indices=torch.tensor([1, 2, 3, 255], dtype=torch.uint8)))
    assert errors(report) == [("GDR243", "`ssm_state_indices` has dtype uint8; the kernel expects int32 or int64")]
    assert report.errors[0].fixes[0] == (
        "row 3 holds 255: a -1 padding sentinel that uint8 cannot represent, so the kernel writes slot 255 "
        "instead of skipping the row")


def test_uint8_wrapped_sentinels_past_the_eighth_are_counted():
    call = call_for("gdn", B=12, slots=[1, 2] + [255] * 10)
    call["ssm_state_indices"] = call["ssm_state_indices"].to(torch.uint8)
    report = check("gdn", call)
    assert only(report, "GDR243")[0].fixes[0] == (
        "rows 2, 3, 4, 5, 6, 7, 8, 9 and 2 more hold 255: a -1 padding sentinel that uint8 cannot represent, so the "
        "kernel writes slot 255 instead of skipping the row")


def test_uint8_255_in_a_large_pool_is_a_real_slot():
    call = with_(call_for("gdn"), ssm_state_indices=torch.tensor([1, 2, 3, 255], dtype=torch.uint8))
    call["initial_state"] = torch.empty(300, *call["initial_state"].shape[1:])
    assert [d.code for d in check("gdn", call).errors] == ["GDR243"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_zero_value_head_dim_is_reported(variant):
    call = call_for(variant)
    S, HV, V, K = call["initial_state"].shape
    call["initial_state"] = torch.empty(S, HV, 0, K)
    call["out"] = torch.empty(call["out"].shape[0], 1, HV, 0)
    width = call["mixed_qkv"].shape[1] - HV * V
    call["mixed_qkv"] = torch.empty(call["mixed_qkv"].shape[0], width)
    report = check(variant, call)
    assert [(d.code, d.message) for d in report.errors] == [
        ("GDR256", f"`initial_state` has V=0 (shape {(S, HV, 0, K)}): the wrapper raises ZeroDivisionError when "
                   "it sizes the value tiles")]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_int32_and_int64_indices_are_fine(variant, dtype):
    assert not only(check(variant, with_(call_for(variant), ssm_state_indices=indices(dtype=dtype))), "GDR243")


# -- non-float tensors (GDR258) -------------------------------------------------------------------------------
FLOAT_FIXES = {
    "mixed_qkv": "pass `mixed_qkv` as bfloat16, the dtype of the activations (dequantize it before the call)",
    "a": "pass `a` as {act}, the dtype of the activations (dequantize it before the call)",
    "b": "pass `b` as {act}, the dtype of the activations (dequantize it before the call)",
    "A_log": "keep `A_log` a floating-point parameter (`A_log.float()`)",
    "dt_bias": "keep `dt_bias` a floating-point parameter (`dt_bias.float()`)",
    "initial_state": "allocate the state pool in float32 (`--mamba-ssm-dtype float32`)",
    "out": "allocate `out` as {act}, the dtype of the activations",
}
USES = {"initial_state": "reads and writes", "out": "writes"}  # the inputs: "reads"


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("argument", list(FLOAT_FIXES))
@pytest.mark.parametrize("dtype, name", [(torch.int8, "int8"), (torch.int32, "int32"), (torch.bool, "bool"),
                                         (torch.complex64, "complex64"), (torch.float8_e4m3fn, "float8_e4m3fn")])
def test_a_tensor_the_kernel_computes_with_must_be_floating_point(variant, argument, dtype, name):
    call = call_for(variant)
    call[argument] = torch.zeros(call[argument].shape, dtype=dtype)
    activation = "bfloat16" if argument == "mixed_qkv" else str(call["mixed_qkv"].dtype).removeprefix("torch.")
    found = only(check(variant, call), "GDR258")
    use = USES.get(argument, "reads")
    assert [(d.severity, d.message) for d in found] == [
        ("error", f"`{argument}` has dtype {name}; the kernel {use} it as a plain floating-point number")]
    assert found[0].fixes == [FLOAT_FIXES[argument].format(act=activation)]


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_non_float_tensor_is_named(variant):
    call = {**call_for(variant)}
    call["out"] = torch.zeros(call["out"].shape, dtype=torch.int32)
    call["initial_state"] = torch.zeros(call["initial_state"].shape, dtype=torch.int16)
    assert [d.message.split(" has")[0] for d in only(check(variant, call), "GDR258")] == ["`initial_state`", "`out`"]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
def test_floating_point_tensors_are_fine(variant, dtype):
    call = call_for(variant)
    for argument in FLOAT_FIXES:
        call[argument] = call[argument].to(dtype)
    assert not only(check(variant, call), "GDR258")


# -- U7: grid limit -------------------------------------------------------------------------------------------
def test_gdn_grid_limit_under_sglang_only():
    big = qwen_gdn_call(B=2048)  # B*HV = 65536
    report = check("gdn", big)
    assert errors(report) == [
        ("GDR244", "the launch grid needs B*HV = 2048*32 = 65536 > 65535, the CUDA grid limit: the launch fails")]
    assert report.errors[0].fixes == [
        "cap the decode batch at 2047 (65535 // HV=32), or raise TP so that each rank has fewer value heads"]
    assert check("gdn", qwen_gdn_call(B=2047)).ok  # 65504
    assert check("gdn", big, engine="vllm").ok  # vLLM splits the grid


def _triton_kda_call(B: int) -> dict:
    """A KDA call sglang runs on Triton: without the in-kernel l2norm, its CUDA kernel is never tried."""
    return {**qwen_kda_call(B=B), "use_qk_l2norm_in_kernel": False}


def test_kda_grid_limit_on_triton_is_on_B_alone():
    assert check("kda", _triton_kda_call(2048)).ok  # (NV, B, HV): B*HV is not a grid dimension
    report = check("kda", _triton_kda_call(65536))
    assert errors(report) == [
        ("GDR244", "the launch grid needs B = 65536 > 65535, the CUDA grid limit: the launch fails")]
    assert check("kda", _triton_kda_call(65535)).ok


def test_kda_grid_limit_on_sglangs_cuda_kernel_is_gridDim_x():
    """With `use_qk_l2norm_in_kernel=True` and a covered call, sglang runs its CUDA KDA kernel: one 1-D grid of
    B*HV blocks (kda_packed_decode.cuh), counted in uint32, under gridDim.x's 2**31 - 1."""
    assert check("kda", qwen_kda_call(B=65536)).ok  # 2**21 blocks
    bf16 = qwen_kda_call(B=65536)
    bf16["initial_state"] = bf16["initial_state"].to(torch.bfloat16)  # Triton's (NV, B, HV) grid
    assert errors(check("kda", bf16)) == [
        ("GDR244", "the launch grid needs B = 65536 > 65535, the CUDA grid limit: the launch fails")]
    report = check("kda", qwen_kda_call(B=65536, HV=32768, S=2))
    assert errors(report) == [("GDR244", "the launch grid needs B*HV = 65536*32768 = 2147483648 > 2147483647, the "
                                         "CUDA grid limit: the launch fails")]
    assert report.errors[0].fixes == [
        "cap the decode batch at 65535 (2147483647 // HV=32768), or raise TP so that each rank has fewer value heads"]
    wrapped = check("kda", qwen_kda_call(B=65540, HV=65536, S=2))
    assert errors(wrapped) == [("GDR244", "the launch grid needs B*HV = 65540*65536 = 4295229440 > 2147483647, the "
                                          "CUDA grid limit: the kernel counts blocks in 32 bits, so it launches "
                                          "262144: requests from row 4 on are not decoded")]


def test_kda_grid_wrapped_mid_row_names_the_heads_of_the_partly_decoded_row():
    """B = 89478496 rows of HV = 48: B*HV = 4294967808 = 2**32 + 512 blocks, so 512 launch. Block i decodes value
    head i % 48 of row i // 48: rows 0-9 whole (480 blocks), row 10's heads 0-31 (32 blocks), nothing after. It said
    "requests from row 10 on are not decoded", though row 10 is partly decoded (review)."""
    wrapped = check("kda", qwen_kda_call(B=89478496, HV=48, S=2))
    assert errors(wrapped) == [("GDR244", "the launch grid needs B*HV = 89478496*48 = 4294967808 > 2147483647, the "
                                          "CUDA grid limit: the kernel counts blocks in 32 bits, so it launches 512: "
                                          "row 10 is decoded only in value heads 0-31 (heads 32-47 are not), and "
                                          "requests from row 11 on are not decoded")]
    # 6700417*641 = 2**32 + 1: one block, row 0's head 0; 1431655766*3 = 2**32 + 2: row 0's heads 0-1, not head 2
    assert errors(check("kda", qwen_kda_call(B=6700417, HV=641, S=2)))[0][1].endswith(
        "so it launches 1: row 0 is decoded only in value head 0 (heads 1-640 are not), and requests from row 1 on "
        "are not decoded")
    assert errors(check("kda", qwen_kda_call(B=1431655766, HV=3, S=2)))[0][1].endswith(
        "so it launches 2: row 0 is decoded only in value heads 0-1 (head 2 is not), and requests from row 1 on are "
        "not decoded")


# -- U11: scale -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("scale, shown, problem", [
    (None, "None", "not a number: the kernel needs a positive float"),
    ("0.35", "'0.35'", "not a number: the kernel needs a positive float"),
    (True, "True", "not a number: the kernel needs a positive float"),
    (float("nan"), "nan", "not a number: the kernel needs a positive float"),
    (0.0, "0.0", "not positive: the kernel needs a positive float"),
    (-1, "-1", "not positive: the kernel needs a positive float"),
    (-1e300, "-1e+300", "not positive: the kernel needs a positive float"),
    # positive, but out of docs/limits.md's range (it used to say "needs a positive float" of 1e300)
    (1e300, "1e+300", "above 1e+30, the largest scale docs/limits.md allows"),
    (float("inf"), "inf", "above 1e+30, the largest scale docs/limits.md allows"),
])
def test_invalid_scales_are_errors(variant, scale, shown, problem):
    report = check(variant, with_(call_for(variant), scale=scale))
    assert errors(report) == [("GDR245", f"`scale` is {shown}; {problem} (typically K**-0.5 = {EXPECTED_SCALE})")]
    assert report.errors[0].fixes == [f"pass `scale={EXPECTED_SCALE}` (head_k_dim ** -0.5)"]
    assert not only(report, "GDR255")  # one problem, one diagnostic


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("scale, shown", [(1, "1"), (0.5, "0.5"), (128**-0.5, repr(128**-0.5))])
def test_unusual_scales_are_info(variant, scale, shown):
    report = check(variant, with_(call_for(variant), scale=scale))
    assert report.ok
    (note,) = only(report, "GDR255")
    assert (note.severity, note.message) == ("info", f"`scale` is {shown}, not K**-0.5 = {EXPECTED_SCALE} for K=8")


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_usual_scale_is_silent(variant):
    report = check(variant, with_(call_for(variant), scale=8**-0.5))
    assert not only(report, "GDR255") and not only(report, "GDR245")
    assert math.isclose(EXPECTED_SCALE, 0.3535533905932738)


# -- U17: out aliasing ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", VARIANTS)
def test_out_aliasing_mixed_qkv_is_an_error(variant):
    call = call_for(variant)
    width = call["mixed_qkv"].shape[1]
    arena = torch.zeros(B * width, dtype=torch.bfloat16)
    call["mixed_qkv"] = arena.view(B, width)
    call["out"] = arena[: B * HV * V].view(B, 1, HV, V)  # contiguous, inside mixed_qkv
    report = check(variant, call)
    assert errors(report) == [("GDR246", "`out` overlaps `mixed_qkv` in memory")]
    assert report.errors[0].fixes == ["allocate `out` in its own buffer, not inside `mixed_qkv`"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_out_aliasing_the_pool_and_the_gates(variant):
    call = call_for(variant)
    call["out"] = call["initial_state"].view(-1)[: B * HV * V].view(B, 1, HV, V).clone()
    assert not only(check(variant, call), "GDR246")  # a copy: no alias
    call["out"] = call["initial_state"].view(-1)[: B * HV * V].view(B, 1, HV, V)
    assert errors(check(variant, call)) == [("GDR246", "`out` overlaps `initial_state` in memory")]
    if variant == "gdn":
        ba = torch.zeros(B * HV * V + 2 * B * HV, dtype=torch.bfloat16)
        call = call_for(variant)
        call.update(out=ba[: B * HV * V].view(B, 1, HV, V), a=ba[: B * HV].view(B, HV))
        assert errors(check(variant, call)) == [("GDR246", "`out` overlaps `a` in memory")]


@pytest.mark.parametrize("variant", VARIANTS)
def test_disjoint_views_of_one_arena_do_not_alias(variant):
    call = call_for(variant)
    width = call["mixed_qkv"].shape[1]
    arena = torch.zeros(B * width + B * HV * V, dtype=torch.bfloat16)
    call["mixed_qkv"] = arena[: B * width].view(B, width)
    call["out"] = arena[B * width:].view(B, 1, HV, V)
    assert check(variant, call).ok


# -- slot 0 and the engine profiles ---------------------------------------------------------------------------
@pytest.mark.parametrize("variant", VARIANTS)
def test_slot_0_for_a_live_request_under_sglang(variant):
    report = check(variant, with_(call_for(variant), ssm_state_indices=indices((1, 0, 2, 3))), origin="engine")
    assert errors(report) == [
        ("GDR247", "row 1 uses slot 0, which sglang reserves as the dummy slot that padding rows write")]
    assert report.errors[0].fixes == ["give this request a slot from 1..size, or mark a padding row with -1"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_live_rows_in_slot_0_past_the_third_are_counted_not_dropped(variant):
    call = with_(call_for(variant, B=6), ssm_state_indices=indices((0, 0, 0, 0, 0, 1)))
    found = only(check(variant, call, origin="engine"), "GDR247")
    assert [d.message for d in found] == [
        f"row {row} uses slot 0, which sglang reserves as the dummy slot that padding rows write" for row in (0, 1, 2)]
    assert found[2].notes == ["and 2 more rows in slot 0, not listed (the first 3 are)"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_slot_0_in_a_direct_call_is_one_note(variant):
    """Only the engines' allocators reserve slot 0: the upstream kernel tests index their pools from 0."""
    report = check(variant, with_(call_for(variant), ssm_state_indices=indices((0, 1, 2, 3))))
    assert report.ok
    notes = [d for d in report if d.code == "GDR247"]
    assert [(d.severity, d.message) for d in notes] == [
        ("info", "row 0 uses slot 0, which sglang reserves as the dummy slot that padding rows write")]
    assert notes[0].notes[0].startswith("a note only: slot 0 is reserved by sglang's pool allocator")


@pytest.mark.parametrize("variant", VARIANTS)
def test_trailing_slot_0_rows_are_cuda_graph_padding(variant):
    report = check(variant, with_(call_for(variant), ssm_state_indices=indices((1, 2, 0, 0))))
    assert report.ok  # padding rows share the dummy slot: no GDR247, no GDR242


@pytest.mark.parametrize("variant", VARIANTS)
def test_vllm_skips_slot_0(variant):
    call = with_(call_for(variant), ssm_state_indices=indices((1, 0, 2, 0)))
    assert check(variant, call, engine="vllm").ok
    assert [d.code for d in check(variant, call, origin="engine").errors] == ["GDR247"]  # sglang: row 1 is live
    # vLLM still checks the live rows: duplicates and range.
    report = check(variant, with_(call, ssm_state_indices=indices((3, 0, 3, 9))), engine="vllm")
    assert [d.code for d in report.errors] == ["GDR241", "GDR242"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_skip_sentinel_per_engine(variant):
    """sglang skips index < 0; vLLM skips index <= 0: a row at 0 is live under sglang only."""
    call = with_(call_for(variant), ssm_state_indices=indices((0, 0, 1, 2)))
    sglang = check(variant, call, origin="engine")
    assert [d.code for d in sglang.errors] == ["GDR242", "GDR247", "GDR247"]
    assert sglang.errors[0].message == "slot 0 is used by rows 0, 1 of one batch"
    assert check(variant, call, engine="vllm").ok


def test_unknown_engine_is_rejected():
    with pytest.raises(UnknownEngineError, match=r"^unknown engine 'trtllm'; expected one of: sglang, vllm, "
                                                 r"optionally @version \(sglang@0\.5\.23, vllm@0\.34\.0, "
                                                 r"\.\.\.\)$") as caught:
        check("gdn", call_for("gdn"), engine="trtllm")
    assert caught.value.code == "unknown-engine"


@pytest.mark.parametrize("variant", VARIANTS)
def test_read_values_false_skips_the_value_rules(variant):
    call = with_(call_for(variant), ssm_state_indices=indices((0, 9, 9, 2)))
    assert [d.code for d in check(variant, call, origin="engine").errors] == ["GDR241", "GDR241", "GDR242", "GDR247"]
    assert [d.code for d in check(variant, call).errors] == ["GDR241", "GDR241", "GDR242"]  # slot 0: a note
    assert check(variant, call, read_values=False).ok


# -- warnings and notes ---------------------------------------------------------------------------------------
BETA_MESSAGE = ("sglang 0.5.23 rounds beta = sigmoid(b) to bfloat16 before the update: the state drifts from fp32 "
                "beta, more with longer contexts")


def beta_warning(variant: str, *, severity: bool = False) -> list[tuple[str, ...]]:
    """The GDR253 warning a GDN call with a bf16 `b` gets under sglang 0.5.23 (KDA keeps beta in fp32)."""
    if variant != "gdn":
        return []
    return [("GDR253", "warning", BETA_MESSAGE)] if severity else [("GDR253", BETA_MESSAGE)]


@pytest.mark.parametrize("variant", VARIANTS)
def test_K_256_spills_registers(variant):
    call = call_for(variant, K=256, V=128, S=9, device="meta")
    report = check(variant, call)
    assert report.ok
    assert [(d.code, d.message) for d in report.warnings] == [
        ("GDR248", "head dim K=256 needs a [32, 256] fp32 state tile per warp: registers spill past K = 128"),
        *beta_warning(variant)]
    assert not only(check(variant, call_for(variant, K=128, V=128, S=9, device="meta")), "GDR248")


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype, name", [(torch.bfloat16, "bfloat16"), (torch.float16, "float16")])
def test_16_bit_state_is_a_warning_in_an_engines_call_and_a_note_in_a_direct_one(variant, dtype, name):
    """A pool of the caller's own may be 16-bit (the engines' kernel tests use one: tests/test_upstream_calls.py);
    in an engine's call it is the deployment's state dtype."""
    call = call_for(variant, state_dtype=dtype, device="meta")
    message = f"`initial_state` is {name}: the state is rounded to {name} at every step"
    report = check(variant, call, origin="engine")
    assert report.ok
    assert [(d.code, d.message) for d in report.warnings] == [("GDR249", message), *beta_warning(variant)]
    direct = check(variant, call)
    assert [(d.code, d.message) for d in direct.warnings] == beta_warning(variant)
    [note] = [d for d in direct if d.code == "GDR249"]
    assert (note.severity, note.message, note.notes) == ("info", message, [
        "a note only: the kernel takes a 16-bit state; in an engine's call (`origin=\"engine\"`) it is the "
        "deployment's state dtype, a warning"])
    assert [(d.code, d.message) for d in check(variant, call_for(variant, device="meta"), origin="engine").warnings] \
        == beta_warning(variant)


@pytest.mark.parametrize("variant", VARIANTS)
def test_l2norm_off_is_a_warning_in_an_engines_call_and_a_note_in_a_direct_one(variant):
    call = with_(call_for(variant, device="meta"), use_qk_l2norm_in_kernel=False)
    message = "`use_qk_l2norm_in_kernel` is False, while sglang and vLLM decode these models with True"
    report = check(variant, call, origin="engine")
    assert [(d.code, d.message) for d in report.warnings] == [("GDR250", message), *beta_warning(variant)]
    direct = check(variant, call)
    assert [(d.code, d.message) for d in direct.warnings] == beta_warning(variant)
    [note] = [d for d in direct if d.code == "GDR250"]
    assert (note.severity, note.message) == ("info", message)


@pytest.mark.parametrize("variant", VARIANTS)
def test_all_cpu_is_a_warning_but_meta_and_mixed_are_not(variant):
    report = check(variant, call_for(variant))
    assert [(d.code, d.severity, d.message) for d in report.warnings] == [
        ("GDR251", "warning",
         "all tensors are on cpu: the Triton kernel cannot run there outside the interpreter"),
        *beta_warning(variant, severity=True)]
    assert not only(check(variant, call_for(variant, device="meta")), "GDR251")
    mixed = with_(call_for(variant), initial_state=torch.zeros(S, HV, V, K, device="meta"))
    report = check(variant, mixed)
    assert [d.code for d in report.errors] == ["GDR209"] and not only(report, "GDR251")


@pytest.mark.parametrize("variant", VARIANTS)
def test_empty_batch_is_info(variant):
    report = check(variant, call_for(variant, B=0, slots=[]))
    assert report.ok
    (note,) = only(report, "GDR252")
    assert (note.severity, note.message) == ("info", "the batch is empty (B=0): the call is a no-op")


@pytest.mark.parametrize("variant", VARIANTS)
def test_K_0_raises_zero_division_in_the_wrapper(variant):
    call = call_for(variant, K=0)
    call["mixed_qkv"] = torch.zeros(B, HV * V + 16, dtype=torch.bfloat16)  # passes check 17
    report = check(variant, call)
    assert errors(report) == [(
        "GDR227", "`initial_state` has K=0 (shape (8, 4, 8, 0)): the wrapper raises ZeroDivisionError (integer "
                  "modulo by zero) at its Q-size check")]
    assert report.errors[0].wrapper


def test_kda_lower_bound_must_be_negative():
    for bound in (1.0, 0.0):
        report = check("kda", call_for("kda", lower_bound=bound, device="meta"))
        assert [(d.code, d.message) for d in report.warnings] == [
            ("GDR254", f"`lower_bound` is {bound}: the safe gate g = lower_bound * sigmoid(...) must be negative "
                       f"to decay")]
    assert not check("kda", call_for("kda", lower_bound=-5.0, device="meta")).warnings
    assert not check("kda", call_for("kda", lower_bound=None, device="meta")).warnings


def test_beta_rounding_is_a_warning_where_the_engine_rounds():
    (warning,) = only(check("gdn", call_for("gdn")), "GDR253")
    assert (warning.severity, warning.message) == ("warning", BETA_MESSAGE)
    assert warning.fixes == ["no sglang 0.5.23 setting changes it (the layer passes `b` in the model dtype); a "
                             "direct caller can pass `b` in float32, which keeps beta exact"]
    (old_vllm,) = only(check("gdn", call_for("gdn"), engine="vllm@0.28"), "GDR253")
    assert (old_vllm.severity, old_vllm.message) == ("warning", BETA_MESSAGE.replace("sglang 0.5.23", "vLLM 0.28"))
    assert old_vllm.fixes[0] == "vLLM 0.29 and later keep beta in fp32 (`--engine vllm@0.29`)"
    assert not only(check("gdn", call_for("gdn"), engine="vllm"), "GDR253")
    assert not only(check("gdn", call_for("gdn"), engine="vllm@0.29"), "GDR253")
    assert not only(check("gdn", with_(call_for("gdn"), b=torch.zeros(B, HV))), "GDR253")
    assert not only(check("kda", call_for("kda")), "GDR253")


def test_unchecked_rules_follow_the_wrapper_rules():
    """Wrapper diagnostics first (in wrapper order), then the unchecked ones by code."""
    call = awkward_call("gdn")
    call.update(mixed_qkv=call["mixed_qkv"][:, None], scale=None, ssm_state_indices=indices((1, 1, 2, 3, -1, -1)))
    codes = check("gdn", call).codes()
    assert codes[0] == "GDR201"
    rest = codes[1:]
    assert rest == sorted(rest) and {"GDR242", "GDR245"} <= set(rest)
