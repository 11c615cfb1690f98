"""Drive an engine's own plugin loader and worker start-up, as read from its released wheel, in a fresh
interpreter: `python tests/plugin_engines.py vllm|sglang fork|spawn TREE OUT.json [broken]`.

The parent process plays the process that loads the plugins and then starts the workers (vLLM's engine core,
sglang's launcher); the worker is a forked or a spawned child, as each engine can start them. Real files of the
release, run as they are:
- vLLM: the plugin loader `vllm/plugins/__init__.py` with `vllm/envs.py` (its `VLLM_PLUGINS`), the worker
  wrapper `vllm/v1/worker/worker_base.py` (`WorkerWrapperBase.init_worker`, which loads the plugins, and
  `init_device`), `vllm/version.py`, and the FLA ops package and GDN layer that tests/vllm_real.py loads. The
  worker goes through `init_worker`, `init_device`, `load_model`, as `WorkerProc.__init__` calls them
  (`vllm/v1/executor/multiproc_executor.py:772-788`), then one decode step of the real GDN layer.
- sglang: the plugin loader `sglang/srt/plugins/__init__.py` with `hook_registry.py` and `srt/environ.py`,
  `sglang/version.py`, and the FLA kernels and backends that tests/sglang_real.py loads.

Stood in (tests/vllm_real.py's stand-ins for the rest): vLLM's config module (`VllmConfig`,
`set_current_vllm_config`), `resolve_obj_by_qualname` (what vLLM's does: import, then the attribute), the TP
rank of `vllm.distributed.parallel_state`, and the worker class (`StandInGpuWorker`: its `init_device` sets the
TP rank, its `load_model` imports the GDN layer as building the model does), and the compiler's decorators
(`vllm_real.eager_compile`). For sglang: the model runner module
(`StandInModelRunner`, in the order of the release's `ModelRunner`: `init_torch_distributed` in `__init__`,
then `initialize`, which loads the model, builds the GDN backend and runs a decode step) and the runtime
context's `get_parallel()`. tests/test_plugins.py checks that order against the release's source.

The package's entry points are found as installed ones are: a `gdr_check-*.dist-info` folder on PYTHONPATH,
written by the test from pyproject.toml. What the worker saw is written to OUT.json.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import json
import logging
import multiprocessing
import os
import sys
import types
from pathlib import Path
from typing import Any

import pytest

import sglang_real
import vllm_real

GDN = "fused_recurrent_gated_delta_rule_packed_decode"
KDA = "fused_recurrent_kda_packed_decode"
S = 5  # pool slots
BACKING = 16  # slots of the memory the pool is a view into: every slot the steps use lies inside it
# row: 0 ok, 1 past the pool, 2 ok, 3 repeats row 2's slot, 4 slot 0, 5 one past the end, 6 ok, 7 skipped (-1)
VLLM_SLOTS = [1, 9, 2, 2, 0, S, 3, -1]
# sglang: slot 0 is its padding slot, -1 is not a skip sentinel; trailing zeros are padding rows
SGLANG_SLOTS = [1, 9, 2, 2, 3, 0, 0]
VLLM_WORKER = "vllm.v1.worker.worker_base"
SGLANG_RUNNER = "sglang.srt.model_executor.model_runner"
MODEL = "/nonexistent/served-model"  # what the engine config names: unreadable here, so the guard says so
TP = 2
RANK = 1


# -- the import environment of each engine -------------------------------------------------------------------------
def _packages(root: Path, real: set[str], modules: set[str]) -> None:
    """Parent packages of `modules` with their real folders, their `__init__` not run (except those in `real`)."""
    names = {".".join(m.split(".")[:depth]) for m in modules for depth in range(1, m.count(".") + 1)}
    for name in sorted(names - real, key=lambda n: n.count(".")):
        package = types.ModuleType(name)
        package.__path__ = [str(root / name.replace(".", "/"))]
        sys.modules[name] = package
        parent, _, leaf = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], leaf, package)


@contextlib.contextmanager
def _current_config(config: Any) -> Any:
    yield


def _resolve_obj_by_qualname(qualname: str) -> Any:
    module, _, name = qualname.rpartition(".")
    return getattr(importlib.import_module(module), name)


def vllm_environment(root: Path) -> None:
    import triton
    import triton.language as tl
    import triton.language.extra.libdevice as tldevice

    real = {"vllm.plugins", "vllm.envs", "vllm.version", "vllm._version", VLLM_WORKER, vllm_real.OPS,
            vllm_real.GDN_LAYER}
    real |= {f"{vllm_real.OPS}.{p.stem}" for p in (root / vllm_real.OPS.replace(".", "/")).glob("*.py")
             if p.stem != "__init__"}
    _packages(root, real, real)
    config = vllm_real._stand_in("vllm.config")  # what else the real files import from it: stood in
    config.VllmConfig = object  # type: ignore[attr-defined]
    config.set_current_vllm_config = _current_config  # type: ignore[attr-defined]
    imports = vllm_real._stand_in("vllm.utils.import_utils")
    imports.resolve_obj_by_qualname = _resolve_obj_by_qualname  # type: ignore[attr-defined]
    state = vllm_real._stand_in("vllm.distributed.parallel_state")
    state.get_tensor_model_parallel_rank = _tp_rank  # type: ignore[attr-defined]
    utils = vllm_real._stand_in("vllm.triton_utils")
    utils.triton, utils.tl, utils.tldevice = triton, tl, tldevice  # type: ignore[attr-defined]
    for module in (config, imports, state, utils):
        sys.modules[module.__name__] = module
    sys.meta_path.insert(0, vllm_real._StandInFinder(real | set(sys.modules)))  # type: ignore[arg-type]


def _tp_rank() -> int:
    rank = sys.modules["vllm.distributed.parallel_state"].__dict__.get("rank")
    if rank is None:  # vLLM's own words when the groups are not built
        raise AssertionError("tensor model parallel group is not initialized")
    return int(rank)


class StandInGpuWorker:
    """The worker class `init_worker` builds (vLLM's `gpu_worker.Worker` in an engine)."""

    def __init__(self, vllm_config: Any, local_rank: int, rank: int, **kwargs: Any) -> None:
        self.vllm_config = vllm_config
        self.rank = rank

    def init_device(self) -> None:
        if os.environ.get("PLUGIN_TEST_BROKEN") != "rank":
            sys.modules["vllm.distributed.parallel_state"].rank = RANK  # the distributed groups are built

    def load_model(self) -> None:
        importlib.import_module(vllm_real.GDN_LAYER)  # building the model's layers imports them


def vllm_config() -> Any:
    ns = types.SimpleNamespace
    return ns(model_config=ns(model=MODEL),
              parallel_config=ns(tensor_parallel_size=TP, world_size=TP, worker_cls="plugin_engines.StandInGpuWorker",
                                 worker_extension_cls=None),
              cache_config=ns(mamba_ssm_cache_dtype="float32", mamba_cache_dtype="auto"),
              enable_trace_function_call_for_thread=lambda: None)


def vllm_worker(root: str, out: str, spawned: bool) -> None:
    """A vLLM worker process: `WorkerProc.__init__`'s calls, then one decode step."""
    if spawned:
        vllm_environment(Path(root))
    vllm_real.without_compiler(setattr)  # before the worker imports vLLM's files (tests/vllm_real.py says why)
    _log_lines(out)
    worker_base = importlib.import_module(VLLM_WORKER)
    wrapper = worker_base.WorkerWrapperBase(rpc_rank=RANK)
    kwargs = {"vllm_config": vllm_config(), "local_rank": RANK, "rank": RANK, "distributed_init_method": None,
              "is_driver_worker": False, "shared_worker_lock": None}
    wrapper.init_worker([{}] * RANK + [kwargs])
    wrapper.init_device()
    wrapper.load_model()
    loaded = _gdr_check_modules()
    modules = {name: sys.modules[name] for name in (vllm_real.OPS, vllm_real.KERNELS, vllm_real.GDN_LAYER)}
    kernels = modules[vllm_real.KERNELS]
    if os.environ.get("TRITON_INTERPRET") == "1":
        from gdr_check.kernel.engine_kernels import _standin_exp

        kernels.exp = _standin_exp
    from kernel_helpers import make_call

    call = _in_backing(make_call(B=len(VLLM_SLOTS), H=1, HV=2, K=8, V=8, slots=VLLM_SLOTS, pool_slots=S, kda=False,
                                 seed=11))
    error = None
    with pytest.MonkeyPatch.context() as monkeypatch:
        try:
            if os.environ.get("PLUGIN_TEST_GRAPH") == "1":
                _decode_in_a_graph(monkeypatch, modules, call)
            else:
                for _ in range(_steps()):
                    vllm_real.decode(monkeypatch, modules, call)
        except Exception as raised:  # noqa: BLE001 - raise mode: what the engine's step would see
            error = f"{type(raised).__name__}: {raised}"
    _finish(out, modules, GDN, error, loaded)


def _decode_in_a_graph(monkeypatch: Any, modules: dict[str, types.ModuleType], call: Any) -> None:
    """The step as vLLM runs it on a GPU: warmed up eagerly and captured in a CUDA graph on valid slots, then the
    graph replayed after the slot table was refilled in place with VLLM_SLOTS (as the engine's input buffers
    are); the second replay, after the device has finished the first, reads the faults the first recorded."""
    import torch

    bad = call.ssm_state_indices.clone()
    good = torch.tensor([1, 2, 3, 4] + [-1] * (len(VLLM_SLOTS) - 4), dtype=bad.dtype, device=bad.device)
    call.ssm_state_indices.copy_(good)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        vllm_real.decode(monkeypatch, modules, call)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        vllm_real.decode(monkeypatch, modules, call)
    torch.cuda.synchronize()
    logging.getLogger("plugin_engines").info("captured")
    call.ssm_state_indices.copy_(bad)
    graph.replay()
    torch.cuda.synchronize()
    graph.replay()
    torch.cuda.synchronize()


# -- sglang ----------------------------------------------------------------------------------------------------------
class _Parallel:
    attn_tp_size = TP
    attn_tp_rank = RANK


def _get_parallel() -> Any:
    if os.environ.get("PLUGIN_TEST_BROKEN") == "rank":
        raise ValueError("config namespace 'parallel' not published")
    return _Parallel()


class StandInModelRunner:
    """sglang's `ModelRunner` in the order its `__init__` and `initialize` run (tests/test_plugins.py reads it
    from the release): the parallel state, then `initialize`, which loads the model and builds the backends."""

    def __init__(self, server_args: Any, model_config: Any, is_draft_worker: bool = False) -> None:
        self.server_args = server_args
        self.model_config = model_config
        self.is_draft_worker = is_draft_worker
        self.init_torch_distributed()
        self.initialize()

    def init_torch_distributed(self) -> None:
        pass

    def initialize(self) -> None:
        self.load_model()

    def load_model(self) -> None:
        for name in (sglang_real.GDN_BACKEND, sglang_real.KDA_BACKEND):  # the model's layers import them
            importlib.import_module(name)


def sglang_environment(root: Path) -> None:
    real = {"sglang.srt.plugins", "sglang.srt.plugins.hook_registry", "sglang.srt.environ", "sglang.version",
            "sglang._version"}
    files = {f[:-3].replace("/", ".") for f in sglang_real.FILES}
    _packages(root, real, real | files | {"sglang.srt.model_executor.x", "sglang.kernels.ops.attention.linear.x"})
    for name in sglang_real._STAND_INS:
        sys.modules[name] = sglang_real._stand_in(name)
        parent, _, leaf = name.rpartition(".")
        if parent in sys.modules:
            setattr(sys.modules[parent], leaf, sys.modules[name])
    # torch's release from its installed metadata: importing torch here (~2 s) would be charged to every spawn
    # test's parent, whose worker imports it again; the worker's kernels import it where they need it.
    version = importlib.metadata.version("torch")
    release = tuple(int(part) for part in version.split("+")[0].split(".")[:2])
    sys.modules["sglang.srt.utils.common"].torch_release = release  # type: ignore[attr-defined]
    context = types.ModuleType("sglang.srt.runtime_context")
    context.get_parallel = _get_parallel  # type: ignore[attr-defined]
    sys.modules[context.__name__] = context


def _import_runner() -> types.ModuleType:
    """The model runner module, imported as the scheduler's first `TpModelWorker` imports it (after the plugins
    have loaded): a module object made here, run through the import system so a waiting hook sees it."""
    import importlib.abc
    import importlib.machinery

    class Loader(importlib.abc.Loader):
        def create_module(self, spec: Any) -> None:
            return None

        def exec_module(self, module: types.ModuleType) -> None:
            module.ModelRunner = type("ModelRunner", (StandInModelRunner,),  # type: ignore[attr-defined]
                                      {"__module__": SGLANG_RUNNER, "initialize": StandInModelRunner.initialize})

    class Finder:
        def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
            if fullname == SGLANG_RUNNER:
                return importlib.machinery.ModuleSpec(fullname, Loader())
            return None

    # Ahead of the file system's finder (the release's own model_runner.py may lie in the tree, read as text by
    # the tests), behind any finder a plugin placed first.
    position = next(i for i, finder in enumerate(sys.meta_path) if finder is importlib.machinery.PathFinder)
    sys.meta_path.insert(position, Finder())  # type: ignore[arg-type]
    return importlib.import_module(SGLANG_RUNNER)


def sglang_worker(root: str, out: str, spawned: bool) -> None:
    """A sglang scheduler process: `run_scheduler_process` loads the plugins first, then the model runner is
    built; then one decode step through the GDN backend."""
    if spawned:
        sglang_environment(Path(root))
    _log_lines(out)
    importlib.import_module("sglang.srt.plugins").load_plugins()
    runner_module = _import_runner()
    ns = types.SimpleNamespace
    runner_module.ModelRunner(ns(model_path=MODEL, mamba_ssm_dtype="float32"), ns(model_path=MODEL))
    loaded = _gdr_check_modules()
    if os.environ.get("TRITON_INTERPRET") == "1":
        from gdr_check.kernel.engine_kernels import _standin_exp

        sys.modules[sglang_real.KERNELS].exp = _standin_exp
    modules = {name: sys.modules[name] for name in (sglang_real.KERNELS, sglang_real.GDN_BACKEND,
                                                    sglang_real.KDA_BACKEND)}
    from kernel_helpers import make_call

    call = _in_backing(make_call(B=len(SGLANG_SLOTS), H=1, HV=2, K=8, V=8, slots=SGLANG_SLOTS, pool_slots=S, kda=False,
                                 seed=11))
    error = None
    try:
        backend = modules[sglang_real.GDN_BACKEND].TritonGDNKernel()
        HV, V = call.initial_state.shape[1:3]
        for _ in range(_steps()):
            backend.packed_decode(call.mixed_qkv, call.a, call.b, A_log=call.A_log, dt_bias=call.dt_bias,
                                  scale=call.scale, ssm_states=call.initial_state,
                                  cache_indices=call.ssm_state_indices, num_v_heads=HV, head_v_dim=V)
    except Exception as raised:  # noqa: BLE001
        error = f"{type(raised).__name__}: {raised}"
    _finish(out, modules, (GDN, KDA), error, loaded)


def _steps() -> int:
    """Decode steps to run: one; two in raise mode, where the faults a step's slot check recorded on the device
    are read, and raised, at the next guarded call."""
    return 2 if os.environ.get("GDR_CHECK_GUARD") == "raise" else 1


def _in_backing(call: Any) -> Any:
    """`call` with its pool of S slots a view into a backing of BACKING slots, so that the unguarded step (no
    variable set, or a plugin that could not start) reads and writes the bad slots inside memory it owns."""
    import torch

    backing = torch.zeros((BACKING, *call.initial_state.shape[1:]), dtype=call.initial_state.dtype,
                          device=call.initial_state.device)
    backing[1:S + 1] = call.initial_state
    call.initial_state = backing[1:S + 1]
    return call


# -- what the worker saw ----------------------------------------------------------------------------------------------
def _log_lines(out: str) -> None:
    """The worker's log records, one per line, to OUT.log: the parent adds them to OUT.json once the worker has
    exited, so the lines its exit handlers write are there too."""
    handler = logging.FileHandler(out + ".log", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(logging.INFO)


def _gdr_check_modules() -> list[str]:
    """The gdr_check modules imported once the worker has built its model (before the test's own imports)."""
    return sorted(n for n in sys.modules if n.split(".")[0] == "gdr_check")


def _finish(out: str, modules: dict[str, types.ModuleType], names: Any, error: str | None,
            loaded: list[str]) -> None:
    names = (names,) if isinstance(names, str) else names
    bindings = {}
    for module_name, module in modules.items():
        for name in names:
            value = module.__dict__.get(name)
            if value is not None:
                bindings[f"{module_name}.{name}"] = "wrapped" if hasattr(value, "__wrapped__") else "original"
    result = {"bindings": bindings, "error": error, "gdr_check_modules": loaded}
    Path(out).write_text(json.dumps(result, indent=1))


def main(engine: str, method: str, root: str, out: str) -> None:
    environment, worker = (vllm_environment, vllm_worker) if engine == "vllm" else (sglang_environment,
                                                                                     sglang_worker)
    environment(Path(root))
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    if engine == "vllm":
        importlib.import_module("vllm.plugins").load_general_plugins()  # the engine core loads them first
    else:
        importlib.import_module("sglang.srt.plugins").load_plugins()  # the launcher loads them first
    context = multiprocessing.get_context(method)
    child = context.Process(target=worker, args=(root, out, method == "spawn"))
    child.start()
    child.join(120)
    if Path(out).is_file():
        result = json.loads(Path(out).read_text())
        result["log"] = Path(out + ".log").read_text(encoding="utf-8").splitlines()
        Path(out).write_text(json.dumps(result, indent=1))
    sys.exit(child.exitcode)


if __name__ == "__main__":
    main(*sys.argv[1:5])
