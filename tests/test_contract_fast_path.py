"""The contract engine's all-clear fast path for the wrapper checks agrees with running every rule.

`call_plan(rules, variant).clear` is the pass predicates of the variant's error-raising wrapper rules (each
declared beside its check), compiled into one function; when it answers True the engine skips those rules.
The rules stay the source of truth, so:
- the fast path covers exactly the variant's error-raising wrapper rules (a rule without a predicate cannot be
  declared);
- where it answers True, every covered rule finds nothing (soundness), on random near-valid and absurd calls;
- the reports with and without the fast path are identical (codes, messages, fixes, bindings, order);
- healthy calls, including the awkward-but-valid layouts, do take it.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gdr_check import TensorSpec
from gdr_check.base.registry import RULE_SET, findings_of, rules_in_scope
from gdr_check.call.packed_call import TENSOR_ARGUMENTS, CallContext, PackedDecodeCall
from gdr_check.checks.call_plan import call_plan
from gdr_check.checks.contract import _diagnostics
from test_contract_robust import specs as absurd_specs

SETTINGS = dict(deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def test_the_fast_path_covers_exactly_the_raising_wrapper_rules():
    for variant in ("gdn", "kda"):
        plan = call_plan(RULE_SET, variant)
        raising = {r.code for r in rules_in_scope("call") if variant in r.wrapper and r.severity == "error"}
        assert plan.covered == raising
        assert [r.code for r in plan.after_clear] == [r.code for r in plan.rules if r.code not in plan.covered]


def _agree(call: PackedDecodeCall, engine: str) -> bool:
    """Assert that the fast path is sound and changes nothing on this call; return whether it was taken."""
    ctx = CallContext.build(call, engine)
    plan = call_plan(RULE_SET, call.variant)
    clear = plan.clear(ctx)
    if clear:
        for rule in plan.rules:
            if rule.code in plan.covered:
                assert not findings_of(rule.check(ctx)), (rule.code, call)
    fast = [d.to_dict() for d in _diagnostics(ctx, fast_path=True)]
    slow = [d.to_dict() for d in _diagnostics(ctx, fast_path=False)]
    assert fast == slow
    return clear


# -- near-valid calls: a valid call of random geometry, then a few random mutations ---------------------------
def _valid(variant: str, B: int, H: int, G: int, K: int, V: int, S: int, dtype: str, device: str
           ) -> dict[str, TensorSpec]:
    HV = H * G
    gate = HV * K if variant == "kda" else HV
    return {
        "mixed_qkv": TensorSpec.of((B, 2 * H * K + HV * V), dtype, device, storage=1),
        "a": TensorSpec.of((B, gate), dtype, device, storage=2),
        "b": TensorSpec.of((B, HV), dtype, device, storage=3),
        "A_log": TensorSpec.of((HV,), "float32", device, storage=4),
        "dt_bias": TensorSpec.of((gate,), "float32", device, storage=5),
        "initial_state": TensorSpec.of((S, HV, V, K), "float32", device, storage=6),
        "out": TensorSpec.of((B, 1, HV, V), dtype, device, storage=7),
        "ssm_state_indices": TensorSpec.of((B,), "int32", device, storage=8),
    }


def _mutations(spec: TensorSpec, steps: tuple[int, ...]):
    """Every single change of `spec` this test tries: one size or stride moved by a geometry step (1, K, V, HV,
    ...), doubled, halved or zeroed; a size-1 axis added or an axis dropped; another dtype, device or storage."""
    def of(shape, stride=None, dtype=spec.dtype, device=spec.device, storage=spec.storage, offset=spec.offset):
        return TensorSpec.of(shape, dtype, device, stride=stride, storage=storage, offset=offset)

    shape, stride = list(spec.shape), list(spec.stride)
    for axis in range(len(shape)):
        for values, contiguous in ((shape, True), (stride, False)):
            old = values[axis]
            for new in {old * 2, old // 2, 0, *(old + step for step in steps), *(old - step for step in steps)}:
                if new >= 0 and new != old:
                    values[axis] = new
                    yield of(shape) if contiguous else of(shape, stride)  # a resized tensor is contiguous again
                    values[axis] = old
        yield of(shape[:axis] + shape[axis + 1:], stride[:axis] + stride[axis + 1:])
    for axis in range(len(shape) + 1):
        for step in (0, 1, 5):
            yield of(shape[:axis] + [1] + shape[axis:], stride[:axis] + [step] + stride[axis:])
    for dtype in ("bfloat16", "float32", "int64", "uint8"):
        yield of(shape, stride, dtype=dtype)
    for device in ("cpu", "cuda:1", "meta"):
        yield of(shape, stride, device=device)
    yield of(shape, stride, storage=None)
    yield of(shape, stride, storage=7, offset=2)  # inside `out`'s buffer


GEOMETRIES = [(0, 1, 1, 1, 1, 1), (3, 1, 2, 1, 1, 2), (4, 2, 2, 8, 8, 8), (3, 2, 3, 5, 7, 4), (2, 3, 1, 4, 2, 3)]


@pytest.mark.parametrize("variant", ["gdn", "kda"])
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=[",".join(map(str, g)) for g in GEOMETRIES])
def test_fast_path_agrees_with_every_rule_on_every_single_mutation(variant, geometry):
    """Exhaustive over one change to one tensor of a valid call: each pass condition of the fast path is
    needed by some of these (dropping any one of them makes this test fail)."""
    B, H, G, K, V, S = geometry
    valid = _valid(variant, B, H, G, K, V, S, "bfloat16", "cuda:0")
    steps = (1, K, V, H * G, H * G * V, H * K, 2 * H * K)
    for name in TENSOR_ARGUMENTS:
        for spec in _mutations(valid[name], steps):
            call = PackedDecodeCall(**{**valid, name: spec}, scale=K ** -0.5, use_qk_l2norm_in_kernel=True,
                                    variant=variant)
            for engine in ("sglang", "vllm"):
                _agree(call, engine)


@st.composite
def near_valid_calls(draw) -> PackedDecodeCall:
    """A valid call of random geometry with up to three random single changes."""
    variant = draw(st.sampled_from(["gdn", "kda"]))
    H, G, K, V = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 9)), draw(st.integers(1, 9))
    tensors = _valid(variant, draw(st.integers(0, 9)), H, G, K, V, draw(st.integers(1, 9)),
                     draw(st.sampled_from(["bfloat16", "float32"])), draw(st.sampled_from(["cuda:0", "cpu", "meta"])))
    steps = (1, K, V, H * G, H * G * V, 2 * H * K)
    for name in draw(st.lists(st.sampled_from(TENSOR_ARGUMENTS), max_size=3)):
        tensors[name] = draw(st.sampled_from(list(_mutations(tensors[name], steps))))
    return PackedDecodeCall(**tensors, scale=draw(st.sampled_from([K ** -0.5, 0.1, None, -1.0])),
                            use_qk_l2norm_in_kernel=draw(st.booleans()), variant=variant,
                            lower_bound=draw(st.sampled_from([None, -5.0, 1.0])))


@settings(max_examples=300, **SETTINGS)
@given(call=near_valid_calls(), engine=st.sampled_from(["sglang", "vllm"]))
def test_fast_path_agrees_with_every_rule_on_near_valid_calls(call, engine):
    _agree(call, engine)


@settings(max_examples=200, **SETTINGS)
@given(variant=st.sampled_from(["gdn", "kda"]), engine=st.sampled_from(["sglang", "vllm"]),
       tensors=st.lists(absurd_specs(), min_size=8, max_size=8), l2norm=st.booleans())
def test_fast_path_agrees_with_every_rule_on_absurd_calls(variant, engine, tensors, l2norm):
    call = PackedDecodeCall(**dict(zip(TENSOR_ARGUMENTS, tensors, strict=True)), scale=0.1,
                            use_qk_l2norm_in_kernel=l2norm, variant=variant)
    _agree(call, engine)


def test_valid_geometries_take_the_fast_path():
    """Soundness alone would allow a fast path that never fires: every valid geometry must take it."""
    for variant in ("gdn", "kda"):
        for B, H, G, K, V, S in [(0, 1, 1, 1, 1, 1), (8, 16, 2, 128, 128, 9), (3, 2, 3, 5, 7, 4), (1, 4, 1, 64, 32, 2)]:
            call = PackedDecodeCall(**_valid(variant, B, H, G, K, V, S, "bfloat16", "cuda:0"), scale=K ** -0.5,
                                    variant=variant)
            assert _agree(call, "sglang"), (variant, B, H, G, K, V, S)


# -- real torch calls: the clean and awkward layouts, and every mutation of the oracle corpus ------------------
torch = pytest.importorskip("torch")
from contract_calls import awkward_call, call_for, mutated, mutation_names, qwen_gdn_call, qwen_kda_call  # noqa: E402
from gdr_check.checks.contract import describe_call  # noqa: E402


def _live(variant: str, call: dict) -> PackedDecodeCall:
    tensors = {name: call[name] for name in TENSOR_ARGUMENTS}
    return describe_call(variant, tensors, call["scale"], call["use_qk_l2norm_in_kernel"], call.get("lower_bound"),
                         read_values=False)


@pytest.mark.parametrize("variant", ["gdn", "kda"])
def test_clean_and_awkward_torch_calls_take_the_fast_path(variant):
    calls = [call_for(variant), awkward_call(variant), awkward_call(variant, index_dtype=torch.int64,
                                                                   pool="every-other"),
             qwen_gdn_call() if variant == "gdn" else qwen_kda_call()]
    for call in calls:
        assert _agree(_live(variant, call), "sglang")


@pytest.mark.parametrize("variant", ["gdn", "kda"])
def test_fast_path_agrees_on_every_mutation_of_the_oracle_corpus(variant):
    for name in mutation_names(variant):
        for engine in ("sglang", "vllm"):
            _agree(_live(variant, mutated(variant, name)), engine)
