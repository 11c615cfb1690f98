"""The runtime guard's inputs (issue 11): whatever is passed to `check_packed_decode` /
`check_kda_packed_decode`, the guard returns a report (GDR228 naming the argument and what it is, GDR245 for an
absurd scale) and never raises AttributeError, RuntimeError or OverflowError from inside the library."""

from __future__ import annotations

import warnings

import pytest

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")

from contract_calls import gdn_call, kda_call

from gdr_check import check_kda_packed_decode, check_packed_decode


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


@pytest.mark.parametrize("scale,shown", [
    (float("nan"), "nan"), (float("inf"), "inf"), (1e308, "1e+308"), (10**400, "'an integer of at least 400 digits'"),
    (-1.0, "-1.0"), ("0.5", "'0.5'"), (None, "None"),
])
def test_absurd_scales_are_gdr245(scale, shown):
    call = gdn_call()
    call["scale"] = scale
    report = check_packed_decode(**call)
    messages = [d.message for d in report.diagnostics if d.code == "GDR245"]
    assert messages and messages[0].startswith(f"`scale` is {shown}; the kernel needs a positive float"), messages


def test_a_valid_call_is_unaffected():
    assert not [d for d in check_packed_decode(**gdn_call()).diagnostics if d.severity == "error"]
