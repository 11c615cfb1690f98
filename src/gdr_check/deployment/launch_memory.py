"""The engines' own memory arithmetic for a launch: what vLLM 0.33.0 and sglang 0.5.23 compute at start-up.

The defaults an earlier release resolves from the GPU differently (vLLM's `--gpu-memory-utilization`, `max_num_seqs`
tiers, capture-size ceiling and Mamba block check; sglang's GPU tiers and speculative reserve) are that release's
flag-table data (`engines.launch_flags.LaunchDefaults`), read here from `command.table.defaults`.

From the launch command's settings (`launch_command.LaunchCommand`), the model's geometry and config, the GPU and
the weights per rank, this module reproduces the numbers each engine derives before serving:

vLLM 0.33.0 (one shared block pool for attention and Mamba-style state):
- `max_num_seqs` default by GPU memory (`engine/arg_utils.py:2940-3010`, doubled under `--performance-mode
  throughput`, `:3183-3188`);
- the attention block size raised so one attention page holds one layer's state (`platforms/interface.py:940-1130`),
  aligned to 64 tokens when prefix caching (mamba cache mode `align`) meets FlashInfer's GDN prefill on Hopper
  (`model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py:689-702`, `v1/attention/backends/gdn_attn.py:34`);
- the layers grouped by type (`v1/core/kv_cache_planning.py:416-556`), bytes per block = layers per group x page,
  blocks = available memory // bytes per block (`:642-690`), the one-request check at `--max-model-len`
  (`:50-87`, `:1253-1285`, `:1530-1545`) and the Mamba block check under FULL CUDA graphs
  (`config/compilation.py:1510-1531`): `max_num_seqs` must not exceed the blocks.
- available memory = total x `--gpu-memory-utilization` - weights - the profiled non-KV peak
  (`v1/worker/gpu_worker.py:745-758`); the peak (activations, CUDA graphs, NCCL and other non-torch memory) is
  measured by the engine at start and only estimated here (`Overhead`).

sglang 0.5.23 (a state pool apart from the KV pool):
- `--mem-fraction-static` default (`srt/arg_groups/memory_hook.py:78-345`), the decode CUDA-graph batch default
  (`:89-188`);
- rest memory = total x mem_fraction_static - weights (`srt/mem_cache/kv_cache_configurator.py:2990-3050`), the
  state pool `K = (budget - per_slot) // per_slot` with `budget = rest x r / (1 + r)` (`:3229-3391`), pool rows
  K + 1 (`srt/mem_cache/memory_pool.py:701-750`);
- the `auto` strategy, the slots counted per running request, the pool a budget gives and the cap
  `max_running_requests <= K // ratio` (a warning, an error only at 0): `state_pool`, the one implementation
  `check` reads too.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import field
from typing import Any

from ..base.errors import printable
from ..base.records import dataclass
from ..base.tensor_spec import DTYPE_ITEMSIZE
from ..engines.launch_flags import SGLANG_DEFAULTS_0_5_23, VLLM_DEFAULTS_0_33, FlagTable, LaunchDefaults
from ..engines.profiles import profile_for
from ..models.description import LinearAttentionModel
from .launch_command import LaunchCommand, attention_tp
from .settings import Deployment, resolve
from .state_pool import PoolStrategy, RunningCap, pool_from_budget, resolve_strategy

GiB = 1 << 30
MiB = 1 << 20


@dataclass(frozen=True)
class Gpu:
    """A GPU as the engines see it: its name (vLLM tells A100 apart by name), the CUDA-visible total memory as
    torch reports it (driver-dependent within about 0.2 GiB), and its compute capability."""

    key: str
    name: str
    total_bytes: int
    sm: int


GPUS: dict[str, Gpu] = {
    "h100": Gpu("h100", "NVIDIA H100 80GB HBM3", int(79.25 * GiB), 90),
    "h200": Gpu("h200", "NVIDIA H200", int(139.80 * GiB), 90),
    "a100-80g": Gpu("a100-80g", "NVIDIA A100-SXM4-80GB", int(79.15 * GiB), 80),
    "b200": Gpu("b200", "NVIDIA B200", int(178.35 * GiB), 100),
}


@dataclass(frozen=True)
class Overhead:
    """The memory an engine needs beside weights and caches (activation peak of its profile run, CUDA graphs,
    NCCL and other non-torch memory), per rank: an estimate with a low and a high end."""

    low: int = 2 * GiB
    estimate: int = 4 * GiB
    high: int = 8 * GiB


DEFAULT_OVERHEAD = Overhead()


@dataclass(frozen=True)
class StateGeometry:
    """One linear-attention layer's state per request on one rank, and the full-attention KV per token."""

    linear_layers: int
    full_layers: int
    conv_bytes: int  # conv window of one layer (W - 1 + draft tokens columns)
    ssm_bytes: int  # recurrent state of one layer
    kv_bytes_per_token: int  # one full-attention layer, one token, this rank
    conv_dtype: str
    state_dtype: str

    @property
    def layer_state_bytes(self) -> int:
        return self.conv_bytes + self.ssm_bytes


class LaunchModelError(ValueError):
    """The model's config lacks what the arithmetic needs (said in one line)."""


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    text = config.get("text_config")
    return text if isinstance(text, dict) else config


def max_position(config: dict[str, Any]) -> int | None:
    value = _text_config(config).get("max_position_embeddings", config.get("max_position_embeddings"))
    return value if isinstance(value, int) and value > 0 else None


def derived_length(config: dict[str, Any], table: FlagTable) -> tuple[int, str] | None:
    """The longest maximum length the engine takes without its override, and the config key it comes from
    (`FlagTable.length_*`): the engine's length key times the RoPE factor, except for the RoPE types whose factor the
    engine does not apply; None when the config gives no length."""
    text = _text_config(config)
    found = [(value, key) for key in table.length_keys
             if isinstance(value := text.get(key, config.get(key)), int) and not isinstance(value, bool) and value > 0]
    if not found:
        return None
    base, key = min(found, key=lambda item: item[0]) if table.length_smallest else found[0]
    override = table.length_override_key
    if override is not None and any(name == override for _, name in found):
        base, key = next(item for item in found if item[1] == override)
    rope = text.get("rope_scaling") or text.get("rope_parameters") or config.get("rope_scaling")
    factor: float = 1.0
    if isinstance(rope, dict):
        kind = rope.get("rope_type", rope.get("type"))
        value = rope.get("factor")
        skipped = kind in table.rope_unscaled_types or (
            table.rope_original_unscaled and "original_max_position_embeddings" in rope)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 and not skipped:
            factor = float(value)
    try:
        length = base * factor
    except OverflowError:  # an int past float's range
        length = math.inf
    if not math.isfinite(length) or length >= 1 << 62:
        raise LaunchModelError(f"the model's config gives `{key}` {printable(base)} and a RoPE factor {factor:g}: "
                               "their product is not a length")
    return int(length), key


def state_geometry(model: LinearAttentionModel, config: dict[str, Any], *, tp: int, state_dtype: str,
                   conv_dtype: str, kv_dtype: str, draft_columns: int = 0) -> StateGeometry:
    """The per-rank state of one layer (the engines' state-shape formulas) and the attention KV per token."""
    needed = {"num_k_heads": model.num_k_heads, "num_v_heads": model.num_v_heads, "head_k_dim": model.head_k_dim,
              "head_v_dim": model.head_v_dim, "conv_kernel": model.conv_kernel, "layers": model.num_hidden_layers}
    missing = [name for name, value in needed.items() if value is None]
    if missing:
        raise LaunchModelError(f"the model's config does not give {', '.join(missing)}")
    HK, HV, K, V = model.num_k_heads or 0, model.num_v_heads or 0, model.head_k_dim or 0, model.head_v_dim or 0
    W = model.conv_kernel or 0
    # Heads that do not split over `tp` stop the engine at load (the model check says so, GDR1xx); the sizes
    # here are then the floor of each rank's share, for the rest of the arithmetic.
    conv_dim = 2 * HK * K + HV * V  # vLLM mamba_utils.py:282 (GDN), :314 (KDA): q, k and v channels
    conv_columns = W - 1 + draft_columns
    conv = conv_dim // tp * conv_columns * DTYPE_ITEMSIZE[conv_dtype]
    ssm = HV // tp * V * K * DTYPE_ITEMSIZE[state_dtype]
    text = _text_config(config)
    full = (model.num_hidden_layers or 0) - len(model.linear_layers)
    if full <= 0:  # no full-attention layer: no KV cache
        return StateGeometry(len(model.linear_layers), 0, conv, ssm, 0, conv_dtype, state_dtype)
    kv_item = 1 if kv_dtype.startswith("fp8") else DTYPE_ITEMSIZE.get(kv_dtype, DTYPE_ITEMSIZE[model.dtypes.activation])
    if isinstance(text.get("kv_lora_rank"), int):  # MLA: one latent per token, not split by TP
        per_token = (text["kv_lora_rank"] + int(text.get("qk_rope_head_dim", 0))) * kv_item
    else:
        heads = model.num_key_value_heads or model.num_attention_heads
        head_dim = text.get("head_dim")
        if not isinstance(head_dim, int):
            hidden, attention_heads = text.get("hidden_size"), model.num_attention_heads
            if not isinstance(hidden, int) or not attention_heads:
                raise LaunchModelError("the model's config gives no `head_dim` for its full-attention layers")
            head_dim = hidden // attention_heads
        if not heads:
            raise LaunchModelError("the model's config gives no `num_key_value_heads`")
        per_token = 2 * max(1, heads // tp) * head_dim * kv_item
    return StateGeometry(len(model.linear_layers), full, conv, ssm, per_token, conv_dtype, state_dtype)


def _dtypes(model: LinearAttentionModel, command: LaunchCommand, tp: int) -> tuple[str, str, list[str]]:
    """The state and conv dtypes the engine picks (gdr-check's engine profiles), with the reasons."""
    wanted = command.get("state_dtype")
    state = None if wanted in (None, "auto") else str(wanted)
    settings = resolve(model, Deployment(tp=tp, batch=1, engine=command.engine_spec, state_dtype=state))
    conv, conv_reason = settings.conv_dtype, settings.conv_dtype_reason
    conv_flag = command.get("conv_dtype")
    if conv_flag not in (None, "auto"):  # vLLM's --mamba-cache-dtype
        conv, conv_reason = str(conv_flag), "--mamba-cache-dtype"
        # vLLM mamba_utils.py:105-106: an auto SSM dtype follows the conv dtype, unless the variant has its own
        if state is None and settings.deployment.profile.decode_of(model.kind).own_state_dtype is None:
            return conv, conv, [f"SSM state {conv} (follows --mamba-cache-dtype)", f"conv state {conv}"]
    env = command.table.conv_dtype_env
    if env is not None and env in command.env:
        conv, conv_reason = command.env[env], env
    return settings.state_dtype, conv, [f"SSM state {settings.state_dtype} ({settings.state_dtype_reason})",
                                        f"conv state {conv} ({conv_reason})"]


# -- vLLM ----------------------------------------------------------------------------------------------------
def vllm_default_max_num_seqs(gpu: Gpu, performance_mode: str | None = None,
                              defaults: LaunchDefaults = VLLM_DEFAULTS_0_33) -> int:
    """The release's `max_num_seqs` default for the OpenAI server (`LaunchDefaults.seqs_tiers`, vLLM's
    `get_batch_defaults`), doubled under `--performance-mode throughput`."""
    seqs = defaults.seqs_fallback
    for tier in defaults.seqs_tiers:
        if gpu.total_bytes >= tier.min_gib * GiB and (tier.excluded_name is None
                                                       or tier.excluded_name not in gpu.name.lower()):
            seqs = tier.seqs
            break
    return seqs * 2 if performance_mode == "throughput" else seqs


def vllm_capture_max(gpu: Gpu, max_num_seqs: int, draft_tokens: int, defaults: LaunchDefaults,
                     flag: Any = None, sizes: Any = None) -> int:
    """The largest decode CUDA-graph capture size: the flag, the largest size given, else the release's default
    min(max_num_seqs x (1 + draft tokens) x 2, ceiling) (`_set_cudagraph_sizes`, vLLM 0.33.0 config/vllm.py:2447-2470;
    the ceiling 1024 on SM100 from 0.28.0, 512 before and elsewhere)."""
    if flag is not None:
        return int(flag)
    if isinstance(sizes, list) and sizes:
        return max(int(size) for size in sizes)
    ceiling = defaults.graph_ceiling_sm100 if gpu.sm // 10 == 10 else defaults.graph_ceiling
    return min(max_num_seqs * (1 + draft_tokens) * 2, ceiling)


@dataclass
class VllmPlan:
    gpu: Gpu
    tp: int
    weights_per_rank: int
    overhead: Overhead
    memory_fraction: float
    max_model_len: int
    max_num_seqs: int
    max_num_seqs_default: bool
    full_cuda_graphs: bool
    prefix_caching: bool
    draft_tokens: int
    geometry: StateGeometry
    block_size: int
    page_bytes: int
    group_size: int
    groups: int
    bytes_per_block: int
    blocks_per_request: int  # one request at max_model_len, over every group
    checkpoint_blocks: int
    dtype_notes: list[str] = field(default_factory=list)
    num_gpu_blocks_override: int | None = None
    kv_cache_memory_bytes: int | None = None
    memory_fraction_default: bool = False
    capture_max: int = 0  # the largest decode CUDA-graph capture size
    # What the release does when the Mamba blocks are fewer than the sequences or capture sizes
    # (`LaunchDefaults.mamba_blocks_at_capture`).
    mamba_blocks_at_capture: str = "refuse"

    def available(self, overhead: int) -> int:
        """KV cache memory: `--kv-cache-memory-bytes`, else total x utilization - weights - overhead."""
        if self.kv_cache_memory_bytes is not None:
            return self.kv_cache_memory_bytes
        # v1/worker/utils.py:724-726: requested memory = ceil(total x utilization)
        return math.ceil(self.gpu.total_bytes * self.memory_fraction) - self.weights_per_rank - overhead

    def blocks(self, overhead: int) -> int:
        if self.num_gpu_blocks_override is not None:
            return self.num_gpu_blocks_override
        return max(self.available(overhead) // self.bytes_per_block, 0)

    @property
    def request_bytes(self) -> int:
        """What one request at `max_model_len` takes (every group's blocks)."""
        return self.blocks_per_request * self.bytes_per_block

    def fits_one_request(self, overhead: int) -> bool:
        # kv_cache_planning.py:1530-1545: the null block is held back before the check.
        return self.request_bytes <= self.available(overhead) - self.bytes_per_block

    def largest_model_len(self, overhead: int) -> int:
        """The longest `--max-model-len` whose one request fits (vLLM's own binary search, closed form)."""
        room = self.available(overhead) - self.bytes_per_block
        state_blocks = self.blocks_per_request - self.full_groups * math.ceil(self.max_model_len / self.block_size)
        per_group_blocks = room // self.bytes_per_block - state_blocks
        if per_group_blocks <= 0 or not self.full_groups:
            return 0
        return per_group_blocks // self.full_groups * self.block_size

    @property
    def full_groups(self) -> int:
        return math.ceil(self.geometry.full_layers / self.group_size) if self.geometry.full_layers else 0

    def utilization_for(self, blocks: int, overhead: int) -> float:
        """The smallest `--gpu-memory-utilization` (to 0.01) that gives `blocks` blocks."""
        need = blocks * self.bytes_per_block + self.weights_per_rank + overhead
        return math.ceil(need / self.gpu.total_bytes * 100) / 100


def plan_vllm(model: LinearAttentionModel, config: dict[str, Any], command: LaunchCommand, gpu: Gpu,
              weights_per_rank: int, overhead: Overhead = DEFAULT_OVERHEAD) -> VllmPlan:
    tp = attention_tp(command)
    draft = int(command.get("speculative_tokens", 0) or 0)
    state, conv, notes = _dtypes(model, command, tp)
    kv_dtype = str(command.get("kv_cache_dtype") or "auto")
    kv_dtype = model.dtypes.activation if kv_dtype == "auto" else kv_dtype
    geometry = state_geometry(model, config, tp=tp, state_dtype=state, conv_dtype=conv, kv_dtype=kv_dtype,
                              draft_columns=draft if command.table.conv_window_has_draft else 0)
    max_len = command.get("max_model_len")
    if max_len in (None, -1):
        derived = derived_length(config, command.table)
        if derived is None:
            raise LaunchModelError("the launch command gives no --max-model-len and the config no length "
                                   f"({', '.join(command.table.length_keys)})")
        max_len = derived[0]
        notes.append(f"max model length {max_len} (the config's `{derived[1]}`)")
    prefix = command.get("prefix_caching", True) is not False  # vLLM 0.33 config/cache.py:257: on
    # Hopper picks FlashInfer's GDN prefill (qwen_gdn_linear_attn.py:148-174); in align mode it exports prefill
    # checkpoints on a 64-token grid and takes one more state block per request.
    flashinfer_checkpoints = command.table.defaults.prefill_checkpoints(model.kind) and prefix and gpu.sm == 90
    align = 16 if command.get("block_size") is None else max(16, int(command.get("block_size")))
    if flashinfer_checkpoints:
        align = math.lcm(align, 64)
    attn_1tok = geometry.kv_bytes_per_token
    mamba_page = geometry.layer_state_bytes
    if attn_1tok:
        block = align * math.ceil(mamba_page / (align * attn_1tok))
        block = max(block, int(command.get("block_size") or 16))
        page = block * attn_1tok
    else:  # attention-free: the pool holds state pages alone
        block, page = align, mamba_page
    counts = [n for n in (geometry.full_layers, geometry.linear_layers) if n]
    group = min(counts)
    if max(counts) < group * 1.5:
        group = max(counts)
    groups = sum(math.ceil(n / group) for n in counts)
    full_groups = math.ceil(geometry.full_layers / group) if geometry.full_layers else 0
    linear_groups = groups - full_groups
    checkpoint_blocks = 1 if flashinfer_checkpoints else 0
    # kv_cache_interface.py:1135-1141: a state group holds 2 + draft + checkpoint blocks in align mode, else 1 + draft
    state_blocks = (2 + draft + checkpoint_blocks) if prefix else (1 + draft)
    per_request = full_groups * math.ceil(max_len / block) + linear_groups * state_blocks
    seqs = command.get("max_running")
    performance = command.get("performance_mode")
    defaults = command.table.defaults
    cc = command.get("compilation_config") or {}
    # (JSON's null, as a startup log prints an unset mode, is vLLM's default)
    mode = str(cc.get("cudagraph_mode") or "").upper() if isinstance(cc, dict) else ""
    full_graphs = not command.get("enforce_eager") and mode not in ("NONE", "PIECEWISE")
    override = command.get("num_gpu_blocks_override")
    kv_bytes = command.get("kv_cache_memory_bytes")
    fraction = command.get("memory_fraction")
    default_fraction = defaults.memory_fraction if defaults.memory_fraction is not None else 0.92
    max_num_seqs = int(seqs) if seqs is not None else vllm_default_max_num_seqs(gpu, performance, defaults)
    graph_flag = command.get("max_cudagraph_capture_size")
    graph_sizes = command.get("cudagraph_capture_sizes")
    if isinstance(cc, dict):
        graph_flag = cc.get("max_cudagraph_capture_size", graph_flag)
        graph_sizes = cc.get("cudagraph_capture_sizes", graph_sizes)
    return VllmPlan(
        gpu=gpu, tp=tp, weights_per_rank=weights_per_rank, overhead=overhead,
        memory_fraction=float(fraction) if fraction is not None else default_fraction,
        memory_fraction_default=fraction is None, max_model_len=int(max_len),
        max_num_seqs=max_num_seqs,
        max_num_seqs_default=seqs is None, full_cuda_graphs=full_graphs, prefix_caching=prefix, draft_tokens=draft,
        geometry=geometry, block_size=block, page_bytes=page, group_size=group, groups=groups,
        bytes_per_block=group * page, blocks_per_request=per_request, checkpoint_blocks=checkpoint_blocks,
        dtype_notes=notes, num_gpu_blocks_override=int(override) if override is not None else None,
        kv_cache_memory_bytes=int(kv_bytes) if kv_bytes is not None else None,
        capture_max=vllm_capture_max(gpu, max_num_seqs, draft, defaults, graph_flag, graph_sizes),
        mamba_blocks_at_capture=defaults.mamba_blocks_at_capture,
    )


# -- sglang --------------------------------------------------------------------------------------------------
def sglang_strategy(command: LaunchCommand, model: LinearAttentionModel) -> PoolStrategy:
    """The pool strategy the command's sglang release runs the model with (`state_pool.resolve_strategy`)."""
    return resolve_strategy(
        profile_for(command.engine_spec), model.architecture, str(command.get("mamba_strategy") or "auto"),
        overlap=not command.get("disable_overlap_schedule", False),
        radix_cache=command.get("prefix_caching", True) is not False,
        page_size=int(command.get("page_size") or 1), backend=str(command.get("linear_attn_backend") or "triton"))


def sglang_decode_graph_default(gpu: Gpu, tp: int,
                                defaults: LaunchDefaults = SGLANG_DEFAULTS_0_5_23) -> tuple[int, int]:
    """(decode CUDA-graph max batch, chunked prefill size) by GPU memory: the release's tiers
    (`LaunchDefaults.graph_tiers`, sglang's `_handle_gpu_memory_settings`)."""
    mib = gpu.total_bytes / MiB
    for tier in defaults.graph_tiers:
        if tier.below_gib is None or mib < tier.below_gib * 1024:
            return (tier.graph_bs_small_tp if tp < 4 else tier.graph_bs_large_tp), tier.chunked_prefill
    return 512, 16384  # (a table always ends with an open tier)


def sglang_speculative_reserve(algorithm: Any, defaults: LaunchDefaults) -> int:
    """MiB the release's `--mem-fraction-static` default reserves for a speculative algorithm (0 for none, NGRAM,
    or a release that reserves nothing)."""
    if not algorithm or str(algorithm).upper() == "NGRAM":
        return 0
    reserves = dict(defaults.speculative_reserve_mib)
    return reserves.get(str(algorithm).upper(), reserves.get("*", 0))


@dataclass
class SglangPlan:
    gpu: Gpu
    tp: int
    attn_tp: int
    attn_dp: int
    weights_per_rank: int
    memory_fraction: float
    memory_fraction_default: bool
    rest_bytes: int
    strategy: str
    strategy_reason: str
    overlap: bool
    radix_cache: bool
    ratio: int  # slots counted per running request
    per_slot_bytes: int
    draft_tokens: int
    pool_size: int  # K = max_mamba_cache_size (rows K + 1)
    pool_from: str
    kv_tokens: int  # token capacity of the full-attention KV pool
    max_running_requested: int | None
    max_running_before_cap: int
    cuda_graph_max_bs: int
    geometry: StateGeometry
    dtype_notes: list[str] = field(default_factory=list)

    refusal: str | None = None  # the strategy's own refusal (no_buffer with the overlap schedule on)

    @property
    def running(self) -> RunningCap:
        return RunningCap(self.pool_size, self.ratio, self.max_running_before_cap)

    @property
    def cap(self) -> int:
        return self.running.cap

    @property
    def max_running(self) -> int:
        return min(self.max_running_before_cap, self.cap)


def plan_sglang(model: LinearAttentionModel, config: dict[str, Any], command: LaunchCommand, gpu: Gpu,
                weights_per_rank: int, overhead: Overhead = DEFAULT_OVERHEAD) -> SglangPlan:
    """sglang's start-up arithmetic (its reserve is its own formula: `overhead` is not used)."""
    tp = int(command.get("tp", 1))
    attn_tp, attn_dp = attention_tp(command), int(command.get("attn_dp", 1))
    state, conv, notes = _dtypes(model, command, attn_tp)
    kv_dtype = str(command.get("kv_cache_dtype") or "auto")
    kv_dtype = model.dtypes.activation if kv_dtype == "auto" else kv_dtype
    geometry = state_geometry(model, config, tp=attn_tp, state_dtype=state, conv_dtype=conv, kv_dtype=kv_dtype)
    requested = command.get("max_running")
    defaults = command.table.defaults
    graph_bs, chunked = sglang_decode_graph_default(gpu, tp, defaults)
    graph_flag = command.get("max_cudagraph_capture_size")
    if graph_flag is not None:
        graph_bs = int(graph_flag)
    elif requested is not None and graph_bs > int(requested):
        graph_bs = int(requested)  # memory_hook.py:182-188
    fraction = command.get("memory_fraction")
    mib = gpu.total_bytes / MiB
    if fraction is None:  # memory_hook.py:281-328 (no post-capture sizing: SGLANG_ENABLE_POST_CAPTURE_KV_SIZING off)
        reserved = 512 + max(chunked, 2048) * 1.5 + tp * int(command.get("pp", 1)) / 8 * 1024 + graph_bs * 2
        if attn_dp > 1:
            reserved += graph_bs * attn_dp * 3 + (graph_bs * attn_dp * 1.5 if graph_bs > 300 else 0)
        if mib > 60 * 1024:
            reserved = max(reserved, 10 * 1024)
        reserved += sglang_speculative_reserve(command.get("speculative_algorithm"), defaults)
        fraction = round((mib - reserved) / mib, 3)
        notes.append(f"--mem-fraction-static {fraction} (sglang's default for this GPU: {reserved:.0f} MiB reserved)")
    rest = int(gpu.total_bytes * float(fraction)) - weights_per_rank
    chosen = sglang_strategy(command, model)
    radix, ratio = chosen.radix_cache, chosen.counted_slots
    per_slot = geometry.linear_layers * geometry.layer_state_bytes
    draft = int(command.get("speculative_tokens", 0) or 0) if command.get("speculative_algorithm") else 0
    explicit = command.get("max_mamba_cache_size")
    ratio_r = float(command.get("mamba_full_memory_ratio") or 0.9)
    if explicit is not None:
        pool, pool_from = int(explicit) // attn_dp, "--max-mamba-cache-size"
    elif not radix and requested is not None:
        pool, pool_from = max(1, int(requested) // attn_dp), "--max-running-requests (radix cache off)"
    else:
        budget = max(rest, 0) * ratio_r / (1 + ratio_r)
        pool = pool_from_budget(budget, per_slot, ratio=ratio, draft_tokens=draft)
        pool_from = f"auto-fit: {ratio_r:g} / (1 + {ratio_r:g}) of the rest memory"
    state_bytes = (pool + 1) * per_slot
    kv_per_token = geometry.full_layers * geometry.kv_bytes_per_token
    kv_tokens = max(rest - state_bytes, 0) // kv_per_token if kv_per_token else 0
    derived = derived_length(config, command.table)
    context = int(command.get("max_model_len") or (derived[0] if derived else 0))
    if requested is not None:
        before = min(max(1, int(requested) // attn_dp), kv_tokens // 2)
    else:
        estimated = int(kv_tokens / context * 512) if context else 2048
        before = min(max(min(estimated, 4096), 2048), kv_tokens // 2)
    return SglangPlan(
        gpu=gpu, tp=tp, attn_tp=attn_tp, attn_dp=attn_dp, weights_per_rank=weights_per_rank,
        memory_fraction=float(fraction), memory_fraction_default=command.get("memory_fraction") is None,
        rest_bytes=rest, strategy=chosen.strategy if radix else "none (radix cache off)",
        strategy_reason=chosen.reason, overlap=chosen.overlap, radix_cache=radix, ratio=ratio,
        per_slot_bytes=per_slot, draft_tokens=draft,
        pool_size=pool, pool_from=pool_from, kv_tokens=kv_tokens, max_running_requested=requested,
        max_running_before_cap=before, cuda_graph_max_bs=graph_bs, geometry=geometry, dtype_notes=notes,
        refusal=chosen.refusal,
    )


def weights_from_tensors(tensors: dict[str, Any]) -> int:
    """Bytes of every tensor a checkpoint's headers list."""
    total = 0
    for info in tensors.values():
        total += math.prod(info.shape) * DTYPE_ITEMSIZE.get(info.dtype, 1)
    return total


# The start-up arithmetic of each memory model a release's flag table names (`FlagTable.memory_model`).
PLANNERS: dict[str, Callable[[LinearAttentionModel, dict[str, Any], LaunchCommand, Gpu, int, Overhead],
                             VllmPlan | SglangPlan]] = {"shared-blocks": plan_vllm, "state-pool": plan_sglang}
