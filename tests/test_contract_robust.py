"""Arbitrary (even absurd) TensorSpec calls never crash the contract engine, and every report keeps the
wrapper order: wrapper diagnostics first, by their position in the wrapper, then the unchecked ones by code.
Torch-free: TensorSpecs only."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gdr_check import TensorSpec, check_kda_packed_decode, check_packed_decode
from gdr_check.checks import RULES

NAMES = ("mixed_qkv", "a", "b", "A_log", "dt_bias", "initial_state", "out", "ssm_state_indices")


@st.composite
def specs(draw):
    ndim = draw(st.integers(0, 6))
    shape = draw(st.lists(st.integers(0, 9), min_size=ndim, max_size=ndim))
    stride = draw(st.lists(st.integers(0, 50), min_size=ndim, max_size=ndim))
    numel = 1
    for size in shape:
        numel *= size
    values = None
    if numel <= 40 and draw(st.booleans()):
        values = draw(st.lists(st.integers(-3, 20), min_size=numel, max_size=numel))
    return TensorSpec.of(
        shape, draw(st.sampled_from(["bfloat16", "float32", "int32", "int64", "uint8", "bool", "float16"])),
        draw(st.sampled_from(["cuda:0", "cuda:0", "cuda:0", "cpu", "meta", "cuda:1"])),
        stride=stride, values=values, storage=draw(st.sampled_from([None, 1, 2])), offset=draw(st.integers(0, 5)))


@settings(max_examples=200, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(variant=st.sampled_from(["gdn", "kda"]), engine=st.sampled_from(["sglang", "vllm"]),
       tensors=st.lists(specs(), min_size=8, max_size=8),
       scale=st.one_of(st.none(), st.floats(), st.integers(-3, 3), st.text(max_size=2), st.booleans()),
       l2norm=st.booleans(), lower_bound=st.one_of(st.none(), st.floats(), st.booleans()))
def test_any_call_gives_a_well_formed_report_in_wrapper_order(variant, engine, tensors, scale, l2norm, lower_bound):
    kwargs = dict(zip(NAMES, tensors, strict=True), scale=scale, use_qk_l2norm_in_kernel=l2norm, engine=engine)
    if variant == "gdn":
        report = check_packed_decode(**kwargs)
    else:
        report = check_kda_packed_decode(**kwargs, lower_bound=lower_bound)
    positions = []
    seen_unchecked = False
    for diagnostic in report:
        rule = RULES[diagnostic.code]
        assert diagnostic.severity in ("error", "warning", "info")
        assert diagnostic.wrapper == bool(rule.wrapper)
        if diagnostic.wrapper:
            assert not seen_unchecked, report.codes()
            positions.append(rule.wrapper[variant])
        else:
            seen_unchecked = True
    assert positions == sorted(positions), report.codes()
    unchecked = [d.code for d in report if not d.wrapper]
    assert unchecked == sorted(unchecked)
    assert report.ok == (not report.errors)
