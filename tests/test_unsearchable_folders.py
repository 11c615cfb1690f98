"""A folder that cannot be searched (mode 000, another user's): the settings discovery and the directory search
go past it, and a target behind it is reported as unreadable, not as missing. The tests run as any user, root
included, so the permission error is made where the operating system would raise it: listing the folder, and
`os.stat`, `os.lstat` and `os.open` of a path inside it (`stat` and `open` through links)."""

from __future__ import annotations

import errno
import os

import pytest

from cli_checkpoints import clean_output_env, run_cli
from gdr_check.pipeline.pyproject_config import ConfigResolver, find_config_file
from gdr_check.sources import find_checkpoints

CONFIG = ('{"model_type": "qwen3_next", "hidden_size": 2048, "num_hidden_layers": 4, "layer_types": '
          '["linear_attention", "linear_attention", "linear_attention", "full_attention"], "linear_num_key_heads": '
          '16, "linear_num_value_heads": 32, "linear_key_head_dim": 128, "linear_value_head_dim": 128, '
          '"linear_conv_kernel_dim": 4, "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256, '
          '"torch_dtype": "bfloat16", "vocab_size": 151936}')


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """tmp/{pyproject.toml, good/config.json, locked/m/config.json}, `locked` unsearchable."""
    (tmp_path / "pyproject.toml").write_text('[tool.gdr-check]\ntp = [1]\n')
    (tmp_path / "good").mkdir()
    (tmp_path / "good" / "config.json").write_text(CONFIG)
    (tmp_path / "locked" / "m").mkdir(parents=True)
    (tmp_path / "locked" / "m" / "config.json").write_text(CONFIG)
    locked = str(tmp_path / "locked")
    # (name, whether the folder itself is refused or only what is inside it, whether the call follows links)
    for name, inside_only, follows in (("stat", True, True), ("lstat", True, False), ("open", True, True),
                                       ("scandir", False, True), ("listdir", False, True)):
        real = getattr(os, name)

        def denied(path=".", *args, real=real, inside_only=inside_only, follows=follows, **kwargs):
            text = os.fspath(path)
            where = os.path.realpath(text) if follows and kwargs.get("follow_symlinks", True) else \
                os.path.abspath(text)
            if where.startswith(locked + os.sep) or (where == locked and not inside_only):
                raise PermissionError(errno.EACCES, "Permission denied", text)
            return real(path, *args, **kwargs)
        monkeypatch.setattr(os, name, denied)
    clean_output_env(monkeypatch)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_settings_discovery_goes_past_a_folder_it_cannot_search(tree):
    assert find_config_file(tree / "locked" / "m") == tree / "pyproject.toml"
    assert ConfigResolver(cwd=tree).for_target("locked/m").tp == [1]


def test_the_directory_search_skips_a_folder_it_cannot_search_and_says_so(tree):
    outcome = run_cli(".", "--output-format", "concise")
    assert outcome.exit_code == 0  # a note and a warning, of the one checkpoint it can search
    assert [line.split(":")[0] for line in outcome.stdout.splitlines()] == ["good/config.json"] * 2
    assert outcome.stderr == ("warning: locked: permission denied (the folder cannot be searched); skipped\n"
                              "summary: 1 checked: 0 error(s), 1 warning(s), 1 note(s)\n")


@pytest.mark.parametrize("option", ["--silent", "--quiet"])
def test_silent_and_quiet_leave_the_skipped_folder_unsaid(tree, option):
    outcome = run_cli(".", "--output-format", "concise", option)
    assert outcome.exit_code == 0 and "warning: locked" not in outcome.stderr


def test_targets_that_overlap_say_it_once(tmp_path, monkeypatch):
    (tmp_path / "ok").mkdir()
    (tmp_path / "ok" / "config.json").write_text(CONFIG)
    (tmp_path / "sub" / "deep").mkdir(parents=True)
    deep, scandir = str(tmp_path / "sub" / "deep"), os.scandir

    def denied(path=".", *args, **kwargs):
        if os.path.abspath(os.fspath(path)) == deep:
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return scandir(path, *args, **kwargs)
    monkeypatch.setattr(os, "scandir", denied)
    clean_output_env(monkeypatch)
    monkeypatch.chdir(tmp_path)
    outcome = run_cli(".", "sub", "--output-format", "concise")  # `.` walks into sub/deep, and so does `sub`
    assert outcome.stderr.count("warning: sub/deep: permission denied") == 1


def test_a_search_that_finds_nothing_but_a_folder_it_cannot_search_says_why(tree):
    (tree / "good" / "config.json").unlink()
    outcome = run_cli(".", "--output-format", "concise")
    assert outcome.exit_code == 2
    assert outcome.stdout == (
        ".:1:1: error[GDR002] `.` is not a checkpoint: no `config.json`, `.safetensors` file or safetensors index in "
        "it or below it (1 directory could not be searched: permission denied)\n")
    assert outcome.stderr.splitlines()[0] == ("warning: locked: permission denied (the folder cannot be searched); "
                                              "skipped")


def test_the_library_names_each_folder_it_could_not_search(tree):
    (tree / "good" / "inner").mkdir()
    skipped: list[str] = []
    assert find_checkpoints(".", on_unsearchable=skipped.append) == ["good"]
    assert skipped == ["locked"]


def test_a_target_behind_a_folder_it_cannot_search_is_unreadable_not_missing(tree):
    outcome = run_cli("locked/m", "--output-format", "concise")
    assert outcome.exit_code == 2
    assert outcome.stderr.splitlines() == [
        "error: cannot read `locked/m`: permission denied (a folder on its path cannot be searched); help: fix the "
        "permissions (a folder needs search access), or point at a regular file the current user can read",
        "summary: 0 checked: 0 error(s), 0 warning(s), 0 note(s); 1 could not be read"]


def test_a_link_to_a_place_behind_such_a_folder_is_unreadable(tree):
    os.symlink(tree / "locked" / "m", tree / "link")
    outcome = run_cli("link", "--output-format", "concise")
    assert outcome.exit_code == 2
    assert outcome.stderr.splitlines()[0] == (
        "error: cannot read `link`: permission denied (a folder on its path cannot be searched); help: fix the "
        "permissions (a folder needs search access), or point at a regular file the current user can read")


@pytest.mark.parametrize("follow", [False, True])
def test_a_checkpoint_file_linking_behind_such_a_folder_is_unreadable(tree, follow):
    (tree / "ck").mkdir()
    (tree / "ck" / "config.json").write_text(CONFIG)
    (tree / "locked" / "w.safetensors").write_bytes(b"\0" * 8)
    os.symlink(tree / "locked" / "w.safetensors", tree / "ck" / "model.safetensors")
    outcome = run_cli("ck", "--output-format", "concise", *(["--follow-links"] if follow else []))
    assert outcome.exit_code == 2
    assert "error[GDR004] cannot read `model.safetensors`: permission denied (a folder on the way to where the " \
           "link points cannot be searched)" in outcome.stdout


def test_a_settings_file_behind_such_a_folder_is_unreadable_not_missing(tree):
    (tree / "locked" / "pyproject.toml").write_text("[tool.gdr-check]\n")
    outcome = run_cli("good", "--config", "locked/pyproject.toml", "--output-format", "concise")
    assert outcome.exit_code == 2
    assert "no such file" not in outcome.stderr
    assert outcome.stderr.startswith("error: locked/pyproject.toml: cannot read it:")


def test_a_hugging_face_cache_that_cannot_be_searched_is_unreadable_not_missing(tree, monkeypatch):
    (tree / "locked" / "hub" / "models--Org--Tiny").mkdir(parents=True)
    monkeypatch.setenv("HF_HUB_CACHE", str(tree / "locked" / "hub"))
    outcome = run_cli("Org/Tiny", "--output-format", "concise")
    assert outcome.exit_code == 2
    assert outcome.stderr.splitlines()[0].startswith(
        "error: locked/hub/models--Org--Tiny: cannot read `models--Org--Tiny`: permission denied (the Hugging Face "
        "cache cannot be searched there); help:")


def test_a_named_folder_that_cannot_be_searched_is_unreadable_not_empty(tree):
    outcome = run_cli("locked", "--output-format", "concise")
    assert outcome.exit_code == 2
    assert outcome.stderr.splitlines()[0] == (
        "error: cannot read `locked`: permission denied (the folder cannot be searched); help: fix the "
        "permissions (a folder needs search access), or point at a regular file the current user can read")
