"""The runtime guard's inputs: whatever is passed to `check_packed_decode` /
`check_kda_packed_decode`, the guard returns a report (GDR228 naming the argument and what it is, GDR245 for an
absurd scale) and never raises AttributeError, RuntimeError or OverflowError from inside the library."""

from __future__ import annotations

import warnings

import pytest

from gdr_check import check_kda_packed_decode, check_packed_decode

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")

from contract_calls import gdn_call, kda_call  # noqa: E402


def _nested() -> torch.Tensor:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.nested.nested_tensor([torch.zeros(3), torch.zeros(4)])


NOT_TENSORS = [
    (lambda t: None, "None"),
    (lambda t: [1, 2], "a value of type `list`"),
    (lambda t: "abc", "a value of type `str`"),
    (lambda t: np.zeros(t.shape, dtype=np.float32), "a value of type `numpy.ndarray`"),
    (lambda t: t.to_sparse(), "a sparse_coo tensor"),
    (lambda t: _nested(), "a nested tensor"),
    (lambda t: 7, "a value of type `int`"),
]


@pytest.mark.parametrize("make,kind", NOT_TENSORS, ids=[kind for _, kind in NOT_TENSORS])
@pytest.mark.parametrize("argument", ["mixed_qkv", "a", "initial_state", "ssm_state_indices"])
@pytest.mark.parametrize("variant", ["gdn", "kda"])
def test_an_argument_that_is_not_a_dense_tensor_is_gdr228(variant, argument, make, kind):
    call = gdn_call() if variant == "gdn" else kda_call()
    call[argument] = make(call[argument])
    report = (check_packed_decode if variant == "gdn" else check_kda_packed_decode)(**call)
    assert [(d.code, d.message) for d in report.diagnostics] == [
        ("GDR228", f"`{argument}` is {kind}, not a dense strided tensor")]


def test_every_bad_argument_is_named_at_once():
    call = gdn_call()
    call["a"], call["out"] = None, [0.0]
    report = check_packed_decode(**call)
    assert [d.message for d in report.diagnostics] == [
        "`a` is None, not a dense strided tensor", "`out` is a value of type `list`, not a dense strided tensor"]


@pytest.mark.parametrize("scale,shown,problem", [
    (float("nan"), "nan", "not a number"), (float("inf"), "inf", "above 1e+30"), (1e308, "1e+308", "above 1e+30"),
    (10**400, "'an integer of at least 400 digits'", "above 1e+30"), (-1.0, "-1.0", "not positive"),
    ("0.5", "'0.5'", "not a number"), (None, "None", "not a number"),
    # (NumPy's own repr: `np.float32(0.25)` from NumPy 2, `0.25` before)
    (np.float32(0.25), repr(np.float32(0.25)), "a numpy.float32, not a Python float"),
    (np.int64(1), repr(np.int64(1)), "a numpy.int64, not a Python float"),
    (np.float32("nan"), repr(np.float32("nan")), "not a number"),
])
def test_absurd_scales_are_gdr245(scale, shown, problem):
    call = gdn_call()
    call["scale"] = scale
    report = check_packed_decode(**call)
    messages = [d.message for d in report.diagnostics if d.code == "GDR245"]
    assert messages and messages[0].startswith(f"`scale` is {shown}; {problem}"), messages


def test_a_valid_call_is_unaffected():
    assert not [d for d in check_packed_decode(**gdn_call()).diagnostics if d.severity == "error"]


ALL_TENSOR_ARGUMENTS = ["mixed_qkv", "a", "b", "A_log", "dt_bias", "initial_state", "out", "ssm_state_indices"]


@pytest.mark.parametrize("argument", ALL_TENSOR_ARGUMENTS)
@pytest.mark.parametrize("variant", ["gdn", "kda"])
def test_a_quantized_tensor_in_any_argument_is_gdr228(variant, argument):
    call = gdn_call() if variant == "gdn" else kda_call()
    dtype = torch.qint32 if argument == "ssm_state_indices" else torch.qint8
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch deprecates creating quantized tensors; engines may still pass one
        call[argument] = torch.quantize_per_tensor(call[argument].float(), 0.1, 0, dtype)
    report = (check_packed_decode if variant == "gdn" else check_kda_packed_decode)(**call)
    assert [(d.code, d.message) for d in report.diagnostics] == [
        ("GDR228", f"`{argument}` is a quantized tensor, not a dense strided tensor")]


@pytest.mark.parametrize("argument", ALL_TENSOR_ARGUMENTS)
def test_a_meta_tensor_is_gdr228_for_a_call_about_to_run(argument):
    from gdr_check.kernel import device_guard

    call = kda_call()
    call[argument] = call[argument].to("meta")
    names = ("mixed_qkv", "a", "b", "A_log", "dt_bias", "scale", "initial_state", "out", "ssm_state_indices",
             "use_qk_l2norm_in_kernel", "lower_bound")
    verdict = device_guard.shape_verdict("kda", tuple(call.get(n) for n in names), "sglang")
    assert [(d.code, d.message) for d in verdict.errors] == [
        ("GDR228", f"`{argument}` is a meta tensor (shapes only, no data to run on), not a dense strided tensor")]
    assert verdict.pool_slots is None  # refused: no pool, nothing is launched
    # `check_packed_decode` runs nothing: there a meta tensor is a shape-only stand-in (on another device than
    # the rest: the wrapper's device check).
    assert [d.code for d in check_kda_packed_decode(**call).diagnostics if d.severity == "error"] == ["GDR209"]


NOT_FINITE = "; the KDA safe gate needs a finite negative float, or None to turn it off"


@pytest.mark.parametrize("bound,shown", [
    (float("nan"), "nan"), (float("inf"), "inf"), (float("-inf"), "-inf"), (1e308, "1e+308"), (-1e31, "-1e+31"),
    (-(10**400), "a negative integer of at least 400 digits"), ("-5", "'-5'"), (True, "True"), (1j, "1j"),
    ([-5.0] * 40, "[-5.0, -5.0, -5.0, -5.0, -5.0, -5.0, -5.0, -5.0, -5.0, -5..."),
])
def test_a_lower_bound_that_is_not_a_finite_number_is_gdr257(bound, shown):
    call = kda_call()
    call["lower_bound"] = bound
    report = check_kda_packed_decode(**call)
    assert [(d.code, d.severity, d.message) for d in report.diagnostics if d.code in ("GDR254", "GDR257")] == [
        ("GDR257", "error", f"`lower_bound` is {shown}{NOT_FINITE}")]


def test_a_tensor_lower_bound_is_gdr257():
    call = kda_call()
    call["lower_bound"] = torch.tensor(-5.0)
    report = check_kda_packed_decode(**call)
    assert [d.message for d in report.diagnostics if d.code == "GDR257"] == [
        f"`lower_bound` is tensor(-5.){NOT_FINITE}"]


@pytest.mark.parametrize("bound,codes", [(-5.0, []), (-1e30, []), (None, []), (-3, []), (0.0, ["GDR254"]),
                                         (2, ["GDR254"])])
def test_a_finite_lower_bound_is_range_checked_by_sign_only(bound, codes):
    call = kda_call()
    call["lower_bound"] = bound
    report = check_kda_packed_decode(**call)
    assert [d.code for d in report.diagnostics if d.code in ("GDR254", "GDR257")] == codes
