"""The Triton GDN packed-decode kernel against its float64 reference, through the checked wrapper."""

import os

if not os.environ.get("GDR_CHECK_TEST_GPU"):
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from gdr_check.kernel.device_guard import raise_pending  # noqa: E402
from gdr_check.kernel.gdn.checked import packed_decode  # noqa: E402
from gdr_check.kernel.gdn.fused import launch_packed_decode  # noqa: E402
from gdr_check.kernel.gdn.naive import naive_packed_decode  # noqa: E402
from gdr_check.kernel.layout import raise_contract_errors  # noqa: E402
from gdr_check.kernel.tiling import TileConfig, pick_config  # noqa: E402
from kernel_helpers import DEVICE, assert_step_matches, make_call, relative_error  # noqa: E402

FP32 = dict(state_tol=1e-5, out_tol=1e-5)
FP16_ACT = dict(state_tol=1e-5, out_tol=2e-3)  # out is rounded to fp16


@pytest.mark.parametrize(
    "shape",
    [
        # GQA (H != HV), K != V, neither a power of two; strided qkv rows, fused gate views, page-padded pool.
        dict(B=3, H=2, HV=4, K=24, V=20, slots=[3, -1, 5], pool_slots=7, qkv_row_pad=5, fused_gates=True,
             pool_layout="head_slice"),
        # G = 3, K < V, int64 indices with stride 2, every-other-slot pool.
        dict(B=2, H=1, HV=3, K=16, V=32, slots=[4, 1], pool_slots=5, index_dtype=torch.int64, index_stride=2,
             pool_layout="every_other"),
        # H == HV, no in-kernel L2 norm, trailing padding rows.
        dict(B=4, H=2, HV=2, K=32, V=8, slots=[2, 6, -1, -1], pool_slots=8, l2norm=False),
    ],
    ids=["gqa-k24-v20-padded-pool", "g3-int64-strided-every-other", "h-eq-hv-no-l2norm"],
)
def test_matches_float64_reference_fp32(shape):
    call = make_call(**shape, seed=1)
    assert_step_matches(call, packed_decode, naive_packed_decode, engine="sglang", **FP32)


def test_fp16_activations_and_fp16_state():
    call = make_call(B=3, H=1, HV=2, K=16, V=12, slots=[1, 4, -1], pool_slots=5, act=torch.float16, seed=2)
    assert_step_matches(call, packed_decode, naive_packed_decode, engine="sglang", **FP16_ACT)
    narrow = make_call(B=2, H=1, HV=2, K=16, V=12, slots=[2, 1], pool_slots=3, state=torch.float16, seed=3)
    # The new state is rounded to fp16 on store: half an fp16 ulp relative to the largest element.
    assert_step_matches(narrow, packed_decode, naive_packed_decode, engine="sglang", state_tol=2e-3, out_tol=1e-5)


def test_engine_profiles_differ_only_by_beta_rounding_and_each_matches_its_reference():
    call = make_call(B=2, H=1, HV=2, K=16, V=16, slots=[1, 2], pool_slots=3, act=torch.float16, seed=4)
    sglang = assert_step_matches(call, packed_decode, naive_packed_decode, engine="sglang", **FP16_ACT)
    vllm = assert_step_matches(call, packed_decode, naive_packed_decode, engine="vllm", **FP16_ACT)
    # sglang rounds sigmoid(b) to fp16 (about 1e-3 relative); the profiles must therefore be told apart.
    slots = call.ssm_state_indices.long()
    gap = relative_error(sglang.initial_state[slots], vllm.initial_state[slots].double())
    assert 1e-5 < gap < 1e-2


def test_vllm_before_its_fp32_beta_fix_rounds_beta_like_sglang():
    call = make_call(B=3, H=1, HV=2, K=16, V=16, slots=[1, 0, 2], pool_slots=3, act=torch.float16, seed=4)
    old = assert_step_matches(call, packed_decode, naive_packed_decode, engine="vllm@0.28", **FP16_ACT)
    new = assert_step_matches(call, packed_decode, naive_packed_decode, engine="vllm@0.29", **FP16_ACT)
    live = torch.tensor([1, 2])
    gap = relative_error(old.initial_state[live], new.initial_state[live].double())
    assert 1e-5 < gap < 1e-2  # the rounded beta of the 0.28 profile reaches the state
    # Both vLLM profiles skip the row that names slot 0 and leave the null block untouched.
    assert torch.equal(old.initial_state[0], call.initial_state[0])
    assert torch.equal(new.initial_state[0], call.initial_state[0])


def test_vllm_skips_slot_zero_and_sglang_flags_a_live_request_there_by_context():
    call = make_call(B=3, H=1, HV=2, K=8, V=8, slots=[0, 2, -1], pool_slots=3, seed=5)
    ran = assert_step_matches(call, packed_decode, naive_packed_decode, engine="vllm", **FP32)
    assert torch.equal(ran.initial_state[0], call.initial_state[0])
    # sglang: the kernel computes slot 0; only the engine's allocator reserves it. A direct call gets a note,
    # the engine's call (context="engine") an error, both read from the device when the caller asks.
    packed_decode(*call.clone().args(), engine="sglang")
    assert [(d.code, d.severity) for d in raise_pending(DEVICE)] == [("GDR247", "info")]
    packed_decode(*call.clone().args(), engine="sglang", context="engine")
    with pytest.raises(ValueError, match="row 0 uses slot 0"):
        raise_pending(DEVICE, context="engine")


def test_int32_and_int64_indices_give_identical_results():
    runs = []
    for index_dtype in (torch.int32, torch.int64):
        call = make_call(B=2, H=1, HV=2, K=8, V=8, slots=[2, 1], pool_slots=3, index_dtype=index_dtype, seed=6)
        ran = call.clone()
        packed_decode(*ran.args())
        runs.append(ran)
    assert torch.equal(runs[0].out, runs[1].out) and torch.equal(runs[0].initial_state, runs[1].initial_state)


@pytest.mark.parametrize(
    "config", [TileConfig(4, 2), TileConfig(4, 3, prefetch=False), TileConfig(4, prefetch=False),
               TileConfig(8, evict_first=True),
               TileConfig(4, 3, prefetch=False, loop_stages=3),
               TileConfig(8, 2, evict_first=True, hint_stores=False, keep_inputs=True)]
)
def test_every_tiling_computes_the_same_step(config):
    """The tuned table only picks among these; each must be exact on V tails and loop remainders."""
    call = make_call(B=2, H=1, HV=2, K=24, V=20, slots=[2, -1], pool_slots=3, seed=7)
    tiled = lambda *args, engine: launch_packed_decode(*args, engine=engine, config=config)  # noqa: E731
    assert_step_matches(call, tiled, naive_packed_decode, engine="sglang", **FP32)


@pytest.mark.parametrize(
    "slots, message",
    [([1, 9], "slot 9 at row 1"), ([2, 2], "slot 2 is used by rows 0, 1 of one batch")],
    ids=["out-of-range", "duplicate"],
)
def test_unsafe_slots_skip_their_row_and_are_raised_when_asked(slots, message):
    call = make_call(B=2, H=1, HV=2, K=8, V=8, slots=slots, pool_slots=3, seed=8)
    ran = call.clone()
    packed_decode(*ran.args())  # no host sync: the faulty row is skipped on the device and recorded
    with pytest.raises(ValueError, match=message):
        raise_pending(DEVICE)
    assert torch.equal(ran.out[1], torch.zeros_like(ran.out[1]))  # the skipped row (the later one)
    assert torch.equal(ran.pool_backing[0], call.pool_backing[0])


def test_non_dense_pool_and_wrapper_shape_errors_are_refused():
    call = make_call(B=1, H=1, HV=2, K=8, V=8, slots=[1], pool_slots=2, seed=9)
    permuted = call.initial_state.permute(0, 2, 1, 3).contiguous().permute(0, 2, 1, 3)  # [S, V, HV, K] storage
    args = list(call.args())
    args[6] = permuted
    with pytest.raises(ValueError, match="inner strides"):
        packed_decode(*args)
    args = list(call.args())
    args[0] = call.mixed_qkv[None]  # a token axis left in: the reference wrapper's first check
    with pytest.raises(ValueError, match=r"^`mixed_qkv` must be a 2D tensor \(got ndim=3\)\.$"):
        packed_decode(*args)


def test_no_grid_limit_refusal_because_the_grid_is_one_dimensional():
    from gdr_check import check_packed_decode

    B, HV = 65536 // 4 + 1, 4  # B*HV just over sglang's 65535 grid limit
    mixed = torch.zeros(B, 2 * 1 + HV)
    slots = torch.arange(1, B + 1, dtype=torch.int32)
    pool = torch.zeros(B + 1, HV, 1, 1)
    report = check_packed_decode(mixed, torch.zeros(B, HV), torch.zeros(B, HV), torch.zeros(HV), torch.zeros(HV),
                                 1.0, pool, torch.zeros(B, 1, HV, 1), slots, True)
    assert "GDR244" in report.codes()  # sglang's kernel would fail to launch this
    raise_contract_errors(report)  # ours takes it: one program per (row, head, V tile), any B
    assert pick_config(B * HV, 1, 1, 4).grid(B, HV, 1) == (B * HV,)
    with pytest.raises(ValueError, match="split the batch"):
        TileConfig(1).grid(2**31, 1, 1)


def test_empty_batch_is_a_no_op():
    call = make_call(B=1, H=1, HV=2, K=8, V=8, slots=[1], pool_slots=2, seed=10)
    ran = call.clone()
    empty = (ran.mixed_qkv[:0], ran.a[:0], ran.b[:0], ran.A_log, ran.dt_bias, ran.scale, ran.initial_state,
             ran.out[:0], ran.ssm_state_indices[:0], True)
    launch_packed_decode(*empty)
    assert torch.equal(ran.pool_backing, call.pool_backing)


def test_cpu_tensors_outside_the_interpreter_are_one_clear_error():
    """Triton has no CPU driver: without TRITON_INTERPRET the checked kernels say what to do (GDR251) instead of
    Triton's `0 active drivers` traceback. Both variants in one child process (each start imports torch and
    triton, seconds)."""
    import subprocess
    import sys

    script = (
        "import sys; sys.path.insert(0, 'tests')\n"
        "from kernel_helpers import make_call\n"
        "from gdr_check.kernel import packed_decode, kda_packed_decode\n"
        "for kda, kernel in ((False, packed_decode), (True, kda_packed_decode)):\n"
        "    call = make_call(B=2, H=1, HV=2, K=8, V=8, slots=[1, 2], pool_slots=3, kda=kda, seed=1)\n"
        "    try:\n"
        "        kernel(*call.args())\n"
        "    except ValueError as error:\n"
        "        print(kernel.__name__, error)\n")
    environment = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "GDR_CHECK_TEST_GPU")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=environment,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))), timeout=300, check=False)
    message = ("all tensors are on cpu: the Triton kernel cannot run there outside the interpreter (set "
               "TRITON_INTERPRET=1 before triton is imported, or move them to the GPU)")
    assert done.stdout == f"packed_decode {message}\nkda_packed_decode {message}\n", done.stderr
