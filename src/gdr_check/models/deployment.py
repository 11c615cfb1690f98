"""A deployment (engine, TP, batch, pool size, dtypes) and what each engine picks when the user leaves it open.

`resolve()` applies the engine defaults of models.md 7.1 (sglang 0.5.23) and 7.2 (vLLM): slot count, SSM
state dtype, conv state dtype and parameter dtypes, each with the reason it was chosen.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from ..tensors import DTYPE_ITEMSIZE, canonical_dtype
from .description import LinearAttentionModel

EngineName = Literal["sglang", "vllm"]
STATE_DTYPES: tuple[str, ...] = ("float32", "bfloat16", "float16")


@dataclass(frozen=True)
class Deployment:
    """How the model is served. None means "the engine's default"."""

    tp: int = 1
    batch: int = 8  # the largest decode batch
    slots: int | None = None  # rows of the state pool, slot 0 included
    state_dtype: str | None = None
    engine: EngineName = "sglang"
    gpu_memory: int | None = None  # bytes per rank available to the linear-attention state pools
    # sglang `--mamba-scheduler-strategy` (no_buffer, extra_buffer) and speculative draft tokens per verify step
    # (0: no speculative decoding); see `models/pools.py`.
    mamba_strategy: str = "no_buffer"
    speculative_tokens: int = 0

    def __post_init__(self) -> None:
        if self.engine not in ("sglang", "vllm"):
            raise ValueError(f"unknown engine {self.engine!r}; expected sglang or vllm")
        if self.tp < 1 or self.batch < 0:
            raise ValueError(f"tp must be >= 1 and batch >= 0 (got tp={self.tp}, batch={self.batch})")
        if self.mamba_strategy not in ("no_buffer", "extra_buffer"):
            raise ValueError(f"unknown mamba strategy {self.mamba_strategy!r}; expected no_buffer or extra_buffer")
        if self.speculative_tokens < 0:
            raise ValueError(f"speculative tokens must be >= 0 (got {self.speculative_tokens})")
        if self.slots is not None and self.slots < 1:
            raise ValueError(f"slots must be >= 1 (got {self.slots})")
        if self.state_dtype is not None:
            dtype = canonical_dtype(self.state_dtype)
            if dtype not in STATE_DTYPES:
                raise ValueError(f"state dtype must be one of {', '.join(STATE_DTYPES)} (got {self.state_dtype!r})")
            object.__setattr__(self, "state_dtype", dtype)

    @property
    def num_slots(self) -> int:
        # Both engines keep row 0 out of use (sglang: the dummy slot padding rows write; vLLM: the null
        # block), so B live requests need B+1 rows.
        return self.slots if self.slots is not None else self.batch + 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class EngineSettings:
    """The dtypes and sizes the engine uses for this model, with the reason for each choice."""

    deployment: Deployment
    num_slots: int
    state_dtype: str
    state_dtype_reason: str
    conv_dtype: str
    conv_dtype_reason: str
    activation_dtype: str
    A_log_dtype: str
    dt_bias_dtype: str
    notes: tuple[str, ...] = ()

    @property
    def state_itemsize(self) -> int:
        return DTYPE_ITEMSIZE[self.state_dtype]

    @property
    def conv_itemsize(self) -> int:
        return DTYPE_ITEMSIZE[self.conv_dtype]


def _config_ssm_dtype(model: LinearAttentionModel) -> str | None:
    raw = model.dtypes.mamba_ssm_dtype
    return canonical_dtype(raw) if raw is not None else None


def _state_dtype(model: LinearAttentionModel, deployment: Deployment) -> tuple[str, str, list[str]]:
    notes: list[str] = []
    configured = _config_ssm_dtype(model)
    if deployment.engine == "vllm" and model.kind == "kda":
        if deployment.state_dtype not in (None, "float32"):
            notes.append(f"vLLM keeps the KDA recurrent state in float32; the requested "
                         f"{deployment.state_dtype} is not used")
        return "float32", "vLLM keeps the KDA recurrent state in float32", notes
    if deployment.state_dtype is not None:
        return deployment.state_dtype, "set by the deployment", notes
    if deployment.engine == "sglang":
        if model.kind == "kda":
            return "float32", "sglang's KDA default (the config is not consulted)", notes
        if configured in STATE_DTYPES:
            return configured, f"`mamba_ssm_dtype` = {model.dtypes.mamba_ssm_dtype!r} in the config", notes  # type: ignore[return-value]
        if configured is not None:
            notes.append(f"sglang ignores `mamba_ssm_dtype` = {model.dtypes.mamba_ssm_dtype!r} (not one of "
                         f"{', '.join(STATE_DTYPES)}) and keeps float32")
        return "float32", "sglang's default", notes
    # vLLM GDN: Qwen3.5/3.6 take the config's `mamba_ssm_dtype`; otherwise the SSM cache follows the model dtype.
    if configured in STATE_DTYPES and model.family in ("qwen3.5", "qwen3.5-moe"):
        return configured, f"`mamba_ssm_dtype` = {model.dtypes.mamba_ssm_dtype!r} in the config", notes  # type: ignore[return-value]
    return model.dtypes.activation, "vLLM's default: the model dtype (no `mamba_ssm_dtype` hook)", notes


def resolve(model: LinearAttentionModel, deployment: Deployment) -> EngineSettings:
    """The engine's choices for `model` under `deployment`."""
    state, reason, notes = _state_dtype(model, deployment)
    if deployment.engine == "sglang":
        conv, conv_reason = "bfloat16", "sglang's default conv state dtype"
    else:
        conv, conv_reason = model.dtypes.activation, "vLLM's default: the model dtype"
    # The engines hold A_log as an fp32 parameter whatever the checkpoint stores; dt_bias keeps the
    # parameter dtype: the model dtype for GDN, fp32 for KDA.
    dt_bias = "float32" if model.kind == "kda" else model.dtypes.activation
    return EngineSettings(
        deployment=deployment, num_slots=deployment.num_slots,
        state_dtype=state, state_dtype_reason=reason, conv_dtype=conv, conv_dtype_reason=conv_reason,
        activation_dtype=model.dtypes.activation, A_log_dtype="float32", dt_bias_dtype=dt_bias,
        notes=tuple(notes),
    )
