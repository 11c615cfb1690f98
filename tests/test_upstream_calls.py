"""The engines' own kernel tests' valid packed-decode calls, replayed: gdr-check must not call them wrong.

The calls and their sources are in `tests/upstream_calls.py`. The tensors are described on cuda:0, where the
upstream tests run them (`test_cpu_replay_only_adds_gdr251` covers the CPU tensors themselves).
"""

from __future__ import annotations

from collections import Counter

import pytest

torch = pytest.importorskip("torch")  # the calls are real tensors: the kernel extra's

from upstream_calls import CASES, SGLANG_KDA, VLLM_NEW, VLLM_OLD, UpstreamCase, build, check  # noqa: E402

# The corpus per source: a shrinking table fails here.
EXPECTED_COUNTS = {VLLM_NEW: 13, VLLM_OLD: 4, SGLANG_KDA: 7}

# Info codes each case is expected to get (notes are allowed, but a new one should be noticed).
# GDR226: sglang's KDA wrapper picks Triton over its CUDA kernel (bf16 pool; B < 8 for some).
# GDR247: a live row in slot 0 (sglang reserves it), only a note for a direct call. The sglang test indexes its
#         pool from 0; with B = 1 the lone slot-0 row is read as a trailing padding row, so no note there.
_KDA_SLOT0 = {"test_b4", "test_b32", "test_b128", "test_asymmetric_heads", "test_production_shapes_through_dispatcher"}


def expected_infos(case: UpstreamCase) -> set[str]:
    """The notes a direct call gets: deployment advice that is a warning or an error only in an engine's call."""
    infos = set()
    if case.source == SGLANG_KDA:
        infos |= {"GDR226"} | ({"GDR247"} if case.test.split(".")[-1] in _KDA_SLOT0 else set())
    if case.state in (torch.float16, torch.bfloat16):  # a 16-bit pool of the test's own: the kernel takes it
        infos.add("GDR249")
    if not case.l2norm:  # the flag's default, legal for a kernel test with no model behind it
        infos.add("GDR250")
    return infos


def _param(case: UpstreamCase):
    return pytest.param(case, id=f"{case.source.split()[0]}:{case.id}")


def test_corpus_size_per_source():
    assert Counter(case.source for case in CASES) == EXPECTED_COUNTS
    assert len({(case.source, case.id) for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_no_errors(case):
    """The issue's target: 0 false errors on the upstream tests' valid calls."""
    report = check(case)
    assert report.ok, [(d.code, d.message) for d in report.errors]
    assert not report.errors


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_no_warnings_and_exactly_the_expected_notes(case):
    """No warning either: GDR249 (a 16-bit pool) and GDR250 (`use_qk_l2norm_in_kernel=False`) warned on 20 of these
    calls, advice aimed at a model deployment applied to a direct kernel call; a direct call gets them as notes,
    as GDR247 (slot 0), and an engine's call as warnings (test_engine_context_keeps_the_warnings)."""
    report = check(case)
    assert [(d.code, d.message) for d in report.warnings] == []
    assert {d.code for d in report if d.severity == "info"} == expected_infos(case)
    assert {d.severity for d in report} == ({"info"} if expected_infos(case) else set())


def test_engine_context_keeps_the_warnings():
    """The same calls made by an engine (`origin="engine"`) keep GDR249 and GDR250 as warnings."""
    bf16 = next(c for c in CASES if c.state == torch.bfloat16)
    no_norm = next(c for c in CASES if not c.l2norm)
    assert [(d.code, d.message) for d in check(bf16, origin="engine").warnings if d.code == "GDR249"] == [
        ("GDR249", "`initial_state` is bfloat16: the state is rounded to bfloat16 at every step")]
    assert [(d.code, d.message) for d in check(no_norm, origin="engine").warnings if d.code == "GDR250"] == [
        ("GDR250", "`use_qk_l2norm_in_kernel` is False, while sglang and vLLM decode these models with True")]


@pytest.mark.parametrize("case", [_param(c) for c in CASES if c.source == SGLANG_KDA][:2]
                         + [_param(c) for c in CASES if c.source == VLLM_NEW][-2:])
def test_cpu_replay_only_adds_gdr251(case):
    """On the CPU tensors themselves the report is the same plus GDR251, which is about this replay."""
    on_cuda = [(d.code, d.message) for d in check(case)]
    on_cpu = [(d.code, d.message) for d in check(case, device=None)]
    assert [d for d in on_cpu if d[0] != "GDR251"] == on_cuda
    assert [d[0] for d in on_cpu].count("GDR251") == 1


def test_builder_matches_the_upstream_layouts():
    """Spot checks of the builder against the layouts the upstream tests make."""
    by_id = {(c.source, c.id): c for c in CASES}
    strided = build(by_id[VLLM_NEW, "test_fused_recurrent_packed_decode_matches_reference[bf16-mixedS-gatesS]"])
    qkv = 2 * 4 * 128 + 8 * 128
    assert strided["mixed_qkv"].shape == (32, qkv) and strided["mixed_qkv"].stride() == (qkv + 64, 1)
    assert strided["a"].stride() == strided["b"].stride() == (32, 1)  # halves of a [B, 4*HV] buffer
    assert strided["a"].storage_offset() == 16 and strided["b"].storage_offset() == 0
    assert strided["ssm_state_indices"].tolist() == list(range(1, 30)) + [-1, -1, -1]
    assert strided["initial_state"].shape == (33, 8, 128, 128)
    grid = build(by_id[VLLM_NEW, "test_packed_decode_supports_large_batch_head_grid"])
    assert grid["a"] is grid["b"] and grid["A_log"] is grid["dt_bias"]
    assert grid["ssm_state_indices"].tolist() == [0] * 1024 and grid["initial_state"].shape == (1, 64, 1, 1)
    old = build(by_id[VLLM_OLD, "test_fused_recurrent_packed_decode_matches_reference[fp16-mixedC]"])
    assert old["ssm_state_indices"].tolist() == list(range(29)) + [-1, -1, -1]
    assert old["initial_state"].shape[0] == 32
    pad = build(by_id[SGLANG_KDA, "TestKDAPackedDecode.test_pad_slot"])
    assert pad["ssm_state_indices"].tolist() == [-1, 1, -1, 3, -1, 5, -1, 7]
    assert pad["a"].shape == (8, 16 * 128) and pad["dt_bias"].shape == (16 * 128,)
    assert pad["initial_state"].shape == (12, 16, 128, 128) and pad["initial_state"].dtype == torch.bfloat16


def test_large_grid_call_is_an_error_against_sglang():
    """Why vLLM's calls are checked against vLLM: the large-grid test targets vLLM's split grid. sglang 0.5.23
    launches (NV, B*HV) blocks, and B*HV = 65536 is one past CUDA's grid-y limit, so the same call fails there
    (a real error for that engine, not a false one)."""
    case = next(c for c in CASES if c.id == "test_packed_decode_supports_large_batch_head_grid")
    report = check(case, engine="sglang")
    assert [(d.code, d.message) for d in report.errors] == [
        ("GDR244", "the launch grid needs B*HV = 1024*64 = 65536 > 65535, the CUDA grid limit: the launch fails")]
