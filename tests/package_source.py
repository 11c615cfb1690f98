"""The package's own source files, read and parsed once per test process.

Several structure tests walk every module of `src/gdr_check` (~1.1 MB of source): the layers, the hot paths'
construction rules, the dataclass decorator, the jit signatures, the typer shim. Each parsed and walked all of it
again, ~1-2 s of CPU a time and twice more at collection (test_layers.py built its graph at import, in every
worker). Here each file is parsed once, and its nodes listed once in `ast.walk` order.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "gdr_check"


@dataclass(frozen=True)
class SourceFile:
    path: Path
    relative: str  # "cli/main.py": the path below src/gdr_check, with forward slashes
    text: str

    @functools.cached_property
    def tree(self) -> ast.Module:
        return ast.parse(self.text)

    @functools.cached_property
    def nodes(self) -> tuple[ast.AST, ...]:
        """Every node of the module, in `ast.walk` order."""
        return tuple(ast.walk(self.tree))

    def mentions(self, word: str) -> bool:
        """Whether `word` occurs in the source as a whole word: a module that never spells it cannot import, call
        or name it, so its syntax tree need not be walked for it."""
        return re.search(rf"\b{re.escape(word)}\b", self.text) is not None


@functools.cache
def source_files() -> tuple[SourceFile, ...]:
    """Every `.py` file of the package, sorted by path."""
    return tuple(SourceFile(path, path.relative_to(PACKAGE).as_posix(), path.read_text(encoding="utf-8"))
                 for path in sorted(PACKAGE.rglob("*.py")))

