"""`dataclass`, as `dataclasses.dataclass` makes it, at about half the cost to define.

`dataclasses.dataclass` writes each method it adds (`__init__`, `__repr__`, `__eq__`, `__hash__`, and for a
frozen class `__setattr__` and `__delattr__`) as source text and compiles it with `exec` when the class is
defined, in every process: the package's ~80 dataclasses on a check's path took ~40% of its import time
(docs/performance.md, *Metadata path*). Here the class is made by `dataclasses.dataclass` with `repr` and `eq`
off, which still writes its `__init__` (and a frozen class's guards), and is given `__repr__`, `__eq__` and
`__hash__` written once below, which read the class's fields: the same text, comparisons and hashes as the
generated ones (a field's `repr`, `compare` and `hash` options included, and `...` for a repr that reaches
itself), a method the class defines itself kept, `__hash__` added, kept or set to None as `dataclass` decides.
`order=True` and `slots=True` classes are made by `dataclasses.dataclass` unchanged (the slotted ones are the
package's hot value types, compared and hashed per call, where the generated methods are faster to call).
`dataclasses.fields`, `replace` and `asdict` work as on any dataclass (`__dataclass_params__` records `repr` and
`eq` as off).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from reprlib import recursive_repr
from typing import TYPE_CHECKING, Any, TypeVar, overload

if TYPE_CHECKING:  # (typing's from 3.11; type checkers know typing_extensions', which need not be installed)
    from typing_extensions import dataclass_transform
elif sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # at run time the decorator below only needs to exist
    def dataclass_transform(**kwargs: Any) -> Callable[[Any], Any]:
        return lambda function: function

T = TypeVar("T")

_MISSING = object()

# Per class: (names shown by repr, names compared, names hashed), computed on first use.
_NAMES = "__record_names__"


def _names(cls: type) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    names: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]] | None = cls.__dict__.get(_NAMES)
    if names is None:
        fields = dataclasses.fields(cls)
        names = (tuple(f.name for f in fields if f.repr), tuple(f.name for f in fields if f.compare),
                 tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash)))
        setattr(cls, _NAMES, names)
    return names


@recursive_repr()
def _repr(self: Any) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in _names(type(self))[0])
    return f"{self.__class__.__qualname__}({shown})"


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    names = _names(type(self))[1]
    return tuple(getattr(self, name) for name in names) == tuple(getattr(other, name) for name in names)


def _hash(self: Any) -> int:
    return hash(tuple(getattr(self, name) for name in _names(type(self))[2]))


def _finish(cls: type[T], *, repr: bool, eq: bool, frozen: bool, unsafe_hash: bool, own: dict[str, Any]) -> type[T]:
    """Add the methods `dataclasses.dataclass(repr=repr, eq=eq, ...)` would have added to the class it made
    (`own`: the class's namespace as written)."""
    if repr and "__repr__" not in own:
        cls.__repr__ = _repr  # type: ignore[method-assign]
    if eq and "__eq__" not in own:
        cls.__eq__ = _eq  # type: ignore[method-assign]
    # `dataclass`'s table for __hash__ (an `__eq__` written in the class body leaves `__hash__ = None` behind,
    # which is not an explicit one): unsafe_hash adds one over the fields (refusing an explicit one, see
    # `dataclass`); eq with frozen adds one unless the class has its own; eq alone makes the class unhashable
    # unless it has its own.
    written = own.get("__hash__", _MISSING)
    explicit = not (written is _MISSING or (written is None and "__eq__" in own))
    if unsafe_hash or (eq and frozen and not explicit):
        cls.__hash__ = _hash  # type: ignore[method-assign]
    elif eq and not frozen and not explicit:
        cls.__hash__ = None  # type: ignore[assignment]
    return cls


@overload
def dataclass(cls: type[T], /) -> type[T]: ...


@overload
def dataclass(*, init: bool = True, repr: bool = True, eq: bool = True, order: bool = False,
              unsafe_hash: bool = False, frozen: bool = False, kw_only: bool = False,
              slots: bool = False) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(eq_default=True, order_default=False, kw_only_default=False, frozen_default=False,
                     field_specifiers=(dataclasses.field, dataclasses.Field))
def dataclass(cls: type[T] | None = None, /, *, init: bool = True, repr: bool = True, eq: bool = True,
              order: bool = False, unsafe_hash: bool = False, frozen: bool = False, kw_only: bool = False,
              slots: bool = False) -> type[T] | Callable[[type[T]], type[T]]:
    """`dataclasses.dataclass` with the same arguments and the same result, defined faster (see the module)."""

    def make(cls: type[T]) -> type[T]:
        if order or slots:  # ordering needs eq's own methods; slotted classes are the package's hot values
            # (TensorSpec, PackedDecodeCall, TensorInfo, Diagnostic...), compared and hashed per call: they keep
            # the generated methods, which are faster to call
            return dataclasses.dataclass(cls, init=init, repr=repr, eq=eq, order=order, unsafe_hash=unsafe_hash,
                                         frozen=frozen, kw_only=kw_only, slots=slots)
        own = dict(cls.__dict__)
        written = own.get("__hash__", _MISSING)
        if unsafe_hash and not (written is _MISSING or (written is None and "__eq__" in own)):
            raise TypeError(f"Cannot overwrite attribute __hash__ in class {cls.__name__}")  # dataclass's error
        made = dataclasses.dataclass(cls, init=init, repr=False, eq=False, order=False, unsafe_hash=False,
                                     frozen=frozen, kw_only=kw_only, slots=slots)
        return _finish(made, repr=repr, eq=eq, frozen=frozen, unsafe_hash=unsafe_hash, own=own)

    return make if cls is None else make(cls)
