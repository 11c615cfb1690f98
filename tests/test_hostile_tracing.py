"""The guard, the library and `call` under tracing and aliasing: fake tensors (`FakeTensorMode`, the tracing
`torch.compile` does) and meta tensors get the shape checks and GDR260 (the index values were not read), never a
data-dependent exception; a pool whose slot axis aliases memory (stride 0, `expand`, a slot stride smaller
than one slot) is GDR259, naming the stride, in the library, the guard and a recording checked by `call`."""

from __future__ import annotations

import json
import sys
import types
import warnings

import pytest

import gdr_check
from gdr_check import check_kda_packed_decode, check_packed_decode
from hostile_corpus import assert_outcome, run_subprocess

torch = pytest.importorskip("torch")
fake_tensor = pytest.importorskip("torch._subclasses.fake_tensor")

from contract_calls import gdn_call, kda_call  # noqa: E402

SLOT = 4 * 8 * 8  # HV * V * K of the contract calls' pool: the elements of one slot
TARGET = "gdr_check_test_tracing_target:fused_recurrent_gated_delta_rule_packed_decode"


def _expanded(pool):
    return pool[:1].expand(pool.shape[0], *pool.shape[1:])


def _half_pitch(pool):
    return torch.as_strided(pool, pool.shape, (pool.stride(0) // 2, *pool.stride()[1:]))


def _pitch_one(pool):
    return torch.as_strided(pool, pool.shape, (1, 64, 8, 1))


ALIASING = [(_expanded, 0), (_half_pitch, SLOT // 2), (_pitch_one, 1)]


def _message(pitch: int) -> str:
    return (f"`initial_state` slot stride `stride(0)` is {pitch}, less than the {SLOT} elements of one slot: "
            "distinct slots share memory")


def _errors(report):
    return [(d.code, d.message) for d in report.diagnostics if d.severity == "error"]


@pytest.mark.parametrize("variant", ["gdn", "kda"])
@pytest.mark.parametrize("alias,pitch", ALIASING, ids=["expand", "half-pitch", "pitch-1"])
def test_a_pool_whose_slots_alias_is_gdr259_in_the_library(variant, alias, pitch):
    call = gdn_call() if variant == "gdn" else kda_call()
    call["initial_state"] = alias(call["initial_state"])
    report = (check_packed_decode if variant == "gdn" else check_kda_packed_decode)(**call)
    assert _errors(report) == [("GDR259", _message(pitch))]


def test_padded_and_sliced_pools_do_not_alias():
    """A slot pitch larger than a slot (page padding) and every other slot (`pool[::2]`) are fine."""
    for pool in (torch.zeros(8, 2 * SLOT)[:, :SLOT].view(8, 4, 8, 8), torch.zeros(16, 4, 8, 8)[::2]):
        assert _errors(check_packed_decode(**dict(gdn_call(), initial_state=pool))) == []


def _fake(call, mode):
    return {name: mode.from_tensor(value) if isinstance(value, torch.Tensor) else value for name, value in call.items()}


NOT_READ = ("GDR260", "`ssm_state_indices` is a fake tensor (traced): its values were not read, only shapes, strides "
                      "and dtypes were checked")


@pytest.mark.parametrize("variant", ["gdn", "kda"])
def test_fake_tensors_get_shape_checks_and_a_note_never_an_exception(variant):
    check = check_packed_decode if variant == "gdn" else check_kda_packed_decode
    mode = fake_tensor.FakeTensorMode()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not even the data-pointer deprecation warning: no address is asked for
        with mode:
            clean = check(**_fake(gdn_call() if variant == "gdn" else kda_call(), mode))
            aliased = _fake(gdn_call() if variant == "gdn" else kda_call(), mode)
            aliased["initial_state"] = _expanded(aliased["initial_state"])
            broken = check(**aliased)
            wrong = _fake(gdn_call() if variant == "gdn" else kda_call(), mode)
            wrong["a"] = wrong["a"][:, :3]
            misshaped = check(**wrong)
    assert _errors(clean) == [] and (NOT_READ[0], NOT_READ[1]) in [(d.code, d.message) for d in clean.diagnostics]
    assert _errors(broken) == [("GDR259", _message(0))]
    assert [code for code, _ in _errors(misshaped)] and "GDR260" in misshaped.codes()


def test_meta_tensors_get_the_note():
    report = check_packed_decode(**gdn_call(device="meta"))
    assert ("GDR260", "`ssm_state_indices` is a tensor on the meta device: its values were not read, only shapes, "
                      "strides and dtypes were checked") in [(d.code, d.message) for d in report.diagnostics]
    assert "GDR260" not in check_packed_decode(**gdn_call()).codes()  # real indices are read and checked


def _engine(monkeypatch):
    module = types.ModuleType(TARGET.split(":")[0])

    def fused_recurrent_gated_delta_rule_packed_decode(mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out,
                                                       ssm_state_indices, use_qk_l2norm_in_kernel=False):
        return "ran"

    module.fused_recurrent_gated_delta_rule_packed_decode = fused_recurrent_gated_delta_rule_packed_decode
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return module


def test_the_guard_refuses_an_aliased_pool_and_checks_fake_calls(monkeypatch):
    module = _engine(monkeypatch)
    call = gdn_call()
    call["initial_state"] = _expanded(call["initial_state"])
    with gdr_check.guard(engine="sglang", mode="raise", targets=[TARGET]):
        with pytest.raises(gdr_check.GuardError, match="GDR259"):
            module.fused_recurrent_gated_delta_rule_packed_decode(**call)
    with gdr_check.guard(engine="sglang", mode="record", targets=[TARGET]) as guard:
        mode = fake_tensor.FakeTensorMode()
        with mode:
            assert module.fused_recurrent_gated_delta_rule_packed_decode(**_fake(gdn_call(), mode)) == "ran"
            aliased = _fake(gdn_call(), mode)
            aliased["initial_state"] = _expanded(aliased["initial_state"])
            assert module.fused_recurrent_gated_delta_rule_packed_decode(**aliased) == "ran"
    assert [d.code for d in guard.diagnostics if d.severity == "error"] == ["GDR259"]


def test_call_reports_a_recorded_aliased_pool(tmp_path):
    """A recording (what `capture()` writes) of a call whose pool has slot stride 0."""
    call = gdn_call()
    arguments = {}
    for name, value in call.items():
        if isinstance(value, torch.Tensor):
            spec = {"shape": list(value.shape), "stride": list(value.stride()), "dtype": str(value.dtype)[6:],
                    "device": "cuda:0"}
            if name == "initial_state":
                spec["stride"][0] = 0
            if name == "ssm_state_indices":
                spec["values"] = value.tolist()
            arguments[name] = spec
    document = {"schema_version": 1, "kind": "gdr-check-capture",
                "calls": [{"index": 0, "call": {"variant": "gdn", "scale": call["scale"], **arguments}}]}
    (tmp_path / "rec.json").write_text(json.dumps(document, indent=1))
    outcome = run_subprocess("call", "rec.json", "--output-format", "concise", cwd=tmp_path)
    assert_outcome("concise", outcome, exit_code=1)
    assert f"error[GDR259] {_message(0)}" in outcome.stdout, outcome.stdout
