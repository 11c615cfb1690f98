"""The sglang plugin: `sglang.srt.plugins` entry point `gdr_check` (pyproject.toml).

sglang 0.5.23 runs every `sglang.srt.plugins` function once per process (`sglang/srt/plugins/__init__.py:103-141`,
`load_plugins`), among them each TP/PP scheduler process, first thing in `run_scheduler_process`
(`sglang/srt/managers/scheduler.py:6322-6323`), which sglang starts with `spawn`. The allow-list
`SGLANG_PLUGINS`, when set, must name `gdr_check`.

With a variable set (`settings`), `register` wraps `ModelRunner.initialize`
(`sglang/srt/model_executor/model_runner.py:705`): `ModelRunner.__init__` has published the parallel state and
built the distributed groups (`init_torch_distributed`, `:466`) and calls `initialize` (`:499`), which loads the
model (`:715`) and later captures the CUDA graphs (`init_cuda_graphs`, `:1170`); the guard or the capture is
entered just before. The class is patched directly rather than through sglang's `HookRegistry`, which imports
every hooked module when it applies hooks: the model runner's import costs seconds, and the plugin also loads in
the server's processes that never build a model. The deployment comes from the runner and sglang's runtime
context: the model path, the attention TP size and rank (`get_parallel()`: GDN/KDA layers shard over the
attention TP group, `tp_size // attn_dp_size // attn_cp_size`), and `--mamba-ssm-dtype` (None leaves it to
the model). A draft model's runner is left alone.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from .hooks import EngineHook, release_of
from .hooks import register as _register
from .variables import ServedDeployment

RUNNER_MODULE = "sglang.srt.model_executor.model_runner"
CONTEXT_MODULE = "sglang.srt.runtime_context"
LOGGER = logging.getLogger("sglang.gdr_check")  # sglang configures the root logger: its handler and format


def deployment(runner: Any) -> ServedDeployment | None:
    """A sglang worker's deployment, from its `ModelRunner` before `initialize`; None for a draft model's."""
    if getattr(runner, "is_draft_worker", False):
        return None
    parallel = sys.modules[CONTEXT_MODULE].get_parallel()
    tp, rank = int(parallel.attn_tp_size), int(parallel.attn_tp_rank)
    model = getattr(runner.model_config, "model_path", None) or getattr(runner.server_args, "model_path", None)
    dtype = getattr(runner.server_args, "mamba_ssm_dtype", None)
    release = release_of("sglang.version")
    return ServedDeployment(engine=f"sglang@{release}" if release else "sglang",
                            model=model if isinstance(model, str) and model else None, tp=tp, rank=rank,
                            state_dtype=dtype if isinstance(dtype, str) and dtype else None)


HOOK = EngineHook(name="sglang", module=RUNNER_MODULE, cls="ModelRunner", method="initialize", after=False,
                  deployment=deployment, logger=LOGGER)


def register() -> None:
    """sglang's entry point: nothing unless GDR_CHECK_GUARD or GDR_CHECK_CAPTURE is set."""
    _register(HOOK)
