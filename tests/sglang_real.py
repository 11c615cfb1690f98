"""Load sglang 0.5.23's own packed-decode modules, as far as they import without the server stack.

`GDR_CHECK_SGLANG_PATH` names a wheel or an unpacked tree. The kernel module `fla/fused_recurrent.py` loads
with its real `fla/utils.py` and `fla/op.py`; the backends `gdn_triton.py` and `kda_triton.py` load with their
real `kernel_backend.py`. Stand-ins replace only what needs the server's dependencies (orjson, msgspec,
einops...): `sglang.srt.utils` (platform probes, all False: a CUDA-style machine) and the sibling kernels the
backends import but the guard never touches (chunked prefill, ReplaySSM, fused sigmoid gating).
Package `__init__` files are not run (they import the whole server); packages get their real directories.

With `helion=True` the Helion KDA decode loads too: the real `helion/__init__.py` (a constant),
`helion/kda_decode.py` (the packed-decode wrapper, its input checks and its choice among three compiled
kernels), `helion/kda_replayssm.py` (imported by the backend's `__init__`) and the backend `kda_helion.py`.
The `helion` package itself is a stand-in (`helion_stand_in`): enough of its API for those modules to import
(`Config`, `kernel`, `exc`, `language`), with kernel objects that refuse to run, since there is no Helion
compiler here; `use_kernel` then replaces the compiled kernel objects of `kda_decode.py` with a real kernel.
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
HELION_FILES = (
    "sglang/kernels/ops/attention/helion/__init__.py",
    "sglang/kernels/ops/attention/helion/kda_decode.py",
    "sglang/kernels/ops/attention/helion/kda_replayssm.py",
    "sglang/srt/layers/attention/linear/kernels/kda_helion.py",
)
KERNELS = "sglang.kernels.ops.attention.fla.fused_recurrent"
HELION_PACKAGE = "sglang.kernels.ops.attention.helion"
HELION_DECODE = "sglang.kernels.ops.attention.helion.kda_decode"
HELION_REPLAYSSM = "sglang.kernels.ops.attention.helion.kda_replayssm"
HELION_BACKEND = "sglang.srt.layers.attention.linear.kernels.kda_helion"
# The compiled kernels `kda_decode.py` chooses among (fp32 state; bf16 state; bf16 state, bounded gate, few heads).
HELION_KERNELS = ("_helion_fused_recurrent_kda_packed_decode", "_helion_fused_recurrent_kda_packed_decode_bf16",
                  "_helion_fused_recurrent_kda_packed_decode_bf16_small_head")
GDN_BACKEND = "sglang.srt.layers.attention.linear.kernels.gdn_triton"
KDA_BACKEND = "sglang.srt.layers.attention.linear.kernels.kda_triton"
_STAND_INS = (
    "sglang.srt.utils", "sglang.srt.utils.common",
    "sglang.kernels.ops.attention.fla.chunk", "sglang.kernels.ops.attention.fla.kda",
    "sglang.kernels.ops.attention.linear.fused_recurrent_linear_replayssm",
    "sglang.kernels.ops.attention.linear.fused_sigmoid_gating_recurrent",
)


def sglang_tree(tmp_path: Path, helion: bool = False) -> Path | None:
    """An unpacked tree holding FILES (and HELION_FILES with `helion`), from GDR_CHECK_SGLANG_PATH; None when
    it is not set or lacks them."""
    given = os.environ.get("GDR_CHECK_SGLANG_PATH")
    if not given:
        return None
    files = FILES + HELION_FILES if helion else FILES
    path = Path(given)
    if path.is_file() and path.suffix == ".whl":
        with zipfile.ZipFile(path) as archive:
            present = set(archive.namelist())
            for name in files:
                if name in present:
                    archive.extract(name, tmp_path)
        path = tmp_path
    for root in (path, path / "python"):
        if all((root / name).is_file() for name in files):
            return root
    return None


class StandInHelionKernel:
    """What the stand-in `helion.kernel` returns: the kernel body and its settings. It refuses to run (there is no
    Helion compiler here); `use_kernel` puts a real kernel in its place."""

    def __init__(self, fn, **settings):
        self.fn = fn
        self.settings = settings

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"stand-in helion kernel {self.fn.__name__}: no Helion compiler here")


class _StandInConfig(dict):
    """`helion.Config(**settings)`, kept as a dictionary."""

    @classmethod
    def from_dict(cls, settings):
        return cls(settings)


def helion_stand_in() -> dict[str, types.ModuleType]:
    """`helion`, `helion.language` and `helion.exc`: the names the sglang modules use when they are imported."""
    helion = types.ModuleType("helion")
    helion.__path__ = []
    language = types.ModuleType("helion.language")
    language.constexpr = bool  # only an annotation in the kernel bodies
    exc = types.ModuleType("helion.exc")
    exc.ProcessGroupNameNotFound = type("ProcessGroupNameNotFound", (UserWarning,), {})
    helion.language, helion.exc = language, exc
    helion.Config = _StandInConfig
    helion.Kernel = StandInHelionKernel
    helion.kernel = lambda fn, **settings: StandInHelionKernel(fn, **settings)
    helion.next_power_of_2 = lambda n: 1 << max(0, int(n) - 1).bit_length()
    return {"helion": helion, "helion.language": language, "helion.exc": exc}


def use_kernel(monkeypatch, decode: types.ModuleType, launch) -> list[str]:
    """Replace the three compiled kernels of `kda_decode.py` with `launch`, a packed-decode launcher in the
    sglang order (gdr-check's Triton kernel, or the float64 reference). The wrapper calls a kernel with
    (mixed_qkv, a, b, A_log, dt_bias, scale, lower_bound value, initial_state, out, ssm_state_indices,
    use_qk_l2norm_in_kernel, use_fast_rsqrt, use_lower_bound) and takes its return value as `out`.
    Returns the list that records, per call, which of the three the wrapper chose."""
    chosen: list[str] = []

    def kernel_for(name: str):
        def run(mixed_qkv, a, b, A_log, dt_bias, scale, lower_bound, initial_state, out, ssm_state_indices,
                use_qk_l2norm_in_kernel, use_fast_rsqrt, use_lower_bound):
            chosen.append(name)
            launch(mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices,
                   use_qk_l2norm_in_kernel, lower_bound if use_lower_bound else None)
            return out
        return run

    for name in HELION_KERNELS:
        assert isinstance(getattr(decode, name), StandInHelionKernel)
        monkeypatch.setattr(decode, name, kernel_for(name))
    return chosen


def _stand_in(name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__path__ = []

    def probe(attribute: str):
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        return lambda *args, **kwargs: False  # is_cpu(), is_npu(), ... and kernels the guard never calls

    module.__getattr__ = probe  # type: ignore[method-assign]
    return module


def load(monkeypatch, root: Path, helion: bool = False) -> dict[str, types.ModuleType]:
    """Import the real modules under their real names (undone by `monkeypatch`); with `helion`, the Helion KDA
    decode and its backend too, over the stand-in `helion` package."""
    import importlib
    import importlib.util

    import torch

    for name in [n for n in sys.modules if n.split(".")[0] in ("sglang", "helion")]:
        monkeypatch.delitem(sys.modules, name)
    files = FILES + HELION_FILES if helion else FILES
    packages = {".".join(f.split("/")[:depth]) for f in files for depth in range(1, f.count("/") + 1)}
    packages.discard(HELION_PACKAGE)  # its real `__init__.py` runs below
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
    names = [KERNELS, GDN_BACKEND, KDA_BACKEND]
    if helion:
        for name, module in helion_stand_in().items():
            monkeypatch.setitem(sys.modules, name, module)
        directory = root / HELION_PACKAGE.replace(".", "/")
        spec = importlib.util.spec_from_file_location(HELION_PACKAGE, directory / "__init__.py",
                                                      submodule_search_locations=[str(directory)])
        assert spec is not None and spec.loader is not None
        package = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, HELION_PACKAGE, package)
        spec.loader.exec_module(package)
        parent, _, leaf = HELION_PACKAGE.rpartition(".")
        monkeypatch.setattr(sys.modules[parent], leaf, package, raising=False)
        names += [HELION_DECODE, HELION_BACKEND]
    modules = {name: importlib.import_module(name) for name in names}
    if os.environ.get("TRITON_INTERPRET") == "1":
        # The interpreter cannot call the libdevice `exp` of fla/op.py; the loader's jit `exp` computes the same.
        from gdr_check.kernel.engine_kernels import _standin_exp

        monkeypatch.setattr(modules[KERNELS], "exp", _standin_exp)
    return modules
