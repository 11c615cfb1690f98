"""The package's import graph runs one way: sources -> model description -> deployment -> expected call ->
rules -> diagnostics -> renderers, over the base modules (docs/architecture.md).

Every module of `src/gdr_check` is parsed with `ast` (nothing is imported), its imports resolved (relative ones,
and the parent packages an import runs), and the graph is checked for (a) a cycle, (b) an import that runs back
up the layer order, (c) a function-level import that is not a lazy import of a heavy or on-demand module
(`LAZY_HEAVY`, `LAZY_IMPORTERS`). `if TYPE_CHECKING:` imports do not run and are left out. There is no list
of exceptions: a back edge or a cycle is fixed by moving the code to its layer.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "src" / "gdr_check"
PACKAGE = "gdr_check"

# The layer of each module, lowest first: a module imports only modules of its own layer or below. A module
# is matched by its longest listed prefix.
LAYERS: dict[str, int] = {
    # 0 base: names every stage uses (errors, reports, tensor specs, engine profiles, the rule registry).
    "gdr_check": 0, "gdr_check._lazy": 0, "gdr_check.engines": 0, "gdr_check.errors": 0,
    "gdr_check.report": 0, "gdr_check.tensors": 0, "gdr_check.registry": 0, "gdr_check.limits": 0,
    "gdr_check.files": 0,
    # 1 sources: files on disk -> `Checkpoint` (config, tensor names, shapes, dtypes).
    "gdr_check.sources": 1,
    # 2 model description: checkpoint -> `LinearAttentionModel` (adapters, built-in models).
    "gdr_check.models": 2, "gdr_check.models.adapters": 2, "gdr_check.models.builtin": 2,
    "gdr_check.models.description": 2, "gdr_check.models.decode_path": 2,
    # 3 deployment: engine settings, TP size, dtypes.
    "gdr_check.models.deployment": 3,
    # 4 the expected kernel call per rank (and the kernels that define the contract).
    "gdr_check.models.expected": 4, "gdr_check.models.pools": 4, "gdr_check.call": 4, "gdr_check.kernel": 4,
    "gdr_check.recording": 4,  # a recorded call: the file `capture()` writes, read back as a `PackedDecodeCall`
    # 5 rules: each rule's check, its example (as data), the contract engine; the checked kernels, which run the
    # contract's shape verdict before each launch, and their device fault buffer (`kernel.device_guard`).
    "gdr_check.checks": 5, "gdr_check.kernel.device_guard": 5, "gdr_check.kernel.checked": 5,
    # 6 diagnostics: running the rules over a model, a recording, a dry run or each rule's example; the runtime
    # guard turns device faults into diagnostics; the library API runs whole checks.
    "gdr_check.models.check": 6, "gdr_check.capture": 6, "gdr_check.runner": 6, "gdr_check.example_runner": 6,
    "gdr_check.guard": 6, "gdr_check.api": 6, "gdr_check.results": 6,
    # which rules a run reports (`--select`/`--ignore`), and the `[tool.gdr-check]` settings that feed it.
    "gdr_check.selection": 6, "gdr_check.config": 6,
    # 7 renderers: the command line and its output formats.
    "gdr_check.cli": 7, "gdr_check.__main__": 7,
}

# Function-level imports that are allowed, each for its reason (by imported-module prefix, or by importer).
LAZY_HEAVY = {
    "torch": "the metadata path never imports torch",
    "triton": "the metadata path never imports triton",
    "numpy": "heavy, only for tensor runs",
    "rich.progress": "only drawn when a run is long enough to show progress",
    "rich.table": "only for tables, most runs print none",
    "gdr_check.kernel": "imports torch and triton",
    "gdr_check.runner": "the dry run imports torch",
    "huggingface_hub": "optional dependency, only for Hugging Face repo ids",
}
# `gdr_check.cli.main` imports each command's module on demand (startup of `--help` and `check`).
LAZY_IMPORTERS = {"gdr_check.cli": "CLI command modules are imported on demand to keep startup fast"}


def _modules() -> dict[str, tuple[Path, bool]]:
    modules = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        modules[".".join(parts)] = (path, is_package)
    return modules


MODULES = _modules()


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
            if candidate in MODULES and candidate != module and not module.startswith(candidate + "."):
                found.append((candidate, end < len(parts)))
    # The named modules first, then the parent packages that run on the way (marked True).
    named = [name for name, parent in found if not parent]
    return [(name, False) for name in named] + [(name, True) for name, parent in found if parent and name not in named]


def _imports() -> list[tuple[str, str, bool, int]]:
    """(importer, imported, at function level, line) for each import that runs; `at function level` is only
    set for the module a function-level import names, not for the parent packages it runs on the way."""
    edges = []
    for module, (path, is_package) in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        type_checking: set[int] = set()
        in_function: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                type_checking.update(id(child) for child in ast.walk(node))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                in_function.update(id(child) for child in ast.walk(node))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or id(node) in type_checking:
                continue
            lazy = id(node) in in_function
            for target, parent in _targets(module, is_package, node):
                edges.append((module, target, lazy and not parent, node.lineno))
            if lazy and isinstance(node, (ast.Import, ast.ImportFrom)) and not getattr(node, "level", 0):
                for name in ([a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]):
                    if not name.startswith(PACKAGE):
                        edges.append((module, name, True, node.lineno))
    return edges


EDGES = _imports()


def _layer(module: str) -> int:
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if prefix in LAYERS:
            return LAYERS[prefix]
    raise AssertionError(f"{module} has no layer in LAYERS (tests/test_layers.py) or docs/architecture.md")


def _match(name: str, table: dict[str, str]) -> bool:
    return any(name == key or name.startswith(key + ".") for key in table)


def test_every_module_has_a_layer() -> None:
    for module in MODULES:
        _layer(module)


def test_no_cycle() -> None:
    """No cycle among the imports that run (function-level ones included)."""
    graph: dict[str, set[str]] = {module: set() for module in MODULES}
    for importer, imported, _lazy, _line in EDGES:
        if imported in MODULES:
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
    return {(importer, imported) for importer, imported, _lazy, _line in EDGES
            if imported in MODULES and _layer(imported) > _layer(importer)}


def _unlisted_lazy() -> set[tuple[str, str]]:
    return {(importer, imported) for importer, imported, lazy, _line in EDGES
            if lazy and not _match(imported, LAZY_HEAVY) and not _match(importer, LAZY_IMPORTERS)}


def test_no_import_runs_back_up() -> None:
    assert sorted(_back_edges()) == []


def test_function_level_imports_are_lazy_heavy_only() -> None:
    assert sorted(_unlisted_lazy()) == []
