"""What can be said about an engine backend without importing torch: the parent refuses these before a child.

Loading the kernel itself (sglang's file, vLLM's module) needs triton, so it happens in the child
(`runner.kernels`).
"""

from __future__ import annotations

import importlib.util

from ..engines import profile_for


def known_unavailable(backend: str, variant: str) -> str | None:
    """Why `backend` cannot run a `variant` call, when that is known up front; None when it may be available.

    "builtin" is always available; an engine backend is unavailable for KDA when its KDA op has another API,
    and when the module its kernel is imported from is not installed (sglang's kernel is read from its files
    by `kernel.engines`, which reports a missing file itself)."""
    if backend == "builtin":
        return None
    profile = profile_for(backend)
    if variant == "kda" and profile.kda_other_api is not None:
        return profile.kda_other_api
    if profile.import_name is not None and importlib.util.find_spec(profile.import_name) is None:
        return f"{profile.display_name} is not installed here"
    return None
