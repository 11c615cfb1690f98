"""The Triton KDA packed-decode kernel against its float64 reference, through the checked wrapper."""

import os

if not os.environ.get("GDR_CHECK_TEST_GPU"):
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from gdr_check.kernel.device_guard import raise_pending  # noqa: E402
from gdr_check.kernel.kda.checked import kda_packed_decode  # noqa: E402
from gdr_check.kernel.kda.fused import launch_kda_packed_decode  # noqa: E402
from gdr_check.kernel.kda.naive import naive_kda_packed_decode  # noqa: E402
from gdr_check.kernel.tiling import TileConfig  # noqa: E402
from kernel_helpers import DEVICE, assert_step_matches, make_call  # noqa: E402

FP32 = dict(state_tol=1e-5, out_tol=1e-5)


@pytest.mark.parametrize("lower_bound", [None, -5.0], ids=["softplus-gate", "safe-gate"])
@pytest.mark.parametrize(
    "shape",
    [
        # K != V, neither a power of two; strided qkv rows, fused gate views, page-padded pool, a -1 row.
        dict(B=3, H=2, HV=2, K=24, V=20, slots=[3, -1, 1], pool_slots=5, qkv_row_pad=3, fused_gates=True,
             pool_layout="head_slice"),
        # H != HV (the kernel supports it even though Kimi uses H == HV), int64 strided indices, no L2 norm.
        dict(B=2, H=1, HV=2, K=16, V=8, slots=[2, 1], pool_slots=3, index_dtype=torch.int64, index_stride=2,
             pool_layout="every_other", l2norm=False),
    ],
    ids=["k24-v20-padded-pool", "gqa-int64-every-other"],
)
def test_matches_float64_reference_fp32(shape, lower_bound):
    call = make_call(**shape, kda=True, lower_bound=lower_bound, seed=11)
    assert_step_matches(call, kda_packed_decode, naive_kda_packed_decode, engine="sglang", **FP32)


def test_fp16_activations():
    call = make_call(B=2, H=2, HV=2, K=16, V=16, slots=[1, 2], pool_slots=3, kda=True, act=torch.float16, seed=12)
    assert_step_matches(call, kda_packed_decode, naive_kda_packed_decode, engine="sglang", state_tol=1e-5,
                        out_tol=2e-3)


def test_beta_is_never_rounded_so_both_profiles_agree_on_live_rows():
    call = make_call(B=2, H=1, HV=2, K=8, V=8, slots=[1, 2], pool_slots=3, kda=True, act=torch.float16, seed=13)
    sglang = assert_step_matches(call, kda_packed_decode, naive_kda_packed_decode, engine="sglang",
                                 state_tol=1e-5, out_tol=2e-3)
    vllm = assert_step_matches(call, kda_packed_decode, naive_kda_packed_decode, engine="vllm",
                               state_tol=1e-5, out_tol=2e-3)
    assert torch.equal(sglang.out, vllm.out) and torch.equal(sglang.initial_state, vllm.initial_state)


def test_vllm_skips_slot_zero():
    call = make_call(B=3, H=1, HV=1, K=8, V=8, slots=[2, 0, -1], pool_slots=3, kda=True, seed=14)
    ran = assert_step_matches(call, kda_packed_decode, naive_kda_packed_decode, engine="vllm", **FP32)
    assert torch.equal(ran.initial_state[0], call.initial_state[0])


def test_duplicate_slots_skip_the_later_row_and_are_raised_when_asked():
    call = make_call(B=2, H=1, HV=1, K=8, V=8, slots=[1, 1], pool_slots=2, kda=True, seed=15)
    ran = call.clone()
    kda_packed_decode(*ran.args())
    with pytest.raises(ValueError, match="slot 1 is used by rows 0, 1 of one batch"):
        raise_pending(DEVICE)
    assert torch.equal(ran.out[1], torch.zeros_like(ran.out[1])) and not torch.isnan(ran.out[0]).any()
    assert torch.equal(ran.pool_backing[0], call.pool_backing[0])


def test_gdn_style_gates_get_the_reference_wrappers_message():
    call = make_call(B=1, H=1, HV=2, K=8, V=8, slots=[1], pool_slots=2, kda=True, seed=16)
    args = list(call.args())
    args[1] = call.a[:, :2]  # a per-head [B, HV] gate, as the GDN kernel takes
    message = r"^`a` must have shape \[B, HV\*K\] with HV=2, K=8 \(got a.shape=\(1, 2\)\)\.$"
    with pytest.raises(ValueError, match=message):
        kda_packed_decode(*args)


@pytest.mark.parametrize("config", [TileConfig(4, 3, prefetch=False, loop_stages=3), TileConfig(4, prefetch=False),
                                    TileConfig(8, 2),
                                    TileConfig(8, 2, evict_first=True, hint_stores=False, keep_inputs=True)])
def test_every_tiling_computes_the_same_step(config):
    """The tables pick among these for KDA (the software-pipelined loop for a large bf16 batch); each must be
    exact on V tails and loop remainders."""
    call = make_call(B=2, H=2, HV=2, K=24, V=20, slots=[2, -1], pool_slots=3, kda=True, seed=7)
    tiled = lambda *args, engine: launch_kda_packed_decode(*args, engine=engine, config=config)  # noqa: E731
    assert_step_matches(call, tiled, naive_kda_packed_decode, engine="sglang", **FP32)
