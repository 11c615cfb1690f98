"""Engine profiles: every fact about sglang and vLLM that the checks, kernels and fixes depend on, as data.

One frozen `EngineProfile` per engine and contract epoch: the first release where a fact gdr-check models changed.
Code elsewhere reads a profile's fields instead of testing the engine's name, so supporting the next engine
release means adding one profile here. This module imports only the standard library: every stage (sources,
models, checks, kernels, runner, CLI) may use it.

Selection: `profile_for("vllm")` is the newest vLLM profile, `profile_for("vllm@0.27.1")` the profile of the
epoch the release belongs to (the newest profile at or below the version, see `profile_for`). Unknown names,
versions before the first packed decode kernel, or malformed versions raise `UnknownEngineError`, whose message
lists the choices; a release newer than the newest verified one is accepted (`substitution_note` says so).

Sources of the facts: each profile's release's own wheel, read by `scripts/verify_engine_profiles.py`
(the packed decode wrappers and kernels, the layers' decode call, the environment defaults, the argument
definitions). The verifier fails on any disagreement; the facts it read are kept in tests/data/engine_facts/
and the tests compare every profile with them. docs/engines.md names the files and lines per release.
"""

from __future__ import annotations

import functools
import importlib.metadata
import re
from dataclasses import replace

from ..base.records import dataclass
from ..base.tensor_spec import canonical_dtype

# The CUDA limit on gridDim.y and gridDim.z.
GRID_DIM_LIMIT = 65535
# The CUDA limit on gridDim.x (compute capability 3.0 and later).
GRID_X_LIMIT = 2**31 - 1

# The SSM state dtypes gdr-check models (its `--state-dtype`). Which of them an engine release's own flag accepts
# is that profile's flag data (`EngineProfile.state_dtype_fix` is None for a dtype the flag lacks).
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

# The launch grids of the packed decode wrappers, axis by axis as the wrapper writes them (gridDim.x first).
GRID_NV_BHV = ("NV", "B*HV")  # B*HV on gridDim.y: B*HV <= 65535
GRID_NV_HV_B = ("NV", "HV", "B")  # HV on gridDim.y, B on gridDim.z: each <= 65535
GRID_NV_B_HV = ("NV", "B", "HV")  # B on gridDim.y, HV on gridDim.z: each <= 65535
GRID_NV_BH = ("NV", "B*H")  # vLLM's own KDA op (no GQA: H value heads): B*H <= 65535

# `safe_gate_route` values: what the KDA layer does with a layer that has a safe-gate lower bound.
SAFE_GATE_PACKED = "packed"  # the packed kernel takes it (with `lower_bound` where the kernel has it)
SAFE_GATE_UNFUSED = "unfused"  # never the packed kernel: the unfused conv + recurrent chain
SAFE_GATE_SWITCH = "switch"  # the packed kernel only with a decode backend that supports it (`safe_gate_packed_switch`)


@dataclass(frozen=True, slots=True)
class KdaFastPath:
    """When an engine's KDA wrapper swaps the Triton kernel for a CUDA kernel (sglang 0.5.17 and later,
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
class VariantDecode:
    """One variant's decode facts in one release: the profile's `gdn_*` and `kda_*` fields, picked by the
    variant's name in one place (`EngineProfile.decode_of`) instead of a branch on the name at each reader."""

    kernel: str | None  # None: the layers decode with the contract's packed kernel; else the one they call
    grids: tuple[tuple[str, ...], ...]  # the packed op's launch grids; (): no packed op
    # The limit on B*HV of an unsplit (NV, B*HV) launch of the packed op; None: B and HV on axes of their own
    grid_limit: int | None
    beta_rounding: str | None  # B_DTYPE: sigmoid(b) rounded to b's dtype; None: fp32 throughout
    state_dtype_fixed: bool  # the engine ignores a requested state dtype
    # The variant's own recurrent state default, which no config key changes (vLLM's `kda_state_dtype`); None: the
    # engine's SSM state dtype (its flag, the config's `mamba_ssm_dtype` hook, its default; vLLM's follows
    # `--mamba-cache-dtype` when the SSM dtype is auto: `_mamba_state_dtype`, mamba_utils.py:105-106)
    own_state_dtype: str | None
    # The state dtypes a flag may request (None: every one of STATE_DTYPES) and the engine's start-up error on
    # any other (`{dtype}`; None: none refused)
    state_dtypes: tuple[str, ...] | None
    state_dtype_refusal: str | None
    other_api: str | None  # why the engine's decode cannot be compared with the contract's; None: same API
    attention_heads_error: str  # what the engine does with a TP not dividing the attention heads ({heads}, {tp})
    conv_channel_first: bool  # conv state per slot is (conv_dim/tp, W-1) rather than (W-1, conv_dim/tp)
    packed_decode_env: str | None  # the environment variable that switches the packed decode off; None: none
    fast_path: KdaFastPath | None  # the CUDA kernel the wrapper swaps in; None: the wrapper always runs Triton
    decode_backends: tuple[str, ...] | None  # the decode backends the layer accepts; None: any


@dataclass(frozen=True, slots=True)
class EngineFlag:
    """One command-line flag of an engine release, as the release's argument definitions declare it.

    Read from the wheel by scripts/verify_engine_profiles.py (sglang: `server_args.py` / `arg_groups/`, vLLM:
    `engine/arg_utils.py` with the `CacheConfig` field types of `config/cache.py`). Only the flags that set the
    linear-attention state pools, their dtypes and caching, and the decode backend are recorded (sglang:
    `--mamba-ssm-dtype`, `--max-mamba-cache-size`, `--mamba-full-memory-ratio`, `--mamba-scheduler-strategy`,
    `--mamba-radix-cache-strategy`, `--linear-attn-backend`, `--linear-attn-decode-backend`; vLLM:
    `--enable-prefix-caching`, `--mamba-block-size`, `--mamba-cache-dtype`, `--mamba-cache-mode`,
    `--mamba-ssm-cache-dtype`): among those, one absent from a release's `EngineProfile.flags` does not exist in
    that release. Values are as argparse sees them: `choices` as strings, `default` as the source's literal.
    """

    name: str  # as typed on the command line: "--mamba-ssm-dtype"
    choices: tuple[str, ...] | None  # the values argparse accepts; None: any value of the flag's type
    default: str | float | int | bool | None  # the default the source declares; None: unset (derived at start-up)
    replaced_by: str | None = None  # a deprecated alias: the flag it sets
    no_effect: bool = False  # accepted, but deprecated and ignored

    def accepts(self, value: str) -> bool:
        return self.choices is None or value in self.choices


@dataclass(frozen=True, slots=True)
class GpuDecodeRule:
    """A start-up rule that moves decode off the packed kernel on some GPUs (sglang 0.5.11 and later: on SM100 GPUs,
    compute capability 10.x, with a bfloat16 SSM state and no decode backend given, decode defaults to flashinfer)."""

    sm_major: int  # the compute capability major version it applies to (10: B200, GB200, B300)
    state_dtype: str  # the SSM state dtype (`--mamba-ssm-dtype`) it requires
    backend: str  # the decode backend it selects
    unless_backend: str | None  # a `--linear-attn-backend` that keeps it from applying (0.5.18 on: helion)
    unless_speculative: bool  # it applies only without speculative decoding (0.5.11 - 0.5.12)

    def applies(self, sm: int | None, state_dtype: str | None, speculative: bool = False) -> bool:
        """Whether it moves decode for a GPU of compute capability `sm` (x10, e.g. 100; None: unknown, never) and
        the state dtype."""
        if sm is None or sm // 10 != self.sm_major or state_dtype != self.state_dtype:
            return False
        return not (self.unless_speculative and speculative)


@dataclass(frozen=True, slots=True)
class EngineProfile:
    """What one engine release (and the releases after it, up to the next profile) does with the packed decode
    call and its state pools.

    scripts/verify_engine_profiles.py checks, per release, the fields it reads from the wheel: `kernel_file`,
    `skip_at_or_below`, `reserved_slot_zero`, `gdn_beta_rounding`, `gdn_grids`, `grid_dim_limit`, `kda_grids`,
    `kda_takes_lower_bound`, `kda_fast_path` (present or not), `flags` and the roles naming them,
    `packed_decode_env(_default)`, `gdn_decode_kernel`, `kda_decode_kernel`, `safe_gate_route`,
    `kda_decode_backends`, `gpu_decode_rule`, `decode_targets`, `other_api_targets`, `instance_holders`, and the
    state dtype defaults: `default_state_dtype`, `conv_dtype`, `config_ssm_dtype_names` and whether an unknown
    name fails (sglang: `mamba2_state_dtype`, srt/configs/mamba_utils.py:47-105), `kda_state_dtype` and
    `kda_state_dtype_fixed` (vLLM: `MambaStateDtypeCalculator`, model_executor/layers/mamba/mamba_utils.py). The
    other fields (conv and pool layouts, `conv_window_holds_drafts`, `config_ssm_dtype_families`, sglang's KDA state
    default, TP validation) were read in sglang 0.5.23 and vLLM 0.29-0.33 and are carried to the earlier epochs
    unverified."""

    name: str  # "sglang" or "vllm": what `--engine` takes before any `@version`
    version: str  # the first release of this epoch
    display_name: str  # "sglang", "vLLM": the engine in prose

    # --- slot indices -------------------------------------------------------------------------------------
    # Rows whose index is <= this are skipped: -1 means `idx < 0`, 0 means `idx <= 0`.
    skip_at_or_below: int
    # sglang keeps slot 0 as a dummy that CUDA-graph padding rows write, so a live request must never get it
    # and repeated 0s are only legal in trailing padding rows; vLLM's block 0 is a null block it never touches.
    reserved_slot_zero: bool
    slot_zero_note: str  # how the report describes row 0 of the pool

    # --- the packed decode kernel -------------------------------------------------------------------------
    kernel_file: str | None  # the wheel's module file holding the packed GDN decode (and sglang's KDA); None: none
    gdn_beta_rounding: str | None  # B_DTYPE: sigmoid(b) rounded to b's dtype (GDN only); None: fp32 throughout
    # The GDN wrapper's launch grids: one, or (split, unsplit) where the wrapper splits the grid when B*HV > 65535.
    gdn_grids: tuple[tuple[str, ...], ...]
    grid_dim_limit: int | None  # the limit on B*HV of an unsplit (NV, B*HV) GDN launch; None: the grid is split
    # The Triton launch grid of the KDA packed op that KDA layers decode with; () when they take no packed op.
    kda_grids: tuple[tuple[str, ...], ...]
    kda_takes_lower_bound: bool  # the KDA packed op has a `lower_bound` (safe gate) parameter

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
    kda_state_dtype_fixed: bool  # True: the engine ignores a requested KDA state dtype (vLLM before 0.30)
    # The KDA state dtypes a flag may request (None: every one of STATE_DTYPES), and the error the engine stops
    # with at start-up on any other, in its own words (`{dtype}`: the requested one); None where none is refused.
    kda_state_dtypes: tuple[str, ...] | None
    kda_state_dtype_refusal: str | None
    conv_dtype: str  # conv state default: a dtype or MODEL_DTYPE
    gdn_conv_channel_first: bool  # GDN conv state per slot is (conv_dim/tp, W-1) rather than (W-1, conv_dim/tp)
    # The conv state's window grows by the speculative draft tokens: W-1+num_spec rows (vLLM's
    # `gated_delta_net_state_shape` / `kda_state_shape`); False: W-1, with the draft tokens' windows kept apart.
    conv_window_holds_drafts: bool
    stacked_state_pool: bool  # one [layers, slots, ...] tensor per kind (sglang) vs one tensor per layer (vLLM)

    # --- flags and environment users set ------------------------------------------------------------------
    # Every flag of the release that gdr-check names or that sets the state pools, as the release declares it.
    flags: tuple[EngineFlag, ...]
    # The roles gdr-check's fixes name, each one of `flags` (None: the release has no such flag).
    state_dtype_flag: str  # the SSM state dtype
    conv_dtype_flag: str | None
    cache_size_flag: str | None  # the number of state slots
    memory_ratio_flag: str | None  # the state pools' share of memory
    scheduler_strategy_flag: str | None  # how states are cached across requests
    state_dtype_env: str | None  # environment variable that overrides the SSM state dtype
    # The environment variable that switches the GDN packed decode, and its default ("1": on unless set to 0);
    # None: no switch, the packed decode is the decode kernel's own choice.
    packed_decode_env: str | None
    packed_decode_env_default: str | None
    kda_other_api: str | None  # why the engine's KDA decode cannot be compared with the contract's; None: same API
    import_name: str | None  # the module a dry-run imports to run the engine's kernel; None: read from its files

    # --- where the release keeps its packed decode functions (what a runtime guard and a capture wrap) ----------
    # "package.module:function" of every packed decode the release defines with the contract's arguments and
    # imports somewhere (a copy nothing imports is never called); sglang's Helion KDA decode among them.
    decode_targets: tuple[str, ...]
    # Packed decodes the release imports that take another argument list (vLLM's own KDA op): never wrapped.
    other_api_targets: tuple[str, ...]
    # "package.module:Class" whose instances keep a packed decode as an attribute (`self._packed_decode = f`).
    instance_holders: tuple[str, ...]

    # --- engine behaviour outside the kernel ---------------------------------------------------------------
    kda_fast_path: KdaFastPath | None  # None: the KDA wrapper always runs Triton
    checks_attention_heads_first: bool  # TP validation stops at the attention heads before the GDN widths
    # What the engine does with a TP that does not divide the attention heads, for (GDN, KDA) models; templates
    # with {heads} and {tp}.
    attention_heads_errors: tuple[str, str]
    layer_kinds_follow_interval: bool | None  # the interval rule (`full_attention_interval`) decides which
    #                                           layers are linear; None: not verified

    # --- which decode kernel a layer reaches (docs/model-families.md) ----------------------------------------
    gdn_decode_kernel: str | None  # None: GDN layers decode with the packed GDN kernel; else the one they call
    kda_decode_kernel: str | None  # None: KDA layers decode with the contract's packed KDA kernel; else the one called
    # What the KDA layer does with a safe-gate lower bound (SAFE_GATE_*), and for SAFE_GATE_SWITCH the setting
    # that selects a decode kernel with safe-gate support.
    safe_gate_route: str
    safe_gate_packed_switch: str | None
    kda_decode_backends: tuple[str, ...]  # the decode backends the KDA layer accepts (others stop start-up)
    gpu_decode_rule: GpuDecodeRule | None  # a GPU on which decode leaves the packed kernel by default
    own_decode_verified: bool  # layers that call their own decode kernel (Jet-Nemotron) were read in this engine
    models_pool_strategies: bool  # gdr-check models this engine's pool strategies and speculative buffers

    # --- sglang's state pool sizing (`deployment/state_pool.py`) --------------------------------------------
    # The architectures whose `auto` pool strategy resolves to extra_buffer (the overlap schedule or paging on, the
    # Triton linear-attention backend); (): `auto` always resolves to no_buffer.
    extra_buffer_architectures: tuple[str, ...] = ()
    # An explicit no_buffer with the overlap schedule on stops start-up (True) or turns the schedule off (False).
    no_buffer_refuses_overlap: bool = False
    # The state pool's cap on running requests is logged as a warning (True) or applied without a word (False).
    pool_cap_warns: bool = False

    @property
    def spec(self) -> str:
        """`name@version`: what `--engine` takes to select exactly this profile."""
        return f"{self.name}@{self.version}"

    @property
    def label(self) -> str:
        """The engine and version in prose, e.g. "vLLM 0.29"."""
        return f"{self.display_name} {self.version}"

    def flag(self, name: str) -> EngineFlag | None:
        """The release's flag `name`, or None when the release has no such flag."""
        return next((flag for flag in self.flags if flag.name == name), None)

    def state_dtype_setting(self, dtype: str) -> str | None:
        """The command-line setting that puts the SSM state in `dtype`, e.g. `--mamba-ssm-dtype bfloat16`; None
        when the release's flag has no such choice (vLLM before 0.22 has no bfloat16)."""
        flag = self.flag(self.state_dtype_flag)
        if flag is None or not flag.accepts(dtype):
            return None
        return f"{self.state_dtype_flag} {dtype}"

    def state_dtype_fix(self) -> str:
        """The setting that keeps the SSM state in float32, e.g. `--mamba-ssm-dtype float32`: a choice of the
        state dtype flag in every release (tests/test_engine_epochs.py)."""
        return f"{self.state_dtype_flag} float32"

    def row_is_live(self, slot: int) -> bool:
        return slot > self.skip_at_or_below

    def decode_of(self, variant: str) -> VariantDecode:
        """The release's decode facts for `variant` ("gdn" or "kda"): the one place that maps a variant's name
        to the profile's fields of that variant."""
        gdn_error, kda_error = self.attention_heads_errors
        if variant == "kda":
            return VariantDecode(
                kernel=self.kda_decode_kernel, grids=self.kda_grids,
                grid_limit=GRID_DIM_LIMIT if self.kda_grids == (GRID_NV_BHV,) else None, beta_rounding=None,
                state_dtype_fixed=self.kda_state_dtype_fixed, own_state_dtype=self.kda_state_dtype,
                state_dtypes=self.kda_state_dtypes, state_dtype_refusal=self.kda_state_dtype_refusal,
                other_api=self.kda_other_api, attention_heads_error=kda_error, conv_channel_first=False,
                packed_decode_env=None, fast_path=self.kda_fast_path, decode_backends=self.kda_decode_backends)
        return VariantDecode(
            kernel=self.gdn_decode_kernel, grids=self.gdn_grids, grid_limit=self.grid_dim_limit,
            beta_rounding=self.gdn_beta_rounding, state_dtype_fixed=False, own_state_dtype=None, state_dtypes=None,
            state_dtype_refusal=None, other_api=None, attention_heads_error=gdn_error,
            conv_channel_first=self.gdn_conv_channel_first, packed_decode_env=self.packed_decode_env, fast_path=None,
            decode_backends=None)


# --- sglang ------------------------------------------------------------------------------------------------------
_SGLANG_SRT_FILE = "sglang/srt/layers/attention/fla/fused_recurrent.py"
_SGLANG_KERNELS_FILE = "sglang/kernels/ops/attention/fla/fused_recurrent.py"
_SGLANG_DTYPES = ("float32", "bfloat16", "float16")
_GDN_PACKED = "fused_recurrent_gated_delta_rule_packed_decode"
_KDA_PACKED = "fused_recurrent_kda_packed_decode"


def _targets(kernel_file: str, *functions: str) -> tuple[str, ...]:
    """`module:function` of functions defined in the wheel file `kernel_file` ("a/b/c.py" is module a.b.c)."""
    module = kernel_file.removesuffix(".py").replace("/", ".")
    return tuple(f"{module}:{function}" for function in functions)


_SGLANG_HELION_TARGET = "sglang.kernels.ops.attention.helion.kda_decode:helion_fused_recurrent_kda_packed_decode"
_SGLANG_HELION_HOLDER = "sglang.srt.layers.attention.linear.kernels.kda_helion:HelionKDAKernel"
_SGLANG_STRATEGIES = ("auto", "no_buffer", "extra_buffer")
_SGLANG_STRATEGIES_LAZY = (*_SGLANG_STRATEGIES, "extra_buffer_lazy")
_SGLANG_BACKENDS = ("triton", "cutedsl", "flashinfer")


def _sglang_flags(strategy: tuple[EngineFlag, ...], backends: tuple[str, ...],
                  memory_ratio_default: float | None) -> tuple[EngineFlag, ...]:
    return (EngineFlag("--mamba-ssm-dtype", _SGLANG_DTYPES, None),
            EngineFlag("--max-mamba-cache-size", None, None),
            EngineFlag("--mamba-full-memory-ratio", None, memory_ratio_default),
            *strategy,
            EngineFlag("--linear-attn-backend", backends, "triton"),
            EngineFlag("--linear-attn-decode-backend", backends, None))


_SCHEDULER_STRATEGY = EngineFlag("--mamba-scheduler-strategy", _SGLANG_STRATEGIES, "auto")
_SCHEDULER_STRATEGY_LAZY = EngineFlag("--mamba-scheduler-strategy", _SGLANG_STRATEGIES_LAZY, "auto")
_RADIX_STRATEGY = EngineFlag("--mamba-radix-cache-strategy", _SGLANG_STRATEGIES_LAZY, "auto")
_SCHEDULER_ALIAS = EngineFlag("--mamba-scheduler-strategy", _SGLANG_STRATEGIES_LAZY, "auto",
                              replaced_by="--mamba-radix-cache-strategy")
# sglang 0.5.11 - 0.5.12: on SM100 (`is_sm100_supported()`: compute capability 10.x) with a bf16 state and no
# decode backend given, decode takes flashinfer unless speculative decoding is on (`_handle_linear_attn_backend`,
# srt/server_args.py); 0.5.13 drops that condition, and 0.5.18 keeps the helion backend out of it
# (srt/arg_groups/attention_hook.py from 0.5.20).
_SM100_FLASHINFER_0_5_11 = GpuDecodeRule(10, "bfloat16", "flashinfer", None, True)
_SM100_FLASHINFER_0_5_13 = GpuDecodeRule(10, "bfloat16", "flashinfer", None, False)
_SM100_FLASHINFER_0_5_18 = GpuDecodeRule(10, "bfloat16", "flashinfer", "helion", False)

# The first packed decode: GDN only. Kimi-Linear decodes with `fused_sigmoid_gating_delta_rule_update` (the KDA
# Triton kernel's `decode`); the kernels live under srt/.
SGLANG_0_5_10 = EngineProfile(
    name="sglang", version="0.5.10", display_name="sglang",
    skip_at_or_below=-1, reserved_slot_zero=True, slot_zero_note="slot 0 reserved",
    kernel_file=_SGLANG_SRT_FILE,
    gdn_beta_rounding=B_DTYPE, gdn_grids=(GRID_NV_BHV,), grid_dim_limit=GRID_DIM_LIMIT,
    kda_grids=(), kda_takes_lower_bound=False,
    default_state_dtype="float32", config_ssm_dtype_families=None,
    # `mamba2_state_dtype` (srt/configs/mamba_utils.py): a dict lookup of the exact string; any other value logs
    # "Invalid mamba_ssm_dtype ... Using default 'float32'" and keeps float32.
    config_ssm_dtype_names=(("float32", "float32"), ("bfloat16", "bfloat16"), ("float16", "float16")),
    config_ssm_dtype_failure=None,
    kda_state_dtype="float32", kda_state_dtype_fixed=False, kda_state_dtypes=None, kda_state_dtype_refusal=None,
    conv_dtype="bfloat16", gdn_conv_channel_first=True, conv_window_holds_drafts=False, stacked_state_pool=True,
    flags=_sglang_flags((_SCHEDULER_STRATEGY,), _SGLANG_BACKENDS, 0.9),
    state_dtype_flag="--mamba-ssm-dtype", conv_dtype_flag=None,
    cache_size_flag="--max-mamba-cache-size", memory_ratio_flag="--mamba-full-memory-ratio",
    scheduler_strategy_flag="--mamba-scheduler-strategy", state_dtype_env="SGLANG_MAMBA_SSM_DTYPE",
    packed_decode_env=None, packed_decode_env_default=None, kda_other_api=None, import_name=None,
    decode_targets=_targets(_SGLANG_SRT_FILE, _GDN_PACKED), other_api_targets=(), instance_holders=(),
    kda_fast_path=None,
    checks_attention_heads_first=False,
    attention_heads_errors=(
        "sglang fails in `divide()` unless DP attention makes the attention TP size a divisor of {heads}",
        "sglang 0.5.23 raises `AssertionError: num_attention_heads must be divisible by world_size`"),
    layer_kinds_follow_interval=True,
    gdn_decode_kernel=None, kda_decode_kernel="fused_sigmoid_gating_delta_rule_update",
    safe_gate_route=SAFE_GATE_UNFUSED, safe_gate_packed_switch=None,
    kda_decode_backends=("cutedsl", "triton"), gpu_decode_rule=None,
    own_decode_verified=True, models_pool_strategies=True,
)
# The last release before the packed decode: GDN and KDA layers decode with `fused_sigmoid_gating_delta_rule_update`
# (srt/layers/attention/hybrid_linear_attn_backend.py); no linear-attention backend flags yet.
SGLANG_0_5_9 = replace(
    SGLANG_0_5_10, version="0.5.9", kernel_file=None, gdn_grids=(), grid_dim_limit=None, decode_targets=(),
    gdn_decode_kernel="fused_sigmoid_gating_delta_rule_update", kda_decode_backends=(),
    flags=_sglang_flags((_SCHEDULER_STRATEGY,), (), 0.9)[:4])
# SM100+ with a bf16 state decodes with flashinfer (unless speculative decoding is on).
SGLANG_0_5_11 = replace(SGLANG_0_5_10, version="0.5.11", gpu_decode_rule=_SM100_FLASHINFER_0_5_11)
# Kimi-Linear decodes with the KDA packed decode (Triton, grid (NV, B*HV), no `lower_bound`); the SM100 rule no
# longer waits for speculative decoding; the strategy flag gains `extra_buffer_lazy`.
SGLANG_0_5_13 = replace(
    SGLANG_0_5_11, version="0.5.13", kda_grids=(GRID_NV_BHV,), kda_decode_kernel=None,
    decode_targets=_targets(_SGLANG_SRT_FILE, _GDN_PACKED, _KDA_PACKED),
    safe_gate_route=SAFE_GATE_PACKED, gpu_decode_rule=_SM100_FLASHINFER_0_5_13,
    flags=_sglang_flags((_SCHEDULER_STRATEGY_LAZY,), _SGLANG_BACKENDS, 0.9))
# The architectures `auto` resolves to extra_buffer for (`_support_mamba_cache_extra_buffer`, later
# `_MAMBA_EXTRA_BUFFER_ARCHS`), per release: the GDN/KDA ones gdr-check describes (scripts/verify_launch_flags.py).
_EXTRA_BUFFER_0_5_14 = ("InternS2PreviewForConditionalGeneration", "Qwen3NextForCausalLM",
                        "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration")
_EXTRA_BUFFER_0_5_16 = (*_EXTRA_BUFFER_0_5_14, "KimiLinearForCausalLM")
_EXTRA_BUFFER_0_5_17 = (*_EXTRA_BUFFER_0_5_16, "KimiK3ForConditionalGeneration")
_EXTRA_BUFFER_0_5_19 = (*_EXTRA_BUFFER_0_5_17, "BailingMoeV3ForCausalLM", "Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM")
_EXTRA_BUFFER_0_5_20 = (*_EXTRA_BUFFER_0_5_19, "Glm5NextForConditionalGeneration", "Qwen4ExpForConditionalGeneration")
# `--mamba-radix-cache-strategy` replaces `--mamba-scheduler-strategy`, which stays as a deprecated alias; `auto`
# resolves to extra_buffer for the architectures above (no_buffer before), and an explicit no_buffer with the
# overlap schedule on stops start-up (it turned the schedule off before).
SGLANG_0_5_14 = replace(
    SGLANG_0_5_13, version="0.5.14", scheduler_strategy_flag="--mamba-radix-cache-strategy",
    extra_buffer_architectures=_EXTRA_BUFFER_0_5_14, no_buffer_refuses_overlap=True,
    flags=_sglang_flags((_SCHEDULER_ALIAS, _RADIX_STRATEGY), _SGLANG_BACKENDS, 0.9))
# `--linear-attn-backend` gains `flashkda`.
SGLANG_0_5_15 = replace(
    SGLANG_0_5_14, version="0.5.15",
    flags=_sglang_flags((_SCHEDULER_ALIAS, _RADIX_STRATEGY), (*_SGLANG_BACKENDS, "flashkda"), 0.9))
# The FLA kernels move from srt/ to sglang/kernels/ (no shim at the old path); KDA accepts a flashinfer decode.
SGLANG_0_5_16 = replace(SGLANG_0_5_15, version="0.5.16", kernel_file=_SGLANG_KERNELS_FILE,
                        extra_buffer_architectures=_EXTRA_BUFFER_0_5_16,
                        decode_targets=_targets(_SGLANG_KERNELS_FILE, _GDN_PACKED, _KDA_PACKED),
                        kda_decode_backends=("cutedsl", "flashinfer", "triton"))
# The KDA packed decode gains `lower_bound` (safe gate; safe-gate layers take the packed kernel) and the CUDA fast
# path (`kda_packed_decode.covered()`).
SGLANG_0_5_17 = replace(
    SGLANG_0_5_16, version="0.5.17", kda_takes_lower_bound=True, kda_fast_path=KdaFastPath(),
    extra_buffer_architectures=_EXTRA_BUFFER_0_5_17, pool_cap_warns=True,
    flags=_sglang_flags((_SCHEDULER_ALIAS, _RADIX_STRATEGY),
                        (*_SGLANG_BACKENDS, "flashkda", "nvidia_kda", "ptx_kda"), 0.9))
# The helion backend (a Helion KDA packed decode, kept by its backend object): KDA accepts it, and it keeps the
# SM100 rule from applying.
SGLANG_0_5_18 = replace(
    SGLANG_0_5_17, version="0.5.18", gpu_decode_rule=_SM100_FLASHINFER_0_5_18,
    decode_targets=(*SGLANG_0_5_17.decode_targets, _SGLANG_HELION_TARGET), instance_holders=(_SGLANG_HELION_HOLDER,),
    kda_decode_backends=("cutedsl", "flashinfer", "helion", "triton"),
    flags=_sglang_flags((_SCHEDULER_ALIAS, _RADIX_STRATEGY),
                        (*_SGLANG_BACKENDS, "flashkda", "nvidia_kda", "ptx_kda", "helion"), 0.9))
# The KDA Triton grid becomes (NV, B, HV); `--linear-attn-backend` gains `intel_xpu`.
_SGLANG_BACKENDS_0_5_19 = (*_SGLANG_BACKENDS, "flashkda", "nvidia_kda", "ptx_kda", "helion", "intel_xpu")
SGLANG_0_5_19 = replace(
    SGLANG_0_5_18, version="0.5.19", kda_grids=(GRID_NV_B_HV,),
    extra_buffer_architectures=_EXTRA_BUFFER_0_5_19,
    flags=_sglang_flags((_SCHEDULER_ALIAS, _RADIX_STRATEGY), _SGLANG_BACKENDS_0_5_19, 0.9))
# Safe-gate layers leave the packed decode (`lower_bound is None` guards it); `--mamba-scheduler-strategy` is
# gone; `--mamba-full-memory-ratio` defaults to unset (0.9 as a fallback).
SGLANG_0_5_20 = replace(SGLANG_0_5_19, version="0.5.20", safe_gate_route=SAFE_GATE_UNFUSED,
                        extra_buffer_architectures=_EXTRA_BUFFER_0_5_20,
                        flags=_sglang_flags((_RADIX_STRATEGY,), _SGLANG_BACKENDS_0_5_19, None))
# Safe-gate layers take the packed decode again with a decode backend that supports it (helion).
SGLANG_0_5_22 = replace(SGLANG_0_5_20, version="0.5.22", safe_gate_route=SAFE_GATE_SWITCH,
                        safe_gate_packed_switch="--linear-attn-decode-backend helion")
# The release gdr-check's checks were first written for: the 0.5.22 contract (only the GDN tiling moved).
SGLANG_0_5_23 = replace(SGLANG_0_5_22, version="0.5.23")


# --- vLLM --------------------------------------------------------------------------------------------------------
_VLLM_MX_FILE = "vllm/model_executor/layers/fla/ops/fused_recurrent.py"
_VLLM_TP_FILE = "vllm/third_party/flash_linear_attention/ops/fused_recurrent.py"
_VLLM_DTYPES = ("auto", "float32", "float16")
_VLLM_DTYPES_BF16 = (*_VLLM_DTYPES, "bfloat16")


def _vllm_flags(dtypes: tuple[str, ...], cache_mode: EngineFlag) -> tuple[EngineFlag, ...]:
    return (EngineFlag("--enable-prefix-caching", None, None),
            EngineFlag("--mamba-block-size", None, None),
            EngineFlag("--mamba-cache-dtype", dtypes, "auto"),
            cache_mode,
            EngineFlag("--mamba-ssm-cache-dtype", dtypes, "auto"))


_CACHE_MODE = EngineFlag("--mamba-cache-mode", ("all", "align", "none"), "none")
_VLLM_ATTENTION_HEADS_ERROR = ("vLLM raises `ValueError: Total number of attention heads ({heads}) must be divisible "
                               "by tensor parallel size ({tp}).`")
_VLLM_PACKED_ENV = "VLLM_ENABLE_FLA_PACKED_RECURRENT_DECODE"

# The first packed GDN decode, run by default (`VLLM_ENABLE_FLA_PACKED_RECURRENT_DECODE` defaults to "1") for pure
# decode batches without speculative tokens. It skips `idx < 0` (CUDA-graph padding rows get PAD_SLOT_ID = -1) and
# rounds sigmoid(b) to b's dtype, on an unsplit (NV, B*HV) grid. KDA layers decode with `fused_recurrent_kda`.
VLLM_0_18 = EngineProfile(
    name="vllm", version="0.18", display_name="vLLM",
    skip_at_or_below=-1, reserved_slot_zero=False, slot_zero_note="block 0 null",
    kernel_file=_VLLM_MX_FILE,
    gdn_beta_rounding=B_DTYPE, gdn_grids=(GRID_NV_BHV,), grid_dim_limit=GRID_DIM_LIMIT,
    kda_grids=(), kda_takes_lower_bound=False,
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
    kda_state_dtype="float32", kda_state_dtype_fixed=True, kda_state_dtypes=None, kda_state_dtype_refusal=None,
    conv_dtype=MODEL_DTYPE, gdn_conv_channel_first=False, conv_window_holds_drafts=True, stacked_state_pool=False,
    flags=_vllm_flags(_VLLM_DTYPES, _CACHE_MODE),
    state_dtype_flag="--mamba-ssm-cache-dtype", conv_dtype_flag="--mamba-cache-dtype",
    cache_size_flag=None, memory_ratio_flag=None, scheduler_strategy_flag="--mamba-cache-mode",
    state_dtype_env=None, packed_decode_env=_VLLM_PACKED_ENV, packed_decode_env_default="1",
    kda_other_api=("vLLM decodes KDA layers with `fused_recurrent_kda`, not a packed KDA decode; only its GDN "
                   "packed decode can be compared"),
    import_name="vllm",
    decode_targets=_targets(_VLLM_MX_FILE, _GDN_PACKED), other_api_targets=(), instance_holders=(),
    kda_fast_path=None,
    checks_attention_heads_first=True,
    attention_heads_errors=(_VLLM_ATTENTION_HEADS_ERROR, _VLLM_ATTENTION_HEADS_ERROR),
    layer_kinds_follow_interval=None,
    gdn_decode_kernel=None, kda_decode_kernel="fused_recurrent_kda",
    safe_gate_route=SAFE_GATE_UNFUSED, safe_gate_packed_switch=None, kda_decode_backends=(), gpu_decode_rule=None,
    own_decode_verified=False, models_pool_strategies=False,
)
# The last release before the packed decode: Qwen3-Next's GDN layers decode with `fused_recurrent_gated_delta_rule`
# (models/qwen3_next.py); no environment switch yet.
VLLM_0_17 = replace(VLLM_0_18, version="0.17", kernel_file=None, gdn_grids=(), grid_dim_limit=None, decode_targets=(),
                    gdn_decode_kernel="fused_recurrent_gated_delta_rule", packed_decode_env=None,
                    packed_decode_env_default=None)
# Padding rows get NULL_BLOCK_ID = 0, and the kernel skips `idx <= 0`.
VLLM_0_20 = replace(VLLM_0_18, version="0.20", skip_at_or_below=0)
# `bfloat16` becomes a choice of `--mamba-ssm-cache-dtype` and `--mamba-cache-dtype`.
VLLM_0_22 = replace(VLLM_0_20, version="0.22", flags=_vllm_flags(_VLLM_DTYPES_BF16, _CACHE_MODE))
# The FLA ops move to vllm/third_party/flash_linear_attention/ (same kernel).
VLLM_0_26 = replace(VLLM_0_22, version="0.26", kernel_file=_VLLM_TP_FILE,
                    decode_targets=_targets(_VLLM_TP_FILE, _GDN_PACKED))
# Kimi-Linear's non-speculative decode calls vLLM's own KDA packed op (vllm.models.kimi_k3, grid (NV, B*H), no
# environment switch); `fused_recurrent_kda` is left for speculative rows.
VLLM_0_27 = replace(
    VLLM_0_26, version="0.27", kda_grids=(GRID_NV_BH,), kda_takes_lower_bound=True,
    kda_decode_kernel="fused_recurrent_kda_packed_decode",
    other_api_targets=tuple(f"vllm.models.kimi_k3.{vendor}.ops.third_party.kda.fused_recurrent:{_KDA_PACKED}"
                            for vendor in ("amd", "nvidia")),
    kda_other_api=("vLLM's KDA packed op has another API (raw_g, raw_beta, state_indices; `out` [1, B, H, V]); "
                   "only its GDN packed decode can be compared"))
# The GDN grid is split, (NV, HV, B), when B*HV > 65535: B and HV must each stay <= 65535.
VLLM_0_28 = replace(VLLM_0_27, version="0.28", gdn_grids=(GRID_NV_HV_B, GRID_NV_BHV), grid_dim_limit=None)
# Beta stays in fp32 in the GDN packed decode.
VLLM_0_29 = replace(VLLM_0_28, version="0.29", gdn_beta_rounding=None)
# The KDA recurrent state takes `--mamba-ssm-cache-dtype` ("auto": float32; float32 or bfloat16; any other value
# raises ValueError): `MambaStateDtypeCalculator.kda_state_dtype`, model_executor/layers/mamba/mamba_utils.py:133-148
# (0.33.0), which the model's `get_mamba_state_dtype_from_config` calls while the config is built
# (platforms/interface.py:1059 in 0.33.0), so `--mamba-ssm-cache-dtype float16` stops vLLM before it loads weights.
VLLM_0_30 = replace(
    VLLM_0_29, version="0.30", kda_state_dtype_fixed=False, kda_state_dtypes=("float32", "bfloat16"),
    kda_state_dtype_refusal="ValueError: KDA recurrent state supports only auto, float32, and bfloat16; got {dtype}")
# `--mamba-cache-mode` loses `all`.
VLLM_0_32 = replace(VLLM_0_30, version="0.32", flags=_vllm_flags(
    _VLLM_DTYPES_BF16, EngineFlag("--mamba-cache-mode", ("align", "none"), "none")))
# `--mamba-cache-mode` is deprecated and has no effect: the mamba state is prefix-cached with
# `--enable-prefix-caching`.
VLLM_0_33 = replace(VLLM_0_32, version="0.33", scheduler_strategy_flag="--enable-prefix-caching", flags=_vllm_flags(
    _VLLM_DTYPES_BF16, EngineFlag("--mamba-cache-mode", ("align", "none"), None, no_effect=True)))

# Every profile, oldest first within an engine; the last of each name is that name's default.
PROFILES: tuple[EngineProfile, ...] = (
    SGLANG_0_5_9, SGLANG_0_5_10, SGLANG_0_5_11, SGLANG_0_5_13, SGLANG_0_5_14, SGLANG_0_5_15, SGLANG_0_5_16,
    SGLANG_0_5_17, SGLANG_0_5_18, SGLANG_0_5_19, SGLANG_0_5_20, SGLANG_0_5_22, SGLANG_0_5_23,
    VLLM_0_17, VLLM_0_18, VLLM_0_20, VLLM_0_22, VLLM_0_26, VLLM_0_27, VLLM_0_28, VLLM_0_29, VLLM_0_30, VLLM_0_32,
    VLLM_0_33)
# The releases whose wheels scripts/verify_engine_profiles.py read and found in agreement with their profiles (their
# facts are tests/data/engine_facts/<engine>-<release>.json), oldest first. A release after the newest is accepted,
# checked as the newest profile, with a note saying it is unverified.
VERIFIED_RELEASES: dict[str, tuple[str, ...]] = {
    "sglang": ("0.5.9", "0.5.10", "0.5.11", "0.5.12", "0.5.13", "0.5.14", "0.5.15", "0.5.16", "0.5.17", "0.5.18",
               "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23"),
    "vllm": ("0.17.1", "0.18.0", "0.19.0", "0.20.0", "0.21.0", "0.22.0", "0.26.0", "0.27.0", "0.27.1", "0.28.0",
             "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0", "0.34.0"),
}
NEWEST_VERIFIED: dict[str, str] = {name: releases[-1] for name, releases in VERIFIED_RELEASES.items()}


ENGINE_NAMES: tuple[str, ...] = tuple(dict.fromkeys(p.name for p in PROFILES))
DEFAULT_ENGINE = "sglang"

# Why a run's engine profile was chosen, in the order the sources are tried (reports carry it as
# `engine_profile_reason`): `--engine`, `engine` in [tool.gdr-check], the engine installed in this Python
# environment, gdr-check's default; for the library, its `engine=` argument; for `gdr-check call`, the engine a
# recording names (`recorded`).
ENGINE_REASONS: tuple[str, ...] = ("flag", "config", "installed", "default", "argument", "recorded")


# Why a live process's engine release (`gdr_check.guard`, `gdr_check.capture`) was chosen: `engine=` naming a
# release, the engine's release installed in this Python environment, `engine=` naming an engine that is not
# installed (its newest profile), gdr-check's default.
LIVE_REASONS: tuple[str, ...] = ("argument", "installed", "default")


def installed_release(name: str) -> str | None:
    """`name@version` of engine `name`'s release installed in this Python environment (package metadata only, the
    engine is never imported); None when it is not installed or no profile covers its release."""
    try:
        version = importlib.metadata.version(name)
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return None
    spec = f"{name}@{version}"
    try:
        profile_for(spec)
    except UnknownEngineError:
        return None
    return spec


def live_engine(engine: str | EngineProfile | None) -> tuple[str, str]:
    """The engine release a runtime guard or a capture in this process wraps and checks for (`name@version`, or
    the name as given where nothing narrows it) and why (one of LIVE_REASONS). The process runs the installed
    release, so `engine="sglang"` selects the installed sglang's profile where sglang is installed; a release
    given (`"vllm@0.20"`, a profile) is taken as it is; None takes the installed engine (sglang first), else the
    default. UnknownEngineError for a name or version no profile covers."""
    if isinstance(engine, EngineProfile):
        return engine.spec, "argument"
    profile = profile_for(DEFAULT_ENGINE if engine is None else engine)
    if engine is not None and "@" in engine:
        return engine, "argument"
    installed = installed_release(profile.name) if engine is not None else installed_engine()
    if installed is not None:
        return installed, "installed"
    return (DEFAULT_ENGINE, "default") if engine is None else (engine, "argument")


def installed_engine() -> str | None:
    """`name@version` of the engine release installed in this Python environment, from its package metadata only
    (the engine is never imported); the default engine first when both are installed. None when neither is, or
    when the installed release is one no profile covers (a release before the first profile)."""
    for name in (DEFAULT_ENGINE, *(other for other in ENGINE_NAMES if other is not DEFAULT_ENGINE)):
        spec = installed_release(name)
        if spec is not None:
            return spec
    return None


def choose_engine(flag: str | None, config: str | None) -> tuple[str, str]:
    """The engine a run checks for and why (one of ENGINE_REASONS): the option, the config, the installed engine,
    or the default."""
    if flag is not None:
        return flag, "flag"
    if config is not None:
        return config, "config"
    installed = installed_engine()
    if installed is not None:
        return installed, "installed"
    return DEFAULT_ENGINE, "default"


def _newest_by_name() -> dict[str, EngineProfile]:
    newest: dict[str, EngineProfile] = {}
    for profile in PROFILES:
        newest[profile.name] = profile
    return newest


# Every accepted spelling → its profile: "vllm", "vllm@0.29", and the profile objects themselves are looked
# up here first, so the per-call guard pays one dict lookup.
_BY_SPEC: dict[str, EngineProfile] = {**_newest_by_name(), **{p.spec: p for p in PROFILES}}


def kernel_files(name: str) -> tuple[str, ...]:
    """Every module file in which a release of engine `name` keeps its packed decode (`kernel_file`), the newest
    layout first: sglang moved it from srt/ to sglang/kernels/ in 0.5.16."""
    return tuple(dict.fromkeys(p.kernel_file for p in reversed(PROFILES) if p.name == name and p.kernel_file))


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

    A version selects the newest profile at or below it: "vllm@0.29.1" and "vllm@0.29.9" → the 0.29 profile
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
    """For `name@version` that selects the profile of an earlier release (`vllm@0.31` -> the 0.30 profile), a
    note saying so, and for a release newer than the newest verified one, a warning naming it; None for a name, a
    profile, or a profile's own version."""
    profile = profile_for(engine)
    if not isinstance(engine, str) or "@" not in engine:
        return None
    version = engine.partition("@")[2]
    wanted, newest = _version_key(version), NEWEST_VERIFIED.get(profile.name)
    if newest is not None and wanted is not None and wanted > _version_key_or_zero(newest):
        return (f"{profile.display_name} {version} is newer than the newest release gdr-check verified, "
                f"{profile.display_name} {newest}: checked as {profile.label}, whose facts may have changed since "
                f"(scripts/verify_engine_profiles.py reads a release's wheel)")
    if wanted == _version_key(profile.version):
        return None  # the profile's own version, however written ("0.29.0")
    if any(_version_key(release) == wanted for release in VERIFIED_RELEASES.get(profile.name, ())):
        return (f"{profile.display_name} {version} is checked as {profile.label}, the profile of its release epoch "
                "(its wheel was verified against it)")
    return (f"{profile.display_name} {version} has no profile of its own: checked as {profile.label}, the newest "
            "profile at or below it (behaviour carries forward until a profile records a change)")


def _version_key_or_zero(version: str) -> tuple[tuple[int, ...], int]:
    key = _version_key(version)
    return key if key is not None else ((0,), 0)


@functools.lru_cache(maxsize=64)
def _parse(engine: str) -> EngineProfile:
    name, at, version = engine.partition("@")
    named = [p for p in PROFILES if p.name == name]
    if not named:
        raise UnknownEngineError(
            "unknown-engine", f"unknown engine {engine!r}; expected one of: {', '.join(ENGINE_NAMES)}, optionally "
                              f"@version ({', '.join(f'{n}@{r}' for n, r in NEWEST_VERIFIED.items())}, ...)")
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
