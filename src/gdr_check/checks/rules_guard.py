"""GDR228: an argument of the runtime guard that is not a dense strided tensor (issue 11).

`check_packed_decode` / `check_kda_packed_decode` take whatever the caller passes. The contract rules read shapes,
strides, dtypes and devices, which `None`, a list, a NumPy array, a string, or a sparse or nested tensor do not have
(or have in a form the kernel cannot take): instead of an AttributeError or RuntimeError from inside the library,
the guard reports each such argument and what it is, and runs no other rule (they would be about a call that
cannot be described).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..call import TENSOR_ARGUMENTS
from ..registry import RULE_SET, Finding, RuleSet
from ..report import Diagnostic, Report
from ..tensors import TensorSpec


def _kind(value: Any) -> str | None:
    """What `value` is, when it is not a dense strided tensor the guard can describe; None when it is."""
    if isinstance(value, TensorSpec):
        return None
    torch = sys.modules.get("torch")
    try:
        if torch is not None and isinstance(value, torch.Tensor):
            if value.is_nested:
                return "a nested tensor"
            if value.layout is not torch.strided:
                return f"a {str(value.layout).removeprefix('torch.').removeprefix('_')} tensor"
            if value.is_quantized:
                return "a quantized tensor"
        TensorSpec.from_tensor(value)
        return None
    except Exception:  # noqa: BLE001  (whatever a foreign object raises, it is not a tensor we can describe)
        pass
    if value is None:
        return "None"
    kind = type(value)
    name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    return f"a value of type `{name[:60]}`"


def argument_report(arguments: Mapping[str, Any], rules: RuleSet = RULE_SET) -> Report | None:
    """GDR228 for each tensor argument that is not a dense strided tensor; None when every one is."""
    rule = rules.get("GDR228") or RULE_SET.rules["GDR228"]
    diagnostics: list[Diagnostic] = []
    for name in TENSOR_ARGUMENTS:
        kind = _kind(arguments.get(name))
        if kind is not None:
            finding = Finding({"argument": name, "kind": kind}, argument=name)
            diagnostics.append(rule.diagnostic_with(finding, finding.values, {}))
    return Report(diagnostics) if diagnostics else None


@dataclass(frozen=True)
class GuardExample:
    """The base call with `changes` (argument -> a Python value), passed to the runtime guard (run by
    `gdr_check.example_runner`)."""

    changes: Mapping[str, Any] = field(default_factory=dict)
    note: str = ""
    variant: str = "gdn"

    @property
    def text(self) -> str:
        lines = [f"# {self.variant.upper()} call to the runtime guard: the base call with"]
        lines += [f"{name} = {value!r}" for name, value in self.changes.items()]
        if self.note:
            lines.append(f"# {self.note}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text


RULE = RULE_SET.declare(
    "GDR228", "argument-not-a-dense-tensor", scope="guard",
    summary="a kernel argument is not a dense strided tensor",
    message="`{argument}` is {kind}, not a dense strided tensor",
    explanation=(
        "Every tensor argument of the packed decode kernels is a dense, strided torch tensor: the kernel takes "
        "its data pointer and strides. `None`, a Python list, a NumPy array, a string, a sparse, nested or "
        "quantized tensor has no such layout, and the wrapper fails on it with an AttributeError or a Triton "
        "compile error far from the call. The guard names the argument and checks nothing else on that call."
    ),
    causes=("an optional tensor left as None", "a NumPy array or a list passed where a torch tensor belongs",
            "a sparse or nested tensor from an upstream op"),
    fixes=("pass a dense torch tensor (`torch.as_tensor(x)`, `x.to_dense()`, `x.dequantize()`)",),
    engines="sglang 0.5.23 and vLLM.",
    example=GuardExample({"initial_state": None}, "an optional state left unset"),
)
