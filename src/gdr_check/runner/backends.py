"""What can be said about an engine backend without importing torch: the parent refuses these before a child.

Loading the kernel itself (sglang's file, vLLM's module) needs triton, so it happens in the child
(`runner.kernels`).
"""

from __future__ import annotations

import importlib.util

VLLM_KDA = ("vLLM's KDA packed op has another API (raw_g, raw_beta, state_indices; `out` [1, B, H, V]); only its GDN "
            "packed decode can be compared")
VLLM_MISSING = "vLLM is not installed here"


def known_unavailable(backend: str, variant: str) -> str | None:
    """Why `backend` cannot run a `variant` call, when that is known up front; None when it may be available."""
    if backend != "vllm":
        return None
    if variant == "kda":
        return VLLM_KDA
    if importlib.util.find_spec("vllm") is None:
        return VLLM_MISSING
    return None
