"""The real sglang 0.5.23 wrappers are the oracle for the wrapper checks: messages and order.

The wrappers are loaded from sglang's own `fused_recurrent.py` (via `gdr_check.kernel.engine_kernels`), with the
module-level Triton kernels replaced by a recorder, so a call that passes every check "launches" without
Triton or a GPU. For every call, bad or good:

    the wrapper raises ValueError(M)  <=>  our first error is a wrapper diagnostic whose message is M
    the wrapper raises ZeroDivisionError (K = 0)  <=>  our first error is GDR227
    the wrapper launches  =>  we report no wrapper-check error, and infer the H, HV, K, V it launches with

Source: $GDR_CHECK_SGLANG_PATH (a wheel, an unpacked tree or the file), else the repository's git-ignored
`.sglang/` (an unpacked `src/` tree or a wheel). The module is skipped when neither is there.
GDR_ORACLE_EXAMPLES=N runs the random test with N fresh (not derandomized) examples per variant.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from contract_calls import call_for, check, mutated, mutation_names, touched  # noqa: E402
from gdr_check.call.packed_call import CallContext  # noqa: E402
from gdr_check.checks.contract import describe_call  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
ENV = "GDR_CHECK_SGLANG_PATH"
KERNELS = ("fused_recurrent_gated_delta_rule_packed_decode_kernel", "fused_recurrent_kda_packed_decode_kernel")


def _source() -> str | None:
    if os.environ.get(ENV):
        return os.environ[ENV]
    local = REPO / ".sglang"
    if (local / "src" / "sglang").is_dir():
        return str(local / "src")
    wheels = sorted(local.glob("sglang-*.whl"))
    return str(wheels[-1]) if wheels else None


class _Launch:
    """Stands in for a `@triton.jit` kernel: `kernel[grid](**kwargs)` records the launch."""

    def __init__(self) -> None:
        self.launches: list[tuple[tuple, dict]] = []

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.launches.append((tuple(grid), kwargs))

        return launch


@pytest.fixture(scope="module")
def wrappers():
    """{"gdn": fn, "kda": fn} with the kernels stubbed; restored afterwards (the module is shared)."""
    source = _source()
    if source is None:
        pytest.skip(f"no sglang 0.5.23 source: set {ENV} to a wheel or tree, or put one under .sglang/")
    try:
        from gdr_check.kernel.engine_kernels import load_sglang_packed_decode
    except ImportError as exc:  # pragma: no cover - the loader ships with the package
        pytest.skip(f"sglang loader unavailable: {exc}")
    try:
        gdn, kda = load_sglang_packed_decode(source)
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    module_globals = getattr(gdn, "__wrapped__", gdn).__globals__
    saved = {name: module_globals[name] for name in KERNELS}
    stubs = {name: _Launch() for name in KERNELS}
    module_globals.update(stubs)
    try:
        yield {"gdn": gdn, "kda": kda, "stubs": stubs}
    finally:
        module_globals.update(saved)


def _run_wrapper(fns, variant: str, call: dict):
    fn = fns[variant]
    stub = fns["stubs"][KERNELS[0 if variant == "gdn" else 1]]
    before = len(stub.launches)
    args = dict(call)
    if variant == "gdn":
        args.pop("lower_bound", None)
    try:
        fn(**args)
    except ValueError as exc:
        return "ValueError", str(exc)
    except ZeroDivisionError as exc:
        return "ZeroDivisionError", str(exc)
    assert len(stub.launches) == before + 1, "the wrapper returned without launching"
    return "launched", stub.launches[-1]


def assert_agrees(fns, variant: str, call: dict) -> str:
    """The equivalence above, for one call; returns the wrapper outcome kind."""
    kind, detail = _run_wrapper(fns, variant, call)
    report = check(variant, call)
    errors = report.errors
    if kind == "ValueError":
        assert errors, f"the wrapper raised {detail!r}; we report no error"
        first = errors[0]
        assert first.wrapper, (first.code, first.message, detail)
        assert first.message == detail, (first.code, first.message, detail)
        # Nothing before the first error is an error, and every wrapper error comes before the rest.
        assert report.diagnostics.index(first) == min(
            i for i, d in enumerate(report.diagnostics) if d.severity == "error")
        with pytest.raises(ValueError) as raised:
            report.raise_for_errors()
        assert str(raised.value) == detail
    elif kind == "ZeroDivisionError":
        assert errors and errors[0].code == "GDR227", [(d.code, d.message) for d in errors]
    else:
        wrapper_errors = [d for d in errors if d.wrapper]
        assert not wrapper_errors, [(d.code, d.message) for d in wrapper_errors]
        _grid, launch = detail
        ctx = CallContext.build(describe_call(
            variant, {n: call[n] for n in ("mixed_qkv", "a", "b", "A_log", "dt_bias", "initial_state", "out",
                                          "ssm_state_indices")},
            call["scale"], call["use_qk_l2norm_in_kernel"], call.get("lower_bound")))
        assert (ctx.H, ctx.HV, ctx.K, ctx.V) == (launch["H"], launch["HV"], launch["K"], launch["V"])
    return kind


# -- the corpus: each mutation, pairs and triples of mutations on different arguments ------------------------
def _corpus(variant: str) -> list[tuple[str, ...]]:
    names = mutation_names(variant)
    single = [(n,) for n in names]
    pairs = [p for p in itertools.combinations(names, 2) if not (touched(variant, p[0]) & touched(variant, p[1]))]
    # A deterministic spread of pairs and triples (every 7th pair, every 97th triple) keeps the run short.
    triples = [t for t in itertools.combinations(names, 3)
               if len(frozenset().union(*(touched(variant, n) for n in t))) == sum(len(touched(variant, n)) for n in t)]
    return single + pairs[::7] + triples[::97]


@pytest.mark.parametrize("variant", ["gdn", "kda"])
def test_every_mutation_and_combinations_agree_with_the_wrapper(wrappers, variant):
    corpus = _corpus(variant)
    kinds = {}
    for names in corpus:
        kinds[names] = assert_agrees(wrappers, variant, mutated(variant, *names))
    # Each single mutation makes the wrapper fail (the corpus is all bad calls) ...
    assert all(kinds[(n,)] != "launched" for n in mutation_names(variant))
    # ... and the corpus is large: every mutation plus many combinations.
    assert len(corpus) >= 80, len(corpus)


@pytest.mark.parametrize("variant", ["gdn", "kda"])
def test_each_single_mutation_hits_the_wrapper_check_we_name(wrappers, variant):
    """Per mutation, the wrapper's message equals the message of the one error we report for it."""
    for name in mutation_names(variant):
        call = mutated(variant, name)
        kind, message = _run_wrapper(wrappers, variant, call)
        errors = check(variant, call).errors
        assert len(errors) == 1, (name, [(d.code, d.message) for d in errors])
        if kind == "ValueError":
            assert errors[0].message == message, name


@pytest.mark.parametrize("variant", ["gdn", "kda"])
def test_clean_and_awkward_calls_launch_and_are_clean(wrappers, variant):
    from contract_calls import awkward_call, qwen_gdn_call, qwen_kda_call

    qwen = qwen_gdn_call if variant == "gdn" else qwen_kda_call
    calls = [call_for(variant), awkward_call(variant), awkward_call(variant, index_dtype=torch.int64,
                                                                    pool="every-other"),
             qwen(), qwen(B=1, device="cpu", S=2)]
    for call in calls:
        assert assert_agrees(wrappers, variant, call) == "launched"
        assert check(variant, call).ok


def test_the_stub_is_restored_and_the_oracle_can_disagree(wrappers):
    """Guard against a vacuous oracle: a wrong expectation is caught."""
    call = mutated("gdn", "A_log-kimi-4d")
    kind, message = _run_wrapper(wrappers, "gdn", call)
    assert (kind, message) == ("ValueError", "`A_log`/`dt_bias` must be 1D tensors.")
    bad = mutated("gdn", "A_log-kimi-4d", "mixed_qkv-transposed")  # the wrapper stops at check 2
    assert _run_wrapper(wrappers, "gdn", bad) == ("ValueError", "`mixed_qkv` must be contiguous in the last dim.")
    assert check("gdn", bad).errors[1].message == message  # we also report check 5, after check 2


# -- hypothesis: random shapes, strides, ranks and devices for every argument --------------------------------
def _contiguous(shape):
    stride, step = [], 1
    for size in reversed(shape):
        stride.append(step)
        step *= max(size, 1)
    return stride[::-1]


def _tensor(draw, shape, dtype, perturb: bool):
    """A tensor of `shape`, in a valid layout (row or slot pitch padded), or when `perturb` is set
    re-ranked, resized, re-strided or moved to the meta device."""
    shape = list(shape)
    stride = _contiguous(shape)
    if len(shape) in (2, 4) and draw(st.booleans()):  # valid: padded row / slot pitch
        stride[0] += draw(st.integers(1, 5))
    device = "cpu"
    if perturb:
        op = draw(st.sampled_from(["insert1", "drop", "resize", "resize", "resize", "flatten", "stride", "stride",
                                   "meta"]))
        if op == "insert1":
            shape.insert(draw(st.integers(0, len(shape))), 1)
        elif op == "drop" and shape:
            shape.pop(draw(st.integers(0, len(shape) - 1)))
        elif op == "resize" and shape:
            i = draw(st.integers(0, len(shape) - 1))
            shape[i] = max(0, shape[i] + draw(st.sampled_from([-1, 1, 2, shape[i] or 1])))
        elif op == "flatten":
            n = 1
            for size in shape:
                n *= size
            shape = [n]
        elif op == "meta":
            device = "meta"
        stride = _contiguous(shape)
        if (op == "stride" or draw(st.integers(0, 3)) == 0) and shape:
            i = draw(st.integers(0, len(shape) - 1))
            stride[i] = draw(st.sampled_from([0, 1, 2, stride[i] + 1, 2 * stride[i]]))
    return torch.empty_strided(tuple(shape), tuple(stride), dtype=dtype, device=device)


TENSORS = ("mixed_qkv", "a", "b", "A_log", "dt_bias", "initial_state", "out", "ssm_state_indices")


@st.composite
def random_calls(draw, variant):
    b = draw(st.integers(0, 4))
    h = draw(st.integers(1, 3))
    hv = h * draw(st.integers(1, 3))
    if variant == "kda" and draw(st.booleans()):
        hv = h
    k = draw(st.integers(1, 9))
    v = draw(st.integers(1, 9))  # V = 0 makes the wrapper divide by zero after its checks (BV = 0)
    s = draw(st.integers(1, 4))
    count = draw(st.sampled_from([0, 1, 1, 1, 1, 2, 3]))
    bad = set(draw(st.lists(st.sampled_from(TENSORS), min_size=count, max_size=count)))
    bf, f32 = torch.bfloat16, torch.float32
    gate = hv if variant == "gdn" else hv * k
    dt = hv if variant == "gdn" else hv * k
    width = 2 * h * k + hv * v
    if draw(st.integers(0, 4)) == 0:
        width += draw(st.sampled_from([-hv * v, -1, 1, 2 * k, hv * v, k]))
    pool_shape = [s, hv, v, 0 if draw(st.integers(0, 19)) == 0 else k]
    call = dict(
        mixed_qkv=_tensor(draw, (b, max(width, 0)), bf, "mixed_qkv" in bad),
        a=_tensor(draw, (b, gate), bf, "a" in bad),
        b=_tensor(draw, (b, hv), bf, "b" in bad),
        A_log=_tensor(draw, (hv,), f32, "A_log" in bad),
        dt_bias=_tensor(draw, (dt,), f32, "dt_bias" in bad),
        scale=k**-0.5,
        initial_state=_tensor(draw, pool_shape, f32, "initial_state" in bad),
        out=_tensor(draw, (b, 1, hv, v), bf, "out" in bad),
        ssm_state_indices=_tensor(draw, (b,), torch.int32, "ssm_state_indices" in bad),
        use_qk_l2norm_in_kernel=draw(st.booleans()),
    )
    if call["initial_state"].ndim == 4 and call["initial_state"].shape[2] == 0:
        call["initial_state"] = torch.zeros(s, hv, 1, k)  # keep V >= 1 (see above)
    if variant == "kda":
        call["lower_bound"] = draw(st.sampled_from([None, -5.0]))
    return call


_SETTINGS = settings(max_examples=int(os.environ.get("GDR_ORACLE_EXAMPLES", 300)), deadline=None,
                     derandomize=not os.environ.get("GDR_ORACLE_EXAMPLES"), database=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@pytest.mark.parametrize("variant", ["gdn", "kda"])
def test_random_calls_agree_with_the_wrapper(wrappers, variant):
    kinds: dict[str, int] = {}
    first_codes: set[str] = set()

    @_SETTINGS
    @given(random_calls(variant))
    def run(call):
        kind = assert_agrees(wrappers, variant, call)
        kinds[kind] = kinds.get(kind, 0) + 1
        if kind != "launched":
            first_codes.add(check(variant, call).errors[0].code)

    run()
    # Both outcomes are reached, so the equivalence is exercised in both directions, and the random calls
    # trip many different wrapper checks first (not just the first few).
    assert kinds.get("ValueError", 0) > 100 and kinds.get("launched", 0) >= 15, kinds
    assert len(first_codes) >= 14, sorted(first_codes)
