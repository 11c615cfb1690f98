"""How `gdr_check.guard`'s wrapper takes a call: the same bindings and TypeErrors as the function it wraps,
every mode's promise kept for arguments the contract refuses (a sparse tensor), an empty pool's rows checked, a
scale that is no plain float keyed so that it is judged once, and a check served again only for the same
indices' memory."""

from __future__ import annotations

import sys
import types

import pytest

import gdr_check

torch = pytest.importorskip("torch")

from contract_calls import gdn_call  # noqa: E402

TARGET = "gdr_check_test_calls_target:fused_recurrent_gated_delta_rule_packed_decode"
NAMES = ("mixed_qkv", "a", "b", "A_log", "dt_bias", "scale", "initial_state", "out", "ssm_state_indices")


def _engine(monkeypatch, function):
    """A module holding `function` under sglang's name, and a list of the slots each call's kernel was given."""
    module = types.ModuleType(TARGET.split(":")[0])
    seen: list[list[int]] = []

    def recording(*args, **kwargs):
        indices = kwargs.get("ssm_state_indices", args[8] if len(args) > 8 else None)
        if type(indices) is torch.Tensor:  # (a subclass may refuse tolist)
            seen.append(indices.tolist())
        return function(*args, **kwargs)

    recording.__signature__ = __import__("inspect").signature(function)  # the guard recognises the API by it
    recording.__name__ = function.__name__
    module.fused_recurrent_gated_delta_rule_packed_decode = recording
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return module, seen


def sglang_like(mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices,
                use_qk_l2norm_in_kernel=False):
    return "ran"


def _decode(module):
    return module.fused_recurrent_gated_delta_rule_packed_decode


def _unguarded_type_error(call):
    with pytest.raises(TypeError) as caught:
        call()
    return str(caught.value)


@pytest.mark.parametrize("mode", ["raise", "warn", "record"])
def test_a_missing_argument_gets_the_wrapped_functions_own_type_error_in_every_mode(monkeypatch, mode):
    module, seen = _engine(monkeypatch, sglang_like)
    for missing in ("out", "ssm_state_indices"):
        call = gdn_call()
        del call[missing]
        expected = _unguarded_type_error(lambda call=call: sglang_like(**call))
        with gdr_check.guard(engine="sglang", mode=mode, targets=[TARGET]):
            with pytest.raises(TypeError) as caught:
                _decode(module)(**call)
        assert str(caught.value) == expected  # e.g. "... missing 1 required positional argument: 'out'"


def test_a_binding_python_refuses_is_refused_as_python_refuses_it(monkeypatch):
    module, _ = _engine(monkeypatch, sglang_like)
    call = gdn_call()
    args = [call[name] for name in NAMES]
    twice = _unguarded_type_error(lambda: sglang_like(*args, mixed_qkv=call["mixed_qkv"]))
    too_many = _unguarded_type_error(lambda: sglang_like(*args, True, 1))
    with gdr_check.guard(engine="sglang", mode="raise", targets=[TARGET]):
        with pytest.raises(TypeError) as caught:
            _decode(module)(*args, mixed_qkv=call["mixed_qkv"])  # given twice: it used to run
        assert str(caught.value) == twice
        with pytest.raises(TypeError) as caught:
            _decode(module)(*args, True, 1)
        assert str(caught.value) == too_many


def test_a_function_with_positional_only_parameters_is_called_by_position(monkeypatch):
    def positional_only(mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices, /,
                        use_qk_l2norm_in_kernel=False):
        return "ran"

    module, seen = _engine(monkeypatch, positional_only)
    call = gdn_call()
    args = [call[name] for name in NAMES]
    with gdr_check.guard(engine="sglang", mode="record", targets=[TARGET]) as guard:
        for _ in range(3):  # the first call, then the steady state
            assert _decode(module)(*args, use_qk_l2norm_in_kernel=True) == "ran"
    assert len(seen) == 3 and not [d for d in guard.diagnostics if d.severity == "error"]


@pytest.mark.parametrize("mode", ["raise", "record"])
@pytest.mark.parametrize("argument", ["mixed_qkv", "initial_state", "out"])
def test_a_sparse_tensor_is_gdr228_in_every_mode_not_a_pointer_error(monkeypatch, mode, argument):
    # torch 2.13 gives a sparse COO tensor strides but no storage: the per-call overlap test must not ask it for a
    # data pointer (it raised "Cannot access data pointer of Tensor that doesn't have storage" in every mode).
    module, _ = _engine(monkeypatch, sglang_like)
    with gdr_check.guard(engine="sglang", mode=mode, targets=[TARGET]) as guard:
        _decode(module)(**gdn_call())
        call = gdn_call()
        call[argument] = call[argument].to_sparse()
        if mode == "raise":
            with pytest.raises(gdr_check.GuardError, match="GDR228"):
                _decode(module)(**call)
        else:
            assert _decode(module)(**call) == "ran"
    assert [d.code for d in guard.diagnostics if d.severity == "error"] == ["GDR228"]


@pytest.mark.parametrize("interpreted", [True, False], ids=["device-check", "host-check"])
def test_an_empty_pool_has_every_live_row_checked(monkeypatch, interpreted):
    # An empty pool (0 slots) was taken for "no pool": no slot check ran and the kernel got every row. Where a
    # slot check can launch (here Triton's interpreter) the rows are skipped and the faults raised after; on CPU
    # tensors with no interpreter the host checks the slots and raise mode stops the call.
    from gdr_check.kernel import _triton_common

    if interpreted and not _triton_common.INTERPRETED:
        pytest.skip("Triton's interpreter is off (a GPU run): no slot check launches on CPU tensors")
    monkeypatch.setattr(_triton_common, "INTERPRETED", interpreted)
    module, seen = _engine(monkeypatch, sglang_like)
    call = gdn_call(slots=[1, 2, 3, 4])
    call["initial_state"] = call["initial_state"][:0]
    with pytest.raises(gdr_check.GuardError) as caught:
        with gdr_check.guard(engine="sglang", mode="raise", targets=[TARGET]) as guard:
            _decode(module)(**call)
            guard.raise_pending()
    assert {d.code for d in caught.value.diagnostics} == {"GDR241"}
    assert seen == ([[-1, -1, -1, -1]] if interpreted else [])  # no row reaches the kernel


@pytest.mark.parametrize("make", [lambda: __import__("numpy").float64("nan"), lambda: torch.tensor(0.25)],
                         ids=["numpy-nan", "tensor"])
def test_a_scale_that_is_no_plain_float_is_judged_once(monkeypatch, make):
    # A NumPy NaN (not equal to itself) and a tensor (hashed by identity) made a new plan, and new diagnostics,
    # on every call.
    module, _ = _engine(monkeypatch, sglang_like)
    base = gdn_call()
    with gdr_check.guard(engine="sglang", mode="record", targets=[TARGET]) as guard:
        for _ in range(20):
            _decode(module)(**dict(base, scale=make()))
    [site] = [site for site in guard.sites if site.plans]
    assert len(site.plans) == 1
    assert len(guard.diagnostics) == len({d.message for d in guard.diagnostics}) >= 1


def test_indices_moved_by_data_assignment_are_checked_again(monkeypatch):
    # `.data = ...` gives the same indices object new memory without a version bump: the next layer of the step
    # must not be served the check of the old values.
    module, seen = _engine(monkeypatch, sglang_like)
    indices = torch.tensor([1, 2, 3, 4], dtype=torch.int32)
    base = gdn_call(slots=[1, 2, 3, 4])
    pools = [torch.zeros_like(base["initial_state"]) for _ in range(2)]
    with pytest.raises(gdr_check.GuardError) as caught:
        with gdr_check.guard(engine="sglang", mode="raise", targets=[TARGET]) as guard:
            _decode(module)(**dict(base, initial_state=pools[0], ssm_state_indices=indices))
            indices.data = torch.tensor([1, 2, 3, 99], dtype=torch.int32)
            _decode(module)(**dict(base, initial_state=pools[1], ssm_state_indices=indices))
            guard.raise_pending()
    from gdr_check.kernel import _triton_common

    assert [d.code for d in caught.value.diagnostics] == ["GDR241"]
    # The device check skips the row and raises after; the host's (CPU tensors, no interpreter) stops the call.
    assert seen == ([[1, 2, 3, 4], [1, 2, 3, -1]] if _triton_common.INTERPRETED else [[1, 2, 3, 4]])


def test_naming_a_new_pools_layer_keeps_no_tensor_of_the_caller_alive(monkeypatch):
    # The guard names a new pool's layer from a `layer_id` or `layer` up the stack. Before Python 3.13 reading a
    # function's `f_locals` leaves a snapshot of its locals on the frame, which held the caller's tensors until
    # it returned: only frames whose code has one of those names are read.
    import gc
    import weakref

    from gdr_check.kernel import _triton_common

    if not _triton_common.INTERPRETED:
        pytest.skip("Triton's interpreter is off (a GPU run): CPU tensors' pools are checked on the host, unnamed")
    module, _ = _engine(monkeypatch, sglang_like)

    def step():
        call = gdn_call()
        pool = weakref.ref(call["initial_state"])
        _decode(module)(**call)
        del call
        gc.collect()
        return pool() is None

    def layer_forward(layer_id):
        call = gdn_call(S=10)  # another pool size: a pool of its own even at the freed pool's address
        _decode(module)(**call)

    with gdr_check.guard(engine="sglang", mode="record", targets=[TARGET]) as guard:
        assert step()
        layer_forward(5)  # a frame with `layer_id` is still read: its pool is named after it
    assert not [d for d in guard.diagnostics if d.severity == "error"]
    assert [label for buffer in guard._buffers.values() for label, *_ in buffer._labels] == ["pool #0", "layer 5"]


def test_positional_only_parameters_passed_by_name_are_refused_as_python_refuses_them(monkeypatch):
    def positional_only(mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices,
                        use_qk_l2norm_in_kernel=False, /):
        return a.shape, ssm_state_indices

    module, _ = _engine(monkeypatch, positional_only)
    call = gdn_call()
    rest = {name: call[name] for name in NAMES[2:]}
    expected = _unguarded_type_error(lambda: positional_only(call["mixed_qkv"], call["a"], **rest))
    with gdr_check.guard(engine="sglang", mode="record", targets=[TARGET]):
        with pytest.raises(TypeError) as caught:  # it ran with the arguments shifted into other slots
            _decode(module)(call["mixed_qkv"], call["a"], **rest)
    assert str(caught.value) == expected


def test_extra_positional_arguments_taken_by_a_star_args_are_still_checked(monkeypatch):
    def with_rest(mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices, *rest,
                  use_qk_l2norm_in_kernel=False):
        return rest

    module, seen = _engine(monkeypatch, with_rest)
    call = gdn_call(slots=[1, 2, 3, 99])
    with pytest.raises(gdr_check.GuardError) as caught:
        with gdr_check.guard(engine="sglang", mode="raise", targets=[TARGET]) as guard:
            assert _decode(module)(*[call[name] for name in NAMES], "extra") == ("extra",)
            guard.raise_pending()
    assert [d.code for d in caught.value.diagnostics] == ["GDR241"]


def test_an_unknown_keyword_gets_the_type_error_even_on_a_call_the_contract_refuses(monkeypatch):
    module, _ = _engine(monkeypatch, sglang_like)
    call = dict(gdn_call(), a=gdn_call()["a"][:, :1], use_qk_l2norm=True)  # a typo, and a narrowed `a`
    expected = _unguarded_type_error(lambda: sglang_like(**call))
    with gdr_check.guard(engine="sglang", mode="raise", targets=[TARGET]):
        for _ in range(2):  # the first call, then the signature's plan
            with pytest.raises(TypeError) as caught:
                _decode(module)(**call)
            assert str(caught.value) == expected


def test_contract_arguments_left_out_are_judged_with_the_functions_defaults(monkeypatch):
    def defaults(mixed_qkv, a, b, A_log, dt_bias, initial_state, out, ssm_state_indices=None, scale=0.125,
                 use_qk_l2norm_in_kernel=False):
        return "ran"

    module, _ = _engine(monkeypatch, defaults)
    call = gdn_call()
    del call["scale"]
    with gdr_check.guard(engine="sglang", mode="raise", targets=[TARGET]) as guard:
        assert _decode(module)(**call) == "ran"  # its own scale, 0.125: no GDR245 for a missing one
    assert "GDR245" not in {d.code for d in guard.diagnostics}
    del call["ssm_state_indices"]
    with gdr_check.guard(engine="sglang", mode="record", targets=[TARGET]) as guard:
        assert _decode(module)(**call) == "ran"  # no KeyError: judged with its default, None (GDR228)
    assert [d.code for d in guard.diagnostics if d.severity == "error"] == ["GDR228"]


def test_scalars_keyed_alike_are_judged_with_their_own_words(monkeypatch):
    import decimal

    module, _ = _engine(monkeypatch, sglang_like)
    base = gdn_call()
    with gdr_check.guard(engine="sglang", mode="record", targets=[TARGET]) as guard:
        for _ in range(10):
            _decode(module)(**dict(base, scale=decimal.Decimal("NaN")))
    assert len([d for d in guard.diagnostics if d.code == "GDR245"]) == 1
    np = pytest.importorskip("numpy")
    messages = []
    with gdr_check.guard(engine="sglang", mode="raise", targets=[TARGET]):  # one guard: their plans side by side
        for scale in (torch.tensor(0.35), torch.tensor(float("nan"), device="meta"), np.True_, np.False_):
            with pytest.raises(gdr_check.GuardError) as caught:
                _decode(module)(**dict(base, scale=scale))
            messages.append(next(d.message for d in caught.value.diagnostics if d.code == "GDR245"))
    shown = [message.split(";")[0] for message in messages]
    assert shown == [f"`scale` is {value!r}" for value in (torch.tensor(0.35), torch.tensor(float("nan"),
                                                                                             device="meta"),
                                                           np.True_, np.False_)]


def test_a_callers_property_that_raises_does_not_stop_the_engines_call(monkeypatch):
    from gdr_check.kernel import _triton_common

    if not _triton_common.INTERPRETED:
        pytest.skip("Triton's interpreter is off (a GPU run): CPU tensors' pools are checked on the host, unnamed")
    module, _ = _engine(monkeypatch, sglang_like)

    class Layer:
        @property
        def layer_id(self):
            raise RuntimeError("boom")

    def forward(layer):
        return _decode(module)(**gdn_call())

    with gdr_check.guard(engine="sglang", mode="record", targets=[TARGET]):
        assert forward(Layer()) == "ran"


def test_a_guard_left_on_while_calls_keep_faulting_keeps_a_bounded_list(monkeypatch):
    # 200 faulty calls in record mode held 200+ diagnostics, and an engine's would grow without end: past
    # KEPT_DIAGNOSTICS they are counted, not kept (the mode still acts on each).
    from gdr_check.pipeline import guard as guard_module

    module, _ = _engine(monkeypatch, sglang_like)
    call = gdn_call(slots=[1, 2, 3, 4])
    call["initial_state"] = call["initial_state"][:0]  # every live row a fault, on every call

    def ten_calls():
        with gdr_check.guard(engine="sglang", mode="record", targets=[TARGET]) as guard:
            for _ in range(10):
                _decode(module)(**call)
        return guard

    everything = ten_calls()
    assert everything.dropped_diagnostics == 0 and len(everything.diagnostics) > 10
    monkeypatch.setattr(guard_module, "KEPT_DIAGNOSTICS", 5)
    bounded = ten_calls()
    assert len(bounded.diagnostics) == 5
    assert bounded.diagnostics == everything.diagnostics[:5]
    assert 5 + bounded.dropped_diagnostics == len(everything.diagnostics)


class _NoStorage(torch.Tensor):
    """A wrapper subclass: shapes and strides, no storage (as tensor subclasses built on another tensor are)."""

    @staticmethod
    def __new__(cls, like):
        return torch.Tensor._make_wrapper_subclass(cls, like.shape, dtype=like.dtype, device=like.device,
                                                   strides=like.stride())

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise NotImplementedError(f"{func} on a tensor without storage")


@pytest.mark.parametrize("mode", ["raise", "record"])
def test_a_tensor_without_storage_is_gdr228_not_a_launch_error(monkeypatch, mode):
    # Its data pointer raises: the slot check's launch raised "Cannot access data pointer" in every mode.
    module, _ = _engine(monkeypatch, sglang_like)
    call = gdn_call()
    call["ssm_state_indices"] = _NoStorage(call["ssm_state_indices"])
    with gdr_check.guard(engine="sglang", mode=mode, targets=[TARGET]) as guard:
        if mode == "raise":
            with pytest.raises(gdr_check.GuardError, match="GDR228"):
                _decode(module)(**call)
        else:
            assert _decode(module)(**call) == "ran"  # the engine's own call, given the tensor as it was
    assert [(d.code, d.message) for d in guard.diagnostics if d.severity == "error"] == [
        ("GDR228", "`ssm_state_indices` is a tensor without storage (a wrapper subclass: no data pointer to run on), "
                   "not a dense strided tensor")]


def _interpreted(monkeypatch):
    from gdr_check.kernel import _triton_common

    if not _triton_common.INTERPRETED:
        pytest.skip("Triton's interpreter is off (a GPU run): no slot check launches on CPU tensors")


def test_cpu_tensors_under_the_interpreter_are_not_said_to_be_unable_to_run(monkeypatch):
    # Under TRITON_INTERPRET=1 the kernels run on CPU tensors; the wheel's guard recorded GDR251 ("cannot run
    # there outside the interpreter") on every signature while its slot check ran in that interpreter.
    _interpreted(monkeypatch)
    module, seen = _engine(monkeypatch, sglang_like)
    with gdr_check.guard(engine="sglang", mode="record", targets=[TARGET]) as guard:
        _decode(module)(**gdn_call(slots=[1, 2, 3, 4]))
    assert seen == [[1, 2, 3, 4]]
    assert "GDR251" not in {d.code for d in guard.diagnostics}


def test_an_earlier_calls_faults_come_before_a_refused_calls_errors(monkeypatch):
    # A call with a repeated slot, then one the contract refuses (a/b of the wrong width): the wheel raised the
    # second call's GDR214 and held the first call's fault until the guard's exit.
    _interpreted(monkeypatch)
    module, _ = _engine(monkeypatch, sglang_like)
    refused = gdn_call(slots=[1, 2, 3, 4])
    refused["a"] = refused["b"] = torch.zeros(4, 8)
    with pytest.raises(gdr_check.GuardError) as caught:
        with gdr_check.guard(engine="sglang", mode="raise", targets=[TARGET]):
            _decode(module)(**gdn_call(slots=[1, 1, 3, 4]))
            _decode(module)(**refused)
    assert [d.code for d in caught.value.diagnostics] == ["GDR242"]


def test_a_warning_names_the_line_of_the_call_that_finds_it(monkeypatch):
    # The faults found at the refused call were warned about at a line inside the guard (guard.py) in the wheel.
    _interpreted(monkeypatch)
    module, _ = _engine(monkeypatch, sglang_like)
    refused = gdn_call(slots=[1, 2, 3, 4])
    refused["a"] = refused["b"] = torch.zeros(4, 8)
    with pytest.warns(RuntimeWarning) as caught:
        with gdr_check.guard(engine="sglang", mode="warn", targets=[TARGET]):
            _decode(module)(**gdn_call(slots=[1, 1, 3, 4]))
            line = sys._getframe().f_lineno + 1
            _decode(module)(**refused)
    found = {w.message.args[0].split(":")[1].strip(): (w.filename, w.lineno) for w in caught}
    assert found["GDR242"] == (__file__, line)
    assert found["GDR214"] == (__file__, line)
    texts = {w.message.args[0].split(":")[1].strip(): w.message.args[0] for w in caught}
    assert texts["GDR242"].endswith("(recorded by an earlier call)")  # the line is the later call's
    assert "earlier" not in texts["GDR214"]
