"""The device-side slot guard: fault records, memory safety, signature cache, capture safety, engine guard.

Kernels run in the Triton interpreter (GDR_CHECK_TEST_GPU=1: on CUDA). The pool is a view into a larger
backing with canary slots before and after it: no index may change them.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import sys
import threading
import warnings

import pytest

import gdr_check

torch = pytest.importorskip("torch")
pytest.importorskip("triton")
numpy = pytest.importorskip("numpy")  # the kernel extra's (the Triton interpreter needs it)

from gdr_check.base.report import LIMITS_DOCS_URL  # noqa: E402
from gdr_check.kernel import _triton_common as triton_common  # noqa: E402
from gdr_check.kernel import (  # noqa: E402
    device_guard,
    kda_packed_decode,
    naive_kda_packed_decode,
    naive_packed_decode,
    packed_decode,
)
from gdr_check.kernel._triton_common import DirectLauncher  # noqa: E402
from gdr_check.kernel.device_guard import FaultBuffer, PendingFaults  # noqa: E402
from gdr_check.kernel.gdn import fused as gdn_module  # noqa: E402
from gdr_check.kernel.gdn.fused import launch_packed_decode as gdn_launch  # noqa: E402
from gdr_check.kernel.kda import fused as kda_module  # noqa: E402
from gdr_check.kernel.kda.fused import launch_kda_packed_decode  # noqa: E402
from gdr_check.kernel.tiling import TileConfig, one_wave_register_cap, register_cap, resident_programs  # noqa: E402
from kernel_helpers import DEVICE, make_call  # noqa: E402

S = 5  # pool slots seen by the kernel; the backing has one canary slot on each side
# row: 0 ok, 1 past the pool (GDR241), 2 ok, 3 repeats row 2's slot (GDR242), 4 slot 0 before a live row
# (GDR247), 5 exactly one past the end (GDR241), 6 ok, 7-8 trailing slot-0 padding (fine), 9 skip sentinel.
SLOTS = [1, 9, 2, 2, 0, S, 3, 0, 0]
SGLANG_FAULTS = [("GDR241", 1, 9), ("GDR242", 3, 2), ("GDR247", 4, 0), ("GDR241", 5, S)]


def canaried(call):
    """`call` with its pool moved into the middle of a backing of S + 2 slots (canaries at both ends)."""
    backing = torch.randn((S + 2, *call.initial_state.shape[1:]), generator=torch.Generator().manual_seed(3))
    backing = backing.to(call.initial_state.dtype).to(DEVICE)
    backing[1:S + 1] = call.initial_state
    call.pool_backing = backing
    call.initial_state = backing[1:S + 1]
    return call


def bad_call(kda=False, slots=SLOTS):
    call = make_call(B=len(slots), H=1, HV=2, K=8, V=8, slots=slots, pool_slots=S, kda=kda, seed=11)
    return canaried(call)


def sanitized(call, keep):
    """The same call with every row not in `keep` set to -1: what the guarded kernel must compute."""
    clean = call.clone()
    values = clean.ssm_state_indices.tolist()
    clean.ssm_state_indices = torch.tensor([v if row in keep else -1 for row, v in enumerate(values)],
                                           dtype=clean.ssm_state_indices.dtype, device=DEVICE)
    return clean


@pytest.mark.parametrize("single_late_tile", [False, True], ids=["table", "single-late-tile"])
@pytest.mark.parametrize("kda", [False, True], ids=["gdn", "kda"])
def test_each_bad_index_class_is_recorded_with_row_slot_and_layer_and_nothing_outside_the_pool_changes(
        kda, single_late_tile, monkeypatch):
    if single_late_tile:  # the one tile loaded after the gates, ahead of the scan's verdict (no table picks it
        # for a scanning kernel today, `tiling.choose_config`; the kernels must still be right with it)
        late = lambda *args: TileConfig(4, prefetch=False)  # noqa: E731
        monkeypatch.setattr(gdn_module, "choose_config", late)
        monkeypatch.setattr(kda_module, "choose_config", late)
    call = bad_call(kda)
    ran = call.clone()
    buffer = FaultBuffer(DEVICE)
    run = kda_packed_decode if kda else packed_decode
    run(*ran.args(), engine="sglang", context="engine", faults=buffer, label="layer 7")
    faults, total = buffer.take()
    assert [(f.code, f.row, f.slot) for f in faults] == SGLANG_FAULTS and total == 4
    assert {f.layer for f in faults} == {"layer 7"} and {f.pool_slots for f in faults} == {S}
    assert faults[1].first_row == 2  # the duplicate names the row that had the slot first
    # Canaries bitwise equal; skipped rows (1, 3, 5) have zero output; the rest match the float64 reference
    # of the same call with those rows skipped.
    assert torch.equal(ran.pool_backing[0], call.pool_backing[0])
    assert torch.equal(ran.pool_backing[S + 1], call.pool_backing[S + 1])
    for row in (1, 3, 5):
        assert torch.equal(ran.out[row], torch.zeros_like(ran.out[row]))
    reference = sanitized(call, keep={0, 2, 4, 6})
    naive = naive_kda_packed_decode if kda else naive_packed_decode
    expected_out, expected_state = naive(*reference.args(), engine="sglang")
    live = [0, 2, 6]  # rows 4, 7 and 8 race on slot 0 (sglang's padding slot): compare the others
    torch.testing.assert_close(ran.out[live].double(), expected_out[live], rtol=1e-4, atol=1e-5)
    for slot in (1, 2, 3):
        torch.testing.assert_close(ran.initial_state[slot].double(), expected_state[slot], rtol=1e-4, atol=1e-5)
    assert buffer.take() == ([], 0)  # each fault is handed out once


@pytest.mark.parametrize("faults, shown", [("x", "'x' (a str)"), (3, "3 (an int)")])
def test_faults_that_is_no_fault_buffer_is_a_type_error_naming_it(faults, shown):
    """Not `'str' object has no attribute 'host_flag'` from inside the launch."""
    call = make_call(B=2, H=1, HV=2, K=8, V=8, slots=[1, 2], pool_slots=3, seed=5)
    for run, args in ((packed_decode, call.clone().args()),
                      (kda_packed_decode, make_call(B=2, H=1, HV=2, K=8, V=8, slots=[1, 2], pool_slots=3, kda=True,
                                                    seed=5).args())):
        with pytest.raises(TypeError) as raised:
            run(*args, faults=faults)
        assert str(raised.value) == (f"faults is {shown}: must be a gdr_check.kernel.FaultBuffer, or None for the "
                                     "device's buffer")


def test_vllm_skips_slot_zero_so_only_range_and_duplicates_are_faults():
    call = bad_call()
    buffer = FaultBuffer(DEVICE)
    packed_decode(*call.clone().args(), engine="vllm", context="engine", faults=buffer)
    faults, _ = buffer.take()
    assert [(f.code, f.row, f.slot) for f in faults] == [("GDR241", 1, 9), ("GDR242", 3, 2), ("GDR241", 5, S)]


def test_slot_zero_is_a_note_for_a_direct_call_and_an_error_for_the_engines():
    call = make_call(B=3, H=1, HV=2, K=8, V=8, slots=[0, 1, 2], pool_slots=3, seed=12)  # upstream tests' habit
    packed_decode(*call.clone().args())  # direct: the default buffer, context="direct"
    [note] = gdr_check.kernel.raise_pending(DEVICE)
    assert (note.code, note.severity) == ("GDR247", "info")
    assert note.message == "row 0 uses slot 0, which sglang reserves as the dummy slot that padding rows write"
    buffer = FaultBuffer(DEVICE)
    packed_decode(*call.clone().args(), context="engine", faults=buffer, label="layer 3")
    [fault] = buffer.take()[0]
    [error] = device_guard.diagnostics_of([fault], "engine", "sglang")
    assert (error.code, error.severity, error.notes[0]) == ("GDR247", "error", "in layer 3")


def test_a_slot_zero_faults_severity_is_the_recording_calls_context_whoever_reads_it():
    # (it was the reader's: an engine's fault read by `raise_pending()` was a note, and a direct call's note made a
    # later engine call raise and not run)
    slot_zero = make_call(B=3, H=1, HV=2, K=8, V=8, slots=[1, 0, 2], pool_slots=3, seed=14)
    clean = make_call(B=2, H=1, HV=2, K=8, V=8, slots=[1, 2], pool_slots=3, seed=15)
    packed_decode(*slot_zero.clone().args(), context="engine")
    with pytest.raises(PendingFaults, match=r"^GDR247: row 1 uses slot 0, "):
        gdr_check.kernel.raise_pending(DEVICE)  # read as a direct caller: still the engine's error
    packed_decode(*slot_zero.clone().args())  # a direct call: a note
    if DEVICE != "cpu":
        torch.cuda.synchronize()
    packed_decode(*clean.clone().args(), context="engine")  # finds the note: runs
    assert gdr_check.kernel.raise_pending(DEVICE) == []  # (the note was handed to that call's look)


def test_pending_faults_raise_at_the_callers_point_and_on_the_next_eager_call():
    call = bad_call()
    packed_decode(*call.clone().args())
    with pytest.raises(PendingFaults, match=r"^GDR241: `ssm_state_indices` holds slot 9 at row 1, but the pool "
                                            r"has 5 slots \(0\.\.4\) \[in gdn packed decode\] \(and 2 more faults\)$"):
        gdr_check.kernel.raise_pending(DEVICE)
    assert gdr_check.kernel.raise_pending(DEVICE) == []
    packed_decode(*call.clone().args())
    clean = make_call(B=2, H=1, HV=2, K=8, V=8, slots=[1, 2], pool_slots=S, seed=13)
    if DEVICE != "cpu":
        torch.cuda.synchronize()  # the faulty kernel has run: its flag has landed in host memory
    assert device_guard.default_buffer(DEVICE).host_flag[0] == 1
    with pytest.raises(PendingFaults, match="slot 9 at row 1"):  # the next eager call finds them
        packed_decode(*clean.args())
    assert device_guard.default_buffer(DEVICE).host_flag[0] == 0 and gdr_check.kernel.raise_pending(DEVICE) == []


@pytest.mark.skipif(DEVICE == "cpu", reason="CUDA graphs")
def test_a_fault_in_a_replayed_graph_sets_the_host_flag_for_the_next_look():
    call = bad_call()
    buffer = FaultBuffer(DEVICE)
    args = call.clone().args()
    packed_decode(*args, context="engine", faults=buffer)  # compiled outside the capture
    buffer.take()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        packed_decode(*args, context="engine", faults=buffer)
    torch.cuda.synchronize()
    assert buffer.host_flag[0] == 0  # nothing ran while capturing
    graph.replay()
    torch.cuda.synchronize()
    assert buffer.host_flag[0] == 1
    with pytest.raises(PendingFaults, match=r"^GDR241: `ssm_state_indices` holds slot 9 at row 1, but the pool has 5 "
                                            r"slots \(0\.\.4\) \[in gdn packed decode\] \(and 3 more faults\) "
                                            r"\(recorded by an earlier call; this call did not run\)$"):
        buffer.look("engine", "sglang")  # the engine's call: slot 0 on a live row is an error too
    assert buffer.host_flag[0] == 0


@pytest.mark.skipif(DEVICE == "cpu", reason="register counts of compiled kernels")
@pytest.mark.parametrize("kda", [False, True], ids=["gdn", "kda"])
def test_the_guarded_kernel_holds_as_many_programs_per_sm_as_the_plain_one(kda):
    # The fault record's branch alone lifted a KDA bf16 tile from 128 to 168 registers on sm_90 (12 resident
    # single-warp programs per SM instead of 16); the variant kept for later launches is capped.
    launcher = (kda_module if kda else gdn_module)._LAUNCHER
    call = make_call(B=128, H=32, HV=32, K=128, V=128, slots=list(range(1, 129)), pool_slots=130, kda=kda,
                     state=torch.bfloat16, seed=5)
    launcher.variants.clear()
    (kda_packed_decode if kda else packed_decode)(*call.clone().args(), context="engine", faults=FaultBuffer(DEVICE))
    (launch_kda_packed_decode if kda else gdn_launch)(*call.clone().args())
    compiled = {key[3] is None: entry[0] for key, entry in launcher.variants.items()}
    assert set(compiled) == {True, False}
    warps = compiled[True].metadata.num_warps
    assert resident_programs(compiled[False].n_regs, warps) >= resident_programs(compiled[True].n_regs, warps)
    assert compiled[False].n_regs <= max(compiled[True].n_regs, register_cap(compiled[True].n_regs, warps))


@pytest.mark.skipif(DEVICE == "cpu", reason="register counts of compiled kernels")
@pytest.mark.parametrize("kda", [False, True], ids=["gdn", "kda"])
def test_a_guarded_launch_smaller_than_the_sms_hold_is_compiled_under_the_lifted_cap(kda):
    # One row at HV = 32: 1024 single-warp programs. Under ptxas's own target (64 registers, full residency) the
    # guarded kernel issued 4 of its 16 state loads early and the rest after the q/k loads had returned.
    launcher = (kda_module if kda else gdn_module)._LAUNCHER
    call = make_call(B=1, H=32, HV=32, K=128, V=128, slots=[1], pool_slots=3, kda=kda, seed=6)
    launcher.variants.clear()
    (kda_packed_decode if kda else packed_decode)(*call.clone().args(), context="engine", faults=FaultBuffer(DEVICE))
    (launch_kda_packed_decode if kda else gdn_launch)(*call.clone().args())
    entries = {key[3] is None: entry for key, entry in launcher.variants.items()}
    (guarded, grid, device_index, _), plain = entries[False], entries[True][0]
    cap = one_wave_register_cap(grid, guarded.metadata.num_warps, triton_common.multiprocessors(device_index))
    if not triton_common.residency_model_applies(device_index) or cap is None:
        pytest.skip("the residency model does not describe this device, or it has too few SMs for one wave")
    assert guarded.metadata.maxnreg == cap
    assert plain.metadata.maxnreg is None  # the unguarded kernel keeps ptxas's own target
    assert guarded.n_regs <= cap


@pytest.mark.parametrize("kda", [False, True], ids=["gdn", "kda"])
def test_the_guarded_kernel_requests_its_single_tile_before_the_duplicate_scan(monkeypatch, kda):
    # At 16 (row, value head) pairs with an fp32 state the table loads the one tile after the gate arithmetic,
    # faster unguarded; the guarded kernel requests it first, so that its duplicate scan overlaps the state's
    # latency. With one row there is no scan, and the table's tiling stays.
    module = kda_module if kda else gdn_module
    monkeypatch.setattr(module._LAUNCHER, "variants", {})  # no cached variant: every launch reaches `launch`
    monkeypatch.setattr(module, "INTERPRETED", False)  # the table's choice (the interpreter takes one tiling)
    launched = []  # the constants of each launch; the kernel itself is not run (the test is about the choice)
    monkeypatch.setattr(module._LAUNCHER, "launch", lambda key, grid, device, args, constants, *rest: (
        launched.append(constants)))
    pair = make_call(B=2, H=4, HV=8, K=16, V=16, slots=[2, 1], pool_slots=3, kda=kda, seed=3)
    single = make_call(B=1, H=4, HV=8, K=16, V=16, slots=[1], pool_slots=2, kda=kda, seed=4)
    for call in (pair, single):
        (kda_packed_decode if kda else packed_decode)(*call.clone().args(), context="engine",
                                                      faults=FaultBuffer(DEVICE))
        (launch_kda_packed_decode if kda else gdn_launch)(*call.clone().args())
    rows = 4 if kda else 2  # the table's rows per tile at 8 and 16 pairs (KDA has no guarded row there)
    assert [(c["GUARD"], c["SCAN_BLOCK"] > 0, c["PREFETCH"], c["BV"], c["TILES"]) for c in launched] == [
        (True, True, True, rows, 1), (False, False, False, rows, 1),  # two rows: the guarded tile first
        (True, False, False, rows, 1), (False, False, False, rows, 1)]  # one row: no scan, after the gates


def test_shape_verdicts_are_cached_per_signature(monkeypatch):
    calls = []
    real = device_guard.shape_verdict
    monkeypatch.setattr(device_guard, "shape_verdict", lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    monkeypatch.setattr(device_guard, "_VERDICTS", {})
    first = make_call(B=2, H=1, HV=2, K=8, V=8, slots=[1, 2], pool_slots=3, seed=14)
    for _ in range(3):
        packed_decode(*first.clone().args())
    assert calls == ["gdn"] and len(device_guard._VERDICTS) == 1
    other = make_call(B=3, H=1, HV=2, K=8, V=8, slots=[1, 2, -1], pool_slots=3, seed=15)  # another batch size
    packed_decode(*other.args())
    assert calls == ["gdn", "gdn"] and len(device_guard._VERDICTS) == 2
    # A shape error is cached too, and raised on every call without re-running the contract.
    broken = list(first.args())
    broken[0] = first.mixed_qkv[None]
    for _ in range(2):
        with pytest.raises(ValueError, match=r"^`mixed_qkv` must be a 2D tensor \(got ndim=3\)\.$"):
            packed_decode(*broken)
    assert len(calls) == 3


def test_every_call_site_passes_its_tag_as_a_cell_of_one_alignment_and_faults_name_their_site(monkeypatch):
    # An int tag took part in Triton's specialization (1 a constant, multiples of 16 marked), so call sites ran
    # different binaries; a cell's address has the same alignment for every tag.
    buffer = FaultBuffer(DEVICE)
    launches = [buffer.guard_launch(f"layer {n}", 9 + n, "engine") for n in range(20)]
    assert [launch.tag for launch in launches] == list(range(20))
    assert [int(launch.tag_cell[0]) for launch in launches] == list(range(20))
    assert {launch.tag_cell.data_ptr() % 16 for launch in launches} == {0}
    grown = buffer.tag_cell(device_guard.INITIAL_TAG_CELLS + 5)  # the table doubles; earlier cells stay valid
    assert int(grown[0]) == device_guard.INITIAL_TAG_CELLS + 5 and grown.data_ptr() % 16 == 0
    assert buffer.tag_cells.shape[0] == 2 * device_guard.INITIAL_TAG_CELLS and int(launches[19].tag_cell[0]) == 19
    # A fault of the 20th call site is recorded with its tag, read from the cell.
    call = bad_call()
    packed_decode(*call.clone().args(), context="engine", faults=buffer, label="layer 19")
    faults, _ = buffer.take()
    assert {f.layer for f in faults} == {"layer 19"}
    # While a stream captures, a tag past the table gets the overflow cell instead of a write to the device.
    monkeypatch.setattr(device_guard, "is_capturing", lambda: True)
    past = buffer.tag_cell(10 * device_guard.INITIAL_TAG_CELLS)
    assert int(past[0]) == device_guard.OVERFLOW_TAG and buffer.tag_cells.shape[0] == 2 * device_guard.INITIAL_TAG_CELLS


def test_nothing_touches_the_host_while_a_stream_is_capturing(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    assert device_guard.is_capturing()
    buffer = FaultBuffer(DEVICE)
    looked = []
    monkeypatch.setattr(buffer, "look", lambda *a: looked.append(a))
    buffer.host_flag[0] = 1  # an earlier fault, flagged
    call = bad_call()
    ran = call.clone()
    packed_decode(*ran.args(), context="engine", faults=buffer)
    assert looked == []  # no read of earlier faults during capture
    assert buffer.take() == ([], 0)  # and no read on request either
    assert int(buffer.counter[0]) == 4 and buffer.host_flag[0] == 1  # the faults wait in the device buffer
    assert torch.equal(ran.pool_backing[S + 1], call.pool_backing[S + 1])
    guard = gdr_check.guard(engine="sglang", mode="raise")
    guard._buffers[torch.device(DEVICE)] = buffer
    assert guard.raise_pending() == []
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    with pytest.raises(gdr_check.GuardError, match=r"^GDR241: .* slot 9 at row 1, .*\[in gdn packed decode\] "
                                                     r"\(and 3 more errors\)$"):
        guard.raise_pending()


def test_the_check_kernel_hands_the_engine_indices_with_every_faulty_row_skipped():
    indices = torch.tensor(SLOTS, dtype=torch.int64, device=DEVICE)[None].expand(2, -1).t()[:, 0]  # strided
    buffer = FaultBuffer(DEVICE)
    for _ in range(2):  # the first launch compiles; on CUDA the second goes straight to the compiled kernel
        check = buffer.check_launch("sglang", indices.device)  # what the engine guard launches, once per call
        safe = check(indices, indices.shape[0], indices.stride(0), S, buffer.tag_for("layer 1", S))
        assert safe.tolist() == [1, -1, 2, -1, 0, -1, 3, 0, 0] and safe.dtype == torch.int64
        assert [(f.code, f.row, f.slot, f.layer) for f in buffer.take()[0]] == [
            (code, row, slot, "layer 1") for code, row, slot in SGLANG_FAULTS]


# -- the guard in an engine ---------------------------------------------------------------------------------------
def engine_arguments(slots=SLOTS):
    call = bad_call(slots=slots)
    # call.args() ends with use_qk_l2norm_in_kernel, which the engine's caller passes itself: zip stops before it
    return call, dict(zip(("mixed_qkv", "a", "b", "A_log", "dt_bias", "scale", "initial_state", "out",
                           "ssm_state_indices"), call.args(), strict=False))


def test_guard_wraps_every_binding_of_a_fake_engine_and_restores_them(monkeypatch):
    from fake_engine import SGLANG_GDN_CALLER, SGLANG_KERNELS, install

    engine = install(monkeypatch)
    seen = []
    original = engine.sglang_kernels.fused_recurrent_gated_delta_rule_packed_decode

    @functools.wraps(original)  # the engine's signature, so the guard recognises the API
    def spy(*args, **kwargs):
        seen.append(kwargs.get("ssm_state_indices", args[8] if len(args) > 8 else None).tolist())
        return original(*args, **kwargs)

    monkeypatch.setattr(engine.sglang_kernels, "fused_recurrent_gated_delta_rule_packed_decode", spy)
    monkeypatch.setattr(engine.gdn_caller, "fused_recurrent_gated_delta_rule_packed_decode", spy)
    call, arguments = engine_arguments()
    with gdr_check.guard(engine="sglang", mode="record") as guard:
        holders = sorted(h for site in guard.sites for h in site.holders)
        engine.gdn_caller.forward_decode(**arguments)
        assert sys.modules[SGLANG_GDN_CALLER].fused_recurrent_gated_delta_rule_packed_decode is not spy
    assert f"{SGLANG_GDN_CALLER}.fused_recurrent_gated_delta_rule_packed_decode" in holders
    assert f"{SGLANG_KERNELS}.fused_recurrent_gated_delta_rule_packed_decode" in holders
    assert engine.gdn_caller.fused_recurrent_gated_delta_rule_packed_decode is spy  # restored
    assert seen == [[1, -1, 2, -1, 0, -1, 3, 0, 0]]  # the engine's kernel got the skipped rows
    found = [d for d in guard.diagnostics if d.code in device_guard.FAULT_CODES.values()]
    assert [(d.code, d.severity) for d in found] == [
        ("GDR241", "error"), ("GDR242", "error"), ("GDR247", "error"), ("GDR241", "error")]
    assert found[0].notes[0] == "in pool #0" and guard.calls == 1


def test_a_guard_takes_a_versioned_engine(monkeypatch):
    """`engine="vllm@0.28"`, as the library's other entry points take it: vLLM's functions are wrapped and
    checked by that profile (block 0 skipped, no reserved slot)."""
    from fake_engine import install

    engine = install(monkeypatch)
    _, arguments = engine_arguments()
    for version in ("vllm@0.28", "vllm"):
        with gdr_check.guard(engine=version, mode="record") as guard:
            engine.vllm_caller.forward_decode(**arguments)
        assert guard.calls == 1 and guard.engine == version
        faults = [(d.code, d.message) for d in guard.diagnostics if d.code in device_guard.FAULT_CODES.values()]
        assert sorted(code for code, _ in faults) == ["GDR241", "GDR241", "GDR242"]
    with pytest.raises(ValueError, match=r"^no vLLM profile for version '0\.1' \(engine 'vllm@0\.1'\)"):
        gdr_check.guard(engine="vllm@0.1")


def test_guard_modes(monkeypatch):
    from fake_engine import install

    engine = install(monkeypatch)
    _, arguments = engine_arguments()
    # Raise mode names the first error and counts the others (the four faults of the call are all errors).
    with pytest.raises(gdr_check.GuardError,
                       match=r"^GDR241: `ssm_state_indices` holds slot 9 at row 1.* \(and 3 more errors\)$"):
        with gdr_check.guard(engine="sglang"):
            engine.gdn_caller.forward_decode(**arguments)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gdr_check.guard(engine="sglang", mode="warn"):
            engine.gdn_caller.forward_decode(**arguments)
    codes = [str(w.message).split(":")[1].strip() for w in caught]
    assert [c for c in codes if c in device_guard.FAULT_CODES.values()] == ["GDR241", "GDR242", "GDR247", "GDR241"]
    # A shape error refuses the call in raise mode before the engine's kernel runs.
    broken = dict(arguments, mixed_qkv=arguments["mixed_qkv"][None])
    with pytest.raises(gdr_check.GuardError, match=r"^GDR2\d\d: `mixed_qkv` must be a 2D tensor"):
        with gdr_check.guard(engine="sglang"):
            engine.gdn_caller.forward_decode(**broken)


def test_faults_past_the_guards_ring_are_counted_in_every_mode(monkeypatch):
    """Four faults, two records kept: the first two numbered are itemised (which rows they are is the device's
    order) and the other two are counted, not lost, in each mode. (Faults raced for the rows of a ring of the last
    two on a GPU, which left none of them itemised.)"""
    from fake_engine import install

    engine = install(monkeypatch)
    _, arguments = engine_arguments()
    unlisted = ("counted on the device but not kept (only the first max_records since the last read are): "
                "raise max_records")
    with gdr_check.guard(engine="sglang", mode="record", max_records=2) as guard:
        engine.gdn_caller.forward_decode(**arguments)
    slot_faults = [d for d in guard.diagnostics if d.code in device_guard.FAULT_CODES.values()]
    assert len(slot_faults) == 2 and guard.unlisted_faults == 2
    with pytest.raises(gdr_check.GuardError,
                       match=rf"^GDR24[127]: .* \(and 1 more error, and 2 more faults {re.escape(unlisted)}\)$"):
        with gdr_check.guard(engine="sglang", max_records=2):
            engine.gdn_caller.forward_decode(**arguments)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gdr_check.guard(engine="sglang", mode="warn", max_records=2):
            engine.gdn_caller.forward_decode(**arguments)
    assert f"gdr_check.guard: 2 faults {unlisted}" in [str(w.message) for w in caught]


def test_faults_none_of_which_were_kept_are_raised_for_the_engine_and_not_for_a_direct_call():
    """Six faults numbered, no record written. The first read may be racing kernels still storing them: it
    stops and keeps the flag. The next read comes after a synchronisation that those kernels had to finish
    before: their rows were never kept, and all six are counted. For the engine's calls every slot fault is an
    error: raised, with the count; for a direct call they may be notes (slot 0), which never raise alone."""
    for context, raises in (("engine", True), ("direct", False)):
        buffer = FaultBuffer(DEVICE, max_records=2)
        buffer.counter[0] += 6
        buffer.host_flag[0] = 1
        buffer.look(context, "sglang")
        assert buffer.host_flag[0] == 1  # nothing read yet: the rows may still be being stored
        if raises:
            with pytest.raises(PendingFaults) as pending:
                buffer.look(context, "sglang")
            assert str(pending.value) == ("6 faults counted on the device but not kept (only the first max_records "
                                          "since the last read are): raise max_records (recorded by an earlier "
                                          "call; this call did not run)")  # (a look is a later call's)
            assert (pending.value.diagnostics, pending.value.total) == ([], 6)
        else:
            buffer.look(context, "sglang")
        assert buffer.host_flag[0] == 0 and buffer.take() == ([], 0)


def test_a_guard_error_for_faults_none_of_which_the_ring_kept_says_how_many():
    assert str(gdr_check.GuardError([], 3)) == ("3 faults counted on the device but not kept (only the first "
                                                "max_records since the last read are): raise max_records")


@pytest.mark.skipif(DEVICE != "cpu", reason="the host path is for CPU tensors")
def test_cpu_tensors_without_the_interpreter_are_checked_on_the_host(monkeypatch):
    """Triton cannot launch on CPU tensors outside its interpreter (`0 active drivers`): the guard reads the slots
    on the host instead, where that costs no device sync, and reports them in its mode; nothing is launched."""
    from fake_engine import install

    engine = install(monkeypatch)
    monkeypatch.setattr(triton_common, "INTERPRETED", False)
    monkeypatch.setattr(device_guard.CheckLaunch, "__call__", lambda *args, **kwargs: pytest.fail("launched"))
    call, arguments = engine_arguments()
    with gdr_check.guard(engine="sglang", mode="record") as guard:
        engine.gdn_caller.forward_decode(**arguments)
    found = [(d.code, d.message) for d in guard.diagnostics if d.code in device_guard.FAULT_CODES.values()]
    assert found == [
        ("GDR241", f"`ssm_state_indices` holds slot 9 at row 1, but the pool has {S} slots (0..{S - 1})"),
        ("GDR241", f"`ssm_state_indices` holds slot {S} at row 5, but the pool has {S} slots (0..{S - 1})"),
        ("GDR242", "slot 2 is used by rows 2, 3 of one batch"),
        ("GDR247", "row 4 uses slot 0, which sglang reserves as the dummy slot that padding rows write"),
    ]
    assert "GDR251" in [d.code for d in guard.diagnostics]  # and why: the tensors are on the CPU
    with pytest.raises(gdr_check.GuardError, match=r"^GDR241: `ssm_state_indices` holds slot 9 at row 1"):
        with gdr_check.guard(engine="sglang"):
            engine.gdn_caller.forward_decode(**arguments)


def test_guard_as_a_decorator(monkeypatch):
    from fake_engine import install

    engine = install(monkeypatch)
    _, arguments = engine_arguments(slots=[1, 2, 3, 4, -1, -1, 0, 0, 0])
    guard = gdr_check.guard(engine="sglang", mode="record")
    step = guard(engine.gdn_caller.forward_decode)
    step(**arguments)
    step(**arguments)
    assert guard.calls == 2 and [d for d in guard.diagnostics if d.severity == "error"] == []


def _real_modules(real, tree, monkeypatch, tmp_path, missing, **options):
    """An engine's real modules, loaded by the helper module `real` from the tree `tree(tmp_path)` finds (the
    test is skipped with `missing` when there is none); `options` go to both."""
    root = tree(tmp_path, **options)
    if root is None:
        pytest.skip(missing)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return real.load(monkeypatch, root, **options)


def test_guard_wraps_sglangs_real_modules(monkeypatch, tmp_path):
    import sglang_real

    modules = _real_modules(sglang_real, sglang_real.sglang_tree, monkeypatch, tmp_path,
                            "set GDR_CHECK_SGLANG_PATH to the sglang 0.5.23 wheel or an unpacked tree")
    kernels, gdn_backend, kda_backend = (modules[n] for n in (sglang_real.KERNELS, sglang_real.GDN_BACKEND,
                                                             sglang_real.KDA_BACKEND))
    gdn_original = kernels.fused_recurrent_gated_delta_rule_packed_decode
    kda_original = kernels.fused_recurrent_kda_packed_decode
    call = bad_call(slots=[1, 9, 2, 2])
    ran = call.clone()
    with gdr_check.guard(engine="sglang", mode="record") as guard:
        holders = sorted(h for site in guard.sites for h in site.holders)
        assert holders == sorted([
            f"{sglang_real.KERNELS}.fused_recurrent_gated_delta_rule_packed_decode",
            f"{sglang_real.KERNELS}.fused_recurrent_kda_packed_decode",
            f"{sglang_real.GDN_BACKEND}.fused_recurrent_gated_delta_rule_packed_decode",
            f"{sglang_real.KDA_BACKEND}.fused_recurrent_kda_packed_decode",
        ])
        backend = gdn_backend.TritonGDNKernel()
        HV, V = ran.initial_state.shape[1:3]
        out = backend.packed_decode(ran.mixed_qkv, ran.a, ran.b, A_log=ran.A_log, dt_bias=ran.dt_bias,
                                    scale=ran.scale, ssm_states=ran.initial_state, cache_indices=ran.ssm_state_indices,
                                    num_v_heads=HV, head_v_dim=V)
    assert kernels.fused_recurrent_gated_delta_rule_packed_decode is gdn_original
    assert gdn_backend.fused_recurrent_gated_delta_rule_packed_decode is gdn_original
    assert kda_backend.fused_recurrent_kda_packed_decode is kda_original
    found = [d for d in guard.diagnostics if d.code in device_guard.FAULT_CODES.values()]
    assert [(d.code, d.notes[0]) for d in found] == [("GDR241", "in pool #0"), ("GDR242", "in pool #0")]
    # sglang's own kernel ran on the guarded indices: rows 1 and 3 skipped, canaries untouched.
    assert torch.equal(ran.pool_backing[0], call.pool_backing[0])
    assert torch.equal(ran.pool_backing[S + 1], call.pool_backing[S + 1])
    assert torch.equal(out[0, 1], torch.zeros_like(out[0, 1])) and torch.equal(out[0, 3], torch.zeros_like(out[0, 3]))


def test_guard_wraps_vllms_real_modules(monkeypatch, tmp_path):
    import vllm_real

    modules = _real_modules(vllm_real, vllm_real.vllm_tree, monkeypatch, tmp_path,
                            "set GDR_CHECK_VLLM_PATH to a vLLM wheel (0.27 or later, e.g. 0.33.0) or an unpacked tree")
    ops, kernels, layer = (modules[n] for n in (vllm_real.OPS, vllm_real.KERNELS, vllm_real.GDN_LAYER))
    original = kernels.fused_recurrent_gated_delta_rule_packed_decode
    # row: 0 ok, 1 past the pool (GDR241), 2 ok, 3 repeats row 2's slot (GDR242), 4 block 0 (skipped by vLLM:
    # no fault), 5 exactly one past the end (GDR241), 6 ok, 7 -1 (skipped).
    call = bad_call(slots=[1, 9, 2, 2, 0, S, 3, -1])
    guarded, unguarded = call.clone(), sanitized(call, keep={0, 2, 4, 6, 7})
    with gdr_check.guard(engine="vllm", mode="record") as guard:
        holders = sorted(h for site in guard.sites for h in site.holders)
        assert holders == sorted(f"{module}.fused_recurrent_gated_delta_rule_packed_decode"
                                 for module in (vllm_real.KERNELS, vllm_real.OPS, vllm_real.GDN_LAYER))
        vllm_real.decode(monkeypatch, modules, guarded)
    assert guard.calls == 1
    for module in (kernels, ops, layer):
        assert module.fused_recurrent_gated_delta_rule_packed_decode is original
    errors = [(d.code, d.message, d.notes[0]) for d in guard.diagnostics if d.severity == "error"]
    assert errors == [
        ("GDR241", "`ssm_state_indices` holds slot 9 at row 1, but the pool has 5 slots (0..4)", "in pool #0"),
        ("GDR242", "slot 2 is used by rows 2, 3 of one batch", "in pool #0"),
        ("GDR241", "`ssm_state_indices` holds slot 5 at row 5, but the pool has 5 slots (0..4)", "in pool #0"),
    ]
    # vLLM's own kernel ran on the guarded indices: the same step with the faulty rows set to -1 by hand,
    # unguarded, gives the same bits everywhere (pool, canaries, out); the canaries are untouched.
    vllm_real.decode(monkeypatch, modules, unguarded)
    assert torch.equal(guarded.pool_backing, unguarded.pool_backing) and torch.equal(guarded.out, unguarded.out)
    assert torch.equal(guarded.pool_backing[0], call.pool_backing[0])
    assert torch.equal(guarded.pool_backing[S + 1], call.pool_backing[S + 1])
    for row in (1, 3, 4, 5, 7):  # vLLM writes zeros for the rows it skips
        assert torch.equal(guarded.out[row], torch.zeros_like(guarded.out[row]))
    assert not torch.equal(guarded.pool_backing[1:S + 1], call.pool_backing[1:S + 1])  # live rows did run
    # Unguarded, the same step writes slot S: the canary after the pool (row 1's slot 9 is dropped here: it lies
    # past the backing, and reading it would read memory outside any tensor).
    raw = sanitized(call, keep={0, 2, 3, 4, 5, 6, 7})
    vllm_real.decode(monkeypatch, modules, raw)
    assert not torch.equal(raw.pool_backing[S + 1], call.pool_backing[S + 1])


def _helion_modules(monkeypatch, tmp_path):
    """sglang's real Helion KDA decode and backend over the stand-in `helion`, its compiled kernels replaced by
    gdr-check's Triton KDA kernel (tests/sglang_real.py); skips without GDR_CHECK_SGLANG_PATH."""
    import sglang_real

    modules = _real_modules(sglang_real, sglang_real.sglang_tree, monkeypatch, tmp_path,
                            "set GDR_CHECK_SGLANG_PATH to the sglang 0.5.23 wheel or an unpacked tree", helion=True)
    decode = modules[sglang_real.HELION_DECODE]
    chosen = sglang_real.use_kernel(monkeypatch, decode, launch_kda_packed_decode)
    return decode, modules[sglang_real.HELION_BACKEND], chosen


def _helion_step(backend, call):
    """One decode step through the backend's `packed_decode`, as sglang's KDA layer calls it."""
    HV, V = call.initial_state.shape[1:3]
    return backend.packed_decode(call.mixed_qkv, call.a, call.b, A_log=call.A_log, dt_bias=call.dt_bias,
                                 scale=call.scale, ssm_states=call.initial_state,
                                 cache_indices=call.ssm_state_indices, num_v_heads=HV, head_v_dim=V)


def test_guard_wraps_sglangs_helion_kda_decode_in_the_module_and_in_live_backends(monkeypatch, tmp_path):
    import sglang_real

    decode, helion_backend, chosen = _helion_modules(monkeypatch, tmp_path)
    name = "helion_fused_recurrent_kda_packed_decode"
    original = getattr(decode, name)
    early = helion_backend.HelionKDAKernel(enable_prefill=False)  # built before the guard: holds the function
    assert early._packed_decode is original
    call = bad_call(kda=True, slots=[1, 9, 2, 2])
    ran_early, ran_late = call.clone(), call.clone()
    with gdr_check.guard(engine="sglang", mode="record") as guard:
        [site] = [s for s in guard.sites if s.original is original]
        assert site.variant == "kda"
        assert sorted(site.holders) == sorted([
            f"{sglang_real.HELION_DECODE}.{name}",
            f"{sglang_real.HELION_BACKEND}.HelionKDAKernel@{id(early):#x}._packed_decode",
        ])
        late = helion_backend.HelionKDAKernel(enable_prefill=False)  # built inside: imports the wrapper
        assert late._packed_decode is early._packed_decode is not original
        out_late = _helion_step(late, ran_late)
        out_early = _helion_step(early, ran_early)
    assert getattr(decode, name) is original
    assert early._packed_decode is original and late._packed_decode is original  # restored, both
    assert chosen == ["_helion_fused_recurrent_kda_packed_decode"] * 2  # the wrapper's fp32-state kernel
    found = [(d.code, d.notes[0]) for d in guard.diagnostics if d.code in device_guard.FAULT_CODES.values()]
    # One check for the step: both calls pass the same indices tensor, each with its own pool (see guard.py).
    assert found == [("GDR241", "in pool #0"), ("GDR242", "in pool #0")]
    # The Helion wrapper ran on the guarded indices: rows 1 and 3 skipped (zero output), canaries untouched, and
    # rows 0 and 2 as the float64 reference of the call with those rows skipped.
    reference = sanitized(call, keep={0, 2})
    expected_out, expected_state = naive_kda_packed_decode(*reference.args(), engine="sglang")
    for ran, out in ((ran_late, out_late), (ran_early, out_early)):
        assert torch.equal(ran.pool_backing[0], call.pool_backing[0])
        assert torch.equal(ran.pool_backing[S + 1], call.pool_backing[S + 1])
        for row in (1, 3):
            assert torch.equal(out[0, row], torch.zeros_like(out[0, row]))
        torch.testing.assert_close(out[0, [0, 2]].double(), expected_out[[0, 2], 0], rtol=1e-4, atol=1e-5)
        for slot in (1, 2):
            torch.testing.assert_close(ran.initial_state[slot].double(), expected_state[slot], rtol=1e-4, atol=1e-5)


def test_capture_records_sglangs_helion_kda_decode_through_a_backend_built_before_it(monkeypatch, tmp_path):
    decode, helion_backend, _ = _helion_modules(monkeypatch, tmp_path)
    backend = helion_backend.HelionKDAKernel(enable_prefill=False)
    call = make_call(B=3, H=1, HV=2, K=8, V=8, slots=[1, 2, 3], pool_slots=S, kda=True, seed=14)
    with gdr_check.capture(tmp_path / "rec.json", engine="sglang") as recording:
        _helion_step(backend, call)
    [entry] = recording.calls
    assert (entry["function"], entry["variant"], entry["engine"]) == (
        "helion_fused_recurrent_kda_packed_decode", "kda", "sglang")
    assert entry["call"]["use_qk_l2norm_in_kernel"] is True and entry["call"]["ssm_state_indices"]["values"] == [
        1, 2, 3]
    assert backend._packed_decode is decode.helion_fused_recurrent_kda_packed_decode


# -- the guard's steady state -------------------------------------------------------------------------------------
def _counting_verdicts(monkeypatch):
    calls = []
    real = device_guard.shape_verdict
    monkeypatch.setattr(device_guard, "shape_verdict", lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    return calls


def test_the_guard_decides_once_per_signature_and_looks_up_the_plan_afterwards(monkeypatch):
    from fake_engine import install

    engine = install(monkeypatch)
    verdicts = _counting_verdicts(monkeypatch)
    _, arguments = engine_arguments(slots=[1, 2, 3, 4, -1, -1, 0, 0, 0])
    with gdr_check.guard(engine="sglang", mode="record") as guard:
        slow = []
        real_plan = guard._plan
        monkeypatch.setattr(guard, "_plan", lambda *a: slow.append(1) or real_plan(*a))
        for _ in range(3):
            engine.gdn_caller.forward_decode(**arguments)
        assert verdicts == ["gdn"] and slow == [1]  # the wrapper's inlined key is `_signature`'s: no slow path
        from gdr_check.pipeline.guard import _signature

        keys = [key for s in guard.sites for key in s.plans]
        assert keys == [_signature(dict(arguments, use_qk_l2norm_in_kernel=True))]
        [site] = [s for s in guard.sites if s.variant == "gdn" and s.plans]
        [plan] = site.plans.values()
        assert (plan.pool_slots, plan.batch, plan.stride, list(plan.tags.values())) == (S, 9, 1, [0])
        # Another pool of the same signature (another layer): the same plan, a tag of its own; no new verdict.
        other = dict(arguments, initial_state=arguments["initial_state"].clone())
        engine.gdn_caller.forward_decode(**other)
        assert verdicts == ["gdn"] and len(plan.tags) == 2
        # The scale is part of the signature: a NaN scale is judged (GDR245) and refused, once per value.
        for _ in range(2):  # a fresh NaN object per call: still judged once
            engine.gdn_caller.forward_decode(**dict(arguments, scale=float("nan")))
        assert verdicts == ["gdn", "gdn"]
        # A new batch size is a new signature.
        _, smaller = engine_arguments(slots=[1, 2, 3])
        engine.gdn_caller.forward_decode(**smaller)
        assert verdicts == ["gdn", "gdn", "gdn"] and len(site.plans) == 3
    assert guard.calls == 7
    assert [d.code for d in guard.diagnostics if d.severity == "error"] == ["GDR245"]


@pytest.mark.parametrize("implementation", ["torch", "python"])
def test_the_guard_compares_with_the_last_plan_and_still_tells_every_term_apart(monkeypatch, implementation):
    # Steady state compares the call with the site's last plan (its tensors by `hotpath.tensor_matcher`: torch's
    # C++ check, or Python where a torch has none); a call that differs from it in any one term must be judged
    # as the new signature it is, and the base call then finds its own plan again.
    from fake_engine import install

    if implementation == "python":
        monkeypatch.setattr(torch._C._dynamo.guards, "TensorGuards", None)  # calling it fails: the Python test
    engine = install(monkeypatch)
    verdicts = _counting_verdicts(monkeypatch)
    _, arguments = engine_arguments(slots=[1, 2, 3])
    _, other_batch = engine_arguments(slots=[1, 2])
    out, indices = arguments["out"], arguments["ssm_state_indices"]
    variants = [
        dict(arguments, out=out.transpose(2, 3).contiguous().transpose(2, 3)),  # same shape, other strides
        dict(arguments, b=arguments["b"].double()),  # another dtype
        dict(arguments, scale=float(arguments["scale"]) * 2),  # another scalar value
        dict(arguments, scale=numpy.float64(arguments["scale"])),  # an equal scale of another type
        dict(arguments, ssm_state_indices=indices.long()),  # the indices' dtype
        dict(arguments, ssm_state_indices=torch.stack([indices, indices], 1)[:, 0]),  # the indices' stride
    ]
    with gdr_check.guard(engine="sglang", mode="record") as guard:
        slow = []
        real_plan = guard._plan
        monkeypatch.setattr(guard, "_plan", lambda *a: slow.append(1) or real_plan(*a))
        for _ in range(2):  # two signatures taking turns: each finds its own plan after its first call
            engine.gdn_caller.forward_decode(**arguments)
            engine.gdn_caller.forward_decode(**other_batch)
        assert len(verdicts) == 2 and len(slow) == 2
        for number, variant in enumerate(variants, start=3):
            engine.gdn_caller.forward_decode(**arguments)  # the base plan comes last: compared term by term
            engine.gdn_caller.forward_decode(**variant)
            assert len(verdicts) == number, number  # judged once, as the new signature it is
        engine.gdn_caller.forward_decode(**arguments)
        [site] = [s for s in guard.sites if s.variant == "gdn" and s.plans]
        assert len(verdicts) == 8 and len(site.plans) == 8 and site.recent is site.plans[site.recent.key]
        assert {plan.matches.__name__ for plan in site.plans.values()} == {
            "matches" if implementation == "torch" else "same_metadata"}


def test_calls_the_c_check_refuses_but_the_signature_accepts_stay_on_the_steady_path(monkeypatch):
    # torch's tensor check also compares requires_grad (and the exact type, the dispatch keys): layers whose
    # `A_log` is a Parameter requiring grad in one and a plain tensor in the next share one signature. The plan's
    # test accepts both (the Python comparison decides where the C++ check refuses), so alternating calls get no
    # new verdict, no full lookup and no new test; a test made anew per call cost 15 µs per call.
    from fake_engine import install
    from gdr_check.call.packed_call import TENSOR_ARGUMENTS
    from gdr_check.pipeline import guard as guard_module

    engine = install(monkeypatch)
    verdicts = _counting_verdicts(monkeypatch)
    made = []
    real_matcher = guard_module.tensor_matcher
    monkeypatch.setattr(guard_module, "tensor_matcher", lambda tensors: made.append(1) or real_matcher(tensors))
    _, arguments = engine_arguments(slots=[1, 2, 3])
    trained = dict(arguments, A_log=torch.nn.Parameter(arguments["A_log"].clone()))
    with gdr_check.guard(engine="sglang", mode="record") as guard:
        engine.gdn_caller.forward_decode(**arguments)
        slow = []
        real_plan = guard._plan
        monkeypatch.setattr(guard, "_plan", lambda *a: slow.append(1) or real_plan(*a))
        for _ in range(5):
            engine.gdn_caller.forward_decode(**trained)
            engine.gdn_caller.forward_decode(**arguments)
        assert (len(verdicts), len(made), len(slow)) == (1, 1, 0)
        [site] = [s for s in guard.sites if s.variant == "gdn" and s.plans]
        [plan] = site.plans.values()
        assert plan.matches(*(trained[name] for name in TENSOR_ARGUMENTS))
    assert not [d for d in guard.diagnostics if d.severity == "error"]


def test_an_omitted_flag_is_keyed_as_the_functions_default_and_its_type_counts(monkeypatch):
    # The contract runs with an omitted `use_qk_l2norm_in_kernel` as the function's default (False): the same
    # signature as an explicit False, and another one than an explicit None or an int 1 (True == 1).
    from fake_engine import install

    engine = install(monkeypatch)
    verdicts = _counting_verdicts(monkeypatch)
    _, arguments = engine_arguments(slots=[1, 2, 3])
    with gdr_check.guard(engine="sglang", mode="record"):
        decode = engine.sglang_kernels.fused_recurrent_gated_delta_rule_packed_decode  # the guard's wrapper
        decode(**arguments)  # omitted: False
        decode(**arguments, use_qk_l2norm_in_kernel=False)
        assert len(verdicts) == 1
        decode(**arguments, use_qk_l2norm_in_kernel=None)
        decode(**arguments, use_qk_l2norm_in_kernel=True)
        decode(**arguments, use_qk_l2norm_in_kernel=1)
        decode(**arguments, use_qk_l2norm_in_kernel=True)
        assert len(verdicts) == 4


def test_a_refused_signature_raises_on_every_call_in_raise_mode(monkeypatch):
    from fake_engine import install

    engine = install(monkeypatch)
    verdicts = _counting_verdicts(monkeypatch)
    _, arguments = engine_arguments(slots=[1, 2, 3, 4, -1, -1, 0, 0, 0])
    broken = dict(arguments, out=arguments["out"][:, 0])
    with gdr_check.guard(engine="sglang") as guard:
        for _ in range(2):
            with pytest.raises(gdr_check.GuardError, match=r"^GDR2\d\d: `out` must have shape"):
                engine.gdn_caller.forward_decode(**broken)
    assert verdicts == ["gdn"] and guard.calls == 2


def test_a_meta_tensor_in_a_guarded_call_is_gdr228(monkeypatch):
    from fake_engine import install

    engine = install(monkeypatch)
    _, arguments = engine_arguments(slots=[1, 2, 3, 4, -1, -1, 0, 0, 0])
    with gdr_check.guard(engine="sglang", mode="record") as guard:
        engine.gdn_caller.forward_decode(**dict(arguments, a=arguments["a"].to("meta")))
    assert [(d.code, d.message) for d in guard.diagnostics] == [
        ("GDR228", "`a` is a meta tensor (shapes only, no data to run on), not a dense strided tensor")]


def test_a_guarded_call_with_an_argument_that_is_not_a_tensor_is_judged_once(monkeypatch):
    from fake_engine import install

    engine = install(monkeypatch)
    verdicts = _counting_verdicts(monkeypatch)
    _, arguments = engine_arguments(slots=[1, 2, 3, 4, -1, -1, 0, 0, 0])
    with gdr_check.guard(engine="sglang", mode="record") as guard:
        for _ in range(2):
            with pytest.raises(AttributeError):  # the engine's own kernel fails on it, as it would unguarded
                engine.gdn_caller.forward_decode(**dict(arguments, mixed_qkv=None))
    assert verdicts == ["gdn"]
    assert [(d.code, d.message) for d in guard.diagnostics] == [
        ("GDR228", "`mixed_qkv` is None, not a dense strided tensor")]


def test_the_checked_kernel_judges_a_new_scale_or_bound_value(monkeypatch):
    monkeypatch.setattr(device_guard, "_VERDICTS", {})
    call = make_call(B=2, H=1, HV=2, K=8, V=8, slots=[1, 2], pool_slots=3, kda=True, seed=16)
    kda_packed_decode(*call.clone().args())
    args = list(call.clone().args())
    args[5] = float("nan")
    with pytest.raises(ValueError, match=r"^`scale` is nan; not a number: the kernel needs a positive float"):
        kda_packed_decode(*args)
    args = list(call.clone().args())
    args[10] = [-5.0]  # unhashable: keyed by its bounded repr
    with pytest.raises(ValueError, match=r"^`lower_bound` is \[-5\.0\]; the KDA safe gate needs a finite negative"):
        kda_packed_decode(*args)
    args[10] = [-7.0]  # another list: judged again, and named as given
    with pytest.raises(ValueError, match=r"^`lower_bound` is \[-7\.0\]; the KDA safe gate needs a finite negative"):
        kda_packed_decode(*args)


class _FakeJit:
    """A stand-in for a Triton JIT kernel on the CPU: `kernel[grid](*args, **constexprs, num_warps=...)` records
    the launch and returns a compiled kernel whose `run` records the direct launches."""

    def __init__(self, arg_names):
        self.arg_names = list(arg_names)
        self.jit, self.runs = [], []

    def __getitem__(self, grid):
        def launch(*args, num_warps, **constexprs):
            self.jit.append((args[0].dtype, grid, constexprs, num_warps))
            return _FakeCompiled(self, args[0].dtype)
        return launch


class _FakeCompiled:
    function, packed_metadata = "function", "metadata"

    def __init__(self, jit, dtype):
        self.jit, self.dtype = jit, dtype

    def run(self, *args):
        # 9 launcher arguments (grid, stream, function, metadata, hooks), then the kernel's 9 run-time arguments
        # (indices first), then its constants
        self.jit.runs.append((self.dtype, args[:4], args[9].dtype, args[18:]))


def test_the_check_launch_goes_to_the_compiled_variant_of_the_index_dtype_alignment_and_batch(monkeypatch):
    """The CUDA fast path (`DirectLauncher`), on the CPU: after a JIT launch, launches of the same variant (index
    dtype, 16-byte alignment, batch: the grid and the scan's shape) go to the compiled kernel's `run` on the
    current stream, with the constants in the kernel's order; another variant goes through the JIT."""
    kernel = _FakeJit(device_guard.slot_guard_kernel.arg_names)
    monkeypatch.setattr(device_guard, "slot_guard_kernel", kernel)
    buffer = FaultBuffer("cpu", max_records=8)
    launch = device_guard.CheckLaunch("sglang", buffer, "cpu")
    launch.device_index = 0  # as on a CUDA device
    launch.launcher._stream = lambda index: 1234 + index  # the current stream of device 0
    small = torch.tensor([1, 2, 3], dtype=torch.int32)
    wide = torch.tensor([1, 2, 3], dtype=torch.int64)
    for indices in (small, small, small, wide, wide):
        safe = launch(indices, 3, 1, 4, 0)
        assert safe.dtype == indices.dtype and safe.shape == (3,)
    constants = {"SKIP_AT_OR_BELOW": -1, "RESERVED_ZERO": True, "SCAN_BLOCK": 4, "SCAN_LOOP": False, "MAX_RECORDS": 8,
                 "RELEASE": False}  # not a CUDA device: no programmatic launch after the check
    assert kernel.jit == [(torch.int32, (3,), constants, 1), (torch.int64, (3,), constants, 1)]
    ordered = tuple(constants.values())  # the kernel's own order after its run-time arguments
    assert kernel.runs == [(torch.int32, (3, 1, 1, 1234), torch.int32, ordered)] * 2 + [
        (torch.int64, (3, 1, 1, 1234), torch.int64, ordered)]
    # Another batch is another variant: one vector load of up to 1024 rows (4 warps), a loop beyond.
    for batch in (300, 300, 2000):
        launch(torch.ones(batch, dtype=torch.int32), batch, 1, 4, 0)
    assert [(grid, c["SCAN_BLOCK"], c["SCAN_LOOP"], warps) for _, grid, c, warps in kernel.jit[2:]] == [
        ((300,), 512, False, 4), ((2000,), 1024, True, 4)]
    assert kernel.runs[-1][:2] == (torch.int32, (300, 1, 1, 1234))


def test_the_check_releases_the_next_launch_only_for_a_checked_kernel_and_only_where_it_can(monkeypatch):
    # A programmatic launch after the check (PDL) waits for the checked indices on the device; the engine
    # guard's check is followed by the engine's own kernel, which may not wait, so it never releases it.
    kernel = _FakeJit(device_guard.slot_guard_kernel.arg_names)
    monkeypatch.setattr(device_guard, "slot_guard_kernel", kernel)
    buffer = FaultBuffer("cpu", max_records=8)
    check = buffer.check_launch("sglang", torch.device("cpu"))
    check.device_index = 0  # as on a CUDA device
    check.launcher._stream = lambda index: 0
    indices = torch.tensor([1, 2, 3], dtype=torch.int32)
    check(indices, 3, 1, 4, 0, release=True)  # this device cannot: no release
    check.programmatic = True  # as on sm_90 and later
    buffer.check_launch("sglang", indices.device)(indices, 3, 1, 4, 0)  # the engine guard's check
    check(indices, 3, 1, 4, 0, release=True)  # a checked kernel's
    check(indices, 3, 1, 4, 0, release=True)  # the same variant again: the direct launch
    assert [constants["RELEASE"] for _, _, constants, _ in kernel.jit] == [False, True]
    assert [run[3][-1] for run in kernel.runs] == [False, True]  # the release variant launched directly


class _FakeRegisters:
    """A compiled kernel's stand-in with a register count (`n_regs` is set when its binary loads, on `run`)."""

    def __init__(self, registers):
        self.registers, self.n_regs = registers, 0

    @property
    def run(self):
        self.n_regs = self.registers
        return None


@pytest.mark.parametrize("lift, grid, guarded, expected", [
    (True, 512, False, 255),  # 8 pairs of 2-row tiles at V = 128: 8 programs per SM with the successor
    (True, 1024, False, 128),  # 64 pairs of 8-row tiles: 16 per SM
    (True, 2048, False, None),  # 32 per SM, every slot: ptxas's own target
    (False, 512, False, None),  # a tiling that does not ask for it keeps ptxas's own target
    (False, 512, True, 255),  # a guarded launch lifts it whatever its tiling
])
def test_a_one_wave_launch_lifts_the_register_target_when_its_tiling_or_guard_asks(monkeypatch, lift, grid, guarded,
                                                                                   expected):
    launches = []

    class Kernel:
        arg_names = ()

        def __getitem__(self, launch_grid):
            def launch(*args, **options):
                launches.append(options)
            return launch

    monkeypatch.setattr(triton_common, "residency_model_applies", lambda device_index: True)
    monkeypatch.setattr(triton_common, "multiprocessors", lambda device_index: 132)
    plain = ((), {}) if guarded else None
    DirectLauncher(Kernel()).launch(None, grid, 0, (), {}, {"num_warps": 1}, plain, lift_registers=lift)
    assert launches[-1].get("maxnreg") == expected


def test_the_guarded_variant_is_recompiled_under_a_cap_only_where_it_loses_residency(monkeypatch):
    compiles = []

    class Kernel:
        def warmup(self, *args, grid, **kwargs):
            compiles.append(kwargs)
            if kwargs.get("GUARD") is False:
                return _FakeRegisters(plain)
            return _FakeRegisters(kwargs["maxnreg"])

    launcher = DirectLauncher(Kernel())
    options = {"num_warps": 1}
    plain_variant = ((), {"GUARD": False})

    def kept(guarded_registers):
        compiles.clear()
        launched = _FakeRegisters(guarded_registers)
        return launcher._within_plain_residency(launched, 8, (), {"GUARD": True}, options, plain_variant), launched

    plain = 128
    variant, launched = kept(168)  # 12 programs per SM against the plain variant's 16: capped at 128
    assert variant is not launched and variant.n_regs == 128 and compiles[-1]["maxnreg"] == 128
    variant, launched = kept(128)  # as resident as the plain variant: kept as compiled, no cap
    assert variant is launched and [c.get("maxnreg") for c in compiles] == [None]
    variant, launched = kept(40)  # 32 programs, the SM's most: not even the plain variant is compiled
    assert variant is launched and compiles == []
    plain = 40
    variant, launched = kept(70)  # 29 programs against 32: capped at 64, the most that keep 32
    assert variant.n_regs == 64

    def failing_warmup(*args, **kwargs):
        raise RuntimeError("no such Triton")

    monkeypatch.setattr(Kernel, "warmup", failing_warmup)
    variant, launched = kept(168)  # this Triton cannot say: the launched variant stays
    assert variant is launched


def test_a_launcher_convention_that_fails_switches_the_direct_path_off(monkeypatch):
    """A Triton whose compiled kernels take another `run` convention: the first failure turns the direct path
    off for the kernel, and every later launch goes through the JIT."""
    kernel = _FakeJit(device_guard.slot_guard_kernel.arg_names)
    monkeypatch.setattr(device_guard, "slot_guard_kernel", kernel)
    monkeypatch.setattr(_FakeCompiled, "run", lambda self, *args: (_ for _ in ()).throw(TypeError("convention")))
    launch = device_guard.CheckLaunch("sglang", FaultBuffer("cpu"), "cpu")
    launch.device_index = 0
    launch.launcher._stream = lambda index: 1234
    indices = torch.tensor([1, 2], dtype=torch.int32)
    for _ in range(3):
        launch(indices, 2, 1, 4, 0)
    # The first launch through the JIT, the second's direct attempt failed and went through the JIT, the third
    # went there at once: three launches, each exactly once.
    assert len(kernel.jit) == 3 and not launch.launcher.enabled and not launch.launcher.variants


def test_a_guarded_call_with_an_unhashable_scale_is_judged_not_raised(monkeypatch):
    from fake_engine import install

    engine = install(monkeypatch)
    verdicts = _counting_verdicts(monkeypatch)
    _, arguments = engine_arguments(slots=[1, 2, 3, 4, -1, -1, 0, 0, 0])
    with gdr_check.guard(engine="sglang", mode="record") as guard:
        for scale in ([0.5], [0.25], [0.25]):
            engine.gdn_caller.forward_decode(**dict(arguments, scale=scale))
    # Each value is judged once and named as given: a second [0.25] is the same mistake, [0.25] after [0.5]
    # is not (a message naming [0.5] for it would send the user to the wrong value).
    assert verdicts == ["gdn", "gdn"]
    assert [(d.code, d.message.split(";")[0]) for d in guard.diagnostics if d.severity == "error"] == [
        ("GDR245", "`scale` is [0.5]"), ("GDR245", "`scale` is [0.25]")]


def test_a_float_nan_and_the_string_nan_are_told_apart(monkeypatch):
    from fake_engine import install

    engine = install(monkeypatch)
    _, arguments = engine_arguments(slots=[1, 2, 3, 4, -1, -1, 0, 0, 0])
    with gdr_check.guard(engine="sglang", mode="raise"):
        with pytest.raises(gdr_check.GuardError, match=r"^GDR245: `scale` is nan; "):
            engine.gdn_caller.forward_decode(**dict(arguments, scale=float("nan")))
        with pytest.raises(gdr_check.GuardError, match=r"^GDR245: `scale` is 'nan'; "):
            engine.gdn_caller.forward_decode(**dict(arguments, scale="nan"))


@pytest.mark.parametrize("settings,message", [
    ({"tp": 0}, r"^tp is 0: must be in 1\.\.4_096"),
    ({"state_dtype": "float8"}, r"^unknown state dtype 'float8'; expected one of: float32, bfloat16, float16$"),
])
def test_the_guard_refuses_bad_settings_when_it_is_made(settings, message):
    with pytest.raises(ValueError, match=message):
        gdr_check.guard(engine="sglang", model="Qwen/Qwen3-Next-80B-A3B-Instruct", **settings)


def test_a_deployment_with_no_per_rank_call_is_said_on_entry_in_the_guard_s_mode():
    """tp=3 divides none of Qwen3-Next's head counts: there is no expected call to compare with, and the guard
    says why when it is entered (it used to compare nothing, silently)."""
    model = "Qwen/Qwen3-Next-80B-A3B-Instruct"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # no engine functions to wrap in this process
        refused = gdr_check.guard(engine="sglang", model=model, tp=3, mode="raise")
        for _ in range(2):  # every entry, not only the first (a decorated function is entered on each call)
            with pytest.raises(gdr_check.GuardError, match=r"^GDR121: tp=3 does not divide `linear_num_key_heads`=16"):
                with refused:
                    pass
        recorded = gdr_check.guard(engine="sglang", model=model, tp=3, mode="record")
        for _ in range(2):
            with recorded:
                pass
        assert [d.code for d in recorded.diagnostics] == ["GDR121", "GDR122", "GDR123"]  # once, not per entry
        assert all(d.severity == "error" for d in recorded.diagnostics)
        fine = gdr_check.guard(engine="sglang", model=model, tp=4, mode="raise")
        with fine:
            pass
        assert fine.diagnostics == []


def _faults_by_the_rules(slots, pool_slots, engine):
    """The faults the contract names for a slot table, stated row by row in plain Python: (rule, row, slot,
    first row) in row order. sglang skips rows below 0 and reserves slot 0 for padding (slot 0 is a fault only
    before a row that is not 0); vLLM skips rows at or below 0."""
    skip = -1 if engine == "sglang" else 0
    expected = []
    for row, slot in enumerate(slots):
        if slot <= skip:
            continue
        if slot >= pool_slots:
            expected.append(("GDR241", row, slot, None))
            continue
        earlier = [r for r in range(row) if slots[r] == slot]
        followed = any(s != 0 for s in slots[row + 1:])
        padding = engine == "sglang" and slot == 0 and not followed
        if earlier and not padding:
            expected.append(("GDR242", row, slot, earlier[0]))
        elif engine == "sglang" and slot == 0 and followed:
            expected.append(("GDR247", row, slot, None))
    return expected


SCAN_SHAPES = [
    (1, False, 1), (2, False, 1), (5, False, 1), (128, False, 1),  # no scan, one block, one full block (prologue)
    (131, False, 1),  # 128-row blocks in a loop (in the prologue); the last row repeats the first block's
    (131, True, 1),  # one program per row, then the kernel on the sanitised slots (large B * HV)
    (131, True, 2),  # the same with int64 indices every other element of a wider tensor
]
# The shapes of 128 rows and more cost seconds each in the interpreter: by default each runs under two of the four
# (engine, variant) pairs, both engines and both variants at every shape and each pair at two shapes:
# the engines' rules (slot 0 reserved or skipped) and the variants' kernels each meet every scan placement.
# GDR_CHECK_TEST_FULL_MATRIX=1 (set by .ci/run) runs all four pairs at every shape.
LARGE_SHAPE_PAIRS = {(128, False, 1): [("sglang", False), ("vllm", True)],
                     (131, False, 1): [("sglang", True), ("vllm", False)],
                     (131, True, 1): [("sglang", False), ("vllm", True)],
                     (131, True, 2): [("sglang", True), ("vllm", False)]}
FULL_MATRIX = os.environ.get("GDR_CHECK_TEST_FULL_MATRIX") == "1"


def _scan_cases() -> list:
    cases = []
    for shape in SCAN_SHAPES:
        for engine in ("sglang", "vllm"):
            for kda in (False, True):
                if FULL_MATRIX or shape not in LARGE_SHAPE_PAIRS or (engine, kda) in LARGE_SHAPE_PAIRS[shape]:
                    name = "-".join(map(str, (*shape, engine, "kda" if kda else "gdn")))
                    cases.append(pytest.param(*shape, engine, kda, id=name))
    return cases


@pytest.mark.parametrize(("batch", "separate", "index_stride", "engine", "kda"), _scan_cases())
def test_every_scan_shape_finds_exactly_the_faults_the_rules_name(batch, separate, index_stride, engine, kda,
                                                                   monkeypatch):
    """Faults against the rules stated row by row, and the step itself against the float64 reference of the
    same call with the faulty rows skipped: rows computed right, skipped rows' `out` zero, slots no computed
    row names bitwise unchanged (so a placement that skips work, or writes where it should not, fails)."""
    if separate:  # the placement taken from B * HV = SEPARATE_CHECK_MIN_PAIRS on: forced for a small head count
        monkeypatch.setattr(device_guard, "SEPARATE_CHECK_MIN_PAIRS", 1)
    pool_slots = 2 * batch + 3
    gen = torch.Generator().manual_seed(batch)
    slots = torch.randint(-1, pool_slots + 3, (batch,), generator=gen).tolist()
    # Every shape gets a fault: the lone row past the pool; the last row repeating the first (across 128-row
    # blocks at B > 128) and one of the row before; a slot-0 row mid-table (sglang: reserved, vLLM: skipped).
    slots[0] = pool_slots if batch == 1 else 1
    if batch > 1:
        slots[-1] = 1
    if batch > 2:
        slots[batch // 2] = 0
    if batch > 4:  # a repeat of the row just before
        slots[3] = slots[2] = 2
    call = make_call(B=batch, H=1, HV=1, K=4, V=4, slots=slots, pool_slots=pool_slots, kda=kda, seed=batch,
                     index_dtype=torch.int64 if index_stride > 1 else torch.int32, index_stride=index_stride)
    before = call.clone()
    buffer = FaultBuffer(DEVICE, max_records=2 * batch)
    separate_checks = []
    monkeypatch.setattr(buffer, "check_launch", lambda *a: separate_checks.append(a) or FaultBuffer.check_launch(
        buffer, *a))
    (kda_packed_decode if kda else packed_decode)(*call.args(), engine=engine, context="engine", faults=buffer)
    assert len(separate_checks) == separate
    faults, total = buffer.take()
    expected = _faults_by_the_rules(slots, pool_slots, engine)
    assert [(f.code, f.row, f.slot, f.first_row) for f in faults] == expected and total == len(expected)
    skipped = {row for code, row, _, _ in expected if code != "GDR247"}
    for row in skipped:  # a skipped row's `out` is zero, in either placement
        assert torch.equal(call.out[row], torch.zeros_like(call.out[row]))
    live = [slot > (-1 if engine == "sglang" else 0) for slot in slots]
    computed = [row for row in range(batch) if live[row] and row not in skipped]
    expected_out, expected_state = (naive_kda_packed_decode if kda else naive_packed_decode)(
        *sanitized(before, keep=set(computed)).args(), engine=engine)
    rows = [row for row in computed if slots[row] != 0]  # rows on slot 0 (sglang's padding slot) race
    torch.testing.assert_close(call.out[rows].double(), expected_out[rows], rtol=1e-4, atol=1e-5)
    named = {slots[row] for row in computed}
    for slot in range(pool_slots):
        if slot not in named:
            assert torch.equal(call.initial_state[slot], before.initial_state[slot]), slot
        elif slot != 0:
            torch.testing.assert_close(call.initial_state[slot].double(), expected_state[slot], rtol=1e-4, atol=1e-5)


@pytest.mark.skipif(DEVICE == "cpu", reason="CUDA graphs")
@pytest.mark.parametrize("kda", [False, True], ids=["gdn", "kda"])
def test_the_separate_check_and_the_kernel_after_it_replay_in_a_graph_as_they_run_eagerly(kda, monkeypatch):
    # On sm_90 and later the kernel is launched programmatically after the check (PDL) and waits for the
    # check's writes on the device: captured, the graph keeps that dependency, and a replay computes what an
    # eager call computes, bit for bit, faults included.
    monkeypatch.setattr(device_guard, "SEPARATE_CHECK_MIN_PAIRS", 1)
    slots = list(range(1, 201))
    slots[7], slots[150] = 500, slots[3]  # past the pool; a repeat of row 3
    call = make_call(B=200, H=1, HV=2, K=16, V=16, slots=slots, pool_slots=210, kda=kda, seed=3)
    checked = kda_packed_decode if kda else packed_decode
    buffer = FaultBuffer(DEVICE)
    eager = call.clone()
    checked(*eager.args(), context="engine", faults=buffer)  # also compiles, outside the capture
    eager_faults = buffer.take()
    assert [(f.code, f.row) for f in eager_faults[0]] == [("GDR241", 7), ("GDR242", 150)]
    check = buffer.check_launch("sglang", torch.device(DEVICE))
    assert check.programmatic == (torch.cuda.get_device_capability()[0] >= 9)
    replayed = call.clone()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        checked(*replayed.args(), context="engine", faults=buffer)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(replayed.out, eager.out) and torch.equal(replayed.initial_state, eager.initial_state)
    assert buffer.take() == eager_faults


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_the_one_program_per_row_check_loops_past_its_block(engine, monkeypatch):
    """The separate check (large B * HV, and the engine guard) compares up to CHECK_SCAN_MAX rows per load and
    loops past that (here 16, so that 40 rows take three blocks): a repeat of row 0 at the last row and one of
    the row just before, across a block edge, against the rules stated row by row."""
    monkeypatch.setattr(device_guard, "CHECK_SCAN_MAX", 16)
    batch = 40
    pool_slots = 2 * batch
    slots = torch.randint(-1, pool_slots + 3, (batch,), generator=torch.Generator().manual_seed(5)).tolist()
    slots[0] = slots[-1] = 1
    slots[17] = slots[16] = 2
    slots[batch // 2] = 0
    buffer = FaultBuffer(DEVICE, max_records=batch)
    indices = torch.tensor(slots, dtype=torch.int32, device=DEVICE)
    launch = buffer.check_launch(engine, indices.device)
    constexprs, _ = launch.shape_for(batch)
    assert (constexprs["SCAN_BLOCK"], constexprs["SCAN_LOOP"]) == (16, True)
    safe = launch(indices, batch, 1, pool_slots, buffer.tag_for("layer 1", pool_slots))
    faults, total = buffer.take()
    expected = _faults_by_the_rules(slots, pool_slots, engine)
    assert [(f.code, f.row, f.slot, f.first_row) for f in faults] == expected and total == len(expected)
    skipped = {row for code, row, _, _ in expected if code != "GDR247"}
    assert safe.tolist() == [-1 if row in skipped else slot for row, slot in enumerate(slots)]


def test_a_fault_that_repeats_on_every_call_is_read_at_most_every_interval(monkeypatch):
    """A read synchronises the device: slot 0 in a direct call (a note) on every call must not make every call a
    sync. After a read that found faults, the next REPEAT_LOOK_INTERVAL flagged looks pass."""
    monkeypatch.setattr(device_guard, "REPEAT_LOOK_INTERVAL", 3)
    buffer = FaultBuffer(DEVICE)
    taken = []
    real_take = buffer.take
    monkeypatch.setattr(buffer, "take", lambda: taken.append(1) or real_take())
    call = make_call(B=3, H=1, HV=2, K=8, V=8, slots=[0, 1, 2], pool_slots=3, seed=12)  # slot 0: a note
    for _ in range(9):
        packed_decode(*call.clone().args(), faults=buffer)
        if DEVICE != "cpu":
            torch.cuda.synchronize()  # the flag has landed before the next call looks
    # Each call looks before its kernel runs. Calls 2-9 find the flag set: call 2 reads call 1's fault, calls
    # 3-5 pass, call 6 reads the faults of calls 2-5, calls 7-9 pass.
    assert len(taken) == 2 and buffer.host_flag[0] == 1
    notes = device_guard.diagnostics_of(buffer.take()[0], "direct", "sglang")  # calls 6-9's, kept meanwhile
    assert [(note.code, note.severity) for note in notes] == [("GDR247", "info")] * 4


def test_faults_land_in_the_buffer_passed_even_when_it_reuses_a_dead_buffers_id():
    # A guard launch cached by buffer id would hand a new buffer that got a freed buffer's id (CPython reuses
    # addresses at once) the dead buffer's tensors: the faults would land nowhere anyone reads.
    call = bad_call()
    for _ in range(8):
        buffer = FaultBuffer(DEVICE)
        packed_decode(*call.clone().args(), context="engine", faults=buffer)
        assert buffer.host_flag[0] == 1 or DEVICE != "cpu"
        assert len(buffer.take()[0]) == 4
        del buffer


def test_an_error_among_repeated_notes_is_still_itemised_and_raised():
    """Reads are spaced so that, at the last read's fault rate, the records between two reads fill at most half
    the buffer: an error arriving among notes that repeat on every call is not dropped with the overflow."""
    buffer = FaultBuffer(DEVICE, max_records=8)
    noted = make_call(B=3, H=1, HV=2, K=8, V=8, slots=[0, 1, 2], pool_slots=3, seed=12)  # slot 0: a note
    faulty = make_call(B=3, H=1, HV=2, K=8, V=8, slots=[0, 1, 7], pool_slots=3, seed=12)  # and slot 7 past it

    def call(made):
        packed_decode(*made.clone().args(), faults=buffer)
        if DEVICE != "cpu":
            torch.cuda.synchronize()

    for _ in range(12):
        call(noted)
    assert buffer.looks_to_skip <= 3  # one note per call: reads at most 4 flagged looks apart (4 of 8 records)
    call(faulty)
    with pytest.raises(PendingFaults, match=r"^GDR241: `ssm_state_indices` holds slot 7 at row 2, "):
        for _ in range(5):
            call(noted)


def test_a_look_that_cannot_synchronise_leaves_the_faults_flagged(monkeypatch):
    """Another thread's capture (or any failure to synchronise) must not break the engine's call: a look
    returns and keeps the flag for later; an explicit read raises, and keeps it too."""
    buffer = FaultBuffer("cpu")
    buffer.device = torch.device("cuda")  # the CUDA branch; the tensors stay on the CPU
    monkeypatch.setattr(device_guard, "is_capturing", lambda: False)

    def cannot(device=None):
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(torch.cuda, "synchronize", cannot)
    buffer.counter[0] = 1
    buffer.host_flag[0] = 1
    buffer.look("engine", "sglang")
    assert buffer.host_flag[0] == 1 and int(buffer.counter[0]) == 1
    with pytest.raises(RuntimeError, match="capturing"):
        buffer.take()
    assert buffer.host_flag[0] == 1 and int(buffer.counter[0]) == 1


def test_a_recorded_fault_sets_the_host_flag_and_a_look_reads_only_then(monkeypatch):
    """A look reads one word of host memory: nothing while the flag is clear (no take, no sync), the records
    once a kernel has flagged one (the flag is cleared before they are read), and nothing while a stream is
    capturing (the flag stays set for the next look)."""
    buffer = FaultBuffer(DEVICE, max_records=4)
    taken = []
    real_take = buffer.take
    monkeypatch.setattr(buffer, "take", lambda: taken.append(1) or real_take())
    buffer.look("engine", "sglang")
    assert taken == [] and buffer.host_flag[0] == 0
    indices = torch.tensor([1, 7, 2], dtype=torch.int32, device=DEVICE)  # row 1 past a pool of 5 slots
    buffer.check_launch("sglang", indices.device)(indices, 3, 1, 5, buffer.tag_for("layer 3", 5))
    if DEVICE != "cpu":
        torch.cuda.synchronize()
    assert buffer.host_flag[0] == 1  # set by the kernel, in host memory
    capturing = [True]
    monkeypatch.setattr(device_guard, "is_capturing", lambda: capturing[0])
    buffer.look("engine", "sglang")  # capturing: the records are not read and the flag stays set
    assert buffer.host_flag[0] == 1 and int(buffer.counter[0]) == 1
    capturing[0] = False
    with pytest.raises(PendingFaults, match=r"^GDR241: `ssm_state_indices` holds slot 7 at row 1, .*\[in layer 3\] "
                                            r"\(recorded by an earlier call; this call did not run\)$"):
        buffer.look("engine", "sglang")
    assert buffer.host_flag[0] == 0 and len(taken) == 2
    buffer.look("engine", "sglang")
    assert len(taken) == 2 and buffer.take() == ([], 0)


def _record_out_of_range(buffer, rows, label="layer 1"):
    """`rows` faults from one slot check: every row names slot 7 of a 5-slot pool (GDR241), row i as row i."""
    indices = torch.full((rows,), 7, dtype=torch.int32, device=DEVICE)
    buffer.check_launch("sglang", indices.device)(indices, rows, 1, 5, buffer.tag_for(label, 5))


def _faults_land_while_the_ring_is_copied(monkeypatch, buffer, rows, label):
    """While `buffer.take` copies its rows, `rows` faults are recorded (once), as by a kernel that another host
    thread launched after the take read the count. Returns what is still to land: empty once it has."""
    real_copy = buffer._copy_rows
    pending = [rows]

    def copy_rows(first, end):
        copied = real_copy(first, end)
        if pending:
            _record_out_of_range(buffer, pending.pop(), label)
            if DEVICE != "cpu":
                torch.cuda.synchronize()
        return copied

    monkeypatch.setattr(buffer, "_copy_rows", copy_rows)
    return pending


def test_a_fault_recorded_while_the_buffer_is_read_is_kept_for_the_next_read(monkeypatch):
    """Nothing on the device is reset by a read: a fault numbered after the read's count (another thread's
    kernel) is read next time. (The counter used to be zeroed after the read, which lost such a fault.)"""
    buffer = FaultBuffer(DEVICE, max_records=8)
    _record_out_of_range(buffer, 2, "layer 1")
    pending = _faults_land_while_the_ring_is_copied(monkeypatch, buffer, 1, "layer 2")
    first = buffer.take()
    second = buffer.take()
    assert not pending
    assert [(f.code, f.row, f.slot, f.layer) for f in second[0]] == [("GDR241", 0, 7, "layer 2")] and second[1] == 1
    assert [(f.code, f.row, f.layer) for f in first[0]] == [("GDR241", 0, "layer 1"), ("GDR241", 1, "layer 1")]
    assert first[1] == 2 and buffer.take() == ([], 0)


def test_faults_past_the_kept_records_while_they_are_read_are_counted_not_shown(monkeypatch):
    """Four records kept: faults 0-2 are read while faults 3-5 land; 3 is kept (one of layer 2's rows), 4 and 5 are
    not (the device still keeps 0-3, not yet told of the read). The first read shows 0-2 whole; the next shows 3 and
    stops before 4, which a kernel numbered after the first read might still be storing; the one after that
    (its kernel has run by then) counts 4 and 5. Nothing is overwritten."""
    buffer = FaultBuffer(DEVICE, max_records=4)
    _record_out_of_range(buffer, 3, "layer 1")
    pending = _faults_land_while_the_ring_is_copied(monkeypatch, buffer, 3, "layer 2")
    faults, total = buffer.take()
    assert not pending and [(f.row, f.layer) for f in faults] == [(0, "layer 1"), (1, "layer 1"), (2, "layer 1")]
    assert total == 3
    faults, total = buffer.take()
    # Which of layer 2's three rows took fault number 3 is the device's atomics' order: any of them on a GPU (row 2
    # on an H100), row 0 in the interpreter, which runs the programs in order.
    [kept] = faults
    assert kept.layer == "layer 2" and kept.row in (0, 1, 2) and total == 1 and buffer.host_flag[0] == 1
    assert buffer.take() == ([], 2) and buffer.take() == ([], 0)


def test_a_row_still_being_written_is_read_next_time():
    """A fault numbered (the counter stepped) but not yet stamped: the read stops before it and keeps the flag
    set, and the next read takes it once its stamp is there."""
    buffer = FaultBuffer(DEVICE, max_records=4)
    tag = buffer.tag_for("layer 5", 5)
    _record_out_of_range(buffer, 1, "layer 5")
    buffer.counter[0] += 1  # fault 1: numbered, its record not written yet
    faults, total = buffer.take()
    assert [(f.row, f.layer) for f in faults] == [(0, "layer 5")] and total == 1 and buffer.host_flag[0] == 1
    buffer.records[1] = torch.tensor([1, 3, 11, tag, 2])  # GDR241 at row 3, slot 11, stamped 1 + 1
    faults, total = buffer.take()
    assert [(f.code, f.row, f.slot, f.layer) for f in faults] == [("GDR241", 3, 11, "layer 5")] and total == 1


def test_one_reader_at_a_time_hands_each_fault_out_once(monkeypatch):
    """Two threads reading at once (an engine's call and `raise_pending`): the second waits for the first."""
    buffer = FaultBuffer(DEVICE, max_records=8)
    _record_out_of_range(buffer, 3, "layer 1")
    real_copy = buffer._copy_rows
    copying, release = threading.Event(), threading.Event()

    def slow_copy(first, end):
        copying.set()
        assert release.wait(10)
        return real_copy(first, end)

    monkeypatch.setattr(buffer, "_copy_rows", slow_copy)
    taken = []
    first_reader = threading.Thread(target=lambda: taken.append(buffer.take()))
    first_reader.start()
    assert copying.wait(10)
    second_reader = threading.Thread(target=lambda: taken.append(buffer.take()))
    second_reader.start()
    second_reader.join(0.2)
    assert second_reader.is_alive()  # waiting for the first read
    release.set()
    first_reader.join(10)
    second_reader.join(10)
    assert sorted(total for _, total in taken) == [0, 3]
    assert sorted(len(faults) for faults, _ in taken) == [0, 3]


def test_more_faults_than_records_keep_the_first_ones_and_count_all():
    buffer = FaultBuffer(DEVICE, max_records=4)
    _record_out_of_range(buffer, 3, "layer 1")
    _record_out_of_range(buffer, 3, "layer 2")
    faults, total = buffer.take()
    assert [f.layer for f in faults] == ["layer 1", "layer 1", "layer 1", "layer 2"] and total == 6
    assert [f.row for f in faults[:3]] == [0, 1, 2]  # (which of layer 2's rows got number 3: the device's order)
    _record_out_of_range(buffer, 3, "layer 1")
    if DEVICE != "cpu":
        torch.cuda.synchronize()  # the flag has landed
    with pytest.raises(PendingFaults, match=r"^GDR241: .* at row 0, .*\[in layer 1\] \(and 2 more faults\) \(recorded "
                                            r"by an earlier call; this call did not run\)$"):
        buffer.look("engine", "sglang")


@pytest.mark.parametrize(("max_records", "shown"), [(2.5, "2.5"), (64.0, "64.0"), ("64", "'64' (a str)"),
                                                   (True, "True (a bool)")])
def test_a_record_count_must_be_a_whole_number(max_records, shown):
    message = (f"max_records is {shown}: must be a whole number in 1..2**20 (fault records a fault buffer keeps, "
               f"the first ones after each read); see {LIMITS_DOCS_URL}")
    for make in (lambda: FaultBuffer(DEVICE, max_records=max_records),
                 lambda: gdr_check.guard(engine="sglang", max_records=max_records)):
        with pytest.raises(ValueError) as refused:
            make()
        assert str(refused.value) == message


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine without CUDA")
def test_pending_faults_of_cuda_on_a_machine_without_it_are_none():
    assert gdr_check.kernel.raise_pending("cuda") == [] and gdr_check.kernel.raise_pending("cuda:1") == []


@pytest.mark.parametrize("max_records", [0, -1, 2_000_000])
def test_a_fault_buffer_and_a_guard_refuse_a_record_count_outside_the_limit(max_records):
    message = rf"^max_records is {max_records}: must be in 1\.\.2\*\*20 \(fault records"
    with pytest.raises(ValueError, match=message):
        FaultBuffer(DEVICE, max_records=max_records)
    with pytest.raises(ValueError, match=message):
        gdr_check.guard(engine="sglang", max_records=max_records)


@pytest.mark.skipif(DEVICE == "cpu", reason="host threads launching on their own CUDA streams")
def test_faults_from_another_threads_stream_are_each_read_once_while_this_thread_reads():
    buffer = FaultBuffer(DEVICE, max_records=1024)
    launches, rows = 200, 3
    done = threading.Event()

    def engine_thread():
        with torch.cuda.stream(torch.cuda.Stream()):
            for _ in range(launches):
                _record_out_of_range(buffer, rows, "layer 9")
            torch.cuda.synchronize()
        done.set()

    worker = threading.Thread(target=engine_thread)
    worker.start()
    seen, counted = [], 0
    while not done.is_set():
        faults, total = buffer.take()
        seen += faults
        counted += total
    worker.join()
    faults, total = buffer.take()
    seen += faults
    counted += total
    assert counted == launches * rows and len(seen) == counted
    assert sorted(f.row for f in seen) == sorted(list(range(rows)) * launches)


# -- where `out` lies is each call's own (GDR246), not the call signature's ----------------------------------
def _out_inside_the_pool(call):
    """`call` with `out` a view of the pool's slot 1: the same shape, strides and dtype as its own `out`."""
    B, _, HV, V = call.out.shape
    return dataclasses.replace(call, out=call.initial_state[1].reshape(-1)[:B * HV * V].view(B, 1, HV, V))


OVERLAP = "`out` overlaps `initial_state` in memory"


@pytest.mark.parametrize("kda", [False, True], ids=["gdn", "kda"])
def test_the_checked_kernel_judges_where_out_lies_on_every_call(kda):
    # The verdict is kept per call signature, which holds no address: a call of the same shapes with `out`
    # inside the pool was let through after a clean one, and a clean one refused after it.
    checked = kda_packed_decode if kda else packed_decode

    def call(seed):
        return make_call(B=4, H=2, HV=4, K=16, V=16, slots=[1, 2, 3, 4], pool_slots=5, kda=kda, seed=seed)

    faults = FaultBuffer(DEVICE)
    checked(*call(1).args(), faults=faults)  # clean
    aliased = _out_inside_the_pool(call(2))
    before = aliased.initial_state.clone()
    with pytest.raises(ValueError, match=rf"^{re.escape(OVERLAP)}$"):
        checked(*aliased.args(), faults=faults)
    assert torch.equal(aliased.initial_state, before)  # refused before anything ran
    clean = call(3)
    checked(*clean.args(), faults=faults)  # and a clean call after the refused one runs
    assert torch.isfinite(clean.out).all()


def test_the_guard_judges_where_out_lies_on_every_call_and_records_it_once(monkeypatch):
    from fake_engine import install

    engine = install(monkeypatch)

    def arguments(call):
        names = ("mixed_qkv", "a", "b", "A_log", "dt_bias", "scale", "initial_state", "out", "ssm_state_indices")
        return dict(zip(names, call.args(), strict=False))

    def call(seed):
        return make_call(B=4, H=2, HV=4, K=16, V=16, slots=[1, 2, 3, 4], pool_slots=5, seed=seed)

    with gdr_check.guard(engine="sglang", mode="record") as guard:
        engine.gdn_caller.forward_decode(**arguments(call(1)))
        for seed in (2, 3):  # recorded once: it repeats on every call that places `out` so
            engine.gdn_caller.forward_decode(**arguments(_out_inside_the_pool(call(seed))))
        inside_qkv = call(6)  # `out` inside another input: every input is compared, not only the pool
        B, _, HV, V = inside_qkv.out.shape
        inside_qkv = dataclasses.replace(inside_qkv, out=inside_qkv.mixed_qkv.reshape(-1)[:B * HV * V].view(
            B, 1, HV, V))
        engine.gdn_caller.forward_decode(**arguments(inside_qkv))
    assert [(d.code, d.severity, d.message) for d in guard.diagnostics if d.code == "GDR246"] == [
        ("GDR246", "error", OVERLAP), ("GDR246", "error", "`out` overlaps `mixed_qkv` in memory")]
    with gdr_check.guard(engine="sglang", mode="raise"):
        with pytest.raises(gdr_check.GuardError, match=rf"^GDR246: {re.escape(OVERLAP)}$"):
            engine.gdn_caller.forward_decode(**arguments(_out_inside_the_pool(call(4))))
        engine.gdn_caller.forward_decode(**arguments(call(5)))  # the same signature, `out` apart: no error


def test_a_later_call_that_raises_an_earlier_call_s_faults_says_so_and_does_not_run():
    faults = FaultBuffer(DEVICE)
    bad = make_call(B=4, H=2, HV=4, K=16, V=16, slots=[1, 2, 3, 9], pool_slots=5, seed=1)
    packed_decode(*bad.args(), faults=faults)  # slot 9 past the pool: recorded on the device, row skipped
    if DEVICE != "cpu":
        torch.cuda.synchronize()
    later = make_call(B=4, H=2, HV=4, K=16, V=16, slots=[1, 2, 3, 4], pool_slots=5, seed=2)
    before = later.initial_state.clone()
    with pytest.raises(PendingFaults, match=r"^GDR241: `ssm_state_indices` holds slot 9 at row 3, .* \(recorded by an "
                                            r"earlier call; this call did not run\)$") as pending:
        packed_decode(*later.args(), faults=faults)
    assert pending.value.earlier and torch.equal(later.initial_state, before) and later.out.isnan().all()
    packed_decode(*later.args(), faults=faults)  # run again: the faults were read
    assert torch.isfinite(later.out).all()


def test_the_guard_s_inlined_overlap_test_meets_every_input_on_its_fast_path(monkeypatch):
    # The same pool and signature every call, so each goes through the wrapper's inlined test (no new plan):
    # `out` laid over each argument it must not overlap in turn, by a view of one backing holding both.
    from fake_engine import install
    from gdr_check.checks.rules_assumed import OUT_MUST_NOT_OVERLAP

    engine = install(monkeypatch)
    names = ("mixed_qkv", "a", "b", "A_log", "dt_bias", "scale", "initial_state", "out", "ssm_state_indices")
    base = make_call(B=4, H=2, HV=4, K=16, V=16, slots=[1, 2, 3, 4], pool_slots=5, seed=1)
    plans = []
    real_plan = gdr_check.pipeline.guard.Guard._plan
    monkeypatch.setattr(gdr_check.pipeline.guard.Guard, "_plan", lambda self, site, values: plans.append(
        [n for n in names if values[n] is not base.args()[names.index(n)]]) or real_plan(self, site, values))
    with gdr_check.guard(engine="sglang", mode="record") as guard:
        engine.gdn_caller.forward_decode(**dict(zip(names, base.args(), strict=False)))
        for name in OUT_MUST_NOT_OVERLAP:
            arguments = dict(zip(names, base.args(), strict=False))
            other = arguments[name]
            if name == "initial_state":  # the pool itself stays (its tag keeps the plan): `out` in its slot 1
                backing, at = other.reshape(-1), 1 * other[0].numel()
            else:
                backing = torch.zeros(512 + other.numel(), device=DEVICE).view(other.dtype)
                at = 100  # `other` from element 100: inside `out`, which takes elements 0-255
                arguments[name] = backing[at:at + other.numel()].view(other.shape)
                arguments[name].copy_(other)
            start = at - 100 if name != "initial_state" else at
            arguments["out"] = backing[start:start + 256].view(torch.float32).view(4, 1, 4, 16)
            engine.gdn_caller.forward_decode(**arguments)
    assert len(plans) == 1, plans  # every later call took the wrapper's own path
    assert [d.message for d in guard.diagnostics if d.code == "GDR246"] == [
        f"`out` overlaps `{name}` in memory" for name in OUT_MUST_NOT_OVERLAP]


def test_a_refused_call_whose_out_overlaps_an_input_reports_both(monkeypatch):
    from fake_engine import install

    engine = install(monkeypatch)
    names = ("mixed_qkv", "a", "b", "A_log", "dt_bias", "scale", "initial_state", "out", "ssm_state_indices")
    call = _out_inside_the_pool(make_call(B=4, H=2, HV=4, K=16, V=16, slots=[1, 2, 3, 4], pool_slots=5, seed=1))
    arguments = dict(zip(names, call.args(), strict=False))
    arguments["A_log"] = arguments["A_log"][:3]  # one value head short: refused (a shape error)
    with gdr_check.guard(engine="sglang", mode="record") as guard:
        for _ in range(2):
            engine.gdn_caller.forward_decode(**arguments)
    errors = [d for d in guard.diagnostics if d.severity == "error"]
    assert errors[-1].message == OVERLAP and len(errors) >= 2 and errors.count(errors[-1]) == 1
    with gdr_check.guard(engine="sglang", mode="raise"):
        for _ in range(2):  # the first call (a new plan) and a later one (the plan's): both errors each time
            with pytest.raises(gdr_check.GuardError) as refused:
                engine.gdn_caller.forward_decode(**arguments)
            assert [d.code for d in refused.value.diagnostics][-1] == "GDR246" and len(refused.value.diagnostics) >= 2
