"""Cost bounded by what is used: data a run never reports on costs it nothing, a list or an integer read from
data is bounded before it is walked or converted, and rendering is linear in the results. Each case asserts
its cost against the input's size (operations counted, memory traced), never a wall clock, and the one
outcome the README promises through the real CLI: a report, or one `error:` line and exit 2."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from checkpoint_builders import (
    interval_layer_types,
    kimi_config,
    kimi_tensors,
    qwen3_next_config,
    qwen_tensors,
    write_checkpoint,
)
from cli_checkpoints import clean_output_env, write_good
from gdr_check.models.adapters import (
    ConfigView,
    generic_layer_map,
    kimi_layer_map,
    layers_by_namespace,
    split_layer_name,
)
from hostile_corpus import FORMATS, assert_outcome, run_in_process, run_subprocess

MAX_RSS_MIB = 300


class Counted(int):
    """A layer number that counts how often it is compared or hashed: a walk that compares each entry with every other
    one (a list's `in`) shows as a count that grows with the square of the list."""

    comparisons = 0

    def __eq__(self, other: object) -> bool:
        Counted.comparisons += 1
        return int(self) == other

    def __hash__(self) -> int:
        Counted.comparisons += 1
        return int.__hash__(self)


def _comparisons(build, size: int) -> int:
    Counted.comparisons = 0
    build([Counted(i) for i in range(size)])
    return Counted.comparisons


def _kimi(values: list[int]) -> None:
    kimi_layer_map(ConfigView({"num_hidden_layers": 8, "linear_attn_config": {
        "kda_layers": values, "full_attn_layers": values}}))


def _gigachat(values: list[int]) -> None:
    generic_layer_map(ConfigView({"num_hidden_layers": len(values), "full_attention_layers": values}))


@pytest.mark.parametrize("build", [_kimi, _gigachat], ids=["kda_layers", "full_attention_layers"])
def test_a_layer_list_costs_operations_linear_in_its_length(build):
    small, large = _comparisons(build, 2_000), _comparisons(build, 8_000)
    assert large <= 4 * small + 100, (small, large)  # four times the entries: at most four times the work


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("costs")
    config = kimi_config()
    long_list = json.loads(json.dumps(config))
    long_list["linear_attn_config"]["kda_layers"] = list(range(100_000))
    write_checkpoint(root / "kda-100k", long_list, kimi_tensors(config))
    unhashable = json.loads(json.dumps(config))
    unhashable["linear_attn_config"]["full_attn_layers"] = [[4], {"8": 8}]
    write_checkpoint(root / "kda-unhashable", unhashable, kimi_tensors(config))
    qwen = qwen3_next_config()
    kinds = dict(qwen, layer_types=[["linear_attention"], {"a": 1}] + interval_layer_types(8)[2:])
    write_checkpoint(root / "types-unhashable", kinds, qwen_tensors(qwen))
    tensors = dict(qwen_tensors(qwen))
    tensors["model.layers." + "9" * 5000 + ".mlp.gate.weight"] = ("BF16", (4,))
    tensors["model.layers." + "0" * 5000 + "3.linear_attn.extra"] = ("BF16", (4,))
    write_checkpoint(root / "index-digits", qwen, tensors)
    return root


def test_a_hundred_thousand_layer_numbers_are_one_bounded_message(root):
    outcome = run_subprocess("kda-100k", "--isolated", "--output-format", "concise", cwd=root)
    assert_outcome("concise", outcome, exit_code=1)
    assert ("error[GDR104] `linear_attn_config.kda_layers` names layers [0, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, "
            "19, ... (99992 in all)] outside 1..8 (the list is 1-based)") in outcome.stdout
    assert len(outcome.stdout) < 4000 and 0 < outcome.max_rss_mib < MAX_RSS_MIB


@pytest.mark.parametrize("fmt", FORMATS)
def test_unhashable_layer_kinds_are_reported_not_raised(root, monkeypatch, fmt):
    clean_output_env(monkeypatch)
    outcome = run_in_process("types-unhashable", "--isolated", "--output-format", fmt, cwd=root)
    assert_outcome(fmt, outcome, exit_code=1)
    if fmt == "concise":
        assert 'error[GDR104] `layer_types` holds unknown layer kinds `["linear_attention"]`, `{"a": 1}`' \
            in outcome.stdout
    outcome = run_in_process("kda-unhashable", "--isolated", "--output-format", fmt, cwd=root)
    assert_outcome(fmt, outcome, exit_code=0)


def test_a_layer_index_of_thousands_of_digits_names_no_layer(root):
    """Python converts at most 4300 digits: the index is bounded before it is converted, and names no layer of
    any model (it is past `num_hidden_layers`' limit); leading zeros still name the layer they end in."""
    assert split_layer_name("model.layers." + "9" * 5000 + ".mlp.weight") is None
    assert split_layer_name("model.layers.65536.mlp.weight") is None
    assert split_layer_name("model.layers.65535.mlp.weight") == ("model.", 65535, "mlp.weight")
    assert split_layer_name("model.layers." + "0" * 5000 + "7.x") == ("model.", 7, "x")
    grouped = layers_by_namespace({"model.layers." + "9" * 5000 + ".a": 1, "model.layers.007.b": 2,
                                   "model.layers." + "0" * 5000 + "7.c": 3})
    assert grouped == {"model.": {7: {"b": 2, "c": 3}}}
    for fmt in ("concise", "json"):
        outcome = run_subprocess("index-digits", "--isolated", "--output-format", fmt, cwd=root)
        assert_outcome(fmt, outcome, exit_code=1)  # layer 3, zero-padded, holds a linear-attention tensor
        assert "GDR114" in outcome.stdout and "9" * 100 not in outcome.stdout
        if fmt == "concise":
            assert ("error[GDR114] `full_attention_interval` makes layer 3 full-attention, but its tensors are "
                    "linear-attention") in outcome.stdout


def _render_calls(repo: Path, fmt: str, sizes: int) -> int:
    """Python function calls made while `fmt` renders the results of `--tp 1,...,sizes` (the checks are not
    counted)."""
    from gdr_check.cli.formats import format_module

    calls = 0

    def counting(frame, event, arg) -> None:
        nonlocal calls
        if event == "call":
            calls += 1

    module = format_module(fmt)
    render = module.render

    def counted(*args, **kwargs):
        sys.setprofile(counting)
        try:
            return render(*args, **kwargs)
        finally:
            sys.setprofile(None)

    module.render = counted
    try:
        tp = ",".join(str(size) for size in range(1, sizes + 1))
        outcome = run_in_process("good", "--isolated", "--tp", tp, "--output-format", fmt, cwd=repo)
    finally:
        module.render = render
    assert outcome.exit_code == 1 and "Traceback" not in outcome.stderr
    return calls


@pytest.mark.parametrize("fmt", FORMATS)
def test_rendering_is_linear_in_the_results(tmp_path, monkeypatch, fmt):
    """A TP matrix of 10,000 results took 25-50 s to render in the text formats against 1.6 s in JSON: each
    diagnostic asked whether the run is a matrix, a walk over every result."""
    clean_output_env(monkeypatch)
    write_good(tmp_path / "good")
    small, large = (_render_calls(tmp_path, fmt, n) for n in (40, 160))
    assert large <= 5 * small, (small, large)
