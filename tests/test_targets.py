"""Targets as users have them (issue 9 item 5), through the CLI: checkpoints discovered below directories as
ruff discovers files, excludes, the nearest pyproject per target and `--show-settings`, Hugging Face revisions
and JSON-only downloads, Git LFS pointers, and checkpoints made of links (`--follow-links`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cli_checkpoints import clean_output_env, run_cli, write_bad, write_good
from fixtures_sources import (
    INDEX_NAME,
    make_hf_cache_repo,
    qwen3_next_config,
    qwen3_next_layer,
    write_safetensors,
)


@pytest.fixture
def tree(tmp_path: Path, monkeypatch) -> Path:
    """models/{good,bad} plus checkpoints in places a search must not look, run from tmp_path."""
    clean_output_env(monkeypatch)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    write_good(tmp_path / "models" / "good")
    write_bad(tmp_path / "models" / "bad")
    write_good(tmp_path / "models" / "good" / "sub" / "inner")  # inside a checkpoint: not a target of its own
    for hidden in (".git/lfs", ".venv/lib", "node_modules/x", "__pycache__/x", "env/lib"):
        write_good(tmp_path / hidden)
    (tmp_path / "env" / "pyvenv.cfg").write_text("home = /usr/bin\n")  # a virtualenv under another name
    monkeypatch.chdir(tmp_path)
    return tmp_path


def targets_of(*args: str) -> list[str]:
    """The targets a run checks, in order (json-lines records name them)."""
    run = run_cli(*args, "--output-format", "json-lines", "--select", "GDR131")
    assert run.exit_code in (0, 1), run.stderr
    return [json.loads(line)["target"] for line in run.stdout.splitlines()]


# -- discovery -----------------------------------------------------------------------------------------------
def test_no_argument_dot_and_a_directory_find_every_checkpoint_below_in_order(tree: Path):
    assert targets_of() == ["models/bad", "models/good"]
    assert targets_of(".") == ["models/bad", "models/good"]
    assert targets_of("models") == ["models/bad", "models/good"]
    assert targets_of("models/") == ["models/bad", "models/good"]
    assert targets_of("./models") == ["models/bad", "models/good"]
    assert targets_of(str(tree / "models")) == [str(tree / "models" / "bad"), str(tree / "models" / "good")]


def test_discovery_exit_codes_follow_the_checkpoints_found(tree: Path):
    assert run_cli("models").exit_code == 1  # models/bad has an error
    assert run_cli("models", "--exclude", "bad").exit_code == 0


def test_a_directory_with_no_checkpoint_below_is_one_line_and_exit_2(tree: Path):
    (tree / "docs" / "img").mkdir(parents=True)
    run = run_cli("docs")
    assert run.exit_code == 2
    assert run.stderr.splitlines()[-1] == (
        "error: `docs` is not a checkpoint: no `config.json`, `.safetensors` file or safetensors index in it or "
        "below it; help: pass the model directory, its `config.json` or its `.safetensors` files")
    write_good(tree / "docs" / "img" / "skipped")
    run = run_cli("docs", "--exclude", "img")
    assert run.exit_code == 2 and "or below it (1 excluded directory not searched)" in run.stderr


@pytest.mark.parametrize("option, pattern", [
    ("--exclude", "bad"), ("--exclude", "models/bad"), ("--exclude", "models/b*"), ("--extend-exclude", "bad/"),
])
def test_exclude_patterns(tree: Path, option: str, pattern: str):
    assert targets_of("models", option, pattern) == ["models/good"]


def test_exclude_replaces_the_defaults_and_extend_exclude_adds_to_them(tree: Path):
    write_good(tree / "dist" / "m")
    assert "dist/m" not in targets_of()
    # As ruff's: `--exclude` replaces the default list (`dist`, `node_modules`, `__pycache__`, ...).
    assert targets_of("--exclude", "bad") == ["__pycache__/x", "dist/m", "models/good", "node_modules/x"]
    assert targets_of("--extend-exclude", "bad") == ["models/good"]
    # Hidden directories and virtualenvs are never searched, whatever the excludes.
    assert ".venv/lib" not in targets_of("--exclude", "bad") and "env/lib" not in targets_of("--exclude", "bad")


def test_configured_excludes_are_relative_to_their_pyproject(tree: Path):
    (tree / "pyproject.toml").write_text('[tool.gdr-check]\nextend-exclude = ["models/bad"]\n')
    assert targets_of() == ["models/good"]
    # pre-commit passes file names and runs with --force-exclude: the configured excludes apply to them.
    assert targets_of("models/bad/config.json", "models/good/config.json", "--force-exclude") == ["models/good"]
    (tree / "pyproject.toml").write_text('[tool.gdr-check]\nexclude = ["good"]\n')
    assert targets_of("models") == ["models/bad"]


def test_a_named_target_is_checked_even_when_excluded_unless_force_exclude(tree: Path):
    assert targets_of("models/bad", "--exclude", "bad") == ["models/bad"]
    assert targets_of("models/bad", "models/good", "--exclude", "bad", "--force-exclude") == ["models/good"]
    # pre-commit passes file names: the checkpoint they belong to is excluded with them.
    assert targets_of("models/bad/config.json", "models/good/config.json", "--extend-exclude", "models/bad",
                      "--force-exclude") == ["models/good"]
    run = run_cli("models/bad", "--exclude", "bad", "--force-exclude")
    assert (run.exit_code, run.stdout) == (0, "")
    assert run.stderr == "warning: no checkpoint to check: every target is excluded\n"
    settings = run_cli("models/bad", "--exclude", "bad", "--force-exclude", "--show-settings")  # says it too
    assert (settings.exit_code, settings.stderr) == (0, "warning: no checkpoint to check: every target is excluded\n")


def test_an_empty_target_is_a_usage_error_not_the_current_directory(tree: Path):
    """`gdr-check "$MODEL"` with MODEL unset: the empty argument is named, not read as `.`."""
    run = run_cli("", "--isolated")
    assert (run.exit_code, run.stdout) == (2, "")
    assert run.stderr == "error: Invalid value for TARGETS: an empty path names no checkpoint\n"


@pytest.mark.parametrize("fmt, empty", [("json", '"results": []'), ("sarif", '"results": []'), ("gitlab", "[]"),
                                        ("junit", 'tests="0" failures="0" errors="0"')])
def test_every_target_excluded_still_writes_an_empty_report(tree: Path, fmt, empty):
    """A CI step that uploads the report (SARIF to code scanning, a GitLab artifact) finds a valid document, not
    the previous run's or none."""
    (tree / "report").write_text("last run's report, with its findings\n")
    run = run_cli("models/bad", "--exclude", "bad", "--force-exclude", "--output-format", fmt, "-o", "report")
    assert (run.exit_code, run.stdout) == (0, "")
    assert empty in (tree / "report").read_text()
    stdout = run_cli("models/bad", "--exclude", "bad", "--force-exclude", "--output-format", fmt).stdout
    assert empty in stdout


def test_linked_directories_are_searched_only_with_follow_links(tree: Path, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("shared")
    write_good(elsewhere / "m")
    os.symlink(elsewhere, tree / "models" / "shared")
    assert targets_of("models") == ["models/bad", "models/good"]
    assert targets_of("models", "--follow-links") == ["models/bad", "models/good", "models/shared/m"]
    os.symlink(tree / "models", tree / "models" / "loop")  # a cycle ends where it starts again
    assert targets_of("models", "--follow-links") == ["models/bad", "models/good", "models/shared/m"]


# -- the nearest pyproject, --show-settings -----------------------------------------------------------------
NESTED_SETTINGS = """\
run: config pyproject.toml; output-format full; exit-zero false; error-on-warning false; follow-links false

models/bad:
  config: pyproject.toml
  engine: sglang
  tp: 1, 2
  batch: 8
  slots: batch + 1
  state-dtype: the engine default
  gpu-memory: not set
  rules: {outer_rules}

models/good:
  config: models/good/pyproject.toml
  engine: vllm
  tp: 4
  batch: 8
  slots: batch + 1
  state-dtype: bfloat16
  gpu-memory: 20GiB
  rules: {inner_rules}
"""


def _nested_projects(tree: Path) -> None:
    (tree / "pyproject.toml").write_text('[tool.gdr-check]\ntp = [1, 2]\nignore = ["GDR253"]\n')
    (tree / "models" / "good" / "pyproject.toml").write_text(
        '[tool.gdr-check]\nengine = "vllm"\ntp = 4\nstate-dtype = "bfloat16"\ngpu-memory = "20GiB"\n'
        'select = ["GDR1"]\n')


def test_show_settings_names_the_nearest_config_of_each_target(tree: Path):
    from gdr_check.pipeline.selection import known_rules

    _nested_projects(tree)
    rules = sorted(known_rules())
    gdr1 = [code for code in rules if code.startswith("GDR1")]
    run = run_cli("--show-settings")
    assert run.exit_code == 0 and run.stderr == ""
    assert run.stdout == NESTED_SETTINGS.format(
        outer_rules=f"{len(rules) - 1} of {len(rules)} selected; not selected: GDR253",
        inner_rules=f"{len(gdr1)} of {len(rules)} selected; not selected: "
                    + ", ".join(code for code in rules if code not in gdr1),
    )


def test_each_target_is_checked_with_its_nearest_config(tree: Path):
    _nested_projects(tree)
    run = run_cli("--output-format", "json-lines", "--exit-zero")
    records = [json.loads(line) for line in run.stdout.splitlines()]
    by_target = {(r["target"], r["tp"]) for r in records}
    assert {("models/bad", 1), ("models/bad", 2), ("models/good", 4)} <= by_target
    assert not {t for t, tp in by_target if t == "models/good" and tp != 4}
    assert all(r["code"].startswith("GDR1") for r in records if r["target"] == "models/good")
    assert not any(r["code"] == "GDR253" for r in records)
    # The command line still wins over every config.
    run = run_cli("--show-settings", "--tp", "8", "--engine", "sglang")
    assert run.stdout.count("  tp: 8\n") == 2 and run.stdout.count("  engine: sglang\n") == 2
    run = run_cli("--show-settings", "--isolated")
    assert run.stdout.count("  config: none (defaults)\n") == 2


def test_show_settings_reports_unreadable_targets_without_checking(tree: Path):
    (tree / "empty").mkdir()
    run = run_cli("empty", "models/good", "--show-settings")
    assert run.exit_code == 2  # as a run of the same targets: one could not be read
    assert "\nempty:\n  error: `empty` is not a checkpoint: no `config.json`" in run.stdout
    assert "\nmodels/good:\n  config: none (defaults)\n" in run.stdout


@pytest.mark.parametrize("target, line", [
    ("missing", "  error: path `missing` does not exist; help: check the path, or pass a Hugging Face repo id such as "
                "`Qwen/Qwen3-Next-80B-A3B-Instruct`"),
    ("Org/Not-Cached", "  error: `Org/Not-Cached` is neither a local path nor a model in the local Hugging Face "
                       "cache"),
    ("lfs", "  error: lfs/model.safetensors: is a Git LFS pointer, not the weights; help: run `git lfs pull` in the "
            "clone"),
    ("dangling", "  error: dangling/config.json: `config.json` is a link to "),
])
def test_show_settings_says_what_a_run_could_not_read(tree: Path, monkeypatch, target, line):
    """A missing path or model, a Git LFS pointer or a dangling link is found by reading the target's metadata,
    as the run would, not by checking it."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tree / "hub"))
    (tree / "lfs").mkdir()
    (tree / "lfs" / "config.json").write_bytes((tree / "models" / "good" / "config.json").read_bytes())
    (tree / "lfs" / "model.safetensors").write_text(LFS_POINTER)
    (tree / "dangling").mkdir()
    os.symlink(tree / "nowhere" / "config.json", tree / "dangling" / "config.json")
    run = run_cli(target, "models/good", "--show-settings", "--isolated")
    assert run.exit_code == 2
    assert f"\n{target}:\n{line}" in run.stdout
    assert "\nmodels/good:\n  config: none (defaults)\n" in run.stdout
    assert run_cli("Qwen/Qwen3-Next-80B-A3B-Instruct", "--show-settings").exit_code == 0  # the built-in description


# -- Hugging Face: revisions and JSON-only downloads ---------------------------------------------------------
@pytest.fixture
def cache(tree: Path) -> Path:
    """`Org/Tiny-GDN` at main (config + weights) and at tag v2 (config + index, shards not downloaded)."""
    staged = write_safetensors(tree / "staging" / "model.safetensors", qwen3_next_layer(0))
    config = json.dumps(qwen3_next_config()).encode()
    repo = make_hf_cache_repo(tree / "hub", "Org/Tiny-GDN", {"config.json": config, "model.safetensors": staged})
    index = {"weight_map": {name: "model-00001-of-00001.safetensors" for name in qwen3_next_layer(0)}}
    make_hf_cache_repo(tree / "hub", "Org/Tiny-GDN", {"config.json": config, INDEX_NAME: json.dumps(index).encode()},
                       commit="beef" * 10, write_ref=False)
    (repo / "refs" / "v2").write_text("beef" * 10)
    return repo


@pytest.mark.parametrize("args", [["Org/Tiny-GDN@v2"], ["Org/Tiny-GDN", "--revision", "v2"],
                                  ["Org/Tiny-GDN", "--revision", "beefbee"]])
def test_a_json_only_snapshot_is_checked_with_a_note(cache: Path, args: list[str]):
    run = run_cli(*args, "--output-format", "json")
    assert run.exit_code == 0, run.stderr
    document = json.loads(run.stdout)
    check = document
    assert check["source"]["root"] == f"hub/models--Org--Tiny-GDN/snapshots/{'beef' * 10}"
    notes = [d for d in check["diagnostics"] if d["code"] == "GDR013"]
    assert [(d["severity"], d["message"]) for d in notes] == [("info", (
        "none of the 1 shard(s) listed in `model.safetensors.index.json` is present: checked from `config.json` "
        "alone (7 tensor names in the index, no shapes read)"))]


def test_a_missing_revision_names_the_cached_ones(cache: Path):
    run = run_cli("Org/Tiny-GDN@v3")
    assert run.exit_code == 2
    assert run.stderr.splitlines()[0] == (
        "error: `Org/Tiny-GDN` has no revision `v3` in the local Hugging Face cache (cached: main (1a2b3c4), "
        "v2 (beefbee)); help: download it (`hf download Org/Tiny-GDN --revision v3`), or pick one of the cached "
        "revisions")


def test_a_revision_of_an_uncached_builtin_model_is_not_replaced_by_the_description(tree: Path):
    (tree / "hub").mkdir()
    assert run_cli("Qwen/Qwen3-Next-80B-A3B-Instruct").exit_code in (0, 1)  # the built-in description
    for args in (["Qwen/Qwen3-Next-80B-A3B-Instruct@v1"], ["Qwen/Qwen3-Next-80B-A3B-Instruct", "--revision", "v1"]):
        run = run_cli(*args)
        assert run.exit_code == 2
        assert "is neither a local path nor a model in the local Hugging Face cache" in run.stderr
        assert run.stderr.rstrip("\n").endswith(
            "; a revision (`@v1`) is read from the cache only, never from the built-in description")


# -- Git LFS pointers, links ---------------------------------------------------------------------------------
LFS_POINTER = ("version https://git-lfs.github.com/spec/v1\n"
               "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 123456789\n")


@pytest.mark.parametrize("target", ["clone", "clone/model.safetensors", "."])
def test_a_git_lfs_pointer_says_to_run_git_lfs_pull(tree: Path, target: str):
    (tree / "clone").mkdir()
    (tree / "clone" / "config.json").write_text(json.dumps(qwen3_next_config()))
    (tree / "clone" / "model.safetensors").write_text(LFS_POINTER)
    run = run_cli(target, "--extend-exclude", "models")
    assert run.exit_code == 2 and run.stdout == ""
    assert run.stderr == ("error: clone/model.safetensors: is a Git LFS pointer, not the weights; help: run "
                          "`git lfs pull` in the clone\n")


def _linked_checkpoint(tree: Path, tmp_path_factory) -> Path:
    store = tmp_path_factory.mktemp("annex")
    write_good(store / "objects")
    (tree / "annexed").mkdir()
    for name in sorted(os.listdir(store / "objects")):
        os.symlink(store / "objects" / name, tree / "annexed" / name)
    return store / "objects"


def test_links_need_follow_links(tree: Path, tmp_path_factory):
    store = _linked_checkpoint(tree, tmp_path_factory)
    run = run_cli("annexed")
    assert run.exit_code == 2
    assert run.stderr == (
        f"error: annexed/config.json: `config.json` is a link to `{store}/config.json`, outside a Hugging Face "
        "cache snapshot (files inside a checkpoint must not be links); help: pass `--follow-links` to follow links "
        "you trust (git-annex, DVC, shared storage), or copy the real files into the checkpoint directory\n")
    followed = run_cli("annexed", "--follow-links", "--output-format", "json")
    assert followed.exit_code == 0, followed.stderr
    source = json.loads(followed.stdout)["source"]
    assert source["files_read"] == ["annexed/config.json", "annexed/model.safetensors"]
    assert source["bytes_read"] < 20_000  # the header, not the weights


def test_a_dangling_link_is_one_line_and_exit_2(tree: Path, tmp_path_factory):
    _linked_checkpoint(tree, tmp_path_factory)
    (tree / "annexed" / "model.safetensors").unlink()
    os.symlink("../.git/annex/objects/Xz/SHA256E-s1--abc/SHA256E-s1--abc", tree / "annexed" / "model.safetensors")
    for flags in ([], ["--follow-links"]):
        run = run_cli("annexed/model.safetensors", *flags)
        assert run.exit_code == 2
        assert run.stderr == (
            "error: annexed/model.safetensors: `model.safetensors` is a link to "
            "`../.git/annex/objects/Xz/SHA256E-s1--abc/SHA256E-s1--abc`, which does not exist; help: fetch the file "
            "`model.safetensors` stands for (`git annex get`, `dvc pull`, a re-download) or fix the link\n")


def test_a_hugging_face_cache_is_searched_for_its_models_only(cache: Path):
    """`gdr-check ~/.cache/huggingface/hub`: each model entry is one target (its `refs/main`), data sets are
    not searched."""
    dataset = cache.parent / "datasets--Org--Data" / "snapshots" / ("ab" * 20)
    dataset.mkdir(parents=True)
    (dataset / "config.json").write_text(json.dumps(qwen3_next_config()))
    assert targets_of("hub") == ["hub/models--Org--Tiny-GDN"]


@pytest.mark.parametrize("fmt", ["full", "concise", "json", "json-lines", "github", "sarif", "junit"])
def test_a_directory_with_no_checkpoint_is_a_document_in_every_format(tree: Path, fmt: str):
    from test_cli_check import assert_parseable

    (tree / "empty").mkdir()
    run = run_cli("empty", "models/good", "--output-format", fmt)
    assert run.exit_code == 2
    assert_parseable(fmt, run.stdout, fatal=True)
    assert "`empty` is not a checkpoint" in run.stdout + run.stderr
