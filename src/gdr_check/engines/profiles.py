"""Engine profiles: every fact about sglang and vLLM that the checks, kernels and fixes depend on, as data.

One frozen `EngineProfile` per engine and version. Code elsewhere reads a profile's fields instead of testing
the engine's name, so supporting the next engine version means adding one profile here. This module imports
only the standard library: every stage (sources, models, checks, kernels, runner, CLI) may use it.

Selection: `profile_for("vllm")` is the newest vLLM profile, `profile_for("vllm@0.28")` a given version
(`"vllm@0.28.1"` selects the 0.28 profile: the newest profile at or below the version, see `profile_for`).
Unknown names or versions raise `UnknownEngineError`, whose message lists the choices.

Sources of the facts (read in the engines' own code):
- sglang 0.5.23 (the wheel): `srt/arg_groups/fields/exec_.py` and `schedule.py` (the flags),
  `srt/configs/mamba_utils.py` (state dtypes), `srt/mem_cache/allocator/mamba.py` (slot 0 reserved),
  the packed decode wrappers (skip `idx < 0`, beta rounded to `b.dtype`, grid (NV, B*HV)).
- vLLM: `vllm/config/cache.py` (`mamba_cache_dtype`, `mamba_ssm_cache_dtype`, `mamba_cache_mode`), the packed
  GDN decode (skip `idx <= 0`: block 0 is `NULL_BLOCK_ID`; the grid is split when B*HV > 65535 since PR
  #52030); PR #53877 (merged 2026-08-30, first released in 0.29.0) keeps beta in fp32, earlier releases round
  sigmoid(b) to `b.dtype` like sglang.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, replace

from ..base.tensor_spec import canonical_dtype

# The CUDA limit on gridDim.y and gridDim.z.
GRID_DIM_LIMIT = 65535
# The CUDA limit on gridDim.x (compute capability 3.0 and later).
GRID_X_LIMIT = 2**31 - 1

# The SSM state dtypes both engines' flags accept (sglang `--mamba-ssm-dtype`, vLLM `--mamba-ssm-cache-dtype`).
STATE_DTYPES: tuple[str, ...] = ("float32", "bfloat16", "float16")


def state_dtype_problem(value: str) -> str | None:
    """Why `value` names no state dtype, in the words every place that takes one uses (the option,
    pyproject.toml, a `Deployment`); None when it does."""
    if canonical_dtype(value) in STATE_DTYPES:
        return None
    return f"unknown state dtype {value!r}; expected one of: {', '.join(STATE_DTYPES)}"

# `default_state_dtype` / `conv_dtype` value meaning "the model's activation dtype".
MODEL_DTYPE = "model"
# `gdn_beta_rounding` value meaning "sigmoid(b) is rounded to the dtype of `b`, then widened to fp32".
B_DTYPE = "b.dtype"


@dataclass(frozen=True, slots=True)
class KdaFastPath:
    """When an engine's KDA wrapper swaps the Triton kernel for a CUDA kernel (sglang 0.5.23,
    `kda_packed_decode`): every condition must hold."""

    min_batch: int = 8
    head_dims: tuple[int, int] = (128, 128)  # (K, V)
    activation_dtype: str = "bfloat16"  # mixed_qkv, a, b and out
    param_dtype: str = "float32"  # A_log and dt_bias
    state_dtype: str = "float32"
    index_dtype: str = "int32"
    requires_l2norm: bool = True  # only the `use_qk_l2norm_in_kernel=True` path has the switch
    requires_contiguous_indices: bool = True
    requires_dense_state: bool = True  # inner [HV, V, K] strides (V*K, K, 1)
    # Its launch: a 1-D grid of B*HV blocks, the count computed in uint32 (`LaunchKernel(B * HV, ...)` in
    # kda_packed_decode.cuh), so gridDim.x's limit holds, not Triton's (NV, B, HV) limits on B and HV.
    grid_blocks_bits: int = 32


@dataclass(frozen=True, slots=True)
class EngineProfile:
    """What one engine version does with the packed decode call and its state pools."""

    name: str  # "sglang" or "vllm": what `--engine` takes before any `@version`
    version: str  # the release the facts were read in
    display_name: str  # "sglang", "vLLM": the engine in prose

    # --- slot indices -------------------------------------------------------------------------------------
    # Rows whose index is <= this are skipped: -1 means `idx < 0` (sglang), 0 means `idx <= 0` (vLLM).
    skip_at_or_below: int
    # sglang keeps slot 0 as a dummy that CUDA-graph padding rows write, so a live request must never get it
    # and repeated 0s are only legal in trailing padding rows; vLLM's block 0 is a null block it never touches.
    reserved_slot_zero: bool
    slot_zero_note: str  # how the report describes row 0 of the pool

    # --- numerics -----------------------------------------------------------------------------------------
    gdn_beta_rounding: str | None  # B_DTYPE: sigmoid(b) rounded to b's dtype (GDN only); None: fp32 throughout
    grid_dim_limit: int | None  # the GDN launch's (NV, B*HV) limit on B*HV; None: the engine splits the grid

    # --- state defaults (models.md 7) ---------------------------------------------------------------------
    default_state_dtype: str  # GDN SSM state when nothing sets it: a dtype or MODEL_DTYPE
    config_ssm_dtype_families: tuple[str, ...] | None  # GDN families whose config `mamba_ssm_dtype` is read;
    #                                                    None: every GDN family
    # The config `mamba_ssm_dtype` strings the engine takes, exactly as written, each with the state dtype it gives
    # (a dtype or MODEL_DTYPE); and what the engine does with any other value when no flag sets the state dtype:
    # None when it logs a warning and keeps `default_state_dtype`, else how it fails (then it is an error).
    config_ssm_dtype_names: tuple[tuple[str, str], ...]
    config_ssm_dtype_failure: str | None
    kda_state_dtype: str  # KDA recurrent state default
    kda_state_dtype_fixed: bool  # True: the engine ignores a requested KDA state dtype
    conv_dtype: str  # conv state default: a dtype or MODEL_DTYPE
    gdn_conv_channel_first: bool  # GDN conv state per slot is (conv_dim/tp, W-1) rather than (W-1, conv_dim/tp)
    # The conv state's window grows by the speculative draft tokens: W-1+num_spec rows (vLLM's
    # `gated_delta_net_state_shape` / `kda_state_shape`); False: W-1, with the draft tokens' windows kept apart.
    conv_window_holds_drafts: bool
    stacked_state_pool: bool  # one [layers, slots, ...] tensor per kind (sglang) vs one tensor per layer (vLLM)

    # --- flags and environment users set ------------------------------------------------------------------
    state_dtype_flag: str  # the SSM state dtype
    conv_dtype_flag: str | None
    cache_size_flag: str | None  # the number of state slots
    memory_ratio_flag: str | None  # the state pools' share of memory
    scheduler_strategy_flag: str | None  # how states are cached across requests
    state_dtype_env: str | None  # environment variable that overrides the SSM state dtype
    packed_decode_opt_in_env: str | None  # set when the engine runs the GDN packed decode only on request
    kda_other_api: str | None  # why the engine's KDA packed op cannot be compared with the contract's; None: same API
    import_name: str | None  # the module a dry-run imports to run the engine's kernel; None: read from its files

    # --- engine behaviour outside the kernel ---------------------------------------------------------------
    kda_fast_path: KdaFastPath | None  # None: the KDA wrapper always runs Triton
    checks_attention_heads_first: bool  # TP validation stops at the attention heads before the GDN widths
    # What the engine does with a TP that does not divide the attention heads, for (GDN, KDA) models; templates
    # with {heads} and {tp}.
    attention_heads_errors: tuple[str, str]
    layer_kinds_follow_interval: bool | None  # the interval rule (`full_attention_interval`) decides which
    #                                           layers are linear; None: not verified

    # --- which decode kernel a layer reaches (docs/model-families.md) ----------------------------------------
    kda_decode_kernel: str | None  # None: KDA layers decode with the packed KDA kernel; else the kernel called
    # A KDA layer with a safe-gate lower bound: None when the packed kernel takes it as is; else the setting that
    # selects a decode kernel with safe-gate support (without it the engine takes its fused/unfused chain).
    safe_gate_packed_switch: str | None
    own_decode_verified: bool  # layers that call their own decode kernel (Jet-Nemotron) were read in this engine
    models_pool_strategies: bool  # gdr-check models this engine's pool strategies and speculative buffers

    @property
    def spec(self) -> str:
        """`name@version`: what `--engine` takes to select exactly this profile."""
        return f"{self.name}@{self.version}"

    @property
    def label(self) -> str:
        """The engine and version in prose, e.g. "vLLM 0.29"."""
        return f"{self.display_name} {self.version}"

    def state_dtype_fix(self, dtype: str = "float32") -> str:
        """The command-line setting that puts the SSM state in `dtype`, e.g. `--mamba-ssm-dtype float32`."""
        return f"{self.state_dtype_flag} {dtype}"

    def row_is_live(self, slot: int) -> bool:
        return slot > self.skip_at_or_below


SGLANG_0_5_23 = EngineProfile(
    name="sglang", version="0.5.23", display_name="sglang",
    skip_at_or_below=-1, reserved_slot_zero=True, slot_zero_note="slot 0 reserved",
    gdn_beta_rounding=B_DTYPE, grid_dim_limit=GRID_DIM_LIMIT,
    default_state_dtype="float32", config_ssm_dtype_families=None,
    # `mamba2_state_dtype` (srt/configs/mamba_utils.py): a dict lookup of the exact string; any other value logs
    # "Invalid mamba_ssm_dtype ... Using default 'float32'" and keeps float32.
    config_ssm_dtype_names=(("float32", "float32"), ("bfloat16", "bfloat16"), ("float16", "float16")),
    config_ssm_dtype_failure=None,
    kda_state_dtype="float32", kda_state_dtype_fixed=False,
    conv_dtype="bfloat16", gdn_conv_channel_first=True, conv_window_holds_drafts=False, stacked_state_pool=True,
    state_dtype_flag="--mamba-ssm-dtype", conv_dtype_flag=None,
    cache_size_flag="--max-mamba-cache-size", memory_ratio_flag="--mamba-full-memory-ratio",
    scheduler_strategy_flag="--mamba-radix-cache-strategy", state_dtype_env="SGLANG_MAMBA_SSM_DTYPE",
    packed_decode_opt_in_env=None, kda_other_api=None, import_name=None,
    kda_fast_path=KdaFastPath(),
    checks_attention_heads_first=False,
    attention_heads_errors=(
        "sglang fails in `divide()` unless DP attention makes the attention TP size a divisor of {heads}",
        "sglang 0.5.23 raises `AssertionError: num_attention_heads must be divisible by world_size`"),
    layer_kinds_follow_interval=True,
    kda_decode_kernel=None, safe_gate_packed_switch="--linear-attn-decode-backend helion",
    own_decode_verified=True, models_pool_strategies=True,
)

_VLLM_ATTENTION_HEADS_ERROR = ("vLLM raises `ValueError: Total number of attention heads ({heads}) must be divisible "
                               "by tensor parallel size ({tp}).`")
# PR #53877 onwards: beta stays in fp32.
VLLM_0_29 = EngineProfile(
    name="vllm", version="0.29", display_name="vLLM",
    skip_at_or_below=0, reserved_slot_zero=False, slot_zero_note="block 0 null",
    gdn_beta_rounding=None, grid_dim_limit=None,
    default_state_dtype=MODEL_DTYPE, config_ssm_dtype_families=("qwen3.5", "qwen3.5-moe"),
    # The Qwen3.5 hook (`verify_and_update_config`, models/config.py) copies the config value into
    # `mamba_ssm_cache_dtype` when that is "auto"; `MambaStateDtypeCalculator._mamba_state_dtype`
    # (layers/mamba/mamba_utils.py, 02d71083) keeps "auto" (the conv dtype, the model dtype by default) and
    # looks any other name up in `STR_DTYPE_TO_TORCH_DTYPE` (utils/torch_utils.py), whose float entries these
    # are: a name it lacks ("float64", "garbage", 32) raises there. (Its quantized cache names, "fp8", "int8", ...,
    # would give an integer state instead; not verified, they are reported the same way.)
    config_ssm_dtype_names=(("float32", "float32"), ("bfloat16", "bfloat16"), ("float16", "float16"),
                            ("half", "float16"), ("float", "float32"), ("auto", MODEL_DTYPE)),
    config_ssm_dtype_failure=("its Qwen3.5 hook makes it `mamba_ssm_cache_dtype`, which vLLM's dtype table has no "
                              "entry for, so vLLM fails at start-up"),
    kda_state_dtype="float32", kda_state_dtype_fixed=True,
    conv_dtype=MODEL_DTYPE, gdn_conv_channel_first=False, conv_window_holds_drafts=True, stacked_state_pool=False,
    state_dtype_flag="--mamba-ssm-cache-dtype", conv_dtype_flag="--mamba-cache-dtype",
    cache_size_flag=None, memory_ratio_flag=None, scheduler_strategy_flag="--mamba-cache-mode",
    state_dtype_env=None, packed_decode_opt_in_env="VLLM_ENABLE_FLA_PACKED_RECURRENT_DECODE",
    kda_other_api=("vLLM's KDA packed op has another API (raw_g, raw_beta, state_indices; `out` [1, B, H, V]); "
                   "only its GDN packed decode can be compared"),
    import_name="vllm",
    kda_fast_path=None,
    checks_attention_heads_first=True,
    attention_heads_errors=(_VLLM_ATTENTION_HEADS_ERROR, _VLLM_ATTENTION_HEADS_ERROR),
    layer_kinds_follow_interval=None,
    kda_decode_kernel="fused_recurrent_kda", safe_gate_packed_switch=None,
    own_decode_verified=False, models_pool_strategies=False,
)
# The last release before PR #53877: the packed GDN decode rounds sigmoid(b) to b's dtype.
VLLM_0_28 = replace(VLLM_0_29, version="0.28", gdn_beta_rounding=B_DTYPE)

# Every profile, oldest first within an engine; the last of each name is that name's default.
PROFILES: tuple[EngineProfile, ...] = (SGLANG_0_5_23, VLLM_0_28, VLLM_0_29)

ENGINE_NAMES: tuple[str, ...] = tuple(dict.fromkeys(p.name for p in PROFILES))
DEFAULT_ENGINE = "sglang"


def _newest_by_name() -> dict[str, EngineProfile]:
    newest: dict[str, EngineProfile] = {}
    for profile in PROFILES:
        newest[profile.name] = profile
    return newest


# Every accepted spelling → its profile: "vllm", "vllm@0.29", and the profile objects themselves are looked
# up here first, so the per-call guard pays one dict lookup.
_BY_SPEC: dict[str, EngineProfile] = {**_newest_by_name(), **{p.spec: p for p in PROFILES}}


def engine_choices() -> tuple[str, ...]:
    """Every `--engine` value that selects a profile, names first: ("sglang", "vllm", "sglang@0.5.23", ...)."""
    return (*ENGINE_NAMES, *(p.spec for p in PROFILES))


class UnknownEngineError(ValueError):
    """`--engine` (or the `engine` argument) names no profile. `code` tells which part is unknown."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code  # "unknown-engine" or "unknown-engine-version"


# A release as engines publish it: an optional `v`, numbers, then a pre-release (a, b, rc, dev: before the release),
# a post-release or a local label (after it, or the release itself).
_VERSION = re.compile(r"v?(\d+(?:\.\d+)*)((?:[.-]?(?:a|b|rc|dev|post)\d*)*)(?:\+[0-9a-z.]+)?", re.IGNORECASE)


def _version_key(version: str) -> tuple[tuple[int, ...], int] | None:
    """A release's place in order ("0.29.0" == "0.29"; "0.30.0rc1" before "0.30"; "0.5.23.post1" after "0.5.23");
    None for text that is no version."""
    found = _VERSION.fullmatch(version)
    if found is None:
        return None
    numbers = [int(part) for part in found.group(1).split(".")]
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()
    pre = re.search(r"a|b|rc|dev", found.group(2), re.IGNORECASE)  # (a local label, `+...`, is not read)
    return tuple(numbers), -1 if pre else 0


def profile_for(engine: str | EngineProfile) -> EngineProfile:
    """The profile `engine` selects: a name ("vllm": its newest profile), `name@version`, or a profile.

    A version selects the newest profile at or below it: "vllm@0.29.1" and "vllm@0.30" → the 0.29 profile
    (an engine's behaviour carries forward until a newer profile records a change). A version older than every
    profile of the name is an error, as is an unknown name.
    """
    if isinstance(engine, EngineProfile):
        return engine
    if not isinstance(engine, str):
        raise UnknownEngineError("unknown-engine", f"engine must be a string such as 'vllm' (got {engine!r})")
    found = _BY_SPEC.get(engine)
    return found if found is not None else _parse(engine)


def substitution_note(engine: str | EngineProfile) -> str | None:
    """For `name@version` that selects an older profile (`vllm@0.30` -> the 0.29 profile), a note saying so;
    None for a name, a profile, or a profile's own version."""
    profile = profile_for(engine)
    if not isinstance(engine, str) or "@" not in engine:
        return None
    version = engine.partition("@")[2]
    if _version_key(version) == _version_key(profile.version):
        return None  # the profile's own version, however written ("0.29.0")
    return (f"{profile.display_name} {version} has no profile of its own: checked as {profile.label}, the newest "
            "profile at or below it (behaviour carries forward until a profile records a change)")


@functools.lru_cache(maxsize=64)
def _parse(engine: str) -> EngineProfile:
    name, at, version = engine.partition("@")
    named = [p for p in PROFILES if p.name == name]
    if not named:
        raise UnknownEngineError(
            "unknown-engine", f"unknown engine {engine!r}; expected one of: {', '.join(engine_choices())}")
    if not at:
        return named[-1]
    wanted = _version_key(version)
    if wanted is not None:
        keyed = [(_version_key(p.version), p) for p in named]
        at_or_below = [(key, p) for key, p in keyed if key is not None and key <= wanted]
        if at_or_below:
            return max(at_or_below, key=lambda item: item[0])[1]
    versions = ", ".join(p.version for p in named)
    raise UnknownEngineError(
        "unknown-engine-version",
        f"no {named[0].display_name} profile for version {version!r} (engine {engine!r}); known versions: "
        f"{versions}, or a later release")
