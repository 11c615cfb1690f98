"""A deployment (engine, TP, batch, pool size, dtypes) and what each engine picks when the user leaves it open.

`resolve()` applies the defaults of the deployment's engine profile (`gdr_check.engines.profiles`,
docs/engines.md): slot count, SSM state dtype, conv state dtype and parameter dtypes, each with the
reason it was chosen.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ..base.limits import checked
from ..base.records import dataclass
from ..base.tensor_spec import DTYPE_ITEMSIZE, canonical_dtype
from ..base.variants import variant_spec
from ..engines.profiles import (
    ENGINE_REASONS,
    MODEL_DTYPE,
    EngineProfile,
    profile_for,
    state_dtype_problem,
    substitution_note,
)
from ..models.description import LinearAttentionModel, Source, shown_value
from .state_pool import PoolStrategy, resolve_strategy

# An engine as the user selects it: "sglang", "vllm" or "vllm@0.28" (see `gdr_check.engines.profiles`).
EngineName = str


# sglang's `--mamba-radix-cache-strategy` values; `auto` is what sglang resolves (`state_pool.resolve_strategy`).
MAMBA_STRATEGIES = ("auto", "no_buffer", "extra_buffer", "extra_buffer_lazy")


# GPUs by name, each with its compute capability x10 (`--gpu`): what decides a decode path that depends on the GPU.
GPU_SM: dict[str, int] = {
    "a100": 80, "a10": 86, "a10g": 86, "l4": 89, "l40": 89, "l40s": 89,
    "h100": 90, "h200": 90, "h20": 90, "h800": 90, "gh200": 90,
    "b200": 100, "gb200": 100, "b300": 103, "gb300": 103, "rtx-pro-6000": 120, "rtx5090": 120,
}


def sm_problem(value: object) -> str | None:
    """Why `value` is no compute capability x10 (`--sm`: 90 for 9.0, 100 for 10.0), or None when it is one."""
    if isinstance(value, bool) or not isinstance(value, int) or not 30 <= value <= 199:
        return f"expected a compute capability times ten, such as 90 (H100) or 100 (B200), got {value!r}"
    return None


def gpu_sm(name: str) -> int | None:
    """The compute capability x10 of the GPU `name` (case-insensitive, e.g. "H100", "b200"), or None."""
    return GPU_SM.get(name.strip().lower())


def mamba_strategy_problem(value: object) -> str | None:
    """Why `value` is no sglang mamba radix cache strategy, or None when it is one."""
    if value in MAMBA_STRATEGIES:
        return None
    return f"unknown mamba strategy {value!r}; expected one of: {', '.join(MAMBA_STRATEGIES)}"


@dataclass(frozen=True)
class Deployment:
    """How the model is served. None means "the engine's default"."""

    tp: int = 1
    batch: int = 8  # the largest decode batch
    slots: int | None = None  # rows of the state pool, slot 0 included
    state_dtype: str | None = None
    engine: EngineName = "sglang"  # a name or name@version; `profile` is what it selects
    gpu_memory: int | None = None  # bytes per rank available to the linear-attention state pools
    # sglang `--mamba-radix-cache-strategy` (auto: sglang's own choice for the model, `state_pool.resolve_strategy`)
    # and speculative draft tokens per verify step (0: no speculative decoding); see `call/pools.py`.
    mamba_strategy: str = "auto"
    speculative_tokens: int = 0
    # The GPU's compute capability x10 (90: H100/H200, 100: B200), where the engine's decode path depends on it
    # (`EngineProfile.gpu_decode_rule`); None: not given, the path every GPU takes.
    sm: int | None = None
    engine_reason: str = "default"  # why `engine` was chosen: one of ENGINE_REASONS (flag, config, installed, default)
    # sglang's overlap schedule (`--disable-overlap-schedule` turns it off) and radix cache (`--disable-radix-cache`):
    # with the strategy, they decide the slots counted per running request (`state_pool.counted_slots`).
    overlap_schedule: bool = True
    radix_cache: bool = True

    def __post_init__(self) -> None:
        profile_for(self.engine)  # UnknownEngineError (a ValueError) names the choices
        # LimitError (an InputError and a ValueError): the ranges of docs/limits.md, before anything is sized.
        for name in ("tp", "batch", "speculative_tokens"):
            checked(name, getattr(self, name))
        if self.slots is not None:
            checked("slots", self.slots)
        if self.gpu_memory is not None:
            checked("gpu_memory", self.gpu_memory)
        if self.tp < 1 or self.batch < 0:
            raise ValueError(f"tp must be >= 1 and batch >= 0 (got tp={self.tp}, batch={self.batch})")
        problem = mamba_strategy_problem(self.mamba_strategy)
        if problem is not None:
            raise ValueError(problem)
        problem = sm_problem(self.sm) if self.sm is not None else None
        if problem is not None:
            raise ValueError(problem)
        if self.engine_reason not in ENGINE_REASONS:
            raise ValueError(f"engine_reason must be one of {', '.join(ENGINE_REASONS)} (got {self.engine_reason!r})")
        if self.speculative_tokens < 0:
            raise ValueError(f"speculative tokens must be >= 0 (got {self.speculative_tokens})")
        if self.slots is not None and self.slots < 1:
            raise ValueError(f"slots must be >= 1 (got {self.slots})")
        if self.state_dtype is not None:
            problem = state_dtype_problem(self.state_dtype)
            if problem is not None:
                raise ValueError(problem)
            object.__setattr__(self, "state_dtype", canonical_dtype(self.state_dtype))

    @property
    def profile(self) -> EngineProfile:
        return profile_for(self.engine)

    @property
    def profile_note(self) -> str | None:
        """What a version with no profile of its own was checked as (`vllm@0.31` -> vLLM 0.30), or that a release
        is newer than the newest verified one; for an engine found installed, which; None otherwise."""
        note = substitution_note(self.engine)
        if self.engine_reason != "installed":
            return note
        found = (f"engine profile {self.profile.spec}: {self.engine} is installed in this Python environment "
                 "(read from its package metadata); `--engine` checks for another")
        return found if note is None else f"{found}; {note}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class SsmDtypeProblem:
    """A config `mamba_ssm_dtype` the engine reads for this model but does not take (GDR108): the value as written,
    where it is, what the engine does with it, and whether that stops the engine (an error) or not (a warning)."""

    value: Any
    source: Source | None
    problem: str
    fatal: bool


@dataclass(frozen=True)
class EngineSettings:
    """The dtypes and sizes the engine uses for this model, with the reason for each choice."""

    deployment: Deployment
    num_slots: int  # rows of the state pool: the deployment's, else the fewest from which the engine serves the batch
    state_dtype: str
    state_dtype_reason: str
    conv_dtype: str
    conv_dtype_reason: str
    activation_dtype: str
    A_log_dtype: str
    dt_bias_dtype: str
    notes: tuple[str, ...] = ()
    # The config's `mamba_ssm_dtype` when the engine reads it and does not take it (GDR108).
    ssm_dtype_problem: SsmDtypeProblem | None = None
    # The pool strategy the engine runs the model with (sglang's `auto` resolved) and the slots it counts.
    pool: PoolStrategy | None = None
    # The error the engine stops with at start-up on the KDA state dtype the deployment requests (GDR138).
    kda_state_refusal: str | None = None

    @property
    def slots_per_request(self) -> int:
        """State slots counted per running request: sglang's ratio (radix cache, ping-pong slots), else 1."""
        return self.pool.counted_slots if self.pool is not None else 1

    @property
    def state_itemsize(self) -> int:
        return DTYPE_ITEMSIZE[self.state_dtype]

    @property
    def conv_itemsize(self) -> int:
        return DTYPE_ITEMSIZE[self.conv_dtype]


def _reads_config_ssm_dtype(model: LinearAttentionModel, profile: EngineProfile) -> bool:
    """Whether the engine reads the config's `mamba_ssm_dtype` for this GDN model (its hook's families)."""
    families = profile.config_ssm_dtype_families
    return families is None or model.family in families


def _ssm_dtype_problem(model: LinearAttentionModel, deployment: Deployment) -> SsmDtypeProblem | None:
    """The config's `mamba_ssm_dtype` when the engine reads it for this model and does not take it."""
    raw, profile = model.dtypes.mamba_ssm_dtype, deployment.profile
    own = profile.decode_of(model.kind).own_state_dtype  # a variant state no config key changes
    if raw is None or own is not None or not _reads_config_ssm_dtype(model, profile):
        return None
    if isinstance(raw, str) and raw in dict(profile.config_ssm_dtype_names):
        return None
    failure = profile.config_ssm_dtype_failure
    if deployment.state_dtype is not None and failure is not None:
        return None  # the hook reads the config only when the state dtype flag is left at "auto"
    engine = profile.display_name
    taken = ", ".join(name for name, _ in profile.config_ssm_dtype_names)
    if deployment.state_dtype is not None:
        what = f"{engine} logs a warning and ignores it (the deployment sets {deployment.state_dtype})"
    elif failure is None:
        what = f"{engine} logs a warning and keeps its default, {profile.default_state_dtype}"
    else:
        what = failure
    return SsmDtypeProblem(raw, model.dtypes.mamba_ssm_dtype_source, f"not a state dtype {engine} takes ({taken}); "
                           f"{what}", fatal=failure is not None)


def _default_state_dtype(model: LinearAttentionModel, profile: EngineProfile) -> str:
    return model.dtypes.activation if profile.default_state_dtype == MODEL_DTYPE else profile.default_state_dtype


def _state_dtype(model: LinearAttentionModel, deployment: Deployment) -> tuple[str, str, list[str]]:
    notes: list[str] = []
    profile = deployment.profile
    engine = profile.display_name
    decode, label = profile.decode_of(model.kind), variant_spec(model.kind).label
    own = decode.own_state_dtype
    if own is not None and decode.state_dtype_fixed:
        if deployment.state_dtype not in (None, own):
            notes.append(f"{engine} keeps the {label} recurrent state in {own}; the requested "
                         f"{deployment.state_dtype} is not used")
        return own, f"{engine} keeps the {label} recurrent state in {own}", notes
    if deployment.state_dtype is not None:
        return deployment.state_dtype, "set by the deployment", notes
    if own is not None:
        return own, f"{engine}'s {label} default; the config is not consulted", notes
    hook = _reads_config_ssm_dtype(model, profile)
    raw = model.dtypes.mamba_ssm_dtype
    configured = dict(profile.config_ssm_dtype_names).get(raw) if hook and isinstance(raw, str) else None
    if configured is not None:
        dtype = model.dtypes.activation if configured == MODEL_DTYPE else configured
        return dtype, f"`mamba_ssm_dtype` = {shown_value(raw)} in the config", notes
    default = _default_state_dtype(model, profile)
    if hook and raw is not None:  # a value the engine does not take (GDR108)
        if profile.config_ssm_dtype_failure is None:
            return default, f"{engine}'s default: it ignores `mamba_ssm_dtype` = {shown_value(raw)}", notes
        what = "the model dtype" if profile.default_state_dtype == MODEL_DTYPE else "its default"
        return default, (f"assumed: {engine}'s default, {what}, since {engine} fails at start-up on "
                         f"`mamba_ssm_dtype` = {shown_value(raw)}"), notes
    if profile.default_state_dtype == MODEL_DTYPE:
        why = "no `mamba_ssm_dtype` in the config" if hook else "no `mamba_ssm_dtype` hook"
        return default, f"{engine}'s default: the model dtype ({why})", notes
    return default, f"{engine}'s default", notes


def resolve(model: LinearAttentionModel, deployment: Deployment) -> EngineSettings:
    """The engine's choices for `model` under `deployment`."""
    state, reason, notes = _state_dtype(model, deployment)
    profile = deployment.profile
    if profile.conv_dtype == MODEL_DTYPE:
        conv, conv_reason = model.dtypes.activation, f"{profile.display_name}'s default: the model dtype"
    else:
        conv, conv_reason = profile.conv_dtype, f"{profile.display_name}'s default conv state dtype"
    # The engines hold A_log as an fp32 parameter whatever the checkpoint stores; dt_bias is the variant's
    # (`VariantSpec.dt_bias_dtype`: fp32 for KDA), else the model dtype.
    dt_bias = variant_spec(model.kind).dt_bias_dtype or model.dtypes.activation
    pool = resolve_strategy(profile, model.architecture, deployment.mamba_strategy,
                            overlap=deployment.overlap_schedule, radix_cache=deployment.radix_cache)
    # The fewest rows (K + 1, row 0 reserved) whose K // (slots counted per request) holds the batch.
    rows = deployment.slots if deployment.slots is not None else deployment.batch * pool.counted_slots + 1
    return EngineSettings(
        deployment=deployment, num_slots=rows, pool=pool,
        state_dtype=state, state_dtype_reason=reason, conv_dtype=conv, conv_dtype_reason=conv_reason,
        activation_dtype=model.dtypes.activation, A_log_dtype="float32", dt_bias_dtype=dt_bias,
        notes=tuple(notes), ssm_dtype_problem=_ssm_dtype_problem(model, deployment),
        kda_state_refusal=_kda_state_refusal(model, deployment),
    )


def _kda_state_refusal(model: LinearAttentionModel, deployment: Deployment) -> str | None:
    """The engine's start-up error for a state dtype of the variant (KDA's) the deployment requests and the release
    refuses."""
    decode, wanted = deployment.profile.decode_of(model.kind), deployment.state_dtype
    if wanted is None or decode.state_dtype_fixed or decode.state_dtypes is None:
        return None
    if wanted in decode.state_dtypes or decode.state_dtype_refusal is None:
        return None
    return decode.state_dtype_refusal.format(dtype=wanted)
