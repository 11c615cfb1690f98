"""Triton's GPU compiler reads a jit function's signature as code: every name in an annotation must be a
constexpr global, or compiling raises `NameError: Cannot access global variable ...`. The CPU interpreter
(how CI runs the kernels) never looks, so this is checked on the source."""

from __future__ import annotations

import ast

from package_source import source_files


def _is_jit(decorator: ast.expr) -> bool:
    """`@triton.jit`, `@triton.jit(...)` or `@jit`."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return ast.unparse(target) in ("triton.jit", "jit")


def _jit_functions() -> list[tuple[str, ast.FunctionDef]]:
    found = []
    for source in (source for source in source_files() if source.mentions("jit")):
        for node in source.nodes:
            if isinstance(node, ast.FunctionDef) and any(_is_jit(d) for d in node.decorator_list):
                found.append((f"{source.relative}:{node.lineno} {node.name}", node))
    return found


def test_the_package_has_jit_functions():
    assert len(_jit_functions()) >= 10  # the kernels, their helpers and the sglang stand-in


def test_jit_signatures_annotate_only_constexpr_parameters():
    wrong = []
    for where, function in _jit_functions():
        arguments = function.args.posonlyargs + function.args.args + function.args.kwonlyargs
        for argument in arguments:
            if argument.annotation is not None and ast.unparse(argument.annotation) != "tl.constexpr":
                wrong.append(f"{where}: `{argument.arg}: {ast.unparse(argument.annotation)}`")
        if function.returns is not None:
            wrong.append(f"{where}: returns `{ast.unparse(function.returns)}`")
    assert wrong == []
