"""Cost bounded by what is used: data a run never reports on costs it nothing, a list or an integer read from
data is bounded before it is walked or converted, and rendering is linear in the results. Each case asserts
its cost against the input's size (operations counted, memory traced), never a wall clock, and the one
outcome the README promises through the real CLI: a report, or one `error:` line and exit 2."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
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


# -- data that is never reported on costs nothing -------------------------------------------------------------------
def _unused_array(elements: int, element: str = "0") -> str:
    junk = ",".join([element] * elements)
    return '{"model_type": "qwen3_next",\n "junk": [' + junk + '],\n "layer_types": ["a", "b"]}'


def _nested(depth: int, width: int) -> str:
    """Objects `depth` deep, each with an array of `width` numbers and an object of `width / 10` members."""
    text = "0"
    for level in range(depth):
        members = ",".join(f'"x{i}": {i}' for i in range(width // 10))
        text = f'{{"k{level}": {text}, "w": [{",".join(["1"] * width)}], "m": {{{members}}}}}'
    return text


def _deep_and_wide(depth: int, width: int) -> str:
    return '{"model_type": "x",\n"deep": ' + _nested(depth, width) + "}"


@pytest.mark.parametrize("text", [_unused_array(2_000_000), _unused_array(700_000, '"s"'), _deep_and_wide(400, 1000)],
                         ids=["numbers", "strings", "deep-and-wide"])
def test_locating_a_key_costs_memory_independent_of_unused_data(text):
    """A location per element (`dotted_keys`) took gigabytes for a 15 MB config; the locator keeps what lies on
    the asked paths only: well under the text's own size."""
    import tracemalloc

    from gdr_check.sources.key_locator import KeyLocator

    tracemalloc.start()
    try:
        keys = KeyLocator(text)
        located = [keys.get("model_type"), keys.get("layer_types.1"), keys.get("deep.k399"), keys.get("nope.x")]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # (a constant: the regular-expression engine's state for one match of up to 4096 strings)
    assert peak < 2 * 1024 * 1024 + len(text) // 50, (peak, len(text))
    assert located[0] is not None and located[3] is None
    if "junk" in text:
        line = text.splitlines()[2]
        assert located[1] is not None and (located[1].line, located[1].column) == (3, line.index('"b"') + 1)


def test_the_locator_agrees_with_the_full_index_on_random_documents():
    """Every key `dotted_keys` locates (the reference: a location per member and element), the lazy locator
    locates the same, in documents of every shape (escapes, unicode, nesting, compact or indented)."""
    import random

    from gdr_check.sources.jsonpos import dotted_keys
    from gdr_check.sources.key_locator import KeyLocator

    chooser = random.Random(41)

    def value(depth: int):
        roll = chooser.random()
        if depth > 4 or roll < 0.4:
            return chooser.choice([1, -2.5e3, "x", 'a"b\\c\n', True, None, "é", 0, "[{]}"])
        if roll < 0.7:
            return [value(depth + 1) for _ in range(chooser.randint(0, 4))]
        return {chooser.choice(["a", "b", "é", 'q"', "0", "[", "}"]) + str(chooser.randint(0, 3)): value(depth + 1)
                for _ in range(chooser.randint(0, 4))}

    for _ in range(500):
        text = json.dumps({"k": value(0), "z": value(0)}, indent=chooser.choice([None, 2, 0]))
        keys = KeyLocator(text)
        reference = dotted_keys(text)
        assert {key: keys.get(key) for key in reference} == reference, text
        assert set(keys) == set(reference)


@pytest.fixture(scope="module")
def unused(tmp_path_factory) -> Path:
    """A checkpoint whose config holds 7.5 million unused numbers (15 MB, under the 16 MiB cap); one whose
    config nests 800 objects with 1,000 numbers each; a recording with 7 million unused numbers and 3 million
    unused strings."""
    root = tmp_path_factory.mktemp("unused")
    config = qwen3_next_config()
    built = write_checkpoint(root / "array", config, qwen_tensors(config))
    (built / "config.json").write_text(json.dumps(dict(config, junk="J")).replace('"J"', "[" + "0," * 7_500_000 + "0]"))
    built = write_checkpoint(root / "deep", config, qwen_tensors(config))
    (built / "config.json").write_text(json.dumps(dict(config, deep="J")).replace('"J"', _nested(800, 1000)))
    tensor = {"shape": [4, 8], "stride": [8, 1], "dtype": "bfloat16", "device": "cuda:0"}
    call = {"variant": "gdn", "scale": 0.35, **{name: tensor for name in (
        "mixed_qkv", "a", "b", "A_log", "dt_bias", "initial_state", "out", "ssm_state_indices")}}
    document = {"schema_version": 1, "kind": "gdr-check-capture", "calls": [{"index": 0, "call": call, "x": "J"}],
                "junk": "S"}
    (root / "recording.json").write_text(json.dumps(document).replace('"J"', "[" + "0," * 7_000_000 + "0]")
                                         .replace('"S"', "[" + '"s",' * 3_000_000 + '"s"]'))
    return root


@pytest.mark.parametrize("args,exit_code,rss", [
    (("array", "--isolated"), 0, 300), (("deep", "--isolated"), 0, 200), (("call", "recording.json"), 1, 400)])
def test_unused_data_costs_what_parsing_it_costs(unused, args, exit_code, rss):
    """Peak memory a small multiple of the file (the parsed document itself), never a location per element:
    the 15 MB config took 1.1 GB and 59 s, the recording 17 s."""
    outcome = run_subprocess(*args, "--output-format", "json", cwd=unused)
    assert_outcome("json", outcome, exit_code=exit_code)
    assert 0 < outcome.max_rss_mib < rss, outcome.max_rss_mib


# -- structure: iteration, not recursion ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def deep_tree(tmp_path_factory) -> Iterator[Path]:
    """A checkpoint 1,200 folders down (past Python's recursion limit), under a `pyproject.toml` at the top;
    removed from the bottom up afterwards (pytest's own clean-up of old temporary folders recurses)."""
    root = tmp_path_factory.mktemp("deep-tree")
    (root / "pyproject.toml").write_text("[tool.gdr-check]\nbatch = 4\n")
    before = os.getcwd()
    os.chdir(root)  # folder by folder: a path of 1,200 parts is made and removed one part at a time
    try:
        for _ in range(1200):
            os.mkdir("d")
            os.chdir("d")
        write_good(Path("ck"))
    finally:
        os.chdir(before)
    yield root
    os.chdir(root)
    try:
        depth = 0
        while os.path.isdir("d"):
            os.chdir("d")
            depth += 1
        shutil.rmtree("ck")
        for _ in range(depth):
            os.chdir("..")
            os.rmdir("d")
    finally:
        os.chdir(before)


def test_a_checkpoint_1200_folders_deep_is_found_with_its_settings(deep_tree):
    from gdr_check.pipeline.pyproject_config import ConfigResolver
    from gdr_check.sources.discover import find_checkpoints

    deep = "/".join(["d"] * 1200) + "/ck"
    assert find_checkpoints(str(deep_tree)) == [os.path.join(str(deep_tree), deep)]
    assert ConfigResolver(cwd=deep_tree).for_target(str(deep_tree / deep)).batch == 4
    outcome = run_subprocess(".", "--show-settings", "--output-format", "json", cwd=deep_tree)
    document = assert_outcome("json", outcome, exit_code=0)
    assert [(t["target"], t["config"], t["batch"]) for t in document["targets"]] == [(deep, "pyproject.toml", 4)]
    outcome = run_subprocess(".", "--output-format", "concise", cwd=deep_tree)
    assert_outcome("concise", outcome, exit_code=0)
    assert f"{deep}/config.json:1:1: info[GDR131]" in outcome.stdout
