"""Load sglang 0.5.23's own packed-decode modules, as far as they import without the server stack.

`GDR_CHECK_SGLANG_PATH` names a wheel or an unpacked tree. The kernel module `fla/fused_recurrent.py` loads
with its real `fla/utils.py` and `fla/op.py`; the backends `gdn_triton.py` and `kda_triton.py` load with their
real `kernel_backend.py`. Stand-ins replace only what needs the server's dependencies (orjson, msgspec,
einops...): `sglang.srt.utils` (platform probes, all False: a CUDA-style machine) and the sibling kernels the
backends import but the guard never touches (chunked prefill, ReplaySSM, fused sigmoid gating).
Package `__init__` files are not run (they import the whole server); packages get their real directories.
"""

from __future__ import annotations

import os
import sys
import types
import zipfile
from pathlib import Path

FILES = (
    "sglang/kernels/ops/attention/fla/fused_recurrent.py",
    "sglang/kernels/ops/attention/fla/utils.py",
    "sglang/kernels/ops/attention/fla/op.py",
    "sglang/srt/layers/attention/linear/kernels/kernel_backend.py",
    "sglang/srt/layers/attention/linear/kernels/gdn_triton.py",
    "sglang/srt/layers/attention/linear/kernels/kda_triton.py",
)
KERNELS = "sglang.kernels.ops.attention.fla.fused_recurrent"
GDN_BACKEND = "sglang.srt.layers.attention.linear.kernels.gdn_triton"
KDA_BACKEND = "sglang.srt.layers.attention.linear.kernels.kda_triton"
_STAND_INS = (
    "sglang.srt.utils", "sglang.srt.utils.common",
    "sglang.kernels.ops.attention.fla.chunk", "sglang.kernels.ops.attention.fla.kda",
    "sglang.kernels.ops.attention.linear.fused_recurrent_linear_replayssm",
    "sglang.kernels.ops.attention.linear.fused_sigmoid_gating_recurrent",
)


def sglang_tree(tmp_path: Path) -> Path | None:
    """An unpacked tree holding FILES, from GDR_CHECK_SGLANG_PATH; None when it is not set or lacks them."""
    given = os.environ.get("GDR_CHECK_SGLANG_PATH")
    if not given:
        return None
    path = Path(given)
    if path.is_file() and path.suffix == ".whl":
        with zipfile.ZipFile(path) as archive:
            for name in FILES:
                archive.extract(name, tmp_path)
        path = tmp_path
    for root in (path, path / "python"):
        if all((root / name).is_file() for name in FILES):
            return root
    return None


def _stand_in(name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__path__ = []

    def probe(attribute: str):
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        return lambda *args, **kwargs: False  # is_cpu(), is_npu(), ... and kernels the guard never calls

    module.__getattr__ = probe  # type: ignore[method-assign]
    return module


def load(monkeypatch, root: Path) -> dict[str, types.ModuleType]:
    """Import the real modules under their real names (undone by `monkeypatch`)."""
    import importlib

    import torch

    for name in [n for n in sys.modules if n.split(".")[0] == "sglang"]:
        monkeypatch.delitem(sys.modules, name)
    packages = {".".join(f.split("/")[:depth]) for f in FILES for depth in range(1, f.count("/") + 1)}
    packages |= {"sglang.kernels.ops.attention.linear", "sglang.srt.utils"}
    for name in sorted(packages, key=lambda n: n.count(".")):
        package = types.ModuleType(name)
        package.__path__ = [str(root / name.replace(".", "/"))]
        monkeypatch.setitem(sys.modules, name, package)
    for name in _STAND_INS:
        monkeypatch.setitem(sys.modules, name, _stand_in(name))
    release = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2])
    sys.modules["sglang.srt.utils.common"].torch_release = release  # type: ignore[attr-defined]
    for name in sorted(packages | set(_STAND_INS), key=lambda n: n.count(".")):  # `from parent import child`
        parent, _, leaf = name.rpartition(".")
        if parent in sys.modules:
            monkeypatch.setattr(sys.modules[parent], leaf, sys.modules[name], raising=False)
    modules = {name: importlib.import_module(name) for name in (KERNELS, GDN_BACKEND, KDA_BACKEND)}
    if os.environ.get("TRITON_INTERPRET") == "1":
        # The interpreter cannot call the libdevice `exp` of fla/op.py; the loader's jit `exp` computes the same.
        from gdr_check.kernel.engines import _standin_exp

        monkeypatch.setattr(modules[KERNELS], "exp", _standin_exp)
    return modules
