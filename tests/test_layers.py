"""The package's import graph runs one way, folder by folder: base -> engines -> sources -> models -> deployment ->
call -> checks (rules) -> kernel -> pipeline -> cli/integrations (docs/package-layers.md).

Every module of `src/gdr_check` is parsed with `ast` (nothing is imported), its imports resolved (relative ones,
the parent packages an import runs, and the modules a package's lazy `_EXPORTS` name), and the graph is checked
for (a) a cycle, (b) an import that runs back up the folder order, (c) a function-level import of anything but a
module that imports torch or triton, or an optional dependency. `if TYPE_CHECKING:` imports count like any other:
a type link that runs back up is a design link that runs back up. There is no list of exceptions: a back edge or
a cycle is fixed by moving the code.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from pathlib import Path

from package_source import PACKAGE as ROOT
from package_source import source_files

PACKAGE = "gdr_check"

# The layers, lowest first: one folder each (a folder's subfolders are part of its layer). A module imports only
# modules of its own folder or of the folders before it. `gdr_check/__init__.py` (the public names, loaded lazily) and
# `__main__` sit above every folder. `integrations` (the engines' plugins) sits beside `cli`: both are entry points.
FOLDERS: tuple[tuple[str, ...], ...] = (
    ("base",),  # names every stage uses: errors, reports, tensor specs, limits, the rule registry
    ("engines",),  # the engine profiles (data): one record per engine release epoch
    ("sources",),  # files on disk -> `Checkpoint` (config, tensor names, shapes, dtypes)
    ("models",),  # checkpoint -> `LinearAttentionModel` (adapters, built-in geometries, quantization, sharding)
    ("deployment",),  # engine settings, TP size, dtypes, the decode path
    ("call",),  # the expected kernel call per rank, the pools, a recorded call
    ("checks",),  # the rules: each rule's check and example, the contract engine
    ("kernel",),  # the Triton kernels, their float64 references, the checked launch (runs the contract first)
    ("pipeline",),  # whole runs: a model check, the library API, the dry run, the runtime guard, capture, settings
    ("cli", "integrations"),  # renderers and entry points: the command line and its formats; the engine plugins
)
TOP = len(FOLDERS)

# Function-level imports are allowed only of modules that import torch or triton (the metadata path never does;
# the set of package modules that do is computed below, not listed), and of optional dependencies that may be
# missing (pyproject.toml's extras).
HEAVY = ("torch", "triton")
OPTIONAL = ("huggingface_hub",)


# The graph is built when a test first asks for it (in the one worker that runs these tests), not at collection.
@functools.cache
def _modules() -> dict[str, tuple[Path, bool]]:
    modules = {}
    for path in (source.path for source in source_files()):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        modules[".".join(parts)] = (path, is_package)
    return modules


def _targets(module: str, is_package: bool, node: ast.Import | ast.ImportFrom) -> list[tuple[str, bool]]:
    """The modules of this package that `node` runs: the named module, its parent packages and, for
    `from package import name`, the submodule `name` when there is one."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level:
            base = module.split(".") if is_package else module.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            prefix = ".".join(base + ([node.module] if node.module else []))
        else:
            prefix = node.module or ""
        names = [prefix] + [f"{prefix}.{alias.name}" for alias in node.names]
    found = []
    for name in names:
        parts = name.split(".")
        for end in range(1, len(parts) + 1):
            candidate = ".".join(parts[:end])
            # A module's own parent packages are initialized before it runs: no edge.
            if candidate in _modules() and candidate != module and not module.startswith(candidate + "."):
                found.append((candidate, end < len(parts)))
    # The named modules first, then the parent packages that run on the way (marked True).
    named = [name for name, parent in found if not parent]
    return [(name, False) for name in named] + [(name, True) for name, parent in found if parent and name not in named]


_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")  # the fields that hold statements


def _import_statements(tree: ast.Module) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Each import statement of the module and whether it stands inside a function, found by walking statements
    only (an import is a statement; expressions, most of a module's nodes, cannot hold one)."""
    found = []
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, in_function = stack.pop()
        for field in _BODIES:
            for child in getattr(node, field, None) or ():
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    found.append((child, in_function))
                stack.append((child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))))
    return found


@functools.cache
def _imports() -> list[tuple[str, str, bool, int]]:
    """(importer, imported, at function level, line) for each import statement, `if TYPE_CHECKING:` ones
    included; `at function level` is only set for the module a function-level import names, not for the parent
    packages it runs on the way."""
    edges = []
    trees = {source.path: source.tree for source in source_files()}
    for module, (path, is_package) in _modules().items():
        for node, lazy in _import_statements(trees[path]):
            for target, parent in _targets(module, is_package, node):
                edges.append((module, target, lazy and not parent, node.lineno))
            if not getattr(node, "level", 0):
                for name in ([a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]):
                    if not name.startswith(PACKAGE):
                        edges.append((module, name, lazy, node.lineno))
    return edges


@functools.cache
def _lazy_exports() -> list[tuple[str, str, bool, int]]:
    """(package, module, False, line) for each module a package's PEP 562 `_EXPORTS` (`base/lazy.py`) names: the
    package imports it on first use of the name, out of the AST's sight, so that a lazy export that runs back up
    or closes a cycle would otherwise pass. Not edges for `_heavy_modules`: nothing runs at import."""
    edges = []
    trees = {source.path: source.tree for source in source_files()}
    for module, (path, is_package) in _modules().items():
        if not is_package:
            continue
        for node in trees[path].body:
            target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
            if not (isinstance(target, ast.Name) and target.id == "_EXPORTS") or node.value is None:
                continue
            for name in set(ast.literal_eval(node.value).values()):  # ".checks.contract", or "description"
                exported = importlib.util.resolve_name(name if name.startswith(".") else f".{name}", module)
                assert exported in _modules(), f"{module}._EXPORTS names {name!r}, no module of the package"
                edges.append((module, exported, False, node.lineno))
    return edges


def _layer(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1 or parts[1] == "__main__":
        return TOP
    for layer, folders in enumerate(FOLDERS):
        if parts[1] in folders:
            return layer
    raise AssertionError(f"{module} is in no layer's folder: add its folder to FOLDERS (tests/test_layers.py) "
                         f"and to docs/package-layers.md")


@functools.cache
def _heavy_modules() -> set[str]:
    """The package's modules that import torch or triton when they are imported (module-level imports, followed
    through the package)."""
    graph: dict[str, set[str]] = {module: set() for module in _modules()}
    for importer, imported, lazy, _line in _imports():
        if not lazy:
            graph[importer].add(imported)
    heavy = {module for module, targets in graph.items()
             if any(target.split(".")[0] in HEAVY for target in targets)}
    changed = True
    while changed:
        changed = False
        for module, targets in graph.items():
            if module not in heavy and targets & heavy:
                heavy.add(module)
                changed = True
    return heavy


def test_every_module_has_a_layer() -> None:
    for module in _modules():
        _layer(module)


def test_the_kernels_are_the_heavy_modules() -> None:
    """The computed set is not empty (the allowance above is not vacuous) and holds no metadata-path stage."""
    assert "gdr_check.kernel.gdn.fused" in _heavy_modules() and "gdr_check.kernel.kda.fused" in _heavy_modules()
    # (and the engine plugins' worker side, `integrations.served`, which runs in an engine worker only)
    layers = {_layer(module) for module in _heavy_modules()}
    assert layers <= {_layer("gdr_check.kernel"), _layer("gdr_check.pipeline"), _layer("gdr_check.integrations")}


def test_no_cycle() -> None:
    """No cycle among the imports that run (function-level ones included)."""
    graph: dict[str, set[str]] = {module: set() for module in _modules()}
    for importer, imported, _lazy, _line in _imports() + _lazy_exports():
        if imported in _modules():
            graph[importer].add(imported)
    # Tarjan's strongly connected components, iteratively.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for start, targets in graph.items():
        if start in index:
            continue
        work = [(start, iter(sorted(targets)))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        cycles.append(sorted(component))
    assert cycles == []


def _back_edges() -> set[tuple[str, str]]:
    return {(importer, imported) for importer, imported, _lazy, _line in _imports() + _lazy_exports()
            if imported in _modules() and _layer(imported) > _layer(importer)}


def _unlisted_lazy() -> set[tuple[str, str]]:
    return {(importer, imported) for importer, imported, lazy, _line in _imports()
            if lazy and imported not in _heavy_modules() and imported.split(".")[0] not in HEAVY + OPTIONAL}


def test_no_import_runs_back_up() -> None:
    assert sorted(_back_edges()) == []


def test_function_level_imports_are_heavy_or_optional_only() -> None:
    assert sorted(_unlisted_lazy()) == []


def test_lazy_exports_are_edges() -> None:
    """The packages' lazy exports are read (the check above is not vacuous for them): `gdr_check.kernel` exports
    the checked GDN wrapper, `gdr_check.models` its description."""
    names = {(importer, imported) for importer, imported, _lazy, _line in _lazy_exports()}
    assert {("gdr_check.kernel", "gdr_check.kernel.gdn.checked"),
            ("gdr_check.models", "gdr_check.models.description")} <= names
