"""The launch flags gdr-check reads, per engine release: data, one `FlagTable` per release.

Each `Flag` names its spellings in that release, the engine-neutral setting it fills (see
`gdr_check.deployment.launch_command.SETTINGS`), how its value reads, its choices and the release file that
defines it; `rejected` holds the spellings the release's own parser refuses, with what it says. A release whose
spellings differ gets its own table in `FLAG_TABLES`; `table_for(engine, version)` picks one. The release profiles
(`engines.profiles`) name the releases; the tables here are for sglang 0.5.23 and vLLM 0.33.0.

Sources: sglang 0.5.23 `srt/arg_groups/fields/{model,parallel,schedule,memory,exec_,spec}.py`,
`srt/arg_groups/argparse_actions.py`, `srt/arg_groups/parallel_hook.py:39-61`; vLLM 0.33.0
`vllm/engine/arg_utils.py` (`add_cli_args`, `_compute_kwargs`), `vllm/utils/argparse_utils.py:30-95,120-145`,
`vllm/config/{cache,model,parallel,scheduler}.py`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..base.errors import InputError


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
    # Startup-log fields that turn a setting off (`disable_radix_cache=True` -> prefix caching off).
    log_negations: Mapping[str, str] = field(default_factory=dict)

    def lookup(self, name: str) -> Flag | None:
        for flag in self.flags:
            if name in flag.names:
                return flag
        return None


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
                                      "--mamba-radix-cache-strategy; the old spelling was removed before 0.5.23)",
        "--cuda-graph-max-bs": "ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, "
                               "--cuda-graph-max-bs-prefill",
    },
    abbreviations={"--tp": "--tp-size", "--dp": "--dp-size", "--pp": "--pp-size"},
    display="sglang", model_hint="--model-path", legacy_dp_attention=True, memory_model="state-pool",
    conv_dtype_env="SGLANG_MAMBA_CONV_DTYPE", fp8_checks_every_merged_output=True,
    log_negations={"disable_radix_cache": "prefix_caching"},
    switches=frozenset({"--trust-remote-code", "--enable-metrics", "--skip-server-warmup", "--enable-torch-compile",
                        "--enable-ep-moe", "--enable-mixed-chunk", "--disable-custom-all-reduce", "--log-requests"}),
)

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


def table_for(engine: str, version: str | None = None) -> FlagTable:
    """The flag table of `engine` at `version` (default: the newest table of the engine)."""
    by_engine: dict[str, list[tuple[str, FlagTable]]] = {}
    for (name, release), found in FLAG_TABLES.items():
        by_engine.setdefault(name, []).append((release, found))
    tables = sorted(by_engine.get(engine, []), key=lambda item: tuple(int(part) for part in item[0].split(".")))
    if not tables:
        raise LaunchCommandError(f"no launch-flag table for engine {engine!r}")
    if version is None:
        return tables[-1][1]
    for v, table in tables:
        if v == version:
            return table
    known = ", ".join(v for v, _ in tables)
    raise LaunchCommandError(f"no launch-flag table for {engine} {version}; gdr-check reads {engine} {known}")
