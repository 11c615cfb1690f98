"""An engine's launch command as users type it, read with gdr-check's own parser (no engine import).

`parse_launch(argv)` takes `vllm serve MODEL ...`, `python -m vllm.entrypoints.openai.api_server --model ...`,
`python -m sglang.launch_server --model-path ...` or `sglang serve --model-path ...` (with `VAR=value` words and
an interpreter in front) and returns a `LaunchCommand`: the engine, the model, and every setting that changes the
kernel call, the state pool, the decode path or memory, under the engine-neutral names of `SETTINGS`. Other flags
are passed over and listed.

The flags of each release are data (`gdr_check.engines.launch_flags`, one `FlagTable` per engine release).
"""

from __future__ import annotations

import ast
import json
import re
import shlex
import tokenize
from collections.abc import Sequence
from dataclasses import field
from io import StringIO
from typing import Any

from ..base.records import dataclass
from ..engines.launch_flags import Flag, FlagTable, LaunchCommandError, table_for

# The settings a launch command can give, engine-neutral; each engine's flags fill some of them.
SETTINGS: dict[str, str] = {
    "model": "the model (path or repo id)",
    "tp": "tensor-parallel size",
    "dp": "data-parallel replicas",
    "pp": "pipeline-parallel size",
    "attn_dp": "attention data-parallel groups inside the TP group (sglang)",
    "attn_cp": "attention context-parallel size (sglang)",
    "enable_dp_attention": "deprecated sglang switch: --dp-size counts attention-DP groups",
    "memory_fraction": "vLLM --gpu-memory-utilization / sglang --mem-fraction-static",
    "max_model_len": "vLLM --max-model-len / sglang --context-length",
    "max_running": "vLLM --max-num-seqs / sglang --max-running-requests",
    "state_dtype": "SSM state dtype",
    "conv_dtype": "conv state dtype (vLLM --mamba-cache-dtype)",
    "dtype": "activation dtype",
    "kv_cache_dtype": "attention KV cache dtype",
    "quantization": "weight quantization method",
    "speculative_algorithm": "speculative decoding method",
    "speculative_tokens": "draft tokens per verify step",
    "speculative_config": "vLLM --speculative-config (JSON)",
    "compilation_config": "vLLM --compilation-config (JSON)",
    "enforce_eager": "no CUDA graphs",
    "cudagraph_capture_sizes": "decode CUDA-graph batch sizes",
    "max_cudagraph_capture_size": "largest decode CUDA-graph batch",
    "prefix_caching": "prefix caching on (vLLM) / radix cache on (sglang)",
    "mamba_strategy": "sglang --mamba-radix-cache-strategy",
    "disable_overlap_schedule": "sglang overlap scheduler off",
    "max_mamba_cache_size": "sglang state-pool size",
    "mamba_full_memory_ratio": "sglang state/KV memory ratio",
    "page_size": "sglang page size",
    "linear_attn_backend": "sglang linear-attention kernel backend",
    "linear_attn_decode_backend": "sglang linear-attention decode backend",
    "num_gpu_blocks_override": "vLLM block count override",
    "kv_cache_memory_bytes": "vLLM KV cache size in bytes",
    "block_size": "vLLM KV cache block size",
    "performance_mode": "vLLM --performance-mode",
    "mamba_cache_mode": "vLLM --mamba-cache-mode (the state's prefix-caching mode before 0.33)",
}


@dataclass
class LaunchCommand:
    """A launch command as read: the engine, its settings (engine-neutral names), and what was passed over."""

    engine: str
    entry: str  # how it was started: "vllm serve", "python -m sglang.launch_server", ...
    table: FlagTable
    settings: dict[str, Any] = field(default_factory=dict)
    flags: dict[str, str] = field(default_factory=dict)  # setting -> the flag that gave it (as typed)
    env: dict[str, str] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)  # flags passed over (they change no kernel call, pool, path)
    notes: list[str] = field(default_factory=list)

    def get(self, setting: str, default: Any = None) -> Any:
        return self.settings.get(setting, default)

    @property
    def engine_spec(self) -> str:
        """`engine@version`: the release the command was read as (what `--engine` takes, e.g. sglang@0.5.14)."""
        return f"{self.engine}@{self.table.version}"


_ENTRIES: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (("vllm", "serve"), "vllm", "vllm serve"),
    (("-m", "vllm.entrypoints.openai.api_server"), "vllm", "python -m vllm.entrypoints.openai.api_server"),
    (("sglang", "serve"), "sglang", "sglang serve"),
    (("-m", "sglang.launch_server"), "sglang", "python -m sglang.launch_server"),
)
_ENV_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def split_command(text: str) -> list[str]:
    """A command line as one string -> its words, as a POSIX shell splits them (line continuations joined)."""
    try:
        return shlex.split(text.replace("\\\n", " "))
    except ValueError as error:
        raise LaunchCommandError(f"cannot split the launch command: {error}") from None


def _entry(argv: Sequence[str]) -> tuple[str, str, int, dict[str, str]]:
    """The engine, the entry as typed, the index of the first argument after it, and the leading VAR=value words."""
    env: dict[str, str] = {}
    words = list(argv)
    start = 0
    while start < len(words) and _ENV_WORD.match(words[start]):
        name, _, value = words[start].partition("=")
        env[name] = value
        start += 1
    for index in range(start, len(words)):
        for pattern, engine, shown in _ENTRIES:
            if tuple(words[index:index + len(pattern)]) == pattern or (
                    pattern[0] != "-m" and index == start and words[index].rsplit("/", 1)[-1] == pattern[0]
                    and tuple(words[index + 1:index + len(pattern)]) == pattern[1:]):
                return engine, shown, index + len(pattern), env
    seen = " ".join(words[start:start + 3])
    raise LaunchCommandError(
        f"not a launch command gdr-check reads: {seen!r}; expected `vllm serve MODEL ...`, `python -m "
        "vllm.entrypoints.openai.api_server --model ...`, `sglang serve --model-path ...` or `python -m "
        "sglang.launch_server --model-path ...`")


def _int(flag: str, text: str) -> int:
    if re.fullmatch(r"-?\d+", text.strip()):
        return int(text)
    raise LaunchCommandError(f"argument {flag}: invalid int value: {text!r}")


def _value(flag: Flag, typed: str, text: str) -> Any:
    kind = flag.kind
    if flag.choices and text not in flag.choices:
        choices = ", ".join(repr(c) for c in flag.choices)
        raise LaunchCommandError(f"argument {typed}: invalid choice: {text!r} (choose from {choices})")
    if kind == "int":
        return _int(typed, text)
    if kind in ("hint", "hint_auto"):
        value = text.strip()
        if kind == "hint_auto" and (value == "-1" or value.lower() == "auto"):
            return -1
        number, suffix = value[:-1], value[-1:]
        whole, dot, fraction = number.partition(".")
        if suffix and suffix in "kKmMgGtT" and whole.isdigit() and whole.isascii() and (
                not dot or (fraction.isdigit() and fraction.isascii())):
            return int(float(number) * (_DECIMAL.get(suffix) or _BINARY[suffix]))
        return _int(typed, value)
    if kind == "float":
        try:
            return float(text)
        except ValueError:
            raise LaunchCommandError(f"argument {typed}: invalid float value: {text!r}") from None
    if kind == "json":
        try:
            value = json.loads(text)
        except ValueError:
            raise LaunchCommandError(f"argument {typed}: not a JSON object: {text[:60]!r}") from None
        if not isinstance(value, dict):
            raise LaunchCommandError(f"argument {typed}: not a JSON object: {text[:60]!r}")
        return value
    return text


def _dotted(command: LaunchCommand, flag: Flag, typed: str, path: str, text: str) -> None:
    """vLLM's `-cc.cudagraph_mode=FULL` / `--speculative-config.num_speculative_tokens 2`."""
    target = command.settings.setdefault(flag.setting, {})
    keys = path.split(".")
    for key in keys[:-1]:
        target = target.setdefault(key, {})
    try:
        target[keys[-1]] = json.loads(text)
    except ValueError:
        target[keys[-1]] = text
    command.flags.setdefault(flag.setting, typed)


def parse_launch(argv: Sequence[str], *, version: str | None = None) -> LaunchCommand:
    """Read a launch command (its words). Raises `LaunchCommandError` for a command the engine would reject."""
    engine, shown, index, env = _entry(argv)
    table = table_for(engine, version)
    command = LaunchCommand(engine=engine, entry=shown, table=table, env=env)
    words = list(argv[index:])
    position = 0
    while position < len(words):
        word = words[position]
        position += 1
        if not word.startswith("-") or word == "-":
            if table.positional_model and "model" not in command.settings:
                command.settings["model"] = word
                command.flags["model"] = "MODEL"
            else:
                command.ignored.append(word)
            continue
        name, has_value, inline = word.partition("=")
        dotted = None
        if "." in name and table.dotted_json:  # `-cc.cudagraph_mode=FULL`: the key keeps its underscores
            name, _, dotted = name.partition(".")
        if table.underscores and name.startswith("--"):
            name = "--" + name[2:].replace("_", "-")
        if name in table.rejected:
            raise LaunchCommandError(f"{table.display or table.engine} {table.version} rejects it: "
                                     f"{table.rejected[name]}")
        name = table.abbreviations.get(name, name)
        flag = table.lookup(name)
        if name in table.aliases:
            command.notes.append(table.aliases[name])
        negative = False
        if flag is None and table.negatable:
            for prefix, inverse in (("--no-", "--"), ("--disable-", "--enable-")):
                if name.startswith(prefix):
                    candidate = table.lookup(inverse + name[len(prefix):])
                    if candidate is not None and candidate.kind == "bool_opt":
                        flag, negative = candidate, True
                        break
        if flag is None:
            command.ignored.append(word)
            if (not has_value and name not in table.switches and position < len(words)
                    and not words[position].startswith("-")):
                command.ignored.append(words[position])  # its value, most likely (a flag gdr-check does not read)
                position += 1
            continue
        if flag.kind in ("bool", "bool_opt", "false", "bool_dep"):
            if has_value:
                raise LaunchCommandError(f"argument {word.partition('=')[0]}: ignored explicit argument {inline!r}")
            value: Any = not negative if flag.kind != "false" else False
            command.settings[flag.setting] = value
            command.flags[flag.setting] = word
            if flag.kind == "bool_dep":
                command.notes.append(f"{word} is deprecated in {table.engine} {table.version}; "
                                     f"{_DEPRECATED.get(name, 'the engine translates it')}")
            continue
        if flag.kind == "ints":
            values = [inline] if has_value else []
            while not has_value and position < len(words) and re.fullmatch(r"\d+", words[position]):
                values.append(words[position])
                position += 1
            if not values:
                raise LaunchCommandError(f"argument {word}: expected at least one argument")
            command.settings[flag.setting] = [_int(word, v) for part in values for v in part.split(",") if v]
            command.flags[flag.setting] = name
            continue
        if has_value:
            text = inline
        elif position < len(words):
            text = words[position]
            position += 1
        else:
            raise LaunchCommandError(f"argument {name}: expected one argument")
        if dotted is not None and flag.kind == "json":
            _dotted(command, flag, name, dotted, text)
            continue
        command.settings[flag.setting] = _value(flag, name, text)
        command.flags[flag.setting] = name
    _finish(command)
    return command


_DEPRECATED = {
    "--enable-dp-attention": "with --dp-size N it becomes --attn-dp-size N (and --dp-size 1)",
    "--disable-cuda-graph": "it turns the decode CUDA graphs off",
}


def _finish(command: LaunchCommand) -> None:
    """What the engine derives from the flags alone, before the model or the GPU is known."""
    settings = command.settings
    if "model" not in settings:
        raise LaunchCommandError(f"the launch command names no model: give {command.table.model_hint}")
    if command.table.legacy_dp_attention and settings.get("enable_dp_attention"):
        # parallel_hook.py:39-61: `--dp-size N --enable-dp-attention` is `--attn-dp-size N --dp-size 1`.
        if settings.get("attn_dp", 1) == 1 and settings.get("dp", 1) > 1:
            settings["attn_dp"] = settings["dp"]
            settings["dp"] = 1
            count = settings["attn_dp"]
            command.notes.append(f"--enable-dp-attention --dp-size {count} is read as {count} attention data-parallel "
                                 f"groups inside the TP group (`--attn-dp-size {count}` from sglang 0.5.22)")
    if "speculative_config" in settings:  # vLLM's JSON argument
        spec = settings.get("speculative_config")
        if isinstance(spec, dict) and spec.get("num_speculative_tokens") is not None:
            tokens = spec["num_speculative_tokens"]
            if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
                raise LaunchCommandError(f"--speculative-config: num_speculative_tokens must be a whole number, "
                                         f"got {tokens!r}")
            settings["speculative_tokens"] = tokens
    cc = settings.get("compilation_config")  # vLLM's JSON argument
    if isinstance(cc, dict):
        for key in ("cudagraph_capture_sizes", "max_cudagraph_capture_size"):
            if cc.get(key) is not None and key not in settings:
                settings[key] = cc[key]
    for name in ("tp", "dp", "pp", "attn_dp", "attn_cp", "max_running", "speculative_tokens", "page_size"):
        value = settings.get(name)
        if value is not None and value < (0 if name == "speculative_tokens" else 1):
            raise LaunchCommandError(f"{command.flags.get(name, name)} must be >= 1 (got {value})")
    length = settings.get("max_model_len")
    refusal = command.table.nonpositive_length_error
    if refusal is not None and isinstance(length, int) and length < 1 and length != -1:
        raise LaunchCommandError(f"{command.table.display} refuses {command.flags.get('max_model_len', '')} {length}: "
                                 f"`{refusal.format(length=length)}`")
    fraction = settings.get("memory_fraction")
    if fraction is not None and not 0 < fraction <= 1:
        raise LaunchCommandError(f"{command.flags['memory_fraction']} must be in (0, 1] (got {fraction})")
    tp, attn_dp, attn_cp = settings.get("tp", 1), settings.get("attn_dp", 1), settings.get("attn_cp", 1)
    if tp % (attn_dp * attn_cp):
        raise LaunchCommandError(f"--tp-size {tp} is not divisible by --attn-dp-size {attn_dp} x --attn-cp-size "
                                 f"{attn_cp}")


def attention_tp(command: LaunchCommand) -> int:
    """The TP width the GDN/KDA layers are sharded by: sglang's `attn_tp_size = tp // attn_dp // attn_cp`
    (sglang 0.5.23 `srt/runtime_context.py:73-76`); the TP size where the release has no attention DP or CP (vLLM:
    its table reads neither)."""
    tp = int(command.get("tp", 1))
    return tp // int(command.get("attn_dp", 1)) // int(command.get("attn_cp", 1))


# -- a startup log ----------------------------------------------------------------------------------------
_VLLM_NON_DEFAULT = re.compile(r"non-default args: (\{.*\})")
# The release a vLLM startup log names: its banner (`version 0.17.1` beside the logo, vLLM 0.11 on) or the API
# server's `vLLM API server version X` line.
_VLLM_LOG_RELEASE = re.compile(r"(?:\u2588\s+version|vLLM API server version) (v?\d+(?:\.\d+)+[0-9A-Za-z.+-]*)")
# JSON's literals, as vLLM prints a JSON argument (`'compilation_config': {"cudagraph_mode":null, ...}`) inside the
# Python dict of its non-default args.
_JSON_LITERALS = {"null": "None", "true": "True", "false": "False"}
_SGLANG_SERVER_ARGS = re.compile(r"server_args=ServerArgs\((.*)\)")
# Startup-log field -> setting, per engine.
_LOG_FIELDS: dict[str, dict[str, str]] = {
    "vllm": {"model": "model", "model_tag": "model", "tensor_parallel_size": "tp", "data_parallel_size": "dp",
             "pipeline_parallel_size": "pp", "gpu_memory_utilization": "memory_fraction",
             "max_num_seqs": "max_running", "max_model_len": "max_model_len",
             "mamba_ssm_cache_dtype": "state_dtype", "mamba_cache_dtype": "conv_dtype", "dtype": "dtype",
             "kv_cache_dtype": "kv_cache_dtype", "quantization": "quantization", "enforce_eager": "enforce_eager",
             "enable_prefix_caching": "prefix_caching", "num_gpu_blocks_override": "num_gpu_blocks_override",
             "kv_cache_memory_bytes": "kv_cache_memory_bytes", "block_size": "block_size",
             "max_cudagraph_capture_size": "max_cudagraph_capture_size",
             "cudagraph_capture_sizes": "cudagraph_capture_sizes", "speculative_config": "speculative_config"},
    "sglang": {"model_path": "model", "tp_size": "tp", "dp_size": "dp", "pp_size": "pp", "attn_dp_size": "attn_dp",
               "attn_cp_size": "attn_cp", "mem_fraction_static": "memory_fraction",
               "max_running_requests": "max_running", "context_length": "max_model_len",
               "mamba_ssm_dtype": "state_dtype", "dtype": "dtype", "kv_cache_dtype": "kv_cache_dtype",
               "quantization": "quantization", "speculative_algorithm": "speculative_algorithm",
               "speculative_num_draft_tokens": "speculative_tokens",
               "cuda_graph_max_bs_decode": "max_cudagraph_capture_size",
               "mamba_radix_cache_strategy": "mamba_strategy", "disable_overlap_schedule": "disable_overlap_schedule",
               "max_mamba_cache_size": "max_mamba_cache_size", "mamba_full_memory_ratio": "mamba_full_memory_ratio",
               "page_size": "page_size", "linear_attn_backend": "linear_attn_backend",
               "linear_attn_decode_backend": "linear_attn_decode_backend"},
}


def _literal_end(text: str, start: int) -> int:
    """The end of the Python literal (a quoted string, a number, True/False/None) at `start`, or -1; by scanning."""
    if start >= len(text):
        return -1
    quote = text[start]
    if quote in "'\"":
        at = start + 1
        while at < len(text):
            if text[at] == "\\":
                at += 2
                continue
            if text[at] == quote:
                return at + 1
            at += 1
        return -1
    for word in ("True", "False", "None"):
        if text.startswith(word, start):
            return start + len(word)
    at = start + (1 if text[start] == "-" else 0)
    while at < len(text) and (text[at].isdigit() or text[at] in ".e-+"):
        at += 1
    return at if at > start and text[start:at] != "-" else -1


def _keyword_literals(text: str) -> dict[str, Any]:
    """`key=literal` pairs of a repr (`ServerArgs(tp_size=4, model_path='m', ...)`), by one linear scan; values
    that are not plain literals (nested records) are passed over."""
    values: dict[str, Any] = {}
    position = 0
    while (equals := text.find("=", position)) >= 0:
        start = equals
        while start > position and (text[start - 1].isalnum() or text[start - 1] == "_"):
            start -= 1
        end = _literal_end(text, equals + 1)
        position = equals + 1
        if start == equals or end < 0:
            continue
        try:
            values[text[start:equals]] = ast.literal_eval(text[equals + 1:end])
        except (ValueError, SyntaxError, RecursionError, MemoryError):
            continue
        position = end
    return values


# The most text a startup settings line is read over (an engine prints a few kilobytes): a longer one is cut.
_MAX_SETTINGS_LINE = 1 << 20


def _bracketed(text: str, marker: str) -> str | None:
    """What the last `marker` (ending in its opening bracket) encloses, up to the matching bracket, read across line
    breaks (a pasted log wrapped at the terminal's width, even inside a word: the breaks are dropped), by one scan
    that skips quoted strings; None when the text has no such marker or it is not closed."""
    at = text.rfind(marker)
    if at < 0:
        return None
    opening = marker[-1]
    closing = {"(": ")", "{": "}", "[": "]"}[opening]
    depth, quote, index = 1, "", at + len(marker)
    body: list[str] = []
    stop = min(len(text), index + _MAX_SETTINGS_LINE)
    while index < stop:
        char = text[index]
        index += 1
        if char in "\r\n":
            continue
        if quote:
            if char == "\\" and index < len(text):
                body += [char, text[index]]
                index += 1
                continue
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == opening:
            depth += 1
        elif char == closing:
            depth -= 1
            if depth == 0:
                return "".join(body) if opening == "(" else opening + "".join(body) + closing
        body.append(char)
    return None


def _python_literal(text: str) -> Any:
    """A Python literal that may hold JSON's null, true and false (a JSON argument printed inside a dict): the
    names are replaced token by token (never inside a string), then the text is read with `ast.literal_eval`."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, RecursionError, MemoryError):  # (a deep expression overflows the parser)
        pass
    try:
        tokens = [(kind, _JSON_LITERALS.get(value, value) if kind == tokenize.NAME else value)
                  for kind, value, *_ in tokenize.generate_tokens(StringIO(text).readline)]
        return ast.literal_eval(tokenize.untokenize(tokens))
    except (ValueError, SyntaxError, tokenize.TokenError, RecursionError, MemoryError):
        raise LaunchCommandError("the log's `non-default args:` line is cut or not a Python dict") from None


def _log_fields(engine: str, table: FlagTable) -> dict[str, str]:
    """Startup-log field -> setting for `table`'s release: each `--flag` of the release's table under its field name
    (`--mamba-scheduler-strategy` -> `mamba_scheduler_strategy` in an sglang 0.5.13 log), and the fields a log
    names otherwise (`_LOG_FIELDS`). A flag whose presence negates a setting (`--disable-radix-cache`) is read
    through `FlagTable.log_negations` instead, as its field holds True or False."""
    derived = {name[2:].replace("-", "_"): flag.setting for flag in table.flags if flag.kind != "false"
               for name in flag.names if name.startswith("--")}
    return {**derived, **_LOG_FIELDS[engine]}


def log_release(text: str) -> str | None:
    """The engine release a vLLM startup log names (its banner or the API server's version line), if any."""
    found = _VLLM_LOG_RELEASE.findall(text)
    return found[-1].lstrip("v") if found else None


def parse_log(text: str, *, version: str | None = None) -> LaunchCommand:
    """The settings of an engine's startup log: vLLM's `non-default args: {...}` line or sglang's
    `server_args=ServerArgs(...)` line (the last one in the text). The release is `version`, else the one a vLLM
    log names (a note says so), else the newest."""
    vllm = _VLLM_NON_DEFAULT.findall(text)
    sglang = _SGLANG_SERVER_ARGS.findall(text)
    wrapped = _bracketed(text, "non-default args: {"), _bracketed(text, "server_args=ServerArgs(")
    vllm = [wrapped[0]] if wrapped[0] is not None else vllm
    sglang = [wrapped[1]] if wrapped[1] is not None else sglang
    notes: list[str] = []
    if vllm and not sglang:
        values = _python_literal(vllm[-1])
        engine, entry = "vllm", "vLLM startup log (non-default args)"
        named = log_release(text)
        if version is None and named is not None:
            try:
                table_for(engine, named)
            except LaunchCommandError as error:
                raise LaunchCommandError(f"the log is from vLLM {named}: {error}; give --engine-version to read it "
                                         "as another release") from None
            version = named
            notes.append(f"vLLM {named}: the release the log names (its banner)")
    elif sglang:
        values = _keyword_literals(sglang[-1])
        engine, entry = "sglang", "sglang startup log (server_args)"
    else:
        raise LaunchCommandError("no startup settings in the log: expected vLLM's `non-default args: {...}` line or "
                                 "sglang's `server_args=ServerArgs(...)` line")
    if not isinstance(values, dict):
        raise LaunchCommandError("the log's settings line is not a mapping")
    command = LaunchCommand(engine=engine, entry=entry, table=table_for(engine, version))
    command.notes.extend(notes)
    fields = _log_fields(engine, command.table)
    for key, value in values.items():
        setting = fields.get(key)
        if setting is None:
            command.ignored.append(str(key))
            spelling = "--" + str(key).replace("_", "-")
            if spelling in command.table.rejected and value not in (None, False):
                command.notes.append(
                    f"the log sets `{key}`, which {command.table.display} {command.table.version} does not take "
                    f"({command.table.rejected[spelling]}): not read; give --engine-version with the release that "
                    "wrote the log")
        elif value is not None:
            command.settings[setting] = value
            command.flags[setting] = key
    for key, setting in command.table.log_negations.items():
        if setting not in command.settings and values.get(key):
            command.settings[setting] = False
    _finish(command)
    return command
