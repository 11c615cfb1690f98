"""The hot paths' structure: value classes with slots built through their own `__init__` (no
`__new__`/`object.__setattr__`/`__dict__` writes), and the cyclic garbage collector paused by the CLI only."""

from __future__ import annotations

import ast
import gc
import os
import subprocess
import sys
import weakref

import pytest

from gdr_check import TensorSpec
from gdr_check.base.report import Diagnostic, Location
from gdr_check.call.packed_call import PackedDecodeCall
from gdr_check.sources.checkpoint import TensorInfo
from package_source import source_files

GC_OWNER = "cli/main.py"
# read-only uses outside the CLI
GC_READERS = {("pipeline/capture.py", "get_referrers"), ("pipeline/capture.py", "get_freeze_count")}
# The modules of the hot paths and of the value classes they build (the sites of the former bypasses).
HOT_MODULES = {"base/tensor_spec.py", "base/report.py", "pipeline/guard.py", "checks/hotpath.py", "call/packed_call.py",
               "base/registry.py", "kernel/device_guard.py", "sources/checkpoint.py", "deployment/settings.py"}
# `object.__setattr__` left among them: a frozen dataclass's __post_init__ normalising one of its own fields
# (the dataclasses documentation's idiom), not a construction shortcut.
NORMALISING_POST_INITS = {("deployment/settings.py", "object.__setattr__")}


def test_only_the_cli_entry_point_touches_the_garbage_collector():
    """Only the CLI changes the collector's state; elsewhere `gc` may only be read through the functions named in
    GC_READERS (pipeline/capture.py finds live engine backends that hold a packed-decode function:
    `INSTANCE_HOLDERS`)."""
    importing, uses = set(), set()
    for source in source_files():
        if not source.mentions("gc"):  # no other module can import or use it
            continue
        name = source.relative
        for node in source.nodes:
            if isinstance(node, ast.Import) and any(alias.name == "gc" for alias in node.names):
                importing.add(name)
                # Under another name its uses would escape the attribute check below.
                assert all(alias.asname in (None, "gc") for alias in node.names if alias.name == "gc"), name
            if isinstance(node, ast.ImportFrom) and node.module == "gc":
                uses.add((name, "from gc import"))
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "gc":
                uses.add((name, node.attr))
    assert importing == {GC_OWNER, *(name for name, _ in GC_READERS)}
    assert {use for use in uses if use[0] != GC_OWNER} == GC_READERS


_BEFORE_EXIT = """
import gc, sys
{imports}
from gdr_check.cli.main import before_exit
before_exit()
print(gc.get_freeze_count() > 0)
"""


@pytest.mark.parametrize("imports, frozen", [("", True), ("import triton", False)])
def test_before_exit_freezes_the_heap_unless_triton_would_report_leaks(imports: str, frozen: bool):
    """The console script's last step skips the interpreter's final collection (`gc.freeze`), except where triton is
    loaded: its nanobind bindings print a leak report for every object of theirs that exit did not finalize."""
    if imports:
        pytest.importorskip("triton")  # (the torch-free suite has none)
    done = subprocess.run([sys.executable, "-c", _BEFORE_EXIT.format(imports=imports)], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "TRITON_INTERPRET": "1"})
    assert (done.returncode, done.stdout) == (0, f"{frozen}\n")
    assert "leaked" not in done.stderr


def test_no_construction_bypasses_on_the_hot_paths():
    def is_dict(node: ast.expr) -> bool:
        return isinstance(node, ast.Attribute) and node.attr == "__dict__"

    found = set()
    modules = [source for source in source_files() if source.relative in HOT_MODULES]
    assert len(modules) == len(HOT_MODULES)
    for source in modules:
        name = source.relative
        for node in source.nodes:
            if isinstance(node, ast.Attribute):
                base = node.value
                if node.attr == "__setattr__" and isinstance(base, ast.Name) and base.id == "object":
                    found.add((name, "object.__setattr__"))
                if node.attr == "__new__" and not (isinstance(base, ast.Name) and base.id in {"super", "type"}):
                    found.add((name, "__new__"))
                if node.attr in {"update", "setdefault"} and is_dict(base):  # an instance's fields written directly
                    found.add((name, "__dict__ write"))
            if isinstance(node, (ast.Assign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Subscript) and is_dict(t.value) for t in targets):
                    found.add((name, "__dict__ write"))
    assert found <= NORMALISING_POST_INITS, sorted(found)


@pytest.mark.parametrize("cls", [TensorSpec, PackedDecodeCall, TensorInfo, Diagnostic, Location])
def test_the_hot_value_classes_have_slots(cls):
    assert "__slots__" in vars(cls) and "__dict__" not in dir(cls)


def test_specs_and_calls_stay_values():
    spec = TensorSpec([8, 16], [16, 1], "bf16", "cpu", values=(1, 2))
    assert (spec.shape, spec.stride, spec.dtype, spec.ndim) == ((8, 16), (16, 1), "bfloat16", 2)
    same = TensorSpec.of((8, 16), "bfloat16", "cpu")
    assert spec == same and hash(spec) == hash(same)  # `values` is not compared
    assert TensorInfo("w", "float32", (2,), "a.safetensors") == TensorInfo("w", "float32", (2,), "a.safetensors")
    with pytest.raises(ValueError, match=r"^shape \(8,\) and stride \(16, 1\) have different ranks$"):
        TensorSpec((8,), (16, 1))
    # `of` describes a tensor a person writes down: no negative size, and a dtype torch has (or its short name)
    # (the words a recording's tensors get: `recording.py` runs the same checks)
    with pytest.raises(ValueError, match=r"^`shape` has a negative size$"):
        TensorSpec.of((-8, 8))
    for bad in ("bogus", "qint8"):
        with pytest.raises(ValueError, match=rf"^`dtype` is '{bad}': not a dtype \(expected one of bfloat16, bool, "
                                             r"complex128, .*, uint8\)$"):
            TensorSpec.of((8, 8), bad)
    assert TensorSpec.of((8, 8), "fp32").dtype == "float32" and TensorSpec.of((0, 8), "F32").dtype == "float32"
    with pytest.raises(ValueError, match=r"^`shape` must be a sequence of integers, not 'ab'$"):
        TensorSpec("ab", (1,))  # (it said "invalid literal for int() with base 10: 'a'")


def test_the_library_leaves_the_collector_as_it_found_it():
    pytest.importorskip("torch")  # the call is built from torch tensors
    from contract_calls import gdn_call
    from gdr_check import check_packed_decode

    assert gc.isenabled()
    check_packed_decode(**gdn_call())
    assert gc.isenabled()


def test_the_per_call_overlap_test_meets_gdr246_at_the_byte():
    # GDR246 is the one rule that depends on where the tensors lie: the guard and the checked kernels test it on
    # every call from data pointers and the extents kept with the signature. Touching is not overlapping.
    torch = pytest.importorskip("torch")
    from gdr_check.checks.hotpath import address_rules, byte_extents, out_overlaps

    assert address_rules() == frozenset({"GDR246"})
    backing = torch.zeros(64)  # fp32: 4 bytes an element
    inputs = [torch.zeros(2) for _ in range(9)]  # in ARGUMENTS order; scale's place is never read
    dense, strided = backing[:8].view(2, 1, 2, 2), backing[0:16:2].view(2, 1, 2, 2)  # elements 0-7; 0, 2, ... 14
    for out, state, extent, overlaps in ((dense, backing[8:40], 32, False),  # touching is not overlapping
                                         (dense, backing[7:39], 32, True),
                                         (strided, backing[14:46], 60, True),
                                         (strided, backing[15:47], 60, False),
                                         (backing[:0].view(0, 1, 2, 2), backing[:32], 0, False)):  # empty `out`
        args = [*inputs[:6], state.view(2, 2, 2, 4), out, inputs[8]]
        extents = byte_extents(args)
        assert extents is not None and extents[0] == extent and extents[6] == 128
        assert out_overlaps(args, extents) is overlaps
    assert byte_extents([*inputs[:7], [1.0], inputs[8]]) is None  # `out` not a tensor: nothing kept


def _python_matcher_only(monkeypatch, torch):
    """Make `tensor_matcher` fall back to its Python comparison, as on a torch without dynamo's guards."""
    def missing(*tensors, **dims):
        raise AttributeError("no TensorGuards in this torch")

    monkeypatch.setattr(torch._C._dynamo.guards, "TensorGuards", missing)


@pytest.mark.parametrize("implementation", ["torch", "python"])
def test_the_guards_tensor_test_tells_every_signature_term_apart(monkeypatch, implementation):
    # The guard's steady state asks one test whether a call's eight tensors have its plan's shapes, strides,
    # dtypes and devices (`_signature`'s tensor terms): torch's C++ check where it exists, else Python. Each
    # implementation accepts fresh tensors of the same metadata and refuses a change in any one term.
    torch = pytest.importorskip("torch")
    from gdr_check.checks.hotpath import tensor_matcher

    if implementation == "python":
        _python_matcher_only(monkeypatch, torch)

    def tensors():
        return [torch.zeros(3, 40, dtype=torch.bfloat16), torch.zeros(3, 4), torch.zeros(3, 4), torch.zeros(4),
                torch.zeros(4), torch.zeros(5, 4, 2, 2)[1:], torch.zeros(3, 1, 4, 2),
                torch.arange(3, dtype=torch.int32)]

    example = tensors()
    matches = tensor_matcher(example)
    assert matches.__name__ == ("matches" if implementation == "torch" else "same_metadata")
    assert matches(*example) and matches(*tensors())
    changed = {
        "shape": (0, torch.zeros(3, 41, dtype=torch.bfloat16)),
        "strides": (6, torch.zeros(3, 4, 2, 1).transpose(1, 3)),
        "dtype": (1, torch.zeros(3, 4, dtype=torch.float64)),
        "device": (4, torch.zeros(4, device="meta")),
        "indices' dtype": (7, torch.arange(3)),
        "not a tensor": (7, [1, 2, 3]),
    }
    for term, (position, replacement) in changed.items():
        call = tensors()
        call[position] = replacement
        assert not matches(*call), term
    call = tensors()
    call[5].data = torch.zeros(6, 4, 2, 2)  # `.data` swapped without a version bump: another shape
    assert not matches(*call)
    # Stricter terms of torch's check that the signature does not hold: accepted all the same (by Python).
    call = tensors()
    call[3] = torch.nn.Parameter(call[3])  # a Parameter, requiring grad
    assert matches(*call)
    with torch.inference_mode():
        assert matches(*tensors())  # inference tensors
    assert not matches(*tensors()[:7])  # fewer tensors than the plan's
    references = [weakref.ref(tensor) for tensor in example]
    del example, call  # the test keeps no reference to the tensors it was made from (a pool stays freeable)
    gc.collect()
    assert all(reference() is None for reference in references)


def test_a_torch_check_that_does_not_tell_every_term_apart_is_not_used(monkeypatch):
    # The C++ check is a private torch API whose constructor has changed across releases (torch 2.0's could leave
    # sizes dynamic): it is asked once per process whether it refuses another shape, strides, dtype, device
    # and a non-tensor, and a check that does not is never used.
    torch = pytest.importorskip("torch")
    from gdr_check.checks import hotpath

    hotpath._torch_check_is_exact.cache_clear()
    try:
        assert hotpath._torch_check_is_exact()  # this torch's check tells every term apart
        hotpath._torch_check_is_exact.cache_clear()
        monkeypatch.setattr(hotpath, "_torch_check", lambda tensors: lambda *given: len(given) == len(tensors))
        assert not hotpath._torch_check_is_exact()
        matches = hotpath.tensor_matcher([torch.zeros(2, 3)])
        assert matches.__name__ == "same_metadata" and not matches(torch.zeros(3, 2))
    finally:
        hotpath._torch_check_is_exact.cache_clear()


def _spec_call(**changes):
    """A valid GDN call (B=4, H=2, HV=4, K=V=16, 9 slots) of hand-built TensorSpecs, with `changes`."""
    B, H, HV, K, V, S = 4, 2, 4, 16, 16, 9
    width = 2 * H * K + HV * V
    call = dict(mixed_qkv=TensorSpec((B, width), (width, 1), "bfloat16"), a=TensorSpec((B, HV), (HV, 1), "bfloat16"),
                b=TensorSpec((B, HV), (HV, 1), "bfloat16"), A_log=TensorSpec((HV,), (1,), "float32"),
                dt_bias=TensorSpec((HV,), (1,), "bfloat16"), scale=K ** -0.5,
                initial_state=TensorSpec((S, HV, V, K), (HV * V * K, V * K, K, 1), "float32"),
                out=TensorSpec((B, 1, HV, V), (HV * V, HV * V, V, 1), "bfloat16"),
                ssm_state_indices=TensorSpec((B,), (1,), "int32", values=(1, 2, 3, 4)))
    return {**call, **changes}


@pytest.mark.parametrize("argument, spec, kind", [
    ("initial_state", TensorSpec((9, 4, -1, 16), (256, 64, 16, 1), "float32"),
     "a TensorSpec with a negative size (shape [9, 4, -1, 16])"),
    ("out", TensorSpec((4, 1, 4, 16), (64, 64, 16, 1), "float99"), "a TensorSpec of dtype 'float99' (no such dtype)"),
    ("ssm_state_indices", TensorSpec((4,), (1,), "int32", values=(float("nan"), 2, 3, 4)),
     "a TensorSpec that holds nan (slot indices are whole numbers)"),
    ("ssm_state_indices", TensorSpec((4,), (1,), "int32", values=("x", 2, 3, 4)),
     "a TensorSpec that holds 'x' (slot indices are whole numbers)"),
    ("ssm_state_indices", TensorSpec((4,), (1,), "int32", values=(1.5, 2, 3, 4)),
     "a TensorSpec that holds 1.5 (slot indices are whole numbers)"),
    ("ssm_state_indices", TensorSpec((4,), (1,), "int32", values=(1, 2)),
     "a TensorSpec that holds 2 values for shape [4] (4 elements)"),
])
def test_a_hand_built_spec_that_describes_no_tensor_is_gdr228_not_a_conversion_error(argument, spec, kind):
    # (these raised "must be real number, not complex", "cannot convert float NaN to integer", "invalid literal for
    # int()", or passed without a word)
    from gdr_check import check_packed_decode

    report = check_packed_decode(**_spec_call(**{argument: spec}))
    assert [(d.code, d.message) for d in report] == [
        ("GDR228", f"`{argument}` is {kind}, not a dense strided tensor")]


def test_the_fast_mode_reads_no_values_of_a_spec_either():
    # read_values=False skips the index-value rules, for a spec as for a tensor (its values once crashed them)
    from gdr_check import check_packed_decode

    spec = TensorSpec((4,), (1,), "int32", values=("x", 2, 3, 4))
    assert not [d for d in check_packed_decode(**_spec_call(ssm_state_indices=spec), read_values=False)
                if d.severity == "error"]


def test_whole_float_slot_values_are_slots():
    from gdr_check import check_packed_decode

    spec = TensorSpec((4,), (1,), "int32", values=(1.0, 2, 3, 4))
    assert not [d for d in check_packed_decode(**_spec_call(ssm_state_indices=spec)) if d.severity == "error"]
