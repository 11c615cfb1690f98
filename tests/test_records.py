"""`gdr_check.base.records.dataclass` makes the classes `dataclasses.dataclass` makes: the standard library's
decorator is the oracle, on every combination of the options the package uses."""

from __future__ import annotations

import ast
import dataclasses
import itertools
from dataclasses import field
from typing import Any

import pytest

from gdr_check.base.records import dataclass as record
from package_source import source_files

OPTIONS = [dict(zip(("frozen", "eq", "repr", "unsafe_hash", "slots"), values, strict=True))
           for values in itertools.product((False, True), repeat=5)]


def _point(decorator: Any, options: dict[str, bool]) -> Any:
    @decorator(**options)
    class Point:
        a: int
        b: Any = field(default_factory=list)
        c: str = field(default="x", repr=False)
        d: int = field(default=0, compare=False)
        e: int = field(default=1, hash=False)

    return Point


def _name(options: dict[str, bool]) -> str:
    return ",".join(name for name, on in options.items() if on) or "defaults"


@pytest.mark.parametrize("options", OPTIONS, ids=_name)
def test_same_repr_equality_and_hash_as_dataclasses(options: dict[str, bool]) -> None:
    std, ours = _point(dataclasses.dataclass, options), _point(record, options)
    if options["repr"]:
        assert repr(ours(1, [2])) == repr(std(1, [2]))
        assert repr(ours(1, [2])).endswith(".<locals>.Point(a=1, b=[2], d=0, e=1)")
    else:
        assert repr(ours(1)).startswith("<")
    for left, right in (((1, [2]), (1, [2])), ((1, [2]), (2, [2])), ((1, [2], "y", 5), (1, [2], "z", 6))):
        assert (ours(*left) == ours(*right)) is (std(*left) == std(*right))
    assert (ours(1) == 1) is (std(1) == 1)
    assert (std.__hash__ is None) is (ours.__hash__ is None)
    field_hash = options["unsafe_hash"] or (options["eq"] and options["frozen"])
    if field_hash:
        assert hash(ours(1, (2,), "y", 5, 7)) == hash(std(1, (2,), "y", 6, 8))  # d and e are not hashed
        assert hash(ours(1, (2,), "y")) != hash(ours(1, (2,), "z"))
    elif std.__hash__ is not None:
        assert ours.__hash__ is std.__hash__ is object.__hash__
    assert dataclasses.fields(ours) == dataclasses.fields(ours)
    assert [f.name for f in dataclasses.fields(ours)] == [f.name for f in dataclasses.fields(std)]
    assert dataclasses.replace(ours(1), a=7).a == 7
    if options["frozen"]:
        with pytest.raises(dataclasses.FrozenInstanceError):
            ours(1).a = 2  # type: ignore[misc]
    if options["slots"]:
        assert ours.__slots__ == std.__slots__  # type: ignore[attr-defined]


def test_methods_the_class_writes_are_kept() -> None:
    for decorator in (dataclasses.dataclass, record):
        @decorator(frozen=True)
        class Own:
            x: int

            def __repr__(self) -> str:
                return "own"

            def __hash__(self) -> int:
                return 42

        assert (repr(Own(1)), hash(Own(1)), Own(1) == Own(1), Own(1) == Own(2)) == ("own", 42, True, False)

        @decorator
        class OwnEq:
            x: int

            def __eq__(self, other: object) -> bool:
                return True

        assert OwnEq.__hash__ is None
        assert OwnEq(1) == OwnEq(2)


def test_a_repr_that_reaches_itself_shows_dots() -> None:
    shown = []
    for decorator in (dataclasses.dataclass, record):
        @decorator
        class Node:
            child: Any = None

        node = Node()
        node.child = node
        shown.append(repr(node))
    assert shown[0] == shown[1] == "test_a_repr_that_reaches_itself_shows_dots.<locals>.Node(child=...)"


def test_unsafe_hash_refuses_a_hash_of_the_class_as_dataclasses_does() -> None:
    messages = []
    for decorator in (dataclasses.dataclass, record):
        with pytest.raises(TypeError) as refused:
            @decorator(unsafe_hash=True)
            class Hashed:
                x: int

                def __hash__(self) -> int:
                    return 1
        messages.append(str(refused.value))
    assert messages[0] == messages[1] == "Cannot overwrite attribute __hash__ in class Hashed"


def test_order_is_passed_through() -> None:
    @record(order=True, frozen=True)
    class Version:
        major: int
        minor: int

    assert sorted([Version(1, 2), Version(0, 9)]) == [Version(0, 9), Version(1, 2)]


def test_the_package_makes_its_dataclasses_with_records() -> None:
    """Every module but the engines' plugin side (`integrations/`, standard library only) takes `dataclass`
    from `base.records`, so no dataclass of the package pays for `exec`-compiled methods again."""
    offenders = []
    for source in source_files():
        relative = source.relative
        if relative.startswith("integrations/") or relative == "base/records.py" or not source.mentions("dataclasses"):
            continue  # (a module that never names `dataclasses` cannot take its decorator)
        for node in source.nodes:
            if isinstance(node, ast.ImportFrom) and node.module == "dataclasses" and node.level == 0:
                if any(alias.name == "dataclass" for alias in node.names):
                    offenders.append(relative)
            elif isinstance(node, ast.Attribute) and node.attr == "dataclass" and \
                    isinstance(node.value, ast.Name) and node.value.id == "dataclasses":
                offenders.append(relative)
    assert offenders == []
