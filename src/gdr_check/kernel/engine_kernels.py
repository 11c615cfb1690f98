"""Load the reference engines' packed-decode kernels for side-by-side comparison.

sglang's package ``__init__`` pulls in the whole server stack, so instead of importing sglang we execute its
single ``fused_recurrent.py`` with light stand-ins for the two modules it imports (``fla.op`` for ``exp``
and ``fla.utils`` for ``input_guard``). The file comes from, in order: the ``source`` argument, the
``GDR_CHECK_SGLANG_PATH`` environment variable (a wheel, an unpacked tree, or the file itself), or an
installed sglang distribution located through its metadata (not imported).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import importlib
import importlib.metadata
import importlib.util
import os
import shutil
import sys
import tempfile
import types
import zipfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import triton
import triton.language as tl

from ..engines.profiles import kernel_files

SGLANG_PATH_ENV = "GDR_CHECK_SGLANG_PATH"
SGLANG_FILE = "sglang/kernels/ops/attention/fla/fused_recurrent.py"
# Every release layout's file, the newest first: sglang 0.5.10 - 0.5.15 keep it under srt/ (profiles' kernel_file).
SGLANG_FILES = kernel_files("sglang")
_FLA = "sglang.kernels.ops.attention.fla"
_FLA_PACKAGES = ("sglang.kernels.ops.attention.fla", "sglang.srt.layers.attention.fla")  # `fla.op`, `fla.utils`
_GDN_NAME = "fused_recurrent_gated_delta_rule_packed_decode"
_KDA_NAME = "fused_recurrent_kda_packed_decode"


# No annotations: Triton's compiler resolves every name in a jit function's signature as a global, and `Any`
# is not a constexpr (the interpreter does not look, so only a GPU compile fails).
@triton.jit
def _standin_exp(x):  # type: ignore[no-untyped-def]
    # A jit function rather than `tl.exp` itself: the interpreter cannot call a bare bound `tl.exp`.
    return tl.exp(x)


def _identity_decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
    return fn


def _kda_cuda_not_covered(*args: Any, **kwargs: Any) -> bool:
    # Stand-in for sglang's JIT-compiled CUDA KDA path: always decline, so the Triton kernel runs.
    return False


def _standin_modules() -> dict[str, types.ModuleType]:
    names = list(dict.fromkeys(".".join(package.split(".")[:depth]) for package in _FLA_PACKAGES
                               for depth in range(1, package.count(".") + 2)))
    modules = {name: types.ModuleType(name) for name in names}
    for name in names:
        modules[name].__path__ = []  # mark as packages
    for fla in _FLA_PACKAGES:  # both layouts: the file imports `exp` and `input_guard` from its own package
        modules[f"{fla}.op"] = types.ModuleType(f"{fla}.op")
        setattr(modules[f"{fla}.op"], "exp", _standin_exp)  # noqa: B010 (a module built at run time)
        modules[f"{fla}.utils"] = types.ModuleType(f"{fla}.utils")
        setattr(modules[f"{fla}.utils"], "input_guard", _identity_decorator)  # noqa: B010
    kda_cuda = types.ModuleType("sglang.kernels.ops.attention.kda_packed_decode")
    setattr(kda_cuda, "covered", _kda_cuda_not_covered)  # noqa: B010
    modules[kda_cuda.__name__] = kda_cuda
    for name, module in modules.items():  # `from parent import child` reads the parent's attribute
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(modules[parent], child, module)
    return modules


@contextlib.contextmanager
def modules_restored(names: Iterable[str]) -> Iterator[None]:
    """Whatever `sys.modules` holds under `names` now is put back on exit (absent ones removed again)."""
    saved = {name: sys.modules.get(name) for name in names}
    try:
        yield
    finally:
        for name, previous in saved.items():
            if previous is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = previous


@contextlib.contextmanager
def _stand_ins_installed() -> Iterator[None]:
    """Put the stand-ins in sys.modules for the duration, then restore whatever was there."""
    stand_ins = _standin_modules()
    with modules_restored(stand_ins):
        sys.modules.update(stand_ins)
        yield


@functools.cache
def extract_from_wheel(wheel: Path, members: tuple[str, ...] = SGLANG_FILES) -> Path:
    """A temporary folder (removed at exit) holding those of the wheel's `members` it has, extracted once per
    process."""
    target = Path(tempfile.mkdtemp(prefix="gdr_check_sglang_"))
    atexit.register(shutil.rmtree, target, ignore_errors=True)
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        for member in members:
            if member in names:
                archive.extract(member, target)
    return target


def _first_file(root: Path) -> Path | None:
    return next((root / name for name in SGLANG_FILES if (root / name).is_file()), None)


def find_sglang_source(source: str | os.PathLike[str] | None = None) -> Path | None:
    """The sglang ``fused_recurrent.py`` to load, or None when none is available.

    An explicit ``source`` (or the environment variable) that holds no such file raises FileNotFoundError:
    a wrong path should not silently fall back to another copy.
    """
    given = source if source is not None else os.environ.get(SGLANG_PATH_ENV) or None
    if given is not None:
        path = Path(given)
        if path.is_file() and path.suffix == ".whl":
            found = _first_file(extract_from_wheel(path.resolve()))
            if found is None:
                raise FileNotFoundError(f"no {SGLANG_FILE} in {path}")
            return found
        if path.is_file():
            return path
        for root in (path, path / "python"):  # unpacked wheel, git checkout
            found = _first_file(root)
            if found is not None:
                return found
        raise FileNotFoundError(f"no {SGLANG_FILE} under {path}")
    try:
        distribution = importlib.metadata.distribution("sglang")
    except importlib.metadata.PackageNotFoundError:
        return None
    return next((located for name in SGLANG_FILES if (located := Path(str(distribution.locate_file(name)))).is_file()),
                None)


@functools.cache
def _load_module(path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(f"gdr_check_reference_sglang_{abs(hash(path))}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with _stand_ins_installed():
        spec.loader.exec_module(module)
    return module


class SglangPackedDecode(NamedTuple):
    """sglang's packed-decode wrappers, one field per variant (`getattr(loaded, variant)`)."""

    gdn: Callable[..., Any]
    kda: Callable[..., Any]


def load_sglang_packed_decode(
    source: str | os.PathLike[str] | None = None,
) -> SglangPackedDecode:
    """sglang's ``(GDN, KDA)`` packed-decode wrappers, unmodified, from the first source found.

    Raises FileNotFoundError when there is no source. Each function has ``source_path`` set.
    """
    path = find_sglang_source(source)
    if path is None:
        raise FileNotFoundError(
            f"no sglang source: install sglang, or set {SGLANG_PATH_ENV} to a wheel or an unpacked tree"
        )
    module = _load_module(path.resolve())
    gdn_impl, kda_impl = getattr(module, _GDN_NAME), getattr(module, _KDA_NAME)

    @functools.wraps(gdn_impl)
    def gdn(*args: Any, **kwargs: Any) -> Any:
        return gdn_impl(*args, **kwargs)

    @functools.wraps(kda_impl)
    def kda(*args: Any, **kwargs: Any) -> Any:
        # With use_qk_l2norm_in_kernel the wrapper imports its CUDA fast path at call time; the stand-in
        # declines every call.
        with _stand_ins_installed():
            return kda_impl(*args, **kwargs)

    # Where the loaded wrappers came from, for reports (functools.wraps types the wrapper without it).
    gdn.source_path = kda.source_path = str(path)  # type: ignore[attr-defined]
    return SglangPackedDecode(gdn, kda)


_VLLM_MODULES = (
    "vllm.model_executor.layers.fla.ops.fused_recurrent",
    "vllm.third_party.flash_linear_attention.ops.fused_recurrent",
)


def load_vllm_packed_decode() -> Callable[..., Any] | None:
    """vLLM's GDN packed-decode wrapper when vLLM is installed and has one; None otherwise (best effort)."""
    if importlib.util.find_spec("vllm") is None:
        return None
    for name in _VLLM_MODULES:
        try:
            module = importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a partial or broken vLLM install is the same as none for comparison purposes
            continue
        fn = getattr(module, _GDN_NAME, None)
        if callable(fn):
            return fn  # type: ignore[no-any-return]  # found by getattr on an untyped module
    return None
