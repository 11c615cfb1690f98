"""Torch-free description of a tensor: what the checks need to know, from a live tensor or from metadata.

A `TensorSpec` carries shape, stride, dtype and device, and when known the values (slot indices) and the
storage it aliases. Live torch tensors are read by duck typing, so this module never imports torch.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Sequence
from dataclasses import field, replace
from typing import Any

from .limits import counted, shorten
from .records import dataclass

# Canonical dtype names are torch's, without the "torch." prefix.
DTYPE_ITEMSIZE: dict[str, int] = {
    "float64": 8, "float32": 4, "bfloat16": 2, "float16": 2,
    "float8_e4m3fn": 1, "float8_e5m2": 1,
    "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8,
    "bool": 1, "complex64": 8, "complex128": 16,
}

_SHORT = {
    "float64": "f64", "float32": "f32", "bfloat16": "bf16", "float16": "f16",
    "int64": "i64", "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "bool",
}

_ALIASES = {
    "fp32": "float32", "f32": "float32", "float": "float32", "fp16": "float16", "f16": "float16",
    "half": "float16", "bf16": "bfloat16", "fp64": "float64", "f64": "float64", "double": "float64",
    "i32": "int32", "int": "int32", "i64": "int64", "long": "int64", "u8": "uint8",
}


def canonical_dtype(dtype: Any) -> str:
    """Map a torch dtype, numpy dtype or name ("bf16", "torch.float32", "F32") to torch's name."""
    # The runtime guard converts 8 dtypes per call: memoise (dtypes are few; the size bound keeps hostile
    # names from growing the table).
    memo = type(dtype) is str or type(dtype).__name__ == "dtype"  # not numbers: 1 == True, str differs
    if memo and dtype in _CANONICAL:
        return _CANONICAL[dtype]
    name = str(dtype).removeprefix("torch.").strip()
    name = _ALIASES.get(name.lower(), name.lower())
    if memo and len(_CANONICAL) < _CANONICAL_LIMIT and name not in QUANTIZED_DTYPES:
        _CANONICAL[dtype] = name  # never a quantized dtype: `TensorSpec.from_tensor` must see those (a miss)
    return name


_CANONICAL: dict[Any, str] = {}
_CANONICAL_LIMIT = 256
# torch's quantized dtypes: a tensor of one holds integers and a scale, which no kernel here reads as numbers.
QUANTIZED_DTYPES = frozenset({"qint8", "quint8", "qint32", "quint4x2", "quint2x4"})


def check_sizes(shape: Sequence[int], where: str) -> None:
    """ValueError when a tensor written down (`TensorSpec.of`, a recording) has a negative size."""
    if any(size < 0 for size in shape):
        raise ValueError(f"`{where}` has a negative size")


def _integer_range(dtype: str | None) -> tuple[int, int] | None:
    """The values an integer dtype holds (None for any other dtype, or none given)."""
    if dtype is None or not dtype.startswith(("int", "uint")) or dtype not in DTYPE_ITEMSIZE:
        return None
    bits = 8 * DTYPE_ITEMSIZE[dtype]
    return (0, 2**bits - 1) if dtype.startswith("u") else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def index_values_problem(values: Sequence[Any], shape: Sequence[int], dtype: str | None = None) -> str | None:
    """Why `values` are not the slot indices of a tensor of `shape` (one whole number per element, each one that
    an integer `dtype` can hold), as a verb phrase ("holds 4.5 (...)"), or None when they are."""
    elements = math.prod(shape)
    if len(values) != elements:
        return f"holds {counted(len(values), 'value')} for shape {list(shape)} ({counted(elements, 'element')})"
    bounds = _integer_range(dtype)
    for value in values:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (
                isinstance(value, float) and not value.is_integer()):
            return f"holds {shorten(repr(value))} (slot indices are whole numbers)"
        if bounds is not None and not bounds[0] <= value <= bounds[1]:
            return f"holds {shorten(value)}, which {dtype} cannot hold ({bounds[0]}..{bounds[1]})"
    return None


def known_dtype(dtype: Any, where: str) -> str:
    """The canonical name of a dtype written down (a torch dtype, its name or a short one: "bf16", "F32"); ValueError
    naming `where` for anything else (a quantized dtype included: no kernel here reads one as numbers)."""
    name = canonical_dtype(dtype)
    if name not in DTYPE_ITEMSIZE:
        raise ValueError(f"`{where}` is {shorten(str(dtype))!r}: not a dtype (expected one of "
                         f"{', '.join(sorted(DTYPE_ITEMSIZE))})")
    return name


def _described_dtype(dtype: Any) -> str:
    """`canonical_dtype` for a live tensor's dtype; a quantized one cannot be described (GDR228)."""
    name = canonical_dtype(dtype)
    if name in QUANTIZED_DTYPES:
        raise TypeError("a quantized tensor")
    return name


def _device_name(device: Any) -> str:
    """`str(device)`, memoised: formatting a torch.device costs more than the rest of a spec's fields."""
    try:
        return _DEVICE_NAMES[device]
    except KeyError:
        name = str(device)
        if len(_DEVICE_NAMES) < _CANONICAL_LIMIT:
            _DEVICE_NAMES[device] = name
        return name
    except TypeError:  # unhashable duck-typed device
        return str(device)


_DEVICE_NAMES: dict[Any, str] = {}


def _reports_plain_ints(tensor_type: type) -> bool:
    """Whether tensors of this type report shape and stride as Python ints: plain torch tensors and
    Parameters do; subclasses (fake tensors under tracing) may hold symbolic sizes, which need `int()`."""
    known = _PLAIN_INT_TYPES.get(tensor_type)
    if known is None:
        torch = sys.modules.get("torch")  # never imported here: a live tensor means torch is loaded
        plain = (getattr(torch, "Tensor", None), getattr(getattr(torch, "nn", None), "Parameter", None))
        known = torch is not None and tensor_type in plain
        if len(_PLAIN_INT_TYPES) < _CANONICAL_LIMIT:
            _PLAIN_INT_TYPES[tensor_type] = known
    return known


_PLAIN_INT_TYPES: dict[type, bool] = {}

# Tensor types whose values and addresses do not exist: torch's fake tensors (FakeTensorMode, the tracing that
# `torch.compile` does) and the functional wrappers around them. Reading a value raises a data-dependent
# exception there, and a data pointer is meaningless.
_FAKE_TYPE_NAMES = frozenset({"FakeTensor", "FunctionalTensor"})
_FAKE_TYPES: dict[type, bool] = {}


def is_fake_tensor_type(tensor_type: type) -> bool:
    """Whether tensors of `tensor_type` are fake (tracing): they have metadata but no values or memory."""
    known = _FAKE_TYPES.get(tensor_type)
    if known is None:
        known = any(base.__name__ in _FAKE_TYPE_NAMES for base in getattr(tensor_type, "__mro__", ()))
        if len(_FAKE_TYPES) < _CANONICAL_LIMIT:
            _FAKE_TYPES[tensor_type] = known
    return known


def short_dtype(dtype: str) -> str:
    return _SHORT.get(dtype, dtype)


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(int(size), 1)
    return tuple(reversed(strides))


@dataclass(slots=True, unsafe_hash=True)
class TensorSpec:
    """Shape, stride, dtype and device of one tensor; `values` and `storage` when known.

    `storage` identifies the underlying buffer (for aliasing checks) and `offset` is the storage offset in
    elements, as in torch.

    A value: never changed after construction, compared and hashed by its fields (`values` aside). It has slots
    and is not `frozen`: a frozen dataclass's `__init__` sets each field through `object.__setattr__`, which
    doubles the cost of the eight specs `check_packed_decode` builds per call (see checks/hotpath.py).
    """

    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: str = "bfloat16"
    device: str = "cuda:0"
    values: tuple[int | float, ...] | None = field(default=None, compare=False)
    storage: int | None = None
    offset: int = 0
    # Why values asked for (`from_tensor(read_values=True)`) were not read: "meta" or "fake" (no values exist).
    values_unread: str | None = field(default=None, compare=False)
    # len(shape), stored: the rules read it ~20 times per checked call (a property costs a call each).
    ndim: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Tuples of ints and canonical dtype names (what `of`, `from_tensor` and the rules pass) are kept as they
        # are; anything else (lists, torch.Size of a fake tensor, "bf16") is normalised.
        if type(self.shape) is not tuple or type(self.stride) is not tuple:
            # (Tuples are taken as given: the hot path's. `TensorSpec.of` checks what a person writes down.)
            for field_name in ("shape", "stride"):
                value = getattr(self, field_name)
                try:
                    setattr(self, field_name, tuple(map(int, value)))
                except (TypeError, ValueError):
                    raise ValueError(f"`{field_name}` must be a sequence of integers, not "
                                     f"{shorten(str(value))!r}") from None
        if self.dtype not in DTYPE_ITEMSIZE:
            self.dtype = canonical_dtype(self.dtype)
        self.ndim = len(self.shape)
        if self.ndim != len(self.stride):
            raise ValueError(f"shape {self.shape} and stride {self.stride} have different ranks")

    @classmethod
    def of(
        cls,
        shape: Sequence[int],
        dtype: Any = "bfloat16",
        device: str = "cuda:0",
        *,
        stride: Sequence[int] | None = None,
        values: Iterable[int | float] | None = None,
        storage: int | None = None,
        offset: int = 0,
    ) -> TensorSpec:
        """A tensor of `shape`, contiguous unless `stride` is given. ValueError for a negative size or a dtype that
        is not a torch dtype's name (or a short one: "bf16", "fp32")."""
        shape = tuple(int(s) for s in shape)
        check_sizes(shape, "shape")
        name = known_dtype(dtype, "dtype")
        return cls(
            shape=shape,
            stride=tuple(int(s) for s in stride) if stride is not None else contiguous_strides(shape),
            dtype=name,
            device=device,
            values=tuple(values) if values is not None else None,
            storage=storage,
            offset=offset,
        )

    def problem(self, index_values: bool = False) -> str | None:
        """Why this spec describes no tensor a kernel could take, or None: a negative size, a name that is no dtype,
        and with `index_values` (an index tensor's values, which the rules read) values that are not whole numbers
        or not one per element. (`TensorSpec(...)` takes what it is given, for speed; the checks ask this of a spec
        a caller built.)"""
        if any(size < 0 for size in self.shape):
            return f"a TensorSpec with a negative size (shape {list(self.shape)})"
        if self.dtype not in DTYPE_ITEMSIZE:
            return f"a TensorSpec of dtype {shorten(str(self.dtype))!r} (no such dtype)"
        if index_values and self.values is not None:
            problem = index_values_problem(self.values, self.shape, self.dtype)
            return None if problem is None else f"a TensorSpec that {problem}"
        return None

    @classmethod
    def from_tensor(cls, tensor: Any, *, read_values: bool = False) -> TensorSpec:
        """Describe a torch tensor (duck-typed), or return a TensorSpec as it is (without its values unless
        `read_values`: the index-value rules are then skipped, as for a tensor; ValueError when it describes no
        tensor: `problem`).

        Reading values copies the tensor to the host, which synchronises a GPU; only index tensors need it.
        """
        if isinstance(tensor, TensorSpec):
            problem = tensor.problem(read_values)
            if problem is not None:
                raise ValueError(problem)
            return tensor if read_values or tensor.values is None else replace(tensor, values=None)
        # This is the runtime guard's hot path (eight tensors per guarded call), so each torch attribute is read
        # once and names come from memo tables keyed by the torch objects themselves, inlined here instead of
        # through `_device_name`/`canonical_dtype` (a Python call costs about as much as the torch read).
        plain = _PLAIN_INT_TYPES.get(type(tensor))
        if plain is None:
            plain = _reports_plain_ints(type(tensor))
        device_object = tensor.device
        try:
            device = _DEVICE_NAMES[device_object]
        except (KeyError, TypeError):  # first sight, or an unhashable duck-typed device
            device = _device_name(device_object)
        values = None
        fake = _FAKE_TYPES.get(type(tensor))
        if fake is None:
            fake = is_fake_tensor_type(type(tensor))
        unread = None
        if read_values and (device == "meta" or fake):
            unread = "meta" if device == "meta" else "fake"
        elif read_values and tensor.numel() <= 1 << 20:
            values = tuple(tensor.reshape(-1).tolist())
        storage = None
        if device != "meta" and not fake:
            try:
                storage = tensor.untyped_storage().data_ptr()
                if not plain:  # torch gives an int; a duck type may not
                    storage = int(storage)
            except (AttributeError, RuntimeError):
                if "sparse" in str(getattr(tensor, "layout", "")):  # no storage, no strides: GDR228
                    raise TypeError("a sparse tensor") from None
                storage = None
        if plain:  # torch already gives int tuples of equal rank
            shape, stride, offset = tuple(tensor.shape), tensor.stride(), tensor.storage_offset()
        else:
            shape, stride = tuple(map(int, tensor.shape)), tuple(map(int, tensor.stride()))
            offset = int(tensor.storage_offset()) if hasattr(tensor, "storage_offset") else 0
            if len(shape) != len(stride):
                raise ValueError(f"shape {shape} and stride {stride} have different ranks")
        dtype_object = tensor.dtype
        if plain:
            try:  # a torch dtype is hashable and never equal to a name, so it can key the same table as names
                dtype = _CANONICAL[dtype_object]
            except KeyError:  # first sight, or a quantized dtype (never memoised)
                dtype = _described_dtype(dtype_object)
        else:
            dtype = _described_dtype(dtype_object)
        return cls(shape, stride, dtype, device, values, storage, offset, unread)

    # -- derived properties -------------------------------------------------------------------------------
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return DTYPE_ITEMSIZE.get(self.dtype, 0)

    @property
    def nbytes(self) -> int:
        return self.numel() * self.itemsize

    def is_contiguous(self) -> bool:
        """torch semantics: size-1 axes may have any stride; empty tensors are contiguous."""
        if self.numel() == 0:
            return True
        expected = 1
        for size, step in zip(reversed(self.shape), reversed(self.stride), strict=True):
            if size != 1:
                if step != expected:
                    return False
                expected *= size
        return True

    def byte_span(self) -> tuple[int, int] | None:
        """[start, end) bytes of the storage this view can touch; None when empty."""
        if self.numel() == 0:
            return None
        last = sum((size - 1) * step for size, step in zip(self.shape, self.stride, strict=True) if step > 0)
        first = sum((size - 1) * step for size, step in zip(self.shape, self.stride, strict=True) if step < 0)
        return ((self.offset + first) * self.itemsize, (self.offset + last + 1) * self.itemsize)

    def overlaps(self, other: TensorSpec) -> bool:
        if self.storage is None or other.storage is None or self.storage != other.storage:
            return False
        mine, theirs = self.byte_span(), other.byte_span()
        return bool(mine and theirs and mine[0] < theirs[1] and theirs[0] < mine[1])

    def with_shape(self, shape: Sequence[int]) -> TensorSpec:
        """The same buffer seen as a contiguous tensor of another shape (a reshape)."""
        return replace(self, shape=tuple(shape), stride=contiguous_strides(tuple(shape)))

    def describe(self) -> str:
        """Compact dtype-shape notation, e.g. `bf16[8,8192]`."""
        text = f"{short_dtype(self.dtype)}[{','.join(str(s) for s in self.shape)}]"
        if not self.is_contiguous():
            text += f" stride=({', '.join(str(s) for s in self.stride)})"
        return text

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "shape": list(self.shape),
            "stride": list(self.stride),
            "dtype": self.dtype,
            "device": self.device,
        }
        if self.values is not None:
            data["values"] = list(self.values)
        if self.storage is not None:
            data["storage"] = self.storage
            data["offset"] = self.offset
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TensorSpec:
        return cls.of(
            data["shape"],
            data.get("dtype", "bfloat16"),
            data.get("device", "cuda:0"),
            stride=data.get("stride"),
            values=data.get("values"),
            storage=data.get("storage"),
            offset=data.get("offset", 0),
        )
