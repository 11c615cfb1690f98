"""What one dry-run will do, as a JSON document the parent sends to the child on stdin (no torch here)."""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING, Any

from ...base.records import dataclass
from ...base.tensor_spec import TensorSpec
from ...call.packed_call import PackedDecodeCall
from ...engines.profiles import DEFAULT_ENGINE, ENGINE_NAMES, profile_for

if TYPE_CHECKING:
    from ..model_check import ModelCheck

# Our kernel, or the installed engine's own (named as its profiles are).
BACKENDS: tuple[str, ...] = ("builtin", *ENGINE_NAMES)
DEVICES: tuple[str, ...] = ("auto", "cuda", "cpu")
PLAN_VERSION = 1


@dataclass(frozen=True)
class DryRunPlan:
    """The deployed per-rank call and pools, and how to run them."""

    call: PackedDecodeCall
    pools: dict[str, TensorSpec] = field(default_factory=dict)
    engine: str = DEFAULT_ENGINE  # a name or name@version (gdr_check.engines.profiles)
    backend: str = "builtin"  # one of BACKENDS (checked below)
    device: str = "auto"  # auto: CUDA when torch sees a device, else the interpreter on CPU
    steps: int = 3
    seed: int = 0
    timing: bool = True

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)} (got {self.backend!r})")
        if self.device not in DEVICES:
            raise ValueError(f"device must be one of {', '.join(DEVICES)} (got {self.device!r})")
        if self.steps < 1:
            raise ValueError(f"steps must be >= 1 (got {self.steps})")
        profile_for(self.engine)  # UnknownEngineError names the choices

    @property
    def variant(self) -> str:
        return self.call.variant

    def to_dict(self) -> dict[str, Any]:
        return {
            "plan_version": PLAN_VERSION,
            "call": self.call.to_dict(),
            "pools": {name: spec.to_dict() for name, spec in self.pools.items()},
            "engine": self.engine,
            "backend": self.backend,
            "device": self.device,
            "steps": self.steps,
            "seed": self.seed,
            "timing": self.timing,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DryRunPlan:
        return cls(
            call=PackedDecodeCall.from_dict(data["call"]),
            pools={name: TensorSpec.from_dict(spec) for name, spec in data.get("pools", {}).items()},
            engine=data.get("engine", DEFAULT_ENGINE),
            backend=data.get("backend", "builtin"),
            device=data.get("device", "auto"),
            steps=int(data.get("steps", 3)),
            seed=int(data.get("seed", 0)),
            timing=bool(data.get("timing", True)),
        )


def plan_for(check: ModelCheck, *, backend: str = "builtin", device: str = "auto", steps: int = 3, seed: int = 0,
             timing: bool = True) -> DryRunPlan:
    """The plan for a `ModelCheck` that has a per-rank call (the caller refuses checks with errors)."""
    if check.call is None:
        raise ValueError("the model check produced no per-rank kernel call to run")
    return DryRunPlan(call=check.call, pools=dict(check.pools), engine=check.deployment.engine,
                      backend=backend, device=device, steps=steps, seed=seed, timing=timing)
