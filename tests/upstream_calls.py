"""Valid packed-decode calls taken from the engines' own kernel tests, replayed against gdr-check.

Every case below is one call of `fused_recurrent_gated_delta_rule_packed_decode` (GDN) or
`fused_recurrent_kda_packed_decode` (KDA) that an upstream test makes and expects to succeed. The table
records the call's shapes, dtypes and layouts in our own words; `build()` makes real CPU tensors of the same
shapes, dtypes and strides (values do not matter to the checks, except the slot indices, which are built
exactly as the upstream test builds them).

Sources, read through the code index (repository, path, commit):

- VLLM_NEW: vllm-project/vllm, tests/kernels/test_fused_recurrent_packed_decode.py at
  202c2b6745e24d2bcf4e5c78d87463299b21bb30 (imports from `vllm.third_party.flash_linear_attention.ops`).
  - test_fused_recurrent_packed_decode_matches_reference: dtype {fp16, bf16, fp32} x strided_mixed_qkv
    x strided_gates = 12 calls. B=32, H=4, HV=8, K=V=128. A_log/dt_bias in the activation dtype. Slots
    1..B with the last three rows -1 (block 0 is vLLM's NULL_BLOCK_ID); pool of B+1 slots in the activation
    dtype. strided_mixed_qkv: the first qkv_dim columns of a [B, qkv_dim + 64] buffer. strided_gates: one
    [B, 4*HV] buffer cut in two halves (b's half first, then a's), each gate the first HV columns of its
    half, so both have row stride 4*HV. scale = K**-0.5, use_qk_l2norm_in_kernel=True.
  - test_packed_decode_supports_large_batch_head_grid: 1 call. B=1024, H=8, HV=64, K=V=1, float32
    everywhere; `a` and `b` are the same [B, HV] tensor, `A_log` and `dt_bias` the same [HV] tensor; a
    one-slot pool; every index 0; scale=1.0; use_qk_l2norm_in_kernel left at its default (False). B*HV is
    65536, one past CUDA's grid-y limit: the test checks vLLM's split grid, and every row is a null block.
- VLLM_OLD: vllm-project/vllm, the same path at 3036a74519a0968c834aab3ff9c89b3e18747f6f, where the entry
  point was still named `fused_recurrent_gated_delta_rule_packed_decode_fwd` (same arguments).
  - test_fused_recurrent_packed_decode_matches_reference: dtype {fp16, bf16} x strided_mixed_qkv = 4 calls.
    As above but `a`/`b` always separate [B, HV] tensors, slots 0..B-1 with the last three rows -1, and a
    pool of exactly B slots.
- SGLANG_KDA: sgl-project/sglang, test/registered/attention/test_kda_kernels.py at
  05f70dc503324fcbc7cb999e78ab990f27a9597e (imports from `sglang.kernels.ops.attention.fla`, the 0.5.23
  layout), class TestKDAPackedDecode: 7 calls. bf16 activations and a bf16 pool of B+4 slots; A_log fp32
  [HV], dt_bias fp32 [HV*K]; every tensor freshly allocated and contiguous; slots arange(B) from 0 (int32);
  scale = K**-0.5, use_qk_l2norm_in_kernel=True, lower_bound left at None.
  - test_b1 / test_b4 / test_b32 / test_b128: H = HV = 16, K = V = 128.
  - test_asymmetric_heads: B=8, H=8, HV=16.
  - test_pad_slot: B=8, every even row's slot replaced by -1.
  - test_production_shapes_through_dispatcher: B=4, H=HV=16, through `TritonKDAKernel.packed_decode`,
    which hands the kernel `b` reshaped from [1, B, HV] to [B, HV] and `A_log` from [1, 1, HV, 1] to [HV]
    (both views of contiguous tensors) and an `out` of its own, [B, 1, HV, V].

Not covered:
- fla-org/flash-linear-attention (snapshot at bc3b101dcb713ddc5bd8924b66754eb68b5ccf89) has no packed decode
  entry point; its decode test (tests/ops/test_kda.py::test_fused_recurrent_vllm_decode) calls the unpacked
  `fused_recurrent_kda`, whose arguments (q, k, v, g, beta) the packed checks do not take.
- sglang's GDN packed-decode tests (a target-verify-vs-packed-decode test and a beta-in-fp32 test) were seen
  in the index without a repository path that could be confirmed, so they are left out.

Engines: vLLM's tests exercise vLLM's copy of the kernel (rows with index <= 0 skipped, the grid split when
B*HV > 65535), so their calls are checked with `engine="vllm"`; sglang's with the default `engine="sglang"`.
All are direct calls (the default `origin="direct"`): the pools are the tests' own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

VLLM_NEW = "vllm-project/vllm tests/kernels/test_fused_recurrent_packed_decode.py@202c2b6745e2"
VLLM_OLD = "vllm-project/vllm tests/kernels/test_fused_recurrent_packed_decode.py@3036a74519a0"
SGLANG_KDA = "sgl-project/sglang test/registered/attention/test_kda_kernels.py@05f70dc50332"

F16, BF16, F32 = torch.float16, torch.bfloat16, torch.float32
_DT_NAME = {F16: "fp16", BF16: "bf16", F32: "fp32"}


@dataclass(frozen=True)
class UpstreamCase:
    """One upstream call, in the terms that matter to the contract."""

    source: str  # one of the source constants above
    test: str  # the upstream test (and its parameters)
    variant: str  # "gdn" or "kda"
    engine: str  # the engine whose kernel the upstream test runs
    B: int
    H: int
    HV: int
    K: int
    V: int
    pool_slots: int
    slots: tuple[int, ...]  # the index values, row by row
    act: torch.dtype = BF16  # mixed_qkv, a, b, out
    state: torch.dtype = F32  # the pool
    a_log: torch.dtype = F32
    dt_bias: torch.dtype = F32
    index: torch.dtype = torch.int32
    mixed_pad: int = 0  # > 0: mixed_qkv is the first columns of a buffer this many columns wider
    gates: str = "separate"  # "separate", "halves" (vLLM's strided_gates), "shared" (a is b)
    shared_params: bool = False  # A_log and dt_bias are one tensor
    reshaped_views: bool = False  # b and A_log are reshaped views (sglang's dispatcher)
    scale: float = 128**-0.5
    l2norm: bool = True
    lower_bound: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.test


def _vllm_new() -> list[UpstreamCase]:
    cases = []
    B = 32
    live = tuple(range(1, B + 1))
    slots = live[:-3] + (-1, -1, -1)
    for dtype in (F16, BF16, F32):
        for strided_mixed in (False, True):
            for strided_gates in (False, True):
                cases.append(UpstreamCase(
                    VLLM_NEW,
                    f"test_fused_recurrent_packed_decode_matches_reference[{_DT_NAME[dtype]}-"
                    f"mixed{'S' if strided_mixed else 'C'}-gates{'S' if strided_gates else 'C'}]",
                    "gdn", "vllm", B, 4, 8, 128, 128, B + 1, slots,
                    act=dtype, state=dtype, a_log=dtype, dt_bias=dtype,
                    mixed_pad=64 if strided_mixed else 0, gates="halves" if strided_gates else "separate",
                ))
    cases.append(UpstreamCase(
        VLLM_NEW, "test_packed_decode_supports_large_batch_head_grid", "gdn", "vllm",
        1024, 8, 64, 1, 1, 1, (0,) * 1024, act=F32, state=F32, gates="shared", shared_params=True,
        scale=1.0, l2norm=False,
    ))
    return cases


def _vllm_old() -> list[UpstreamCase]:
    B = 32
    slots = tuple(range(B))[:-3] + (-1, -1, -1)
    return [
        UpstreamCase(
            VLLM_OLD,
            f"test_fused_recurrent_packed_decode_matches_reference[{_DT_NAME[dtype]}-"
            f"mixed{'S' if strided_mixed else 'C'}]",
            "gdn", "vllm", B, 4, 8, 128, 128, B, slots,
            act=dtype, state=dtype, a_log=dtype, dt_bias=dtype, mixed_pad=64 if strided_mixed else 0,
        )
        for dtype in (F16, BF16)
        for strided_mixed in (False, True)
    ]


def _sglang_kda() -> list[UpstreamCase]:
    def case(test: str, B: int, H: int = 16, HV: int = 16, slots: tuple[int, ...] | None = None,
             **kw: Any) -> UpstreamCase:
        return UpstreamCase(SGLANG_KDA, f"TestKDAPackedDecode.{test}", "kda", "sglang", B, H, HV, 128, 128,
                            B + 4, tuple(range(B)) if slots is None else slots, act=BF16, state=BF16, **kw)

    return [
        case("test_b1", 1),
        case("test_b4", 4),
        case("test_b32", 32),
        case("test_b128", 128),
        case("test_asymmetric_heads", 8, H=8, HV=16),
        case("test_pad_slot", 8, slots=tuple(-1 if i % 2 == 0 else i for i in range(8))),
        case("test_production_shapes_through_dispatcher", 4, reshaped_views=True),
    ]


CASES: list[UpstreamCase] = [*_vllm_new(), *_vllm_old(), *_sglang_kda()]


def build(case: UpstreamCase) -> dict[str, Any]:
    """Keyword arguments for `check_packed_decode` / `check_kda_packed_decode`: real CPU tensors with the
    upstream call's shapes, dtypes and strides. Contents are left uninitialised (the checks read only the
    slot indices' values, which are exact)."""
    B, H, HV, K, V = case.B, case.H, case.HV, case.K, case.V
    qkv = 2 * H * K + HV * V
    gate_width = HV if case.variant == "gdn" else HV * K

    mixed_qkv = torch.empty(B, qkv + case.mixed_pad, dtype=case.act)[:, :qkv]

    if case.gates == "halves":  # [B, 4*HV] -> two halves (b's, then a's), each gate its half's first HV columns
        gates = torch.empty(B, 4 * HV, dtype=case.act)
        b_half, a_half = gates.chunk(2, dim=-1)
        a, b = a_half[:, :HV], b_half[:, :HV]
    elif case.gates == "shared":
        a = b = torch.empty(B, HV, dtype=case.act)
    else:
        a = torch.empty(B, gate_width, dtype=case.act)
        b = torch.empty(B, HV, dtype=case.act)
    if case.reshaped_views:  # what sglang's TritonKDAKernel.packed_decode hands the kernel
        b = torch.empty(B, HV, dtype=case.act).unsqueeze(0).reshape(B, -1)

    A_log = torch.empty(HV, dtype=case.a_log)
    if case.reshaped_views:
        A_log = A_log.view(1, 1, HV, 1).reshape(-1)
    dt_bias = A_log if case.shared_params else torch.empty(gate_width, dtype=case.dt_bias)

    call: dict[str, Any] = dict(
        mixed_qkv=mixed_qkv,
        a=a,
        b=b,
        A_log=A_log,
        dt_bias=dt_bias,
        scale=case.scale,
        initial_state=torch.empty(case.pool_slots, HV, V, K, dtype=case.state),
        out=torch.empty(B, 1, HV, V, dtype=case.act),
        ssm_state_indices=torch.tensor(case.slots, dtype=case.index),
        use_qk_l2norm_in_kernel=case.l2norm,
    )
    if case.variant == "kda":
        call["lower_bound"] = case.lower_bound
    return call


def check(case: UpstreamCase, *, device: str | None = "cuda:0", **options: Any):
    """Run the matching public check on the case, against the engine its upstream test runs. `device`: the
    device the tensors are described on (the upstream tests' CUDA by default); None checks the CPU tensors
    themselves."""
    from gdr_check import check_kda_packed_decode, check_packed_decode

    fn = check_packed_decode if case.variant == "gdn" else check_kda_packed_decode
    call = build(case)
    return fn(**(call if device is None else on_device(call, device)), engine=options.pop("engine", case.engine),
              **options)


def on_device(call: dict[str, Any], device: str = "cuda:0") -> dict[str, Any]:
    """The same call with every tensor described as a TensorSpec on `device` (the upstream tests run on
    CUDA): shapes, strides, dtypes, storage sharing and the index values are kept. Plain CPU tensors would
    add GDR251 (CPU tensors cannot run the Triton kernel), which is about this replay, not the upstream call."""
    from dataclasses import replace

    from gdr_check import TensorSpec

    return {
        name: replace(TensorSpec.from_tensor(value, read_values=name == "ssm_state_indices"), device=device)
        if isinstance(value, torch.Tensor) else value
        for name, value in call.items()
    }
