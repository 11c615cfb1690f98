"""tests/interpreter_shortcuts.py computes what Triton's interpreter computes: its tree reduction against the
interpreter's element-by-element one (and numpy's), its dtype table against the interpreter's for every type, and
the guarded kernels' results, faults and state with the shortcuts against the plain interpreter's, bitwise."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
np = pytest.importorskip("numpy")
import triton.language as tl  # noqa: E402

import interpreter_shortcuts  # noqa: E402
from gdr_check.kernel import FaultBuffer, kda_packed_decode, packed_decode  # noqa: E402
from gdr_check.kernel._triton_common import _bit_or  # noqa: E402
from kernel_helpers import DEVICE, make_call  # noqa: E402

pytestmark = pytest.mark.skipif(DEVICE != "cpu", reason="the shortcuts are the CPU interpreter's")


@pytest.fixture
def interpreter():
    import triton.runtime.interpreter as interpreter

    if not interpreter_shortcuts.install():
        pytest.skip("the shortcuts are off (GDR_CHECK_TEST_PLAIN_INTERPRETER=1) or this Triton has other internals")
    return interpreter


def plain(interpreter, monkeypatch) -> None:
    """The interpreter as Triton ships it, until the test ends."""
    monkeypatch.setattr(interpreter.ReduceOps, "generic_reduce", interpreter.ReduceOps._plain_generic_reduce)
    monkeypatch.setattr(interpreter, "_patch_lang", interpreter._plain_patch_lang)
    monkeypatch.setattr(interpreter.GridExecutor, "__call__", interpreter.GridExecutor._plain_call)
    monkeypatch.setattr(interpreter, "_get_np_dtype", interpreter._plain_get_np_dtype)


@triton.jit
def _first_nonzero(left, right):  # associative, not commutative: the order of the pairs shows
    return tl.where(left != 0, left, right)


@triton.jit
def _reduce_kernel(x, bit_or, first, keep, N: tl.constexpr, ROWS: tl.constexpr):
    offsets = tl.arange(0, N)
    values = tl.load(x + offsets)
    tl.store(bit_or, tl.reduce(values, 0, _bit_or))
    tl.store(first, tl.reduce(values, 0, _first_nonzero))
    grid = tl.reshape(values, (ROWS, N // ROWS))
    cols = tl.arange(0, N // ROWS)
    tl.store(keep + cols, tl.reshape(tl.reduce(grid, 0, _bit_or, keep_dims=True), (N // ROWS,)))


def _reduce(n: int, rows: int, seed: int) -> tuple[list[int], int, int, list[int]]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 4, (n,), generator=gen, dtype=torch.int32) * (torch.rand(n, generator=gen) < 0.3)
    x = x.to(torch.int32)
    bit_or, first = torch.zeros(1, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
    keep = torch.zeros(n // rows, dtype=torch.int32)
    _reduce_kernel[(1,)](x, bit_or, first, keep, N=n, ROWS=rows)
    return x.tolist(), int(bit_or), int(first), keep.tolist()


@pytest.mark.parametrize(("n", "rows"), [(1, 1), (2, 2), (8, 4), (128, 8), (1024, 32)])
def test_the_tree_reduction_is_the_interpreters(interpreter, monkeypatch, n, rows):
    taken = interpreter_shortcuts.tree_reductions
    fast = [_reduce(n, rows, seed) for seed in range(3)]
    assert interpreter_shortcuts.tree_reductions == taken + 3 * 3  # three reductions per run: none fell back
    plain(interpreter, monkeypatch)
    assert [_reduce(n, rows, seed) for seed in range(3)] == fast
    for x, bit_or, first, keep in fast:
        assert bit_or == int(np.bitwise_or.reduce(np.array(x, dtype=np.int32)))
        assert first == next((v for v in x if v), 0)
        assert keep == np.bitwise_or.reduce(np.array(x, dtype=np.int32).reshape(rows, n // rows), axis=0).tolist()


@pytest.mark.parametrize("kda", [False, True], ids=["gdn", "kda"])
def test_the_guarded_kernels_compute_what_the_plain_interpreter_does(interpreter, monkeypatch, kda):
    batch = 6  # six programs per head, each one scan block with a custom reduction, a repeat and a slot 0
    slots = [(row * 7) % (batch + 2) - 1 for row in range(batch)]
    slots[1] = slots[batch - 1] = 2  # a repeat across the batch

    def run() -> tuple:
        call = make_call(B=batch, H=1, HV=2, K=4, V=4, slots=slots, pool_slots=batch, kda=kda, seed=batch)
        buffer = FaultBuffer(DEVICE, max_records=2 * batch)
        (kda_packed_decode if kda else packed_decode)(*call.args(), engine="sglang", context="engine",
                                                       faults=buffer)
        faults, total = buffer.take()
        builtins = sorted(name for name, value in vars(tl).items() if tl.core.is_builtin(value))
        return call.out, call.pool_backing, [(f.code, f.row, f.slot, f.first_row) for f in faults], total, builtins

    taken = interpreter_shortcuts.tree_reductions
    out, pool, faults, total, builtins = run()
    assert interpreter_shortcuts.tree_reductions > taken
    plain(interpreter, monkeypatch)
    plain_out, plain_pool, plain_faults, plain_total, plain_builtins = run()
    assert total > 0 and (faults, total) == (plain_faults, plain_total)
    assert torch.equal(out, plain_out) and torch.equal(pool, plain_pool)
    assert builtins == plain_builtins  # triton.language is left as the plain interpreter leaves it


def test_the_dtype_table_answers_as_the_interpreter_does(interpreter):
    """Every scalar type of the interpreter's table, each as a block of two shapes and as a pointer (alone and in a
    block), asked twice (the second answer comes from the table)."""
    scalars = [tl.int1, tl.float16, tl.float32, tl.float64, tl.int8, tl.uint8, tl.int16, tl.uint16, tl.int32,
               tl.uint32, tl.int64, tl.uint64, tl.bfloat16, tl.float8e5, tl.float8e5b16, tl.float8e4nv,
               tl.float8e4b8, tl.float8e4b15]
    types = [*scalars, *(tl.block_type(t, [4]) for t in scalars), *(tl.block_type(t, [2, 8]) for t in scalars),
             tl.pointer_type(tl.float32), tl.block_type(tl.pointer_type(tl.bfloat16), [16])]
    for _ in range(2):
        assert [interpreter._get_np_dtype(t) for t in types] == [interpreter._plain_get_np_dtype(t) for t in types]
    assert interpreter._get_np_dtype(tl.bfloat16) == np.dtype(np.uint16)  # stored as its bits, as Triton keeps it
    with pytest.raises(KeyError):  # a type the interpreter has no numpy dtype for is refused as it refuses it
        interpreter._get_np_dtype(tl.void)
