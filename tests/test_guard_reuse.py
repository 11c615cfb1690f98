"""The guard checks the slot indices once per decode step: the layers of a step share one indices tensor (each
with its own pool), and the check's sanitised indices serve them all, unless the indices changed (another
object, an in-place write), a CUDA-graph capture began or ended, or a pool comes round again (a new step).

A step is modelled as in sglang: L layers, each with its own state pool, all passing the same indices object.
Check launches are counted on `CheckLaunch.__call__`; the engine's kernel is a spy recording what it got.
"""

from __future__ import annotations

import functools
import inspect
import sys

import pytest

import gdr_check

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from gdr_check.kernel import _triton_common as triton_common  # noqa: E402
from gdr_check.kernel import device_guard  # noqa: E402
from kernel_helpers import DEVICE, make_call  # noqa: E402

LAYERS = 4
S = 6
VALID = [1, 2, 3, 4, -1, 0]  # live rows 0-3, a skipped row, trailing slot-0 padding
NAMES = ("mixed_qkv", "a", "b", "A_log", "dt_bias", "scale", "initial_state", "out", "ssm_state_indices")


class Step:
    """A fake sglang engine under test: `layer(n)` runs layer n's packed-decode call on its own pool."""

    def __init__(self, monkeypatch, slots=VALID):
        from fake_engine import install

        self.engine = install(monkeypatch)
        self.got: list[tuple[int, torch.Tensor]] = []  # (layer's pool address, indices the kernel got)
        self.launches: list[list[int]] = []  # the indices each check launch was given
        original = self.engine.sglang_kernels.fused_recurrent_gated_delta_rule_packed_decode

        signature = inspect.signature(original)

        @functools.wraps(original)  # the engine's signature, so the guard recognises the API
        def spy(*args, **kwargs):
            bound = signature.bind(*args, **kwargs).arguments  # the guard passes keywords, the engine positions
            self.got.append((bound["initial_state"].data_ptr(), bound["ssm_state_indices"]))
            return original(*args, **kwargs)

        monkeypatch.setattr(self.engine.sglang_kernels, "fused_recurrent_gated_delta_rule_packed_decode", spy)
        monkeypatch.setattr(self.engine.gdn_caller, "fused_recurrent_gated_delta_rule_packed_decode", spy)
        launch = device_guard.CheckLaunch.__call__

        def counted(check, indices, *args):
            self.launches.append(indices.tolist())
            return launch(check, indices, *args)

        monkeypatch.setattr(device_guard.CheckLaunch, "__call__", counted)
        call = make_call(B=len(slots), H=1, HV=2, K=8, V=8, slots=slots, pool_slots=S, seed=21)
        self.arguments = dict(zip(NAMES, call.args(), strict=False))
        self.pools = [call.initial_state.clone() for _ in range(LAYERS)]  # a pool per layer
        self.indices = self.arguments["ssm_state_indices"]

    def layer(self, layer_id: int) -> None:
        """Layer `layer_id`'s call (the guard names the layer from the caller's `layer_id`)."""
        self.engine.gdn_caller.forward_decode(**dict(self.arguments, initial_state=self.pools[layer_id],
                                                     ssm_state_indices=self.indices))

    def step(self) -> None:
        for layer_id in range(LAYERS):
            self.layer(layer_id)

    def handed(self) -> list[torch.Tensor]:
        """The indices tensor each call's kernel got, in call order."""
        return [indices for _, indices in self.got]


def faults(guard) -> list:
    """The guard's device faults (on the CPU the shape verdict also notes GDR251, the tensors' device)."""
    return [d for d in guard.diagnostics if d.code in device_guard.FAULT_CODES.values()]


def same_objects(tensors: list[torch.Tensor]) -> list[int]:
    """Each tensor as the number of the first distinct object it is (identity, not value)."""
    seen: list[torch.Tensor] = []
    numbers = []
    for tensor in tensors:
        number = next((n for n, t in enumerate(seen) if t is tensor), None)
        if number is None:
            seen.append(tensor)
            number = len(seen) - 1
        numbers.append(number)
    return numbers


def test_one_check_serves_every_layer_of_a_step_and_the_next_step_checks_again(monkeypatch):
    step = Step(monkeypatch)
    with gdr_check.guard(engine="sglang", mode="record") as guard:
        step.step()
        assert len(step.launches) == 1
        handed = step.handed()
        assert same_objects(handed) == [0, 0, 0, 0] and handed[0] is not step.indices
        assert handed[0].tolist() == VALID
        assert len({address for address, _ in step.got}) == LAYERS  # four pools, one check
        step.step()  # the same indices object, unwritten: the first layer's pool comes round again
        assert len(step.launches) == 2
        assert same_objects(step.handed()) == [0, 0, 0, 0, 1, 1, 1, 1]
    assert guard.calls == 2 * LAYERS and faults(guard) == []


def test_a_write_to_the_indices_mid_step_is_checked_before_the_next_layer_uses_it(monkeypatch):
    step = Step(monkeypatch)
    with gdr_check.guard(engine="sglang", mode="record") as guard:
        step.layer(0)
        step.layer(1)
        step.indices[1] = S  # an in-place write (the version moves): slot S is past the pool
        step.layer(2)
        step.layer(3)
    assert step.launches == [VALID, [1, S, 3, 4, -1, 0]]
    handed = step.handed()
    assert same_objects(handed) == [0, 0, 1, 1]
    assert [h.tolist() for h in handed[2:]] == [[1, -1, 3, 4, -1, 0]] * 2  # both later layers skip row 1
    assert [(d.code, d.notes[0]) for d in faults(guard)] == [("GDR241", "in layer 2")]


def test_a_new_indices_object_is_checked_even_within_a_step(monkeypatch):
    step = Step(monkeypatch)
    stride = step.indices.stride(0)
    backing = torch.full((len(VALID) * stride,), -7, dtype=step.indices.dtype, device=DEVICE)
    backing[::stride] = torch.tensor([1, S, 3, 4, -1, 0], dtype=step.indices.dtype)  # one write, as the first
    fresh = backing[::stride]  # the same layout (signature) and version number as the first, other values
    assert (fresh.stride(), fresh._version) == (step.indices.stride(), step.indices._version)
    with gdr_check.guard(engine="sglang", mode="record"):
        step.layer(0)
        step.layer(1)
        step.indices = fresh
        step.layer(2)
        step.layer(3)
    assert len(step.launches) == 2 and same_objects(step.handed()) == [0, 0, 1, 1]
    assert [h.tolist() for h in step.handed()] == [VALID] * 2 + [[1, -1, 3, 4, -1, 0]] * 2


def test_a_shared_check_reports_a_fault_once_with_the_first_layers_label(monkeypatch):
    bad = [1, 9, 2, 2, 0, 3]  # row 1 past the pool, row 3 repeats row 2's slot, row 4 slot 0 before a live row
    step = Step(monkeypatch, slots=bad)
    with gdr_check.guard(engine="sglang", mode="record") as guard:
        step.step()
    assert len(step.launches) == 1
    assert [h.tolist() for h in step.handed()] == [[1, -1, 2, -1, 0, 3]] * LAYERS  # every layer skips them
    assert [(d.code, d.bindings["row"], d.notes[0]) for d in faults(guard)] == [
        ("GDR241", 1, "in layer 0"), ("GDR242", 3, "in layer 0"), ("GDR247", 4, "in layer 0")]


def test_the_guard_wraps_graph_capture_to_bump_its_epoch_and_restores_it(monkeypatch):
    began, ended = [], []
    graph_class = torch.cuda.CUDAGraph
    # Stand-ins for the CUDA-only methods (this test runs without a GPU); the guard wraps whatever is there.
    monkeypatch.setattr(graph_class, "capture_begin", lambda graph, *a, **k: began.append((graph, a, k)))
    monkeypatch.setattr(graph_class, "capture_end", lambda graph: ended.append(graph))
    begin, end, replay = graph_class.capture_begin, graph_class.capture_end, graph_class.replay
    step = Step(monkeypatch)
    with gdr_check.guard(engine="sglang", mode="record") as guard:
        assert (graph_class.capture_begin, graph_class.capture_end, graph_class.replay) != (begin, end, replay)
        assert graph_class.capture_begin is not begin and graph_class.capture_end is not end
        graph = object()
        step.layer(0)
        step.layer(1)  # served by layer 0's check
        epoch = guard.epoch
        graph_class.capture_begin(graph, pool=7)  # as torch.cuda.graph begins a capture
        assert began == [(graph, (), {"pool": 7})] and guard.epoch > epoch
        step.layer(2)  # same indices, unwritten, pool not served: checked anyway (eager -> capture)
        step.layer(3)  # served by layer 2's check, inside the same capture
        epoch = guard.epoch
        graph_class.capture_end(graph)
        assert ended == [graph] and guard.epoch > epoch
        step.layer(1)  # pool not served by the captured check: checked anyway (capture -> eager)
    assert len(step.launches) == 3 and same_objects(step.handed()) == [0, 0, 1, 1, 2]
    assert (graph_class.capture_begin, graph_class.capture_end, graph_class.replay) == (begin, end, replay)


def test_a_failed_capture_end_still_moves_the_epoch(monkeypatch):
    def failing(graph):
        raise RuntimeError("capture invalidated")

    monkeypatch.setattr(torch.cuda.CUDAGraph, "capture_end", failing)
    Step(monkeypatch)  # an engine to guard
    with gdr_check.guard(engine="sglang", mode="record") as guard:
        epoch = guard.epoch
        with pytest.raises(RuntimeError, match="^capture invalidated$"):
            torch.cuda.CUDAGraph.capture_end(object())
        assert guard.epoch == epoch + 2
    assert torch.cuda.CUDAGraph.capture_end is failing


def test_without_graph_hooks_every_call_is_checked(monkeypatch):
    graph_class = torch.cuda.CUDAGraph
    methods = (graph_class.capture_begin, graph_class.capture_end, graph_class.replay)
    step = Step(monkeypatch)
    with gdr_check.guard(engine="sglang", mode="record", hook_graphs=False):
        assert (graph_class.capture_begin, graph_class.capture_end, graph_class.replay) == methods
        step.step()
    assert len(step.launches) == LAYERS and same_objects(step.handed()) == [0, 1, 2, 3]


def test_inference_mode_indices_have_no_version_so_a_step_rests_on_the_object_and_the_served_pools(monkeypatch):
    step = Step(monkeypatch)
    with torch.inference_mode():
        step.indices = step.indices.clone()
    assert step.indices.is_inference()
    with gdr_check.guard(engine="sglang", mode="record") as guard:
        step.step()
        step.step()  # the first layer's pool was served: a new step, a new check
    assert len(step.launches) == 2 and faults(guard) == []
    assert same_objects(step.handed()) == [0] * LAYERS + [1] * LAYERS


def test_nothing_is_kept_or_reused_after_the_block(monkeypatch):
    step = Step(monkeypatch)
    guard = gdr_check.guard(engine="sglang", mode="record")
    with guard:
        step.layer(0)
    plans = [plan for site in guard.sites for plan in site.plans.values()]
    assert len(plans) == 1 and plans[0].last is None  # no reference to the indices kept past the block
    with guard:  # re-entered: the pools not served yet are checked, not handed the old check's indices
        step.layer(1)
    assert len(step.launches) == 2 and same_objects(step.handed()) == [0, 1]


@pytest.mark.skipif(DEVICE != "cpu", reason="a CUDA kernel's flag lands when it has run, not at once")
def test_a_step_with_a_fault_raises_once_in_raise_mode(monkeypatch):
    step = Step(monkeypatch, slots=[1, 9, 2, 3, 4, 5])
    with pytest.raises(gdr_check.GuardError, match=r"^GDR241: `ssm_state_indices` holds slot 9 at row 1, .*"
                                                   r"\[in layer 0\]$"):
        with gdr_check.guard(engine="sglang"):
            step.step()
    # The first layer's check found it; the second layer's call raised before its kernel ran.
    assert len(step.launches) == 1 and len(step.got) == 1


def test_guards_left_out_of_order_keep_capture_seen_until_the_last_leaves(monkeypatch):
    """The capture hooks are process-wide: a guard left before another (not nested) does not unhook the class
    under the one still entered, which keeps reusing checks only because capture is still seen."""
    graph_class = torch.cuda.CUDAGraph
    monkeypatch.setattr(graph_class, "capture_begin", lambda graph, *a, **k: None)
    monkeypatch.setattr(graph_class, "capture_end", lambda graph: None)
    methods = (graph_class.capture_begin, graph_class.capture_end, graph_class.replay)
    step = Step(monkeypatch)
    first = gdr_check.guard(engine="sglang", mode="record")
    second = gdr_check.guard(engine="vllm", mode="record", targets=[])
    first.__enter__()
    second.__enter__()
    step.layer(0)  # checked by `first`
    first.__exit__(None, None, None)  # left first, while `second` is still entered
    assert graph_class.capture_begin is not methods[0] and second._reuse
    epoch = second.epoch
    graph_class.capture_begin(object())  # still seen
    assert second.epoch > epoch
    step.layer(1)  # `first` has left: its binding is the engine's own function again, nothing is checked
    second.__exit__(None, None, None)
    assert (graph_class.capture_begin, graph_class.capture_end, graph_class.replay) == methods
    assert len(step.launches) == 1 and len(step.got) == 2


def test_a_check_serves_only_calls_on_its_own_stream(monkeypatch):
    """Another stream could read the sanitised indices before the check has written them: a layer on another
    stream is checked again (streams stood in on the CPU by the plan's stream getter)."""
    step = Step(monkeypatch)
    current = [7]
    with gdr_check.guard(engine="sglang", mode="record") as guard:
        step.layer(0)
        for site in guard.sites:
            for plan in site.plans.values():
                plan.stream = lambda: current[0]
                plan.last = None
        step.layer(0)  # a new check on stream 7 (the last check was dropped above)
        step.layer(1)  # served: same stream
        current[0] = 8
        step.layer(2)  # another stream: checked again
        step.layer(3)  # served by the stream-8 check
    assert len(step.launches) == 3 and same_objects(step.handed()) == [0, 1, 1, 2, 2]


def test_a_wrapper_left_behind_by_a_guard_that_has_left_is_guarded_again(monkeypatch):
    """A binding still holding an exited guard's wrapper (an instance the collector could not reach on exit, such
    as one frozen with gc.freeze()) passes calls straight through; the next guard wraps it like the original."""
    step = Step(monkeypatch)
    caller = step.engine.gdn_caller
    with gdr_check.guard(engine="sglang", mode="record"):
        stale = caller.fused_recurrent_gated_delta_rule_packed_decode
    monkeypatch.setattr(caller, "fused_recurrent_gated_delta_rule_packed_decode", stale)  # left behind
    step.layer(0)
    assert step.launches == []  # an exited guard's wrapper checks nothing
    with gdr_check.guard(engine="sglang", mode="record") as guard:
        assert caller.fused_recurrent_gated_delta_rule_packed_decode is not stale
        step.layer(1)
    holders = [h for site in guard.sites for h in site.holders]
    binding = f"{caller.__name__}.fused_recurrent_gated_delta_rule_packed_decode"
    assert len(step.launches) == 1 and binding in holders, holders
    assert caller.fused_recurrent_gated_delta_rule_packed_decode is not stale  # restored to the engine's own


def test_a_failure_while_leaving_still_unhooks_graph_capture(monkeypatch):
    graph_class = torch.cuda.CUDAGraph
    methods = (graph_class.capture_begin, graph_class.capture_end, graph_class.replay)
    Step(monkeypatch)
    from gdr_check.pipeline import guard as guard_module

    def failing(*args, **kwargs):
        raise RuntimeError("restore failed")

    guard = gdr_check.guard(engine="sglang", mode="record")
    guard.__enter__()
    monkeypatch.setattr(guard_module, "restore_wrappers", failing)
    with pytest.raises(RuntimeError, match="^restore failed$"):
        guard.__exit__(None, None, None)
    assert (graph_class.capture_begin, graph_class.capture_end, graph_class.replay) == methods
    assert not guard._reuse and guard not in guard_module._CAPTURE.guards


def test_a_second_guard_on_the_same_functions_says_it_wraps_nothing(monkeypatch):
    Step(monkeypatch)
    with gdr_check.guard(engine="sglang", mode="record"):
        with pytest.warns(RuntimeWarning, match=r"^gdr_check\.guard wrapped no binding of the sglang packed-decode "
                                                r"functions: another gdr_check\.guard entered on them holds them"):
            with gdr_check.guard(engine="sglang", mode="record") as second:
                pass
    assert second.sites and not any(site.holders for site in second.sites)


def test_the_instance_walk_warns_when_objects_are_frozen(monkeypatch):
    """Objects frozen with gc.freeze() are invisible to the collector's search for live engine backends."""
    import gc
    import types

    from gdr_check.pipeline import capture as capture_module

    module = types.ModuleType("gdr_fake_backend")

    class Backend:
        pass

    module.Backend = Backend
    monkeypatch.setitem(sys.modules, "gdr_fake_backend", module)
    kept = Backend()
    gc.freeze()
    try:
        with pytest.warns(RuntimeWarning, match=r"objects are frozen \(gc\.freeze\(\)\): live .*Backend instances"):
            found = list(capture_module._holder_instances(["gdr_fake_backend:Backend"]))
    finally:
        gc.unfreeze()
    assert found == []  # `kept` is frozen: not found
    assert [name for name, _ in capture_module._holder_instances(["gdr_fake_backend:Backend"])] == [
        f"{Backend.__module__}.{Backend.__qualname__}@{id(kept):#x}"]


def test_indices_resized_in_place_between_two_layers_are_judged_again(monkeypatch):
    """Reuse trusts the indices object and its version for strides and device, not for its shape and dtype: an
    inference tensor has no version to see a `resize_`, and `.data` can be reassigned without one. A layer
    whose indices changed length that way is refused as the signature it now has, not served the step's copy."""
    step = Step(monkeypatch)
    with pytest.raises(gdr_check.GuardError, match=r"^GDR211: "):
        with gdr_check.guard(engine="sglang") as guard:
            step.step()  # every layer's pool known: the next step's calls take the steady-state path
            step.indices = step.indices.clone()  # a new step
            step.layer(0)
            step.indices.data = torch.tensor(VALID + [5], dtype=step.indices.dtype, device=step.indices.device)
            step.layer(1)
    assert len(step.launches) == 2 and len(step.got) == LAYERS + 1 and guard.calls == LAYERS + 2


def test_two_signatures_in_one_step_each_serve_their_layers_from_their_own_check(monkeypatch):
    """Layers that differ (another scale on odd layers) alternate two plans within a step: after the full
    lookup that switches plans, the found plan's own check serves its layers (one check per plan per step)."""
    step = Step(monkeypatch)
    scale = step.arguments["scale"]
    with gdr_check.guard(engine="sglang", mode="record"):
        for _ in range(3):
            step.indices = step.indices.clone()  # a new step
            for layer_id in range(LAYERS):
                step.arguments["scale"] = scale * (2 if layer_id % 2 else 1)
                step.layer(layer_id)
    assert len(step.launches) == 2 * 3



@pytest.mark.skipif(DEVICE != "cpu", reason="the host path is for CPU tensors")
def test_cpu_tensors_checked_on_the_host_are_checked_once_per_step_and_name_the_layer(monkeypatch):
    """Without Triton's interpreter CPU tensors are checked on the host (no launch): as on the device, the first
    layer's check covers the step (every GDR241 of two steps of four layers is the first layer's, once per step)."""
    def slot_faults(on_host: bool) -> list[tuple[str, str, str]]:
        with monkeypatch.context() as patch:
            step = Step(patch, slots=[1, 9, 2, 3, 4, 5])
            if on_host:
                patch.setattr(triton_common, "INTERPRETED", False)
                patch.setattr(device_guard.CheckLaunch, "__call__", lambda *a, **k: pytest.fail("launched"))
            with gdr_check.guard(engine="sglang", mode="record") as guard:
                step.step()
                step.step()
            return [(d.code, d.message, d.notes[0]) for d in guard.diagnostics if d.code == "GDR241"]

    on_device = slot_faults(False)
    assert on_device == [("GDR241", f"`ssm_state_indices` holds slot 9 at row 1, but the pool has {S} slots "
                                    f"(0..{S - 1})", "in layer 0")] * 2
    assert slot_faults(True) == on_device


@pytest.mark.skipif(DEVICE != "cpu", reason="the host path is for CPU tensors")
def test_in_raise_mode_every_layer_checked_on_the_host_raises_for_a_faulty_step(monkeypatch):
    # The host path skips no row: a later layer of the step is not covered by a check that raised.
    step = Step(monkeypatch, slots=[1, 9, 2, 3, 4, 5])
    monkeypatch.setattr(triton_common, "INTERPRETED", False)
    monkeypatch.setattr(device_guard.CheckLaunch, "__call__", lambda *a, **k: pytest.fail("launched"))
    with gdr_check.guard(engine="sglang", mode="raise"):
        for layer_id in range(2):
            with pytest.raises(gdr_check.GuardError, match=r"^GDR241: `ssm_state_indices` holds slot 9 at row 1"):
                step.layer(layer_id)
    assert step.got == []  # neither layer's call reached the engine
