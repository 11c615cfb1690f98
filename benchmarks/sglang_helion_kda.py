"""Load sglang 0.5.23's Helion KDA packed decode (`kernels/ops/attention/helion/kda_decode.py`) without sglang.

sglang's KDA decode backend "helion" (`srt/layers/attention/linear/kernels/kda_helion.py`) calls
`helion_fused_recurrent_kda_packed_decode`, a wrapper that checks the inputs and launches one of three Helion
kernels compiled with fixed configurations (fp32 state; bf16 state; bf16 state with the bounded gate and few
value heads): no autotuning at run time. It needs the `helion` package (sglang 0.5.23 asks for 1.4.0), which is
imported here as it is; without it `load_helion_kda_decode` raises ImportError.

The two files it needs are read from the sglang wheel or tree at run time (nothing of sglang's is stored in
this repository) and run as they are: the package's `__init__.py` (a constant the wrapper imports) under its
real name while `kda_decode.py` executes, and `kda_decode.py` under a private module name that stays
imported, since Helion's generated code imports the kernel's module by name when it compiles. Only the
packages above them (`sglang`, `sglang.kernels`, `sglang.kernels.ops`, `sglang.kernels.ops.attention`) are
empty stand-ins for that moment: their real `__init__` files import sglang's kernel registry.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gdr_check.kernel.engine_kernels import extract_from_wheel, modules_restored

PACKAGE = "sglang.kernels.ops.attention.helion"
FILES = ("sglang/kernels/ops/attention/helion/__init__.py", "sglang/kernels/ops/attention/helion/kda_decode.py")
FUNCTION = "helion_fused_recurrent_kda_packed_decode"
MODULE = "gdr_bench_sglang_helion_kda_decode"  # private: the decode module stays imported under this name
_PARENTS = ("sglang", "sglang.kernels", "sglang.kernels.ops", "sglang.kernels.ops.attention")


def _tree(source: str) -> Path:
    """A directory holding FILES: the wheel's members extracted (kept until exit: Helion reads the kernel's
    source when it compiles), or the tree itself."""
    path = Path(source)
    if path.is_file() and path.suffix == ".whl":
        return extract_from_wheel(path.resolve(), FILES)
    for root in (path, path / "python"):
        if all((root / name).is_file() for name in FILES):
            return root
    raise FileNotFoundError(f"no {FILES[1]} under {path}")


def _exec(name: str, file: Path, package_dir: Path | None = None) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(
        name, file, submodule_search_locations=[str(package_dir)] if package_dir else None)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def load_helion_kda_decode(source: str) -> tuple[Callable[..., Any], str]:
    """sglang's `helion_fused_recurrent_kda_packed_decode`, unmodified, and where it was read from.

    Raises ImportError when `helion` does not import, FileNotFoundError when `source` lacks the files."""
    import helion  # noqa: F401 - the real package; its absence is the caller's "not run" note

    root = _tree(source)
    directory = root / PACKAGE.replace(".", "/")
    names = (*_PARENTS, PACKAGE)
    with modules_restored(names):
        for name in _PARENTS:
            parent = types.ModuleType(name)
            parent.__path__ = []
            sys.modules[name] = parent
        _exec(PACKAGE, directory / "__init__.py", directory)
        for name in names[1:]:  # `from parent import child` reads the parent's attribute
            above, _, leaf = name.rpartition(".")
            setattr(sys.modules[above], leaf, sys.modules[name])
        module = _exec(MODULE, directory / "kda_decode.py")
    return getattr(module, FUNCTION), str(directory / "kda_decode.py")
