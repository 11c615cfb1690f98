"""Load vLLM's own packed-decode modules without the engine stack (checked with 0.27.1, 0.29.0, 0.32.0, 0.33.0).

`GDR_CHECK_VLLM_PATH` names a vLLM wheel or an unpacked tree. Real files, run as they are:
- the FLA ops package `vllm/third_party/flash_linear_attention/ops/`: its `__init__.py` (which imports the GDN
  packed decode by name) and every module it imports, among them `fused_recurrent.py` (the packed decode's
  wrapper and Triton kernel), `op.py` and `utils.py`;
- `vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py`, the Qwen3-Next / Qwen3.5 GDN layer, which
  imports the packed decode by name from the ops package and calls it in `_forward_core_decode_non_spec`.
Package `__init__` files above those (vllm, vllm.model_executor, ...) are not run: they import the whole engine.
Every other `vllm.*` module those files import (platforms, config, distributed, custom ops, the linear layers,
the conv1d kernels...) is a stand-in, and so are `einops` and `transformers` (the test environment does not
install them; they are stood in even where installed): a stand-in
name is a class that can be subclassed, used as a decorator (it returns what it decorates) or in a type union;
whatever is read from it or returned by calling it is false (platform probes: no CUDA, no ROCm). Only
`vllm.triton_utils` is given content: the real `triton`, `triton.language` and libdevice (what the real module
re-exports once it has probed vLLM's settings). The Triton kernel is vLLM's: under TRITON_INTERPRET=1 it runs in
the interpreter on the CPU, with one name swapped: the `exp` that `fused_recurrent.py` imports from `op.py`
(`tl.exp` bound to a module global, which the interpreter cannot call) becomes a jit function computing the
same, as in sglang_real.py. On a GPU (GDR_CHECK_TEST_GPU=1) nothing is swapped. While the files are imported,
`torch.compile` and `torch.compiler.disable` return what they decorate (`eager_compile`): the real ones import
`torch._dynamo`, ~2.6 s of CPU in every process that loads the files here (more than importing torch), and no
test calls a decorated function under a compiler: the decode step runs eagerly, where `disable` changes nothing,
and never reaches the layer's compiled `prepare_gdn_attention_core_inputs`.
`decode` runs one step through the layer's own methods; what it stands in for that call is in its docstring.

`packed_decode_sites` reads a release as text (nothing imported): where it defines the packed decodes and which
modules import them by name (tests/test_vllm_targets.py).

vLLM's KDA packed decode (`vllm/models/kimi_k3/{nvidia,amd}/ops/third_party/kda/fused_recurrent.py`) takes
another API (raw gates, `state_indices`) and is not loaded: the guard leaves it alone.
"""

from __future__ import annotations

import ast
import os
import sys
import types
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OPS = "vllm.third_party.flash_linear_attention.ops"
KERNELS = f"{OPS}.fused_recurrent"
GDN_LAYER = "vllm.model_executor.layers.mamba.gdn.qwen_gdn_linear_attn"
_OPS_DIR = OPS.replace(".", "/")
FILES = (
    f"{_OPS_DIR}/__init__.py",
    f"{_OPS_DIR}/fused_recurrent.py",
    f"{_OPS_DIR}/op.py",
    f"{_OPS_DIR}/utils.py",
    GDN_LAYER.replace(".", "/") + ".py",
)
# Third-party packages the real files import at module level that this test environment does not install.
_THIRD_PARTY = ("einops", "transformers")


def release() -> Path | None:
    """GDR_CHECK_VLLM_PATH as given (a wheel, or a tree holding `vllm/`); None when it is not set or is neither."""
    given = os.environ.get("GDR_CHECK_VLLM_PATH")
    if not given:
        return None
    path = Path(given)
    if (path.is_file() and path.suffix == ".whl") or (path / "vllm").is_dir():
        return path
    return None


def vllm_tree(tmp_path: Path) -> Path | None:
    """An unpacked tree holding FILES (and the rest of the ops package), from GDR_CHECK_VLLM_PATH; None when it
    is not set or lacks them."""
    given = os.environ.get("GDR_CHECK_VLLM_PATH")
    if not given:
        return None
    path = Path(given)
    if path.is_file() and path.suffix == ".whl":
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            wanted = [n for n in names if n in FILES or (n.startswith(f"{_OPS_DIR}/") and n.endswith(".py"))]
            archive.extractall(tmp_path, members=wanted)
        path = tmp_path
    if all((path / name).is_file() for name in FILES):
        return path
    return None


class _Nothing:
    """What reading or calling a stood-in name gives: false, and a decorator that returns what it decorates."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and callable(args[0]):
            return args[0]
        return self

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self

    def __bool__(self) -> bool:
        return False

    def __or__(self, other: object) -> Any:  # in a type annotation: `X | None`
        return Any

    __ror__ = __or__


NOTHING = _Nothing()


class _StandInType(type):
    """The metaclass of stood-in names: `Name.attr` and `Name(...)` behave as `NOTHING` does; `Name[...]` is `Name`."""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return NOTHING

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return NOTHING(*args, **kwargs)

    def __getitem__(cls, key: object) -> Any:  # a generic base: `class K(Kernel["K.Key"])`
        return cls


def _stand_in(name: str) -> types.ModuleType:
    module = types.ModuleType(name, "gdr-check test stand-in")
    module.__path__ = []  # a package: `from vllm.x import y` may name a submodule
    made: dict[str, type] = {}

    def attribute(attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        if attr not in made:
            made[attr] = _StandInType(attr, (), {"__module__": name})
        return made[attr]

    module.__getattr__ = attribute  # type: ignore[method-assign]
    return module


class _StandInFinder:
    """Serves a stand-in for every `vllm.*` module that is not a real file loaded here, and for _THIRD_PARTY."""

    def __init__(self, real: set[str]) -> None:
        self.real = real

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        import importlib.machinery

        top = fullname.split(".")[0]
        stood_in = (top == "vllm" and fullname not in self.real) or top in _THIRD_PARTY
        if not stood_in:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)  # type: ignore[arg-type]

    def create_module(self, spec: Any) -> types.ModuleType:
        return _stand_in(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def eager_compile(function: Any = None, *args: Any, **kwargs: Any) -> Any:
    """`torch.compile` / `torch.compiler.disable` as vLLM's files use them, as decorators (`@torch.compiler.disable`,
    `@torch.compile(fullgraph=True)`): returns what it decorates (see the module's docstring)."""
    return function if function is not None else eager_compile


def without_compiler(setattr_: Any) -> None:
    """Stand `eager_compile` in for the compiler's decorators; `setattr_` is `monkeypatch.setattr` in a test
    process (undone after the test) or `setattr` in a process of its own."""
    import torch

    setattr_(torch, "compile", eager_compile)
    setattr_(torch.compiler, "disable", eager_compile)


def load(monkeypatch, root: Path) -> dict[str, types.ModuleType]:
    """Import the real modules under their real names; `monkeypatch` removes every `vllm` module (and stand-in)."""
    import importlib

    import triton
    import triton.language as tl
    import triton.language.extra.libdevice as tldevice

    for name in [n for n in sys.modules if n.split(".")[0] in ("vllm", *_THIRD_PARTY)]:
        monkeypatch.delitem(sys.modules, name)
    real = {OPS, GDN_LAYER}
    real |= {f"{OPS}.{p.stem}" for p in (root / _OPS_DIR).glob("*.py") if p.stem != "__init__"}
    # Packages on the way to the real files, with their real directories; their `__init__` is not run.
    packages = {".".join(name.split(".")[:depth]) for name in real for depth in range(1, name.count(".") + 1)}
    packages.discard(OPS)
    before = set(sys.modules)
    for name in sorted(packages, key=lambda n: n.count(".")):
        package = types.ModuleType(name)
        package.__path__ = [str(root / name.replace(".", "/"))]
        sys.modules[name] = package
        parent, _, leaf = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], leaf, package)
    utils = sys.modules["vllm.triton_utils"] = _stand_in("vllm.triton_utils")
    utils.triton, utils.tl, utils.tldevice = triton, tl, tldevice  # type: ignore[attr-defined]
    monkeypatch.setattr(sys, "meta_path", [_StandInFinder(real), *sys.meta_path])
    without_compiler(monkeypatch.setattr)
    try:
        modules = {name: importlib.import_module(name) for name in (OPS, KERNELS, GDN_LAYER)}
    finally:
        # vLLM's modules and the stand-ins, removed again by monkeypatch (the names did not exist before); what
        # they imported of torch, triton and the standard library stays, as any import would.
        for name in set(sys.modules) - before:
            if name.split(".")[0] in ("vllm", *_THIRD_PARTY):
                monkeypatch.setitem(sys.modules, name, sys.modules.pop(name))
    if os.environ.get("TRITON_INTERPRET") == "1":
        # op.py binds `exp = tl.exp` (a module global), which the interpreter cannot call inside a kernel; the
        # loader's jit `exp` computes the same. Compiled kernels (on a GPU) keep vLLM's own binding.
        from gdr_check.kernel.engine_kernels import _standin_exp

        monkeypatch.setattr(modules[KERNELS], "exp", _standin_exp)
    return modules


def _conv_passthrough(x: Any, *args: Any, **kwargs: Any) -> Any:
    """Stands in for vLLM's `causal_conv1d_update`: the packed q/k/v go to the recurrence unchanged."""
    return x


def decode(monkeypatch, modules: dict[str, types.ModuleType], call: Any) -> None:
    """One decode step of the real GDN layer: `QwenGatedDeltaNetAttention._forward_core` (its packed-decode
    dispatch, then `_forward_core_decode_non_spec`) on an instance holding what those two methods read.

    Stood in for this call: the forward context (what `get_forward_context()` returns: this step's metadata
    under the layer's prefix) and `causal_conv1d_update`, which returns its input: vLLM's conv kernel would
    index the conv state with the same slots, and out-of-range slots there are outside what the guard covers.
    """
    gdn = modules[GDN_LAYER]
    metadata = object.__new__(gdn.GDNAttentionMetadata)  # a stand-in class: `isinstance` holds
    batch = int(call.ssm_state_indices.shape[0])
    metadata.__dict__.update(spec_sequence_masks=None, num_prefills=0, num_decodes=batch,
                             num_actual_tokens=batch, non_spec_state_indices_tensor=call.ssm_state_indices)
    prefix = "model.layers.0.linear_attn"
    context = types.SimpleNamespace(attn_metadata={prefix: metadata})
    monkeypatch.setattr(gdn, "get_forward_context", lambda: context)
    monkeypatch.setattr(gdn, "causal_conv1d_update", _conv_passthrough)
    import torch

    width = call.mixed_qkv.shape[1]
    conv_state = torch.zeros((call.initial_state.shape[0], 3, width), dtype=call.mixed_qkv.dtype,
                             device=call.mixed_qkv.device)
    K = call.initial_state.shape[-1]
    # The real class without its constructor (which builds the projections through the engine's config).
    gdn_layer = object.__new__(gdn.QwenGatedDeltaNetAttention)
    gdn_layer.__dict__.update(
        prefix=prefix, enable_packed_recurrent_decode=True, kv_cache=(conv_state, call.initial_state),
        conv1d=types.SimpleNamespace(weight=torch.zeros((width, 1, 4), device=call.mixed_qkv.device), bias=None),
        activation="silu", A_log=call.A_log, dt_bias=call.dt_bias, head_k_dim=K)
    gdn_layer._forward_core(mixed_qkv=call.mixed_qkv, b=call.b, a=call.a,
                                                 core_attn_out=call.out.squeeze(1))


# -- where a release defines and imports the packed decodes (read as source text: nothing is imported) -------------
@dataclass
class Sites:
    """`defined[name]`: module -> parameter names of its `def name(...)`; `imported[name]`: (importing module,
    module it imports from) for every `from X import name` anywhere in a module (function bodies too);
    `modules`: every module of the release."""

    modules: set[str] = field(default_factory=set)
    defined: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    imported: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    # Modules that name the function as an attribute (`module.name(...)`, `getattr`-free): which module object it
    # is read from is not known from the text, so the test treats every definition as reachable from them.
    attribute_users: dict[str, set[str]] = field(default_factory=dict)

    def reached(self, name: str) -> set[str]:
        """The defining modules some import chain leads to: what the release can call."""
        holders = {m: {m} for m in self.defined.get(name, {})}
        changed = True
        while changed:  # re-exports: a package that imports the function and is imported from in turn
            changed = False
            for importer, source in self.imported.get(name, []):
                found = holders.get(source, set()) - holders.setdefault(importer, set())
                if found:
                    holders[importer] |= found
                    changed = True
        importers = {importer for importer, _ in self.imported.get(name, [])}
        return set().union(*(holders.get(m, set()) for m in importers)) if importers else set()


def _sources(path: Path) -> Iterator[tuple[str, str]]:
    """(module name, source text) of every `vllm/**.py` in a wheel or an unpacked tree."""
    if path.is_file():
        with zipfile.ZipFile(path) as archive:
            for name in archive.namelist():
                if name.startswith("vllm/") and name.endswith(".py"):
                    yield name, archive.read(name).decode("utf-8", errors="replace")
    else:
        for file in sorted((path / "vllm").rglob("*.py")):
            yield file.relative_to(path).as_posix(), file.read_text(encoding="utf-8", errors="replace")


def packed_decode_sites(path: Path, names: tuple[str, ...]) -> Sites:
    """Every definition of, `from ... import` of, and attribute read of the functions `names` in the release at
    `path`."""
    sites = Sites()
    for file, text in _sources(path):
        parts = file[:-3].split("/")
        is_package = parts[-1] == "__init__"
        module = ".".join(parts[:-1] if is_package else parts)
        sites.modules.add(module)
        if not any(name in text for name in names):
            continue
        package = module if is_package else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef) and node.name in names:
                arguments = [a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)]
                sites.defined.setdefault(node.name, {})[module] = arguments
            elif isinstance(node, ast.Attribute) and node.attr in names:
                sites.attribute_users.setdefault(node.attr, set()).add(module)
            elif isinstance(node, ast.ImportFrom):
                source = node.module or ""
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    source = ".".join([*base, *([source] if source else [])])
                for alias in node.names:
                    if alias.name in names:
                        sites.imported.setdefault(alias.name, []).append((module, source))
    return sites
