"""GDR228 and GDR257: the runtime guard's arguments that the kernel cannot take at all.

GDR228: an argument of the runtime guard that is not a dense strided tensor.

`check_packed_decode` / `check_kda_packed_decode` take whatever the caller passes. The contract rules read shapes,
strides, dtypes and devices, which `None`, a list, a NumPy array, a string, or a sparse or nested tensor do not have
(or have in a form the kernel cannot take): instead of an AttributeError or RuntimeError from inside the library,
the guard reports each such argument and what it is, and runs no other rule (they would be about a call that
cannot be described). A quantized tensor is named in any argument; a meta tensor (shapes only) is a valid
stand-in for `check_packed_decode`, which runs nothing, but is GDR228 for the runtime guard and the checked
kernels, which launch the call (`meta_report`).

GDR257: a KDA `lower_bound` that is not a finite number (NaN, an infinity, a value past 1e30, a string, a bool, a
tensor) is an error of the call, with the value shown bounded; the scale's equivalent is GDR245.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import field
from typing import Any

from ..base.limits import LIMITS, shorten
from ..base.records import dataclass
from ..base.registry import RULE_SET, Finding, RuleSet, rule
from ..base.report import Diagnostic, Report
from ..base.tensor_spec import TensorSpec
from ..base.variants import variant_spec
from ..call.packed_call import TENSOR_ARGUMENTS, CallContext
from .examples import CallExample


def _kind(value: Any, name: str = "") -> str | None:
    """What `value` is, when it is not a dense strided tensor the guard can describe; None when it is. (`name`: the
    argument; the index tensor's values are read.)"""
    if isinstance(value, TensorSpec):
        return value.problem(index_values=name == "ssm_state_indices")
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
    return _report({name: _kind(arguments.get(name), name) for name in TENSOR_ARGUMENTS}, rules)


META_KIND = "a meta tensor (shapes only, no data to run on)"
STORAGELESS_KIND = "a tensor without storage (a wrapper subclass: no data pointer to run on)"


def meta_report(arguments: Mapping[str, Any], rules: RuleSet = RULE_SET) -> Report | None:
    """GDR228 for each tensor argument on the meta device, or strided with elements but no storage (a wrapper
    subclass: its data pointer is 0, or reading it raises), for a call that is about to run (the runtime guard,
    the checked kernels); None when there is none. `check_packed_decode` takes meta tensors as shape-only
    stand-ins and never calls this."""
    kinds: dict[str, str | None] = {}
    for name in TENSOR_ARGUMENTS:
        value = arguments.get(name)
        device = getattr(value, "device", None)
        kinds[name] = META_KIND if str(getattr(device, "type", device)) == "meta" else None
        if kinds[name] is None and str(getattr(value, "layout", None)) == "torch.strided":
            try:
                storageless = value.numel() > 0 and value.data_ptr() == 0  # type: ignore[union-attr]
            except Exception:  # noqa: BLE001 - RuntimeError in torch 2.13; another torch may raise otherwise
                storageless = True
            if storageless:
                kinds[name] = STORAGELESS_KIND
    return _report(kinds, rules)


def _report(kinds: Mapping[str, str | None], rules: RuleSet) -> Report | None:
    declared = rules.get("GDR228") or RULE_SET.rules["GDR228"]
    diagnostics: list[Diagnostic] = []
    for name, kind in kinds.items():
        if kind is not None:
            finding = Finding({"argument": name, "kind": kind}, argument=name)
            diagnostics.append(declared.diagnostic_with(finding, finding.values, {}))
    return Report(diagnostics) if diagnostics else None


@dataclass(frozen=True)
class GuardExample:
    """The base call with `changes` (argument -> a Python value), passed to the runtime guard (run by
    `gdr_check.pipeline.example_runner`)."""

    changes: Mapping[str, Any] = field(default_factory=dict)
    note: str = ""
    variant: str = "gdn"

    @property
    def text(self) -> str:
        lines = [f"# {variant_spec(self.variant).label} call to the runtime guard: the base call with"]
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


def _shown(value: Any) -> str:
    """A scalar argument as a message shows it: repr, with huge integers and long reprs bounded."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return shorten(value)
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


@rule(
    "GDR257", "invalid-lower-bound",
    summary="KDA `lower_bound` is not a finite number",
    message="`lower_bound` is {value}; the KDA safe gate needs a finite negative float, or None to turn it off",
    explanation=(
        "With `lower_bound` set, the KDA kernel computes its gate as g = lower_bound * sigmoid(...) in fp32 and "
        "multiplies the state by exp(g). NaN or +inf turns every state NaN or infinite; -inf wipes the state at "
        "every step and gives NaN wherever the sigmoid underflows to 0; magnitudes past 1e30 overflow the same "
        "way. A value that is not a real number (a string, a bool, a tensor, a complex) fails inside Triton's "
        "launcher far from the call. The wrapper passes the value through unchecked."
    ),
    causes=("a config's gate bound read as a string", "a bound computed from an empty or diverged tensor"),
    fixes=("pass the model's gate lower bound as a Python float (e.g. -5.0), or None",),
    engines="sglang 0.5.23 (`fused_recurrent_kda_packed_decode`).",
    example=CallExample({"lower_bound": float("nan")}, variant="kda"),
)
def lower_bound_valid(ctx: CallContext) -> Finding | None:
    bound = ctx.call.lower_bound
    if not variant_spec(ctx.variant).has_lower_bound or bound is None or LIMITS["lower_bound"].allows(bound):
        return None
    return Finding({"value": _shown(bound)}, ["pass a finite negative float such as -5.0, or None"],
                   argument="lower_bound")
