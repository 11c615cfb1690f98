"""One root cause, never a harmful fix: a fix applied to a wrong call never gives a call that passes every check
while it is still wrong (different from the true call the wrong one was derived from).

The wrong calls are the layouts the engines' users hit: a pool allocated [S, HV, K, V] (K != V, which makes the
wrapper read V and K swapped and fail on a correct `out`), a pool flattened to (S, HV*V*K), and `out` without
its token axis. Every fix that names a concrete tensor operation is applied mechanically.
"""

from __future__ import annotations

import dataclasses
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from gdr_check.base.tensor_spec import TensorSpec
from gdr_check.checks import PackedDecodeCall, run_contract

NAMES = ("mixed_qkv", "a", "b", "A_log", "dt_bias", "initial_state", "out", "ssm_state_indices")
DTYPES = {"mixed_qkv": "bfloat16", "a": "bfloat16", "b": "float32", "A_log": "float32", "dt_bias": "float32",
          "initial_state": "float32", "out": "bfloat16", "ssm_state_indices": "int32"}


def true_shapes(B: int, H: int, G: int, K: int, V: int, S: int) -> dict[str, tuple[int, ...]]:
    HV = H * G
    return {"mixed_qkv": (B, 2 * H * K + HV * V), "a": (B, HV), "b": (B, HV), "A_log": (HV,), "dt_bias": (HV,),
            "initial_state": (S, HV, V, K), "out": (B, 1, HV, V), "ssm_state_indices": (B,)}


def build(shapes: dict[str, tuple[int, ...]], K: int) -> PackedDecodeCall:
    B = shapes["ssm_state_indices"][0]
    tensors = {name: TensorSpec.of(shape, DTYPES[name], "cuda:0", storage=number,
                                   values=tuple(range(1, B + 1)) if name == "ssm_state_indices" else None)
               for number, (name, shape) in enumerate(shapes.items(), 1)}
    return PackedDecodeCall(variant="gdn", scale=K ** -0.5, use_qk_l2norm_in_kernel=True, **tensors)


def errors(shapes: dict[str, tuple[int, ...]], K: int):
    return [d for d in run_contract(build(shapes, K)) if d.severity == "error"]


_NUMBERS = r"\(?(\d+(?:, \d+)*)\)?"


def apply(fix: str, shapes: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]] | None:
    """The shapes after the fix's concrete operation, or None when the fix names none."""
    changed = dict(shapes)
    if "`initial_state.transpose(-1, -2).contiguous()`" in fix:
        state = shapes["initial_state"]
        changed["initial_state"] = (*state[:-2], state[-1], state[-2])
    elif view := re.search(r"`initial_state\.view\((\d+(?:, \d+)*)\)`", fix):
        changed["initial_state"] = tuple(int(n) for n in view.group(1).split(", "))
    elif allocate := re.search(r"`torch\.empty\((\d+(?:, \d+)*)\)`", fix):
        target = "out" if "`out`" in fix or "allocate `out`" in fix else None
        if target is None:
            return None
        changed[target] = tuple(int(n) for n in allocate.group(1).split(", "))
    else:
        return None
    return changed


dims = st.fixed_dictionaries({
    "B": st.integers(1, 6), "H": st.sampled_from([1, 2, 4]), "G": st.sampled_from([1, 2, 4]),
    "K": st.sampled_from([8, 16, 32, 64, 128]), "V": st.sampled_from([8, 16, 32, 64, 128]),
    "extra_slots": st.integers(0, 4),
})


def wrong_calls(d: dict[str, int]) -> dict[str, dict[str, tuple[int, ...]]]:
    B, H, G, K, V = d["B"], d["H"], d["G"], d["K"], d["V"]
    S = B + 1 + d["extra_slots"]  # slots 1..B: sglang reserves slot 0 for padding
    HV = H * G
    true = true_shapes(B, H, G, K, V, S)
    return {
        "transposed pool": {**true, "initial_state": (S, HV, K, V)},
        "flattened pool": {**true, "initial_state": (S, HV * V * K)},
        "out without token axis": {**true, "out": (B, HV, V)},
    }


@settings(max_examples=150, deadline=None)
@given(dims)
def test_no_fix_makes_a_wrong_call_pass_while_still_wrong(d):
    true = true_shapes(d["B"], d["H"], d["G"], d["K"], d["V"], d["B"] + 1 + d["extra_slots"])
    assert errors(true, d["K"]) == []
    for label, wrong in wrong_calls(d).items():
        if wrong == true:
            continue
        found = errors(wrong, d["K"])
        if not found:  # a wrong call the checks cannot tell from a right one (a transposed square pool)
            assert label == "transposed pool" and d["K"] == d["V"]
            continue
        for diagnostic in found:
            for fix in diagnostic.fixes:
                fixed = apply(fix, wrong)
                if fixed is None:
                    continue
                assert errors(fixed, d["K"]) or fixed == true, (label, fix)


@settings(max_examples=80, deadline=None)
@given(dims)
def test_the_transposed_pool_gets_the_transpose_and_never_an_out_resize(d):
    B, H, G, K, V = d["B"], d["H"], d["G"], d["K"], d["V"]
    if K == V:
        return
    S, HV = B + 1 + d["extra_slots"], H * G
    wrong = wrong_calls(d)["transposed pool"]
    found = errors(wrong, K)
    fixes = [fix for diagnostic in found for fix in diagnostic.fixes]
    if not found:
        return
    if found[0].code == "GDR216":  # the wrapper took V and K swapped and failed on a correct `out`
        # every error the swap causes (out, width, Q size, heads) names the one cause
        assert set(fixes) == {
            f"the pool is transposed: it was allocated [S, HV, K, V] = ({S}, {HV}, {K}, {V}) while the kernel "
            f"reads [S, HV, V, K], so the wrapper takes V={K}, K={V} and `out` (HV={HV}, V={V}) is right: "
            f"allocate the pool as ({S}, {HV}, {V}, {K}), or convert it once with "
            f"`initial_state.transpose(-1, -2).contiguous()` (a copy: keep it as the pool, the kernel updates "
            f"it in place)"}
    assert not any("`out` as" in fix or "torch.empty" in fix for fix in fixes), fixes


def test_the_transposed_pool_of_the_issue():
    # B=4, H=2, HV=4, K=16, V=8: the wrapper reads V=16, K=8, and the width 2*2*16 + 4*8 = 96 still splits.
    wrong = {**true_shapes(4, 2, 2, 16, 8, 8), "initial_state": (8, 4, 16, 8)}
    [diagnostic] = errors(wrong, 16)
    assert diagnostic.code == "GDR216" and diagnostic.location.argument == "initial_state"
    assert "`initial_state.transpose(-1, -2).contiguous()`" in diagnostic.fixes[0]
    assert "(8, 4, 8, 16)" in diagnostic.fixes[0]


def test_the_flattened_pool_gets_the_view_with_its_numbers():
    wrong = {**true_shapes(4, 2, 2, 16, 8, 5), "initial_state": (5, 4 * 8 * 16)}
    [diagnostic] = errors(wrong, 16)
    assert diagnostic.code == "GDR212"
    assert diagnostic.fixes == ["the pool is flattened to (5, 512) = (S, HV*V*K) with HV=4 (the gates), V=8 "
                                "(`out`), K=16: pass `initial_state.view(5, 4, 8, 16)` (a view of the same memory)"]


def test_a_16_bit_A_log_is_caught_with_the_engines_dtype():
    from gdr_check.engines.profiles import profile_for

    shapes = true_shapes(4, 2, 2, 16, 8, 5)
    call = build(shapes, 16)
    call = dataclasses.replace(call, A_log=TensorSpec.of((4,), "bfloat16", "cuda:0", storage=4))
    found = [d for d in run_contract(call) if d.code == "GDR265"]
    assert [(d.severity, d.message, d.fixes) for d in found] == [(
        "warning", f"`A_log` is bfloat16: {profile_for('sglang').label} keeps it in float32",
        [f"keep `A_log` in float32 as {profile_for('sglang').label} does: `A_log.float()` once at load"])]
