"""Our kernels and sglang 0.5.23's, on identical inputs (sglang profile, fp32, Triton interpreter on CPU).

sglang's source comes from GDR_CHECK_SGLANG_PATH (a wheel or an unpacked tree) or an installed sglang;
without either the module is skipped.
"""

import os

if not os.environ.get("GDR_CHECK_TEST_GPU"):
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from gdr_check.kernel import kda_packed_decode, packed_decode  # noqa: E402
from gdr_check.kernel.engine_kernels import find_sglang_source, load_sglang_packed_decode  # noqa: E402
from kernel_helpers import make_call, relative_error  # noqa: E402

if find_sglang_source() is None:
    pytest.skip("no sglang source: set GDR_CHECK_SGLANG_PATH to a 0.5.23 wheel or tree", allow_module_level=True)

SGLANG_GDN, SGLANG_KDA = load_sglang_packed_decode()


def run_both(call, ours, theirs):
    mine, ref = call.clone(), call.clone()
    ours(*mine.args(), engine="sglang")
    theirs(*ref.args())
    return mine, ref


def assert_agree(mine, ref):
    assert torch.isfinite(mine.out).all() and torch.isfinite(ref.out).all()
    assert relative_error(mine.out, ref.out.double()) <= 1e-5
    assert relative_error(mine.pool_backing, ref.pool_backing.double()) <= 1e-5
    live = mine.ssm_state_indices.long() >= 0
    assert torch.equal(mine.out[~live], ref.out[~live])  # both write zeros on skipped rows


def test_gdn_agrees_with_sglang():
    call = make_call(B=3, H=2, HV=4, K=24, V=20, slots=[3, -1, 5], pool_slots=7, qkv_row_pad=5,
                     fused_gates=True, pool_layout="head_slice", seed=21)
    assert_agree(*run_both(call, packed_decode, SGLANG_GDN))


def test_gdn_agrees_with_sglang_on_its_beta_rounding():
    # fp16 gates: sglang rounds sigmoid(b) to fp16, and so does our sglang profile.
    call = make_call(B=2, H=1, HV=2, K=16, V=16, slots=[1, 2], pool_slots=3, act=torch.float16, seed=22)
    mine, ref = run_both(call, packed_decode, SGLANG_GDN)
    assert relative_error(mine.pool_backing, ref.pool_backing.double()) <= 1e-5


@pytest.mark.parametrize("lower_bound", [None, -5.0], ids=["softplus-gate", "safe-gate"])
def test_kda_agrees_with_sglang(lower_bound):
    # use_qk_l2norm_in_kernel=True makes sglang's wrapper ask its CUDA fast path first (a stand-in declines).
    call = make_call(B=3, H=2, HV=2, K=24, V=20, slots=[1, -1, 3], pool_slots=4, kda=True, fused_gates=True,
                     lower_bound=lower_bound, seed=23)
    assert_agree(*run_both(call, kda_packed_decode, SGLANG_KDA))


def test_loading_leaves_no_stand_in_modules_behind():
    import sys

    before = {name for name in sys.modules if name.split(".")[0] == "sglang"}
    gdn, kda = load_sglang_packed_decode()
    assert gdn.__name__ == "fused_recurrent_gated_delta_rule_packed_decode"
    assert kda.__name__ == "fused_recurrent_kda_packed_decode"
    # The stand-in parents exist only while sglang's file executes or its KDA wrapper runs.
    assert {name for name in sys.modules if name.split(".")[0] == "sglang"} == before
