"""The vLLM plugin: `vllm.general_plugins` entry point `gdr_check` (pyproject.toml).

vLLM 0.33.0 runs every `vllm.general_plugins` function once per process (`vllm/plugins/__init__.py:77-90`,
`load_general_plugins`): in the API server, the engine core, and each worker inside
`WorkerWrapperBase.init_worker` (`vllm/v1/worker/worker_base.py:287-289`), before the worker class is built. The
allow-list `VLLM_PLUGINS`, when set, must name `gdr_check`. A forked worker inherits its parent's "already
loaded" and the class this plugin patched there; a spawned one runs the plugin itself.

With a variable set (`settings`), `register` wraps `WorkerWrapperBase.init_device`: after the worker's own
`init_device` has built the distributed groups, and before `load_model` builds the model's layers and
`compile_or_warm_up_model` captures CUDA graphs (`vllm/v1/executor/multiproc_executor.py:772-788`,
`vllm/v1/engine/core.py:310-389`), the guard or the capture is entered in that worker. The deployment comes from
the worker's `vllm_config`: the model, `parallel_config.tensor_parallel_size`, the TP rank from
`vllm.distributed.parallel_state`, and the SSM state dtype of `cache_config` (`mamba_ssm_cache_dtype`, else
`mamba_cache_dtype`; "auto" leaves it to the model).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from .hooks import EngineHook, release_of
from .hooks import register as _register
from .variables import ServedDeployment

WORKER_MODULE = "vllm.v1.worker.worker_base"
LOGGER = logging.getLogger("vllm.gdr_check")  # under vLLM's `vllm` logger: its handler and format


def _dtype(cache_config: Any) -> str | None:
    for name in ("mamba_ssm_cache_dtype", "mamba_cache_dtype"):
        value = getattr(cache_config, name, None)
        if isinstance(value, str) and value and value != "auto":
            return value
    return None


def deployment(wrapper: Any) -> ServedDeployment:
    """A vLLM worker's deployment, from its `WorkerWrapperBase` after `init_device`."""
    config = wrapper.vllm_config
    tp = int(config.parallel_config.tensor_parallel_size)
    rank = sys.modules["vllm.distributed.parallel_state"].get_tensor_model_parallel_rank()
    release = release_of("vllm.version")
    model = getattr(config.model_config, "model", None)
    return ServedDeployment(engine=f"vllm@{release}" if release else "vllm",
                            model=model if isinstance(model, str) and model else None, tp=tp, rank=int(rank),
                            state_dtype=_dtype(config.cache_config))


HOOK = EngineHook(name="vLLM", module=WORKER_MODULE, cls="WorkerWrapperBase", method="init_device", after=True,
                  deployment=deployment, logger=LOGGER)


def register() -> None:
    """vLLM's entry point: nothing unless GDR_CHECK_GUARD or GDR_CHECK_CAPTURE is set."""
    _register(HOOK)
