"""Hostile checkpoints through the whole CLI, in every output format (issue 6; hypothesis, bounded for CI).

Property: an unreadable checkpoint ends with exit 2 and exactly one `error:` line on stderr that names the
file; a readable one (however odd its config) ends with 0 or 1. Never a traceback, never an internal error,
never a hang, never memory that follows a length the file only claims; machine formats always print a
document that parses, carrying the error when there was one.

The hostile inputs come from the reader-level fuzz suite (`test_fuzz_sources`); this module only runs them
through `gdr_check.cli.main.main` (in-process, with a few real subprocesses) and checks what a user or a CI
step would see.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
import tracemalloc
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fixtures_sources import INDEX_NAME, qwen3_next_config, qwen3_next_layer, write_json, write_sharded
from gdr_check.cli.main import main
from gdr_check.cli.output import FORMATS
from gdr_check.sources.safetensors_header import MAX_HEADER_BYTES
from test_fuzz_sources import (
    SafetensorsSpec,
    config_bytes,
    index_bytes,
    no_hang,
    safetensors_specs,
    scratch_dir,
    valid_headers,
    write_checkpoint,
    write_spec,
)

# Every example runs once per output format, so the budget is smaller than the reader suite's.
EXAMPLES = int(os.environ.get("GDR_CHECK_FUZZ_CLI_EXAMPLES", "30"))
FUZZ = settings(
    max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
HANG_SECONDS = 10.0
# What a CLI run allocates besides the file itself (parsing, rendering): ~0.3 MB measured, with margin.
RUN_MEMORY = 2 << 20
# Environment that would change what the CLI prints or where.
_ENV_KNOBS = ("GDR_CHECK_OUTPUT_FORMAT", "GDR_CHECK_OUTPUT_FILE", "GDR_CHECK_DEBUG", "GITHUB_STEP_SUMMARY",
              "FORCE_COLOR", "HF_HUB_OFFLINE")
_GITHUB_LINE = re.compile(r"^::(error|warning|notice)( [^\n]*)?::")


# -- running the CLI ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CliRun:
    code: int
    stdout: str
    stderr: str
    peak: int | None = None  # bytes, when traced


@contextlib.contextmanager
def plain_environment(**extra: str) -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in (*_ENV_KNOBS, *extra)}
    for key in _ENV_KNOBS:
        os.environ.pop(key, None)
    os.environ.update(extra)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@cache
def _warmed_up() -> bool:
    """Run every format once on a good checkpoint, so that traced runs do not count first-use imports."""
    with scratch_dir() as scratch:
        write_sharded(scratch / "ok", {"s.safetensors": qwen3_next_layer(0)}, config=qwen3_next_config())
        for fmt in FORMATS:
            run_cli([str(scratch / "ok"), "--output-format", fmt], warm=False)
    return True


def run_cli(args: Sequence[str], *, trace_memory: bool = False, warm: bool = True, **env: str) -> CliRun:
    """`gdr-check ARGS --isolated` in this process, with stdout and stderr captured."""
    if warm:
        _warmed_up()
    out, err = io.StringIO(), io.StringIO()
    peak = None
    with contextlib.ExitStack() as stack:
        stack.enter_context(plain_environment(**env))
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        stack.enter_context(no_hang(HANG_SECONDS, "the CLI"))
        if trace_memory:
            tracemalloc.start()
        try:
            code = main([*args, "--isolated"])
        finally:
            if trace_memory:
                peak = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
    return CliRun(code, out.getvalue(), err.getvalue(), peak)


def run_cli_process(args: Sequence[str], *, cwd: Path, timeout: float = 60, **env: str) -> CliRun:
    """The same in a fresh `python -m gdr_check` process (a hang is a TimeoutExpired)."""
    environment = {k: v for k, v in os.environ.items() if k not in _ENV_KNOBS and k != "TRITON_INTERPRET"}
    environment.update(env)
    done = subprocess.run([sys.executable, "-m", "gdr_check", *args, "--isolated"], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=timeout)
    return CliRun(done.returncode, done.stdout, done.stderr)


# -- the property ---------------------------------------------------------------------------------------------------
def error_lines(run: CliRun) -> list[str]:
    return [line for line in run.stderr.splitlines() if line.startswith("error:")]


def check_outcome(run: CliRun, fmt: str, names: Sequence[str]) -> None:
    """The property of this module, for one run in format `fmt`; `names` are the files it may blame."""
    context = f"format {fmt}, exit {run.code}\n--- stdout\n{run.stdout[-3000:]}\n--- stderr\n{run.stderr[-3000:]}"
    assert "Traceback" not in run.stdout + run.stderr, context
    assert "internal error" not in run.stderr, context
    assert run.code in (0, 1, 2), context
    errors = error_lines(run)
    if run.code == 2:
        assert len(errors) == 1, context
        assert any(name in errors[0] for name in names), context
    else:
        assert not errors, context
    # Besides that one line, stderr holds only the one-line summaries of the formats that print one.
    others = [line for line in run.stderr.splitlines() if not line.startswith(("error:", "summary:", "hint:"))]
    assert not others, context
    check_document(fmt, run.stdout, failed=run.code == 2, context=context)


def check_document(fmt: str, stdout: str, *, failed: bool, context: str = "") -> None:
    """stdout of a machine format parses, and a failed run carries its error there too."""
    if fmt == "json":
        document = json.loads(stdout)
        if failed:
            assert document["error"]["code"].startswith("GDR0"), context
    elif fmt == "json-lines":
        records = [json.loads(line) for line in stdout.splitlines() if line.strip()]
        if failed:
            assert any(record.get("error") for record in records), context
    elif fmt == "sarif":
        document = json.loads(stdout)
        assert document["version"] == "2.1.0", context
        invocation = document["runs"][0]["invocations"][0]
        assert invocation["executionSuccessful"] is (not failed), context
    elif fmt == "junit":
        suites = ET.fromstring(stdout)
        assert suites.tag == "testsuites", context
        assert (suites.get("errors", "0") != "0") is failed, context
    elif fmt == "github":
        commands = [line for line in stdout.splitlines() if line.startswith("::")]
        assert all(_GITHUB_LINE.match(line) for line in commands), context
        if failed:
            assert any(line.startswith("::error") for line in commands), context
    elif fmt == "gitlab":
        issues = json.loads(stdout)
        assert isinstance(issues, list), context
        assert len({issue["fingerprint"] for issue in issues}) == len(issues), context
        if failed:
            assert any(issue["severity"] == "critical" for issue in issues), context


def check_every_format(args: Sequence[str], names: Sequence[str], *, memory_limit: int | None = None) -> int:
    """Run `args` in every output format; the memory of the first run is traced. Returns the exit code,
    which must not depend on the format."""
    codes = set()
    for i, fmt in enumerate(FORMATS):
        traced = memory_limit is not None and i == 0
        run = run_cli([*args, "--output-format", fmt], trace_memory=traced)
        check_outcome(run, fmt, names)
        if traced:
            assert run.peak is not None and run.peak < memory_limit, (run.peak, memory_limit)
        codes.add(run.code)
    assert len(codes) == 1, codes
    return codes.pop()


def _valid_spec(header_and_size: tuple[dict, int]) -> SafetensorsSpec:
    header, data_size = header_and_size
    raw = json.dumps(header).encode()
    return SafetensorsSpec(len(raw), raw, 8 + len(raw) + data_size)


def _memory_limit(spec: SafetensorsSpec) -> int:
    """Memory may follow the bytes on disk, and a header length that is under the cap and inside the file
    (that much is read), never a length that is only claimed."""
    written = min(spec.size, 8 + len(spec.header))  # the rest of the file is a sparse hole
    readable = spec.length if spec.length <= MAX_HEADER_BYTES and 8 + spec.length <= spec.size else 0
    return RUN_MEMORY + 8 * written + 4 * readable


# -- hypothesis: headers, configs, indexes ---------------------------------------------------------------------------
@FUZZ
@given(spec=safetensors_specs())
@example(spec=SafetensorsSpec(2**64 - 1, b"{}", 10))
@example(spec=SafetensorsSpec(2**40, b"{}", 2**40 + 16))
@example(spec=SafetensorsSpec(99_999_999, b"{}", 10))
def test_hostile_headers(spec):
    with scratch_dir() as scratch:
        write_json(scratch / "ck" / "config.json", qwen3_next_config())
        write_spec(scratch / "ck" / "model.safetensors", spec)
        check_every_format([str(scratch / "ck")], ["model.safetensors"], memory_limit=_memory_limit(spec))


@FUZZ
@given(config=config_bytes())
def test_hostile_configs(config):
    with scratch_dir() as scratch:
        directory = write_checkpoint(scratch / "ck", config=config)
        check_every_format([str(directory)], ["config.json"])


@FUZZ
@given(data=st.data())
def test_hostile_indexes(data):
    shard_names = ("s0.safetensors", "s1.safetensors")
    specs = safetensors_specs() | valid_headers().map(_valid_spec)
    shards = {name: data.draw(specs, label=name) for name in shard_names}
    index = data.draw(index_bytes(shard_names), label="index")
    config = data.draw(st.none() | config_bytes(), label="config")
    with scratch_dir() as scratch:
        directory = write_checkpoint(scratch / "ck", config=config, index=index, shards=shards)
        check_every_format([str(directory)], ["config.json", INDEX_NAME, *shard_names])


# -- each named mutation, in every format ----------------------------------------------------------------------------
def _entry(dtype: str = "F32", shape: Sequence = (2,), offsets: Sequence = (0, 8)) -> dict:
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offsets)}


def _header(entries: dict, *, size_change: int = 0, length: int | None = None) -> SafetensorsSpec:
    raw = json.dumps(entries).encode()
    ends = [e["data_offsets"][1] for e in entries.values() if isinstance(e, dict) and "data_offsets" in e]
    data = max([end for end in ends if isinstance(end, int) and 0 <= end < 1 << 32], default=0)
    return SafetensorsSpec(len(raw) if length is None else length, raw, 8 + len(raw) + data + size_change)


_DUPLICATE = (b'{"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, '
              b'"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}')


def _raw(raw: bytes) -> SafetensorsSpec:
    """Header bytes as given, with an empty data region."""
    return SafetensorsSpec(len(raw), raw, 8 + len(raw))


HEADER_CASES = {
    "length 2**64-1": SafetensorsSpec(2**64 - 1, b"{}", 10),
    "length 2**40 inside a 1 TiB sparse file": SafetensorsSpec(2**40, b"{}", 2**40 + 16),
    "length 2**63": SafetensorsSpec(2**63, b"", 8),
    "length just over the cap": SafetensorsSpec(MAX_HEADER_BYTES + 1, b"{}", 10),
    "length under the cap, file too short": SafetensorsSpec(99_999_999, b"{}", 10),
    "file shorter than the length prefix": SafetensorsSpec(0, b"", 5),
    "bad JSON": _raw(b'{"a": [1, 2'),
    "non-UTF-8": _raw(b'{"\xff\xfe": 1}'),
    "not an object": _raw(b"[1, 2, 3]"),
    "unknown dtype": _header({"t": _entry(dtype="Q4")}),
    "negative shape": _header({"t": _entry(shape=[-2])}),
    "overflowing shape": _header({"t": _entry(shape=[2**64, 2**64], offsets=[0, 8])}),
    "overlapping offsets": _header({"a": _entry(offsets=[0, 8]), "b": _entry(offsets=[4, 12])}),
    "offsets past the end of the file": _header({"t": _entry(shape=[1 << 20], offsets=[0, 4 << 20])},
                                                size_change=-(4 << 20) + 8),
    "truncated data region": _header({"t": _entry()}, size_change=-3),
    "duplicate names": SafetensorsSpec(len(_DUPLICATE), _DUPLICATE, 8 + len(_DUPLICATE) + 8),
}


@pytest.mark.parametrize("case", list(HEADER_CASES))
def test_each_header_mutation_in_every_format(tmp_path, case):
    spec = HEADER_CASES[case]
    write_json(tmp_path / "ck" / "config.json", qwen3_next_config())
    write_spec(tmp_path / "ck" / "model.safetensors", spec)
    code = check_every_format([str(tmp_path / "ck")], ["model.safetensors"], memory_limit=_memory_limit(spec))
    assert code == 2


CONFIG_CASES = {
    "bad JSON": b'{"model_type": "qwen3_next",',
    "non-UTF-8": b'{"model_type": "qwen3_next\xff"}',
    "not an object": b'["qwen3_next"]',
    "deeply nested": b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
}


@pytest.mark.parametrize("case", list(CONFIG_CASES))
def test_each_unreadable_config_in_every_format(tmp_path, case):
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "config.json").write_bytes(CONFIG_CASES[case])
    assert check_every_format([str(tmp_path / "ck")], ["config.json"]) == 2


# Readable JSON objects with wrong content: errors found (1), nothing to check (0), or refused (2), by the
# property's rules.
READABLE_CONFIGS = {
    "huge integer": {"model_type": "qwen3_next", "num_hidden_layers": 10**4000},
    "NaN and infinity": dict(qwen3_next_config(), linear_num_value_heads=float("nan"), hidden_size=float("inf")),
    "wrong types": dict(qwen3_next_config(), linear_num_value_heads="32", num_hidden_layers=[4]),
    "missing fields": {k: v for k, v in qwen3_next_config().items() if not k.startswith("linear_")},
    "negative counts": dict(qwen3_next_config(), linear_num_key_heads=-2, num_hidden_layers=-4),
    "zero counts": dict(qwen3_next_config(), linear_key_head_dim=0, linear_num_value_heads=0),
    "layer types out of range": dict(qwen3_next_config(), layer_types=["linear_attention"] * 40),
    "kda layers out of range": {"model_type": "kimi_linear", "architectures": ["KimiLinearForCausalLM"],
                                "num_hidden_layers": 4,
                                "linear_attn_config": {"num_heads": 4, "head_dim": 8, "kda_layers": [0, 9, -1, 2**40],
                                                       "full_attn_layers": [4]}},
    "huge counts": dict(qwen3_next_config(), linear_num_value_heads=2**62, linear_num_key_heads=2**61),
}


@pytest.mark.parametrize("case", list(READABLE_CONFIGS))
def test_each_readable_but_wrong_config_in_every_format(tmp_path, case):
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "config.json").write_text(json.dumps(READABLE_CONFIGS[case]))  # allows NaN, Infinity
    check_every_format([str(tmp_path / "ck")], ["config.json"])


INDEX_CASES = {
    "bad JSON": b'{"weight_map": {"a": ',
    "not an object": b"[]",
    "no weight_map": b'{"metadata": {}}',
    "shard name with ..": json.dumps({"weight_map": {"t": "../s0.safetensors"}}).encode(),
    "absolute shard name": json.dumps({"weight_map": {"t": "/etc/passwd"}}).encode(),
    "shard name with a separator": json.dumps({"weight_map": {"t": "sub/s0.safetensors"}}).encode(),
    "missing shard": json.dumps({"weight_map": {"t": "s9.safetensors"}}).encode(),
    "tensor not in its shard": json.dumps({"weight_map": {"nope": "s0.safetensors"}}).encode(),
}


@pytest.mark.parametrize("case", list(INDEX_CASES))
def test_each_index_mutation_in_every_format(tmp_path, case):
    (tmp_path / "sub").mkdir()
    write_sharded(tmp_path / "sub", {"s0.safetensors": qwen3_next_layer(0)})
    write_sharded(tmp_path / "ck", {"s0.safetensors": qwen3_next_layer(0)}, config=qwen3_next_config())
    (tmp_path / "ck" / INDEX_NAME).write_bytes(INDEX_CASES[case])
    assert check_every_format([str(tmp_path / "ck")], [INDEX_NAME]) == 2


def test_a_fifo_is_refused_in_every_format_without_blocking(tmp_path):
    write_sharded(tmp_path / "ck", {"s0.safetensors": qwen3_next_layer(0)}, config=qwen3_next_config())
    (tmp_path / "ck" / "s0.safetensors").unlink()
    os.mkfifo(tmp_path / "ck" / "s0.safetensors")
    assert check_every_format([str(tmp_path / "ck")], ["s0.safetensors"]) == 2


# -- the same in real processes --------------------------------------------------------------------------------------
def test_hostile_inputs_in_separate_processes(tmp_path):
    """A few cases end to end in `python -m gdr_check`: exit status, streams and documents as a CI step sees
    them (a hang would raise TimeoutExpired)."""
    write_json(tmp_path / "header" / "config.json", qwen3_next_config())
    write_spec(tmp_path / "header" / "model.safetensors", SafetensorsSpec(2**64 - 1, b"{}", 10))
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.json").write_bytes(b'{"model_type": "qwen3_next\xff"}')
    write_sharded(tmp_path / "index", {"s0.safetensors": qwen3_next_layer(0)}, config=qwen3_next_config(),
                  weight_map={"t": "../header/model.safetensors"})
    write_sharded(tmp_path / "fifo", {"s0.safetensors": qwen3_next_layer(0)}, config=qwen3_next_config())
    (tmp_path / "fifo" / "s0.safetensors").unlink()
    os.mkfifo(tmp_path / "fifo" / "s0.safetensors")
    cases = [("header", "json", "model.safetensors"), ("config", "sarif", "config.json"),
             ("index", "junit", INDEX_NAME), ("fifo", "github", "s0.safetensors")]
    for target, fmt, name in cases:
        run = run_cli_process([target, "--output-format", fmt], cwd=tmp_path)
        check_outcome(run, fmt, [name])
        assert run.code == 2

