"""The kernels a dry-run can run: gdr-check's own, and the installed engine's (child process only)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ...base.records import dataclass
from ...base.variants import variant_spec
from .backends import known_unavailable


@dataclass(frozen=True)
class KernelUnderTest:
    name: str  # "builtin", "sglang" or "vllm": the key in results
    label: str  # for people: what was loaded, from where
    checked: Callable[..., Any]  # the call verified each step (runs the wrapper's checks)
    fast: Callable[..., Any]  # the call timed (the kernel alone where a wrapper-free launch exists)


def builtin_kernel(variant: str, engine: str) -> KernelUnderTest:
    from ...kernel.ops import CHECKED, LAUNCHERS  # imports torch and triton: the child process only

    checked, fast = CHECKED[variant], LAUNCHERS[variant]
    return KernelUnderTest(
        name="builtin", label=f"gdr-check Triton {variant_spec(variant).label} kernel ({engine} profile)",
        checked=functools.partial(checked, engine=engine), fast=functools.partial(fast, engine=engine),
    )


def engine_kernel(backend: str, variant: str) -> KernelUnderTest | str:
    """The engine's own wrapper, or why it cannot be loaded."""
    reason = known_unavailable(backend, variant)
    if reason is not None:
        return reason
    return _LOADERS[backend](variant)


def _sglang_kernel(variant: str) -> KernelUnderTest | str:
    from ...kernel.engine_kernels import load_sglang_packed_decode  # imports triton: the child process only

    try:
        loaded = load_sglang_packed_decode()
    except FileNotFoundError as error:
        return str(error)
    chosen = getattr(loaded, variant)  # one field per variant
    label = f"sglang {variant_spec(variant).label} packed decode from {getattr(chosen, 'source_path', '?')}"
    return KernelUnderTest(name="sglang", label=label, checked=chosen, fast=chosen)


def _vllm_kernel(variant: str) -> KernelUnderTest | str:
    from ...kernel.engine_kernels import load_vllm_packed_decode  # imports triton: the child process only

    gdn = load_vllm_packed_decode()
    if gdn is None:
        return "vLLM's FLA module has no fused_recurrent_gated_delta_rule_packed_decode (or does not import)"
    module = getattr(gdn, "__module__", "vllm")
    return KernelUnderTest(name="vllm", label=f"vLLM GDN packed decode ({module})", checked=gdn, fast=gdn)


# How each engine backend's kernel is loaded (sglang's from its file, vLLM's by import), by profile name.
_LOADERS: dict[str, Callable[[str], KernelUnderTest | str]] = {"sglang": _sglang_kernel, "vllm": _vllm_kernel}
