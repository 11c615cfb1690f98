"""Stand-ins for the engines' packed-decode modules, installed under the real import paths for one test.

`install(monkeypatch)` registers, in `sys.modules`:
- `sglang.kernels.ops.attention.fla.fused_recurrent` and
  `vllm.third_party.flash_linear_attention.ops.fused_recurrent` (the newest releases' layouts): `kernels.py`,
  loaded once per path, so each engine has its own function objects, as in a real process;
- callers that import a function by name, as the engines' backends do: `gdn_caller.py` as
  `sglang.srt.layers.attention.linear.kernels.gdn_triton`, `kda_caller.py` as
  `sglang.srt.layers.attention.linear.kda_backend`, and `vllm_caller.py` as
  `vllm.model_executor.layers.mamba.gdn.qwen_gdn_linear_attn`.
Every parent package is an empty package, so the real engines (if installed) are never imported.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
SGLANG_KERNELS = "sglang.kernels.ops.attention.fla.fused_recurrent"
VLLM_KERNELS = "vllm.third_party.flash_linear_attention.ops.fused_recurrent"  # vLLM 0.26 on
SGLANG_GDN_CALLER = "sglang.srt.layers.attention.linear.kernels.gdn_triton"
SGLANG_KDA_CALLER = "sglang.srt.layers.attention.linear.kda_backend"
VLLM_CALLER = "vllm.model_executor.layers.mamba.gdn.qwen_gdn_linear_attn"


@dataclass
class FakeEngine:
    sglang_kernels: types.ModuleType
    vllm_kernels: types.ModuleType
    gdn_caller: types.ModuleType
    kda_caller: types.ModuleType
    vllm_caller: types.ModuleType
    monkeypatch: object

    def load(self, name: str, file: str) -> types.ModuleType:
        """Import one more stand-in module under `name` (e.g. a caller imported while a capture is active)."""
        return load_module(self.monkeypatch, name, HERE / file)


def _ensure_packages(monkeypatch, dotted: str) -> None:
    parts = dotted.split(".")
    for depth in range(1, len(parts)):
        name = ".".join(parts[:depth])
        if name not in sys.modules or not getattr(sys.modules[name], "__gdr_check_fake__", False):
            package = types.ModuleType(name)
            package.__path__ = []  # a package with no directory: nothing real can be found below it
            package.__gdr_check_fake__ = True
            monkeypatch.setitem(sys.modules, name, package)
            if depth > 1:
                monkeypatch.setattr(sys.modules[".".join(parts[:depth - 1])], parts[depth - 1], package,
                                    raising=False)


def load_module(monkeypatch, name: str, path: Path) -> types.ModuleType:
    _ensure_packages(monkeypatch, name)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    parent, _, leaf = name.rpartition(".")
    monkeypatch.setattr(sys.modules[parent], leaf, module, raising=False)
    spec.loader.exec_module(module)
    return module


def install(monkeypatch) -> FakeEngine:
    # Fresh fake packages for every test: a stale engine module from another test must not leak in.
    for name in [n for n in sys.modules if n.split(".")[0] in ("sglang", "vllm")]:
        monkeypatch.delitem(sys.modules, name)
    sglang_kernels = load_module(monkeypatch, SGLANG_KERNELS, HERE / "kernels.py")
    vllm_kernels = load_module(monkeypatch, VLLM_KERNELS, HERE / "kernels.py")
    return FakeEngine(
        sglang_kernels=sglang_kernels,
        vllm_kernels=vllm_kernels,
        gdn_caller=load_module(monkeypatch, SGLANG_GDN_CALLER, HERE / "gdn_caller.py"),
        kda_caller=load_module(monkeypatch, SGLANG_KDA_CALLER, HERE / "kda_caller.py"),
        vllm_caller=load_module(monkeypatch, VLLM_CALLER, HERE / "vllm_caller.py"),
        monkeypatch=monkeypatch,
    )
