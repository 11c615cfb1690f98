"""The launch flags gdr-check reads, per engine release: data, one `FlagTable` per release.

Each `Flag` names its spellings in that release, the engine-neutral setting it fills (see
`gdr_check.deployment.launch_command.SETTINGS`), how its value reads, its choices and the release file that
defines it; `rejected` holds the spellings the release's own parser refuses, with what it says. A release whose
spellings differ gets its own table in `FLAG_TABLES`; `table_for(engine, version)` picks one. The release profiles
(`engines.profiles`) name the releases; the tables here are for sglang 0.5.23 and vLLM 0.33.0, and
`table_for_profile` derives each earlier release's table from them and from its profile (the spellings of the state
pool flags and their choices), with the spellings that moved between releases (below, each with the release that
moved it); scripts/verify_launch_flags.py checks every table against the release's own argument definitions.

Sources: sglang 0.5.23 `srt/arg_groups/fields/{model,parallel,schedule,memory,exec_,spec}.py`,
`srt/arg_groups/argparse_actions.py`, `srt/arg_groups/parallel_hook.py:39-61`; vLLM 0.33.0
`vllm/engine/arg_utils.py` (`add_cli_args`, `_compute_kwargs`), `vllm/utils/argparse_utils.py:30-95,120-145`,
`vllm/config/{cache,model,parallel,scheduler}.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import field, replace

from ..base.errors import InputError
from ..base.records import dataclass
from .group_quant import SGLANG_GROUPS, VLLM_GROUP_EPOCHS, GroupQuantFacts, facts_for
from .profiles import EngineProfile, profile_for


class LaunchCommandError(InputError):
    """A launch command gdr-check cannot read, or that the engine's own parser would reject."""

    code = "usage"


@dataclass(frozen=True)
class Flag:
    """One engine flag: its spellings in this release, the setting it fills and how its value reads.

    kind: "int", "hint" (vLLM's human-readable int: 32k, 1K), "hint_auto" (also -1/auto), "float", "str",
    "bool" (store_true), "bool_opt" (vLLM's --x / --no-x, and --enable-x / --disable-x), "false" (store_true that
    sets the setting to False), "ints" (one or more ints), "json" (a JSON object), "bool_dep" (a deprecated
    boolean the engine translates)."""

    names: tuple[str, ...]
    setting: str
    kind: str
    source: str
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class SeqsTier:
    """One tier of vLLM's `max_num_seqs` default for the OpenAI server (`get_batch_defaults`): GPUs with at least
    `min_gib` GiB whose name lacks `excluded_name` get `seqs`."""

    min_gib: int
    excluded_name: str | None
    seqs: int


@dataclass(frozen=True)
class GraphTier:
    """One tier of sglang's GPU-memory defaults (`_handle_gpu_memory_settings`): below `below_gib` GiB (None: any
    size), the chunked prefill size and the decode CUDA-graph max batch at TP < 4 and at TP >= 4."""

    below_gib: int | None
    chunked_prefill: int
    graph_bs_small_tp: int
    graph_bs_large_tp: int


@dataclass(frozen=True)
class LaunchDefaults:
    """The start-up defaults a release resolves from the GPU, and what it does when the decode CUDA graphs need more
    state blocks than the pool has. One per release epoch; `source` cites the release files read."""

    source: str
    # vLLM: `--gpu-memory-utilization`'s default; sglang computes `--mem-fraction-static` (None here).
    memory_fraction: float | None = None
    # vLLM: `max_num_seqs` tiers, first match wins, else `seqs_fallback`.
    seqs_tiers: tuple[SeqsTier, ...] = ()
    seqs_fallback: int = 256
    # vLLM: the largest default capture size is min(max_num_seqs x decode query length x 2, ceiling); the ceiling
    # on SM100 (data-centre Blackwell) where it differs.
    graph_ceiling: int = 512
    graph_ceiling_sm100: int = 512
    # vLLM, FULL decode graphs with more sequences or capture sizes than Mamba blocks: "refuse" (ValueError
    # before capture), "cap" (capture sizes capped to the blocks, a warning), "assert" (nothing checks: capture
    # of a batch above the blocks fails `assert num_cache_lines >= batch` in `causal_conv1d_update`).
    mamba_blocks_at_capture: str = "refuse"
    # vLLM: with the Mamba state prefix-cached ("align" mode) on Hopper, a GDN layer's FlashInfer prefill keeps one
    # checkpoint block more per request and the attention block aligns to its 64-token chunks (0.33.0
    # qwen_gdn_linear_attn.py:689-702,748, v1/attention/backends/gdn_attn.py:34, platforms/interface.py:1089-1094;
    # none of it in 0.32.0).
    gdn_prefill_checkpoints: bool = False
    # sglang: GPU-memory tiers (smallest first; the last has below_gib None), and the reserve added for a
    # speculative algorithm (MiB: "STANDALONE", and "*" for any other but NGRAM); () where none is added.
    graph_tiers: tuple[GraphTier, ...] = ()
    speculative_reserve_mib: tuple[tuple[str, int], ...] = ()

    def prefill_checkpoints(self, variant: str) -> bool:
        """Whether the variant's layers keep prefill checkpoint blocks (`gdn_prefill_checkpoints`: GDN's FlashInfer
        prefill): the one place that maps a variant's name to these defaults' per-variant field."""
        return self.gdn_prefill_checkpoints if variant == "gdn" else False


@dataclass(frozen=True)
class FlagTable:
    """The flags gdr-check reads for one engine release, and the spellings that release no longer takes."""

    engine: str  # "sglang" | "vllm"
    version: str
    flags: tuple[Flag, ...]
    # A spelling the release's parser rejects -> what the engine says (argparse's own error).
    rejected: Mapping[str, str] = field(default_factory=dict)
    # Abbreviations argparse accepts because they are a unique prefix in the release's whole parser.
    abbreviations: Mapping[str, str] = field(default_factory=dict)
    # vLLM's parser takes `--max_model_len` for `--max-model-len`.
    underscores: bool = False
    # The flags on the positional MODEL (vLLM `serve MODEL`).
    positional_model: bool = False
    # Switches gdr-check passes over that take no value (so the word after one is not read as its value).
    switches: frozenset[str] = frozenset()
    # How the release is named in messages, and how its command names the model when none is given.
    display: str = ""
    model_hint: str = "--model"
    # Parser features: `--no-x` / `--disable-x` negate a boolean flag; `--json-arg.key value` sets one key.
    negatable: bool = False
    dotted_json: bool = False
    # The deprecated `--enable-dp-attention --dp-size N`, read as `--attn-dp-size N --dp-size 1`.
    legacy_dp_attention: bool = False
    # The start-up arithmetic: "shared-blocks" (attention KV and state in one block pool, vLLM) or "state-pool"
    # (a state pool apart, sglang): `deployment.launch_memory` plans each.
    memory_model: str = ""
    # The conv state window holds the draft tokens too (vLLM mamba_utils.py:282-286).
    conv_window_has_draft: bool = False
    # The environment variable that sets the conv state dtype, if any (sglang environ.py:1628).
    conv_dtype_env: str | None = None
    # FP8 block checks at load: every output of a merged layer, split or not (sglang fp8.py:600-610), rather than
    # vLLM's split outputs only (the last output of an unsplit merged layer exempt, fp8_utils.py:1330-1337); the
    # families whose `in_proj_qkvz`/`in_proj_ba` are one interleaved output in this release.
    fp8_checks_every_merged_output: bool = False
    fp8_interleaved_families: tuple[str, ...] = ()
    # The families whose GDN layer has separate `in_proj_qkv`, `in_proj_z`, `in_proj_b`, `in_proj_a` layers in this
    # release (sglang 0.5.9 `srt/models/qwen3_5.py:130-165`; merged into `in_proj_qkvz`/`in_proj_ba` from 0.5.10).
    gdn_separate_families: tuple[str, ...] = ()
    # Group-quantized (AWQ, GPTQ, compressed-tensors WNA16) and NVFP4 layers at load (`engines.group_quant`).
    group_quant: GroupQuantFacts = GroupQuantFacts()
    # Startup-log fields that turn a setting off (`disable_radix_cache=True` -> prefix caching off).
    log_negations: Mapping[str, str] = field(default_factory=dict)
    # Spellings the release still reads for another flag (a deprecated alias, or a flag it accepts and ignores):
    # spelling -> the note the command gets.
    aliases: Mapping[str, str] = field(default_factory=dict)
    # The defaults the release resolves from the GPU (memory fraction, batch, CUDA-graph sizes).
    defaults: LaunchDefaults = field(default_factory=lambda: LaunchDefaults(source=""))
    # A maximum length above the model's (its `max_position_embeddings`, scaled by the RoPE factor except for the
    # RoPE types listed, or whenever the RoPE parameters name `original_max_position_embeddings` where
    # `rope_original_unscaled`) stops the engine unless `long_context_env` is set: its words (`{length}`,
    # `{key}`, `{derived}`); and its words for a length below 1 (None: not checked).
    long_context_env: str = ""
    long_context_error: str = ""
    rope_unscaled_types: tuple[str, ...] = ()
    rope_original_unscaled: bool = False
    nonpositive_length_error: str | None = None
    # The config keys the engine derives the model's length from, in its order: the smallest of them
    # (`length_smallest`, vLLM) or the first present (sglang); `length_override_key` replaces them when present.
    length_keys: tuple[str, ...] = ("max_position_embeddings",)
    length_smallest: bool = False
    length_override_key: str | None = None

    def lookup(self, name: str) -> Flag | None:
        for flag in self.flags:
            if name in flag.names:
                return flag
        return None


# sglang's GPU-memory tiers: 0.5.9-0.5.19 (server_args.py `_handle_gpu_memory_settings`, 0.5.9:935-998;
# arg_groups/memory_hook.py from 0.5.19) and from 0.5.20 (memory_hook.py:89-180 in 0.5.23), where GPUs under 35 GiB
# got a 4096-token chunked prefill and decode graphs to 48 / 160 (24 / 80 before). The tiers above 35 GiB are
# the same in every release.
_SGLANG_TIERS_ABOVE_35 = (GraphTier(60, 4096, 32, 160), GraphTier(90, 8192, 256, 512),
                          GraphTier(160, 8192, 256, 512), GraphTier(None, 16384, 512, 512))
_SGLANG_TIERS_0_5_9 = (GraphTier(20, 2048, 8, 8), GraphTier(35, 2048, 24, 80), *_SGLANG_TIERS_ABOVE_35)
_SGLANG_TIERS_0_5_20 = (GraphTier(20, 2048, 8, 8), GraphTier(35, 4096, 48, 160), *_SGLANG_TIERS_ABOVE_35)
# `--mem-fraction-static`'s default reserves, after the 10 GiB floor, 6 GiB for a STANDALONE draft model and, for
# any other speculative algorithm but NGRAM, 2 GiB in 0.5.9 (server_args.py:1050-1057) and 4 GiB in 0.5.10-0.5.13
# (0.5.10 server_args.py:1316-1322); from 0.5.14 nothing (0.5.14 server_args.py:3278-3314).
_SGLANG_SPEC_0_5_9 = (("STANDALONE", 6144), ("*", 2048))
_SGLANG_SPEC_0_5_10 = (("STANDALONE", 6144), ("*", 4096))
SGLANG_DEFAULTS_0_5_23 = LaunchDefaults(
    source="sglang 0.5.23 srt/arg_groups/memory_hook.py:78-345", graph_tiers=_SGLANG_TIERS_0_5_20)

_SG = "sglang 0.5.23 srt/arg_groups/fields/"
SGLANG_0_5_23 = FlagTable(
    engine="sglang", version="0.5.23",
    flags=(
        Flag(("--model-path", "--model"), "model", "str", _SG + "model.py:51"),
        Flag(("--tp-size", "--tensor-parallel-size"), "tp", "int", _SG + "parallel.py:45"),
        Flag(("--dp-size", "--data-parallel-size"), "dp", "int", _SG + "parallel.py:73"),
        Flag(("--pp-size", "--pipeline-parallel-size"), "pp", "int", _SG + "parallel.py:59"),
        Flag(("--attn-dp-size", "--attention-data-parallel-size"), "attn_dp", "int", _SG + "parallel.py:81"),
        Flag(("--attn-cp-size", "--attention-context-parallel-size"), "attn_cp", "int", _SG + "parallel.py"),
        Flag(("--enable-dp-attention",), "enable_dp_attention", "bool_dep",
             "sglang 0.5.23 srt/arg_groups/parallel_hook.py:39-61"),
        Flag(("--mem-fraction-static",), "memory_fraction", "float", _SG + "schedule.py:27"),
        Flag(("--max-running-requests",), "max_running", "int", _SG + "schedule.py:31"),
        Flag(("--context-length",), "max_model_len", "int", _SG + "model.py:110"),
        Flag(("--mamba-ssm-dtype",), "state_dtype", "str", _SG + "exec_.py:490",
             ("float32", "bfloat16", "float16")),
        Flag(("--dtype",), "dtype", "str", _SG + "model.py:160"),
        Flag(("--kv-cache-dtype",), "kv_cache_dtype", "str", _SG + "model.py:197"),
        Flag(("--quantization",), "quantization", "str", _SG + "model.py:177"),
        Flag(("--speculative-algorithm",), "speculative_algorithm", "str", _SG + "spec.py:31"),
        Flag(("--speculative-num-draft-tokens",), "speculative_tokens", "int", _SG + "spec.py:66"),
        Flag(("--cuda-graph-max-bs-decode",), "max_cudagraph_capture_size", "int", _SG + "exec_.py:629"),
        Flag(("--cuda-graph-bs-decode",), "cudagraph_capture_sizes", "ints", _SG + "exec_.py:640"),
        Flag(("--disable-cuda-graph",), "enforce_eager", "bool_dep",
             "sglang 0.5.23 srt/arg_groups/argparse_actions.py"),
        Flag(("--disable-radix-cache",), "prefix_caching", "false", _SG + "memory.py:64"),
        Flag(("--mamba-radix-cache-strategy",), "mamba_strategy", "str", _SG + "exec_.py:512",
             ("auto", "no_buffer", "extra_buffer", "extra_buffer_lazy")),
        Flag(("--disable-overlap-schedule",), "disable_overlap_schedule", "bool", _SG + "schedule.py:193"),
        Flag(("--max-mamba-cache-size",), "max_mamba_cache_size", "int", _SG + "schedule.py:216"),
        Flag(("--mamba-full-memory-ratio",), "mamba_full_memory_ratio", "float", _SG + "schedule.py:220"),
        Flag(("--page-size",), "page_size", "int", _SG + "schedule.py:143"),
        Flag(("--linear-attn-backend",), "linear_attn_backend", "str", _SG + "exec_.py:542"),
        Flag(("--linear-attn-decode-backend",), "linear_attn_decode_backend", "str", _SG + "exec_.py:549"),
    ),
    rejected={
        "--mamba-scheduler-strategy": "unrecognized arguments: --mamba-scheduler-strategy (renamed "
                                      "--mamba-radix-cache-strategy in 0.5.14; the old spelling removed in 0.5.20)",
        "--cuda-graph-max-bs": "ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, "
                               "--cuda-graph-max-bs-prefill",
        # --pp-max-micro-batch-size and --pp-async-batch-depth share the prefix (fields/parallel.py:59-72)
        "--pp": "ambiguous option: --pp could match --pp-size, --pp-max-micro-batch-size, --pp-async-batch-depth",
    },
    abbreviations={"--tp": "--tp-size", "--dp": "--dp-size"},
    display="sglang", model_hint="--model-path", legacy_dp_attention=True, memory_model="state-pool",
    conv_dtype_env="SGLANG_MAMBA_CONV_DTYPE", fp8_checks_every_merged_output=True, group_quant=SGLANG_GROUPS,
    log_negations={"disable_radix_cache": "prefix_caching"}, defaults=SGLANG_DEFAULTS_0_5_23,
    # srt/configs/model_config.py:1296-1316 (0.5.23); the derived length: srt/utils/hf_transformers/common.py:677-694
    long_context_env="SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN",
    long_context_error=("ValueError: Warning: User-specified context_length ({length}) is greater than the derived "
                        "context_length ({derived}). This may lead to incorrect model outputs or CUDA errors. ..."),
    rope_unscaled_types=("llama3",), rope_original_unscaled=True,
    # srt/utils/hf_transformers/common.py:668-694: the first key present
    length_keys=("max_sequence_length", "seq_length", "max_seq_len", "model_max_length", "max_position_embeddings"),
    switches=frozenset({"--trust-remote-code", "--enable-metrics", "--skip-server-warmup", "--enable-torch-compile",
                        "--enable-ep-moe", "--enable-mixed-chunk", "--disable-custom-all-reduce", "--log-requests"}),
)

# vLLM's `max_num_seqs` default for the OpenAI server (engine/arg_utils.py `get_batch_defaults`): 1024 from 70 GiB
# on a GPU whose name lacks "a100", else 256 (0.17.1-0.27.x); from 0.28.0 also 1024 from 160 GiB whatever the name
# (0.28.0 arg_utils.py `get_batch_defaults`; 0.33.0 :2940-3006 also keeps GB10, compute capability 12.1, at 256,
# a GPU gdr-check's table does not list). Doubled under `--performance-mode throughput` (0.33.0 :3183-3188).
_VLLM_SEQS_0_17 = (SeqsTier(70, "a100", 1024),)
_VLLM_SEQS_0_28 = (SeqsTier(160, None, 1024), SeqsTier(70, "a100", 1024))
VLLM_DEFAULTS_0_33 = LaunchDefaults(
    # config/cache.py:215 (0.92; 0.9 up to 0.19.x), config/vllm.py:2447-2470 (the capture ceiling, 1024 on
    # SM100 from 0.28.0), config/compilation.py:1510-1531 (the Mamba block check, from 0.20.0)
    source="vLLM 0.33.0 config/cache.py:215, engine/arg_utils.py:2940-3006, config/vllm.py:2447-2470, "
           "config/compilation.py:1510-1531",
    memory_fraction=0.92, seqs_tiers=_VLLM_SEQS_0_28, graph_ceiling=512, graph_ceiling_sm100=1024,
    mamba_blocks_at_capture="refuse", gdn_prefill_checkpoints=True)

_VL = "vLLM 0.33.0 vllm/"
VLLM_0_33_0 = FlagTable(
    engine="vllm", version="0.33.0",
    flags=(
        Flag(("--model",), "model", "str", _VL + "config/model.py"),
        Flag(("--tensor-parallel-size", "-tp"), "tp", "int", _VL + "engine/arg_utils.py:1209"),
        Flag(("--data-parallel-size", "-dp"), "dp", "int", _VL + "engine/arg_utils.py:1241"),
        Flag(("--pipeline-parallel-size", "-pp"), "pp", "int", _VL + "engine/arg_utils.py:1171"),
        Flag(("--gpu-memory-utilization",), "memory_fraction", "float", _VL + "config/cache.py:215"),
        Flag(("--max-num-seqs",), "max_running", "int", _VL + "config/scheduler.py"),
        Flag(("--max-model-len",), "max_model_len", "hint_auto", _VL + "engine/arg_utils.py:404"),
        Flag(("--mamba-ssm-cache-dtype",), "state_dtype", "str", _VL + "config/cache.py:300",
             ("auto", "float32", "bfloat16", "float16")),
        Flag(("--mamba-cache-dtype",), "conv_dtype", "str", _VL + "config/cache.py:296",
             ("auto", "float32", "bfloat16", "float16")),
        Flag(("--dtype",), "dtype", "str", _VL + "config/model.py"),
        Flag(("--kv-cache-dtype",), "kv_cache_dtype", "str", _VL + "config/cache.py"),
        Flag(("--quantization", "-q"), "quantization", "str", _VL + "engine/arg_utils.py:992"),
        Flag(("--speculative-config", "-sc"), "speculative_config", "json", _VL + "engine/arg_utils.py:1866"),
        Flag(("--compilation-config", "-cc"), "compilation_config", "json", _VL + "engine/arg_utils.py:1891"),
        Flag(("--enforce-eager",), "enforce_eager", "bool_opt", _VL + "config/model.py"),
        Flag(("--cudagraph-capture-sizes",), "cudagraph_capture_sizes", "ints", _VL + "config/compilation.py"),
        Flag(("--max-cudagraph-capture-size",), "max_cudagraph_capture_size", "int", _VL + "config/compilation.py"),
        Flag(("--enable-prefix-caching",), "prefix_caching", "bool_opt", _VL + "config/cache.py:257"),
        Flag(("--num-gpu-blocks-override",), "num_gpu_blocks_override", "int", _VL + "config/cache.py:251"),
        Flag(("--kv-cache-memory-bytes",), "kv_cache_memory_bytes", "hint", _VL + "config/cache.py:374"),
        Flag(("--block-size",), "block_size", "int", _VL + "config/cache.py:187"),
        Flag(("--performance-mode",), "performance_mode", "str", _VL + "engine/arg_utils.py:3183"),
    ),
    rejected={
        "--cuda-graph-sizes": "unrecognized arguments: --cuda-graph-sizes (use --cudagraph-capture-sizes or "
                              "--max-cudagraph-capture-size)",
    },
    abbreviations={"--tensor-parallel": "--tensor-parallel-size"},
    display="vLLM", model_hint="MODEL (vllm serve MODEL) or --model", negatable=True, dotted_json=True,
    memory_model="shared-blocks", conv_window_has_draft=True, fp8_interleaved_families=("qwen3-next",),
    group_quant=facts_for(VLLM_GROUP_EPOCHS, (0, 33, 0)),
    defaults=VLLM_DEFAULTS_0_33,
    # config/model.py:2545-2700 (0.33.0; the same words from 0.17.1, config/model.py:2029): the derived length and
    # the RoPE types whose factor is not applied; :1070-1075 the positive-length check
    long_context_env="VLLM_ALLOW_LONG_MAX_MODEL_LEN",
    long_context_error=("ValueError: User-specified max_model_len ({length}) is greater than the derived "
                        "max_model_len ({key}={derived} or model_max_length=None in model's config.json). To allow "
                        "overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. ..."),
    rope_unscaled_types=("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling"),
    nonpositive_length_error=("ValueError: max_model_len must be a positive integer, got int: {length}. Example: "
                              "max_model_len=2048"),
    # transformers_utils/model_arch_config_convertor.py:374-402 (0.33.0): the smallest key present, and
    # `model_max_length` over them all
    length_keys=("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
                 "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len"),
    length_smallest=True, length_override_key="model_max_length",
    switches=frozenset({"--trust-remote-code", "--enable-auto-tool-choice", "--enable-expert-parallel",
                        "--enable-chunked-prefill", "--no-enable-chunked-prefill", "--disable-log-requests",
                        "--disable-log-stats", "--enable-log-requests", "--async-scheduling",
                        "--disable-custom-all-reduce"}),
    underscores=True,
    positional_model=True,
)

FLAG_TABLES: dict[tuple[str, str], FlagTable] = {
    ("sglang", SGLANG_0_5_23.version): SGLANG_0_5_23,
    ("vllm", VLLM_0_33_0.version): VLLM_0_33_0,
}


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def _unrecognized(name: str, instead: str) -> str:
    return f"unrecognized arguments: {name} ({instead})"


def _with_flag(flags: list[Flag], setting: str, names: tuple[str, ...], choices: tuple[str, ...] | None = None,
               source: str | None = None) -> None:
    for index, flag in enumerate(flags):
        if flag.setting == setting:
            flags[index] = Flag(names, setting, flag.kind, source or flag.source,
                                flag.choices if choices is None else choices)
            return


def _sglang_table(profile: EngineProfile, release: str) -> FlagTable:
    """sglang `profile`'s release: 0.5.23's table with the spellings that moved (sglang's `server_args.py` before
    0.5.20, `srt/arg_groups/` after)."""
    base, version = SGLANG_0_5_23, _version(profile.version)
    if version >= _version(base.version):
        return base if release == base.version else _replace_table(base, release, base.flags, dict(base.rejected), {})
    defaults = _sglang_defaults(_release_key(profile, release))
    label = f"sglang {release}"
    source = f"sglang {profile.version} srt/server_args.py"
    flags = list(base.flags)
    rejected = dict(base.rejected)
    aliases: dict[str, str] = {}
    removed: set[str] = set()
    # The pool strategy: `--mamba-scheduler-strategy` until 0.5.13, both from 0.5.14 (the old one a deprecated
    # alias), the new one alone from 0.5.20 (the profile's flags, read from each wheel).
    radix, scheduler = profile.flag("--mamba-radix-cache-strategy"), profile.flag("--mamba-scheduler-strategy")
    strategy = radix or scheduler
    names = tuple(flag.name for flag in (radix, scheduler) if flag is not None)
    _with_flag(flags, "mamba_strategy", names, tuple(strategy.choices or ()) if strategy else None, source)
    if scheduler is not None:
        rejected.pop("--mamba-scheduler-strategy", None)
        if radix is not None:
            aliases["--mamba-scheduler-strategy"] = (f"--mamba-scheduler-strategy is a deprecated alias of "
                                                     f"--mamba-radix-cache-strategy in {label}")
    if radix is None:
        rejected["--mamba-radix-cache-strategy"] = _unrecognized(
            "--mamba-radix-cache-strategy", f"{label} names it --mamba-scheduler-strategy")
    # The decode CUDA-graph sizes: `--cuda-graph-max-bs` / `--cuda-graph-bs` until 0.5.13; the `-decode` spellings
    # from 0.5.14, the old ones deprecated aliases until 0.5.19.
    if version < (0, 5, 14):
        _with_flag(flags, "max_cudagraph_capture_size", ("--cuda-graph-max-bs",), source=source)
        _with_flag(flags, "cudagraph_capture_sizes", ("--cuda-graph-bs",), source=source)
        rejected.pop("--cuda-graph-max-bs")
        for name in ("--cuda-graph-max-bs-decode", "--cuda-graph-bs-decode"):
            rejected[name] = _unrecognized(name, f"{label} names it {name.removesuffix('-decode')}")
    elif version < (0, 5, 20):
        _with_flag(flags, "max_cudagraph_capture_size", ("--cuda-graph-max-bs-decode", "--cuda-graph-max-bs"))
        _with_flag(flags, "cudagraph_capture_sizes", ("--cuda-graph-bs-decode", "--cuda-graph-bs"))
        rejected.pop("--cuda-graph-max-bs")
        for name in ("--cuda-graph-max-bs", "--cuda-graph-bs"):
            aliases[name] = f"{name} is a deprecated alias of {name}-decode in {label}"
    # Attention data parallelism as its own size: from 0.5.22; before, `--enable-dp-attention --dp-size N`.
    if version < (0, 5, 22):
        removed |= {"attn_dp"}
        for index, flag in enumerate(flags):  # not yet deprecated: the way to ask for attention DP
            if flag.setting == "enable_dp_attention":
                flags[index] = Flag(flag.names, flag.setting, "bool", source)
        for name in ("--attn-dp-size", "--attention-data-parallel-size"):
            rejected[name] = _unrecognized(name, f"{label}: --enable-dp-attention --dp-size N")
    # The linear-attention backends: from 0.5.10 (the profile's flags).
    for setting, name in (("linear_attn_backend", "--linear-attn-backend"),
                          ("linear_attn_decode_backend", "--linear-attn-decode-backend")):
        if profile.flag(name) is None:
            removed.add(setting)
            rejected[name] = _unrecognized(name, f"{label} has no linear-attention backend flags")
    state = profile.flag("--mamba-ssm-dtype")
    _with_flag(flags, "state_dtype", ("--mamba-ssm-dtype",), tuple(state.choices or ()) if state else None, source)
    kept = tuple(flag for flag in flags if flag.setting not in removed)
    table = _replace_table(base, release, kept, rejected, aliases, defaults=defaults)
    if version < (0, 5, 10):
        # sglang 0.5.9's GDN layers (`srt/models/qwen3_next.py:248-268`: `in_proj_qkvz` and `in_proj_ba` one
        # column-parallel output each; `srt/models/qwen3_5.py:130-165`: four separate projections)
        table = replace(table, fp8_interleaved_families=("qwen3-next",),
                        gdn_separate_families=("qwen3.5", "qwen3.5-moe"))
    return table


def _vllm_table(profile: EngineProfile, release: str) -> FlagTable:
    """vLLM `profile`'s release: 0.33.0's table with the state flags' choices of the release (its profile),
    `--mamba-cache-mode` (the prefix-caching mode of the state before 0.33, accepted with no effect there), and `-sc`
    only from 0.20 (read in the 0.17.0, 0.18.0, 0.20.0, 0.22.0, 0.32.0 and 0.33.0 wheels)."""
    base = VLLM_0_33_0
    flags = list(base.flags)
    for setting, name in (("state_dtype", "--mamba-ssm-cache-dtype"), ("conv_dtype", "--mamba-cache-dtype")):
        found = profile.flag(name)
        if found is not None and found.choices:
            _with_flag(flags, setting, (name,), tuple(found.choices))
    rejected = dict(base.rejected)
    if _version(profile.version) < (0, 20):  # `-sc` from 0.20 (engine/arg_utils.py)
        _with_flag(flags, "speculative_config", ("--speculative-config",))
        rejected["-sc"] = _unrecognized("-sc", f"vLLM {release}: --speculative-config")
    aliases: dict[str, str] = {}
    mode = profile.flag("--mamba-cache-mode")
    if mode is not None:
        flags.append(Flag(("--mamba-cache-mode",), "mamba_cache_mode", "str", f"vLLM {profile.version} config/cache.py",
                          tuple(mode.choices or ())))
        if mode.no_effect:
            aliases["--mamba-cache-mode"] = (f"--mamba-cache-mode is deprecated and has no effect in vLLM "
                                             f"{release}: --enable-prefix-caching decides")
    return _replace_table(base, release, tuple(flags), rejected, aliases,
                          facts_for(VLLM_GROUP_EPOCHS, _version(release)),
                          defaults=_vllm_defaults(_release_key(profile, release)))


def _replace_table(base: FlagTable, version: str, flags: tuple[Flag, ...], rejected: dict[str, str],
                   aliases: dict[str, str], group_quant: GroupQuantFacts | None = None,
                   defaults: LaunchDefaults | None = None) -> FlagTable:
    return FlagTable(
        engine=base.engine, version=version, flags=flags, rejected=rejected, abbreviations=base.abbreviations,
        underscores=base.underscores, positional_model=base.positional_model, switches=base.switches,
        display=base.display, model_hint=base.model_hint, negatable=base.negatable, dotted_json=base.dotted_json,
        legacy_dp_attention=base.legacy_dp_attention, memory_model=base.memory_model,
        conv_window_has_draft=base.conv_window_has_draft, conv_dtype_env=base.conv_dtype_env,
        fp8_checks_every_merged_output=base.fp8_checks_every_merged_output,
        fp8_interleaved_families=base.fp8_interleaved_families, gdn_separate_families=base.gdn_separate_families,
        log_negations=base.log_negations, aliases=aliases,
        group_quant=base.group_quant if group_quant is None else group_quant,
        defaults=base.defaults if defaults is None else defaults, long_context_env=base.long_context_env,
        long_context_error=base.long_context_error, rope_unscaled_types=base.rope_unscaled_types,
        rope_original_unscaled=base.rope_original_unscaled, nonpositive_length_error=base.nonpositive_length_error,
        length_keys=base.length_keys, length_smallest=base.length_smallest,
        length_override_key=base.length_override_key)


def _release_key(profile: EngineProfile, release: str) -> tuple[int, ...]:
    """The release's numbers ("0.19.0" -> (0, 19, 0)); the profile's where the release is not plain numbers."""
    try:
        return _version(release)
    except ValueError:
        return _version(profile.version)


def _sglang_defaults(version: tuple[int, ...]) -> LaunchDefaults:
    """sglang's GPU-memory defaults of a release (the tiers and speculative reserves above)."""
    if version >= (0, 5, 20):
        return SGLANG_DEFAULTS_0_5_23
    where = "srt/arg_groups/memory_hook.py" if version >= (0, 5, 19) else "srt/server_args.py"
    spec = (_SGLANG_SPEC_0_5_9 if version < (0, 5, 10) else _SGLANG_SPEC_0_5_10 if version < (0, 5, 14) else ())
    return LaunchDefaults(source=f"sglang {'.'.join(map(str, version))} {where} (_handle_gpu_memory_settings)",
                          graph_tiers=_SGLANG_TIERS_0_5_9, speculative_reserve_mib=spec)


def _vllm_defaults(version: tuple[int, ...]) -> LaunchDefaults:
    """vLLM's start-up defaults of a release: `--gpu-memory-utilization` 0.9 before 0.20.0 (0.18.0 and 0.19.0
    config/cache.py:41), the `max_num_seqs` tiers and capture ceiling before 0.28.0 (0.27.0 config/vllm.py:1784:
    512 on every GPU), the Mamba block check: the capture sizes capped with a warning in 0.18.x-0.19.x
    (`adjust_cudagraph_sizes_for_mamba_cache`, 0.18.0 config/compilation.py:1198-1245), nothing in 0.17.x; and the
    GDN prefill checkpoints only from 0.33.0."""
    if version >= (0, 33):
        return VLLM_DEFAULTS_0_33
    at = ".".join(map(str, version))
    check = "refuse" if version >= (0, 20) else "cap" if version >= (0, 18) else "assert"
    return LaunchDefaults(
        source=f"vLLM {at} config/cache.py, engine/arg_utils.py (get_batch_defaults), config/vllm.py, "
               "config/compilation.py", memory_fraction=0.92 if version >= (0, 20) else 0.9,
        seqs_tiers=_VLLM_SEQS_0_28 if version >= (0, 28) else _VLLM_SEQS_0_17, graph_ceiling=512,
        graph_ceiling_sm100=1024 if version >= (0, 28) else 512, mamba_blocks_at_capture=check,
        gdn_prefill_checkpoints=False)


# Per engine: its newest table and how an earlier release's table is derived from it.
_DERIVED: dict[str, tuple[FlagTable, Callable[[EngineProfile, str], FlagTable]]] = {
    "sglang": (SGLANG_0_5_23, _sglang_table), "vllm": (VLLM_0_33_0, _vllm_table)}


def table_for_profile(profile: EngineProfile, release: str | None = None) -> FlagTable:
    """The launch-flag table of `release` (default: the release `profile` begins with; for the newest profile, the
    newest table's release), one of the releases `profile` stands for."""
    newest, derive = _DERIVED[profile.name]
    if release is None:
        same = newest.version == profile.version or newest.version.startswith(profile.version + ".")
        release = newest.version if same else profile.version
    return derive(profile, release)


def table_for(engine: str, version: str | None = None) -> FlagTable:
    """The flag table of `engine` at `version` (a release or `None`, the newest), through its profile."""
    if engine not in {name for name, _ in FLAG_TABLES}:
        raise LaunchCommandError(f"no launch-flag table for engine {engine!r}")
    try:
        profile = profile_for(f"{engine}@{version}" if version else engine)
    except ValueError as error:
        raise LaunchCommandError(str(error)) from None
    return table_for_profile(profile, version)
