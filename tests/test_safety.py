"""Safety rules of the metadata path (issue 6), each tested end to end through the CLI so that it fails when
the rule is broken anywhere on the way, not only in the reader:

- never unpickle: `.bin`/`.pt`/`.pth` weights are reported with the conversion fix, never loaded;
- shard names from an index are plain file names inside the checkpoint directory;
- links are followed only where the Hugging Face cache puts them;
- caps on header, index and config sizes, enforced before reading;
- no network access: a repo id that is not cached falls back to the built-in description or is not found;
- the CLI never imports torch or triton (speed item 1 of the issue, for the whole `gdr-check` process).

The reader-level tests (exact messages, each GDR0xx code) are in `test_sources.py`; here each rule is checked
from outside, in a separate process where an audit hook watches what the run does (files opened, pickles
loaded, sockets created) or in-process with memory traced.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path
from typing import Any

import pytest

from checkpoint_builders import kimi_config, kimi_tensors, write_checkpoint
from fixtures_sources import (
    INDEX_NAME,
    make_hf_cache_repo,
    qwen3_next_config,
    qwen3_next_layer,
    write_json,
    write_raw_safetensors,
    write_safetensors,
    write_sharded,
)
from gdr_check.base.limits import MAX_CONFIG_BYTES, MAX_INDEX_BYTES
from gdr_check.sources.safetensors_header import MAX_HEADER_BYTES
from test_fuzz_cli import check_outcome, run_cli

SMALL = qwen3_next_layer(0)
REPO_ID = "Org/Tiny-GDN"
BUILTIN_ID = "Qwen/Qwen3-Next-80B-A3B-Instruct"

# Runs the CLI in a fresh interpreter under an audit hook, then prints one JSON line with what it saw: the
# exit code, files opened (resolved paths), pickle globals looked up and socket events.
_AUDITED_RUN = textwrap.dedent("""
    import json, os, sys
    seen = {"opened": [], "written": [], "pickle": [], "socket": []}
    def hook(event, args):
        if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
            path = os.path.realpath(os.fsdecode(args[0]))
            seen["opened"].append(path)
            mode, flags = (list(args) + [None, 0])[1:3]
            if set(str(mode or "")) & set("wax+") or (flags or 0) & (os.O_WRONLY | os.O_RDWR):
                seen["written"].append(path)
        elif event == "pickle.find_class":
            seen["pickle"].append(".".join(map(str, args)))
        elif event.startswith("socket."):
            seen["socket"].append(event)
            raise PermissionError("network access in a gdr-check run")
    sys.addaudithook(hook)
    from gdr_check.cli.main import main
    runs = []
    for args in json.loads(sys.argv[1]):
        code = main(args + ["--isolated"])
        runs.append({"code": code, **{k: list(v) for k, v in seen.items()}})
        for v in seen.values():
            v.clear()
    print("AUDIT " + json.dumps(runs))
""")


def audited_runs(runs: list[list[str]], *, cwd: Path, **env: str) -> tuple[list[dict[str, Any]], str]:
    """Run each argument list through `main` in one fresh process under the audit hook; returns each run's
    record and the process's stderr."""
    environment = {k: v for k, v in os.environ.items()
                   if (not k.startswith(("GDR_CHECK_", "HF_", "GITHUB_")) or k == "GDR_CHECK_CACHE_DIR")
                   and k != "TRITON_INTERPRET"}
    environment.update(env)
    done = subprocess.run([sys.executable, "-c", _AUDITED_RUN, json.dumps(runs)], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=120)
    lines = [line for line in done.stdout.splitlines() if line.startswith("AUDIT ")]
    assert done.returncode == 0 and lines, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(lines[-1][len("AUDIT "):]), done.stderr


# -- never unpickle ------------------------------------------------------------------------------------------------
class _WritesMarker:
    """Unpickling this calls `open(marker, "w")`: the marker file appears iff the pickle was loaded."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return open, (str(self.marker), "w")


def test_the_pickle_payload_is_live(tmp_path):
    """Meta-test: loading the payload does create its marker, so the test below can fail."""
    marker = tmp_path / "loaded"
    pickle.loads(pickle.dumps(_WritesMarker(marker))).close()
    assert marker.exists()


@pytest.mark.parametrize("weights", ["pytorch_model.bin", "model.pt", "weights.pth"])
def test_pickle_weights_are_reported_with_the_conversion_and_never_loaded(tmp_path, weights):
    marker = tmp_path / "UNPICKLED"
    directory = tmp_path / "ck"
    write_json(directory / "config.json", qwen3_next_config())
    (directory / weights).write_bytes(pickle.dumps(_WritesMarker(marker)))
    sharded = tmp_path / "sharded"
    write_json(sharded / "config.json", qwen3_next_config())
    (sharded / "pytorch_model-00001-of-00001.bin").write_bytes(pickle.dumps(_WritesMarker(marker)))
    write_json(sharded / "pytorch_model.bin.index.json", {"weight_map": {"w": "pytorch_model-00001-of-00001.bin"}})

    targets = [["ck"], [f"ck/{weights}"], ["sharded"], ["ck", "--output-format", "json"]]
    records, stderr = audited_runs(targets, cwd=tmp_path)
    assert not marker.exists()
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == len(targets)
    for record, error in zip(records, errors, strict=True):
        assert record["code"] == 2 and record["pickle"] == []
        assert not any(path.endswith((".bin", ".pt", ".pth")) for path in record["opened"]), record["opened"]
        assert "convert it to safetensors" in error
    assert weights in errors[0] and "pytorch_model" in errors[2]


def test_pickle_files_beside_safetensors_are_ignored(tmp_path):
    marker = tmp_path / "UNPICKLED"
    write_sharded(tmp_path / "ck", {"s0.safetensors": SMALL}, config=qwen3_next_config())
    (tmp_path / "ck" / "pytorch_model.bin").write_bytes(pickle.dumps(_WritesMarker(marker)))
    [record], _ = audited_runs([["ck"]], cwd=tmp_path)
    assert record["code"] in (0, 1) and record["pickle"] == [] and not marker.exists()
    assert not any(path.endswith(".bin") for path in record["opened"])


# -- shard names are plain file names -------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["parent", "absolute", "subdirectory", "dot-dot"])
def test_index_shard_names_cannot_leave_the_checkpoint(tmp_path, kind):
    # Each name points at a real, valid safetensors file: the run must refuse it without opening it.
    outside = write_safetensors(tmp_path / "outside.safetensors", SMALL)
    inside_sub = write_safetensors(tmp_path / "ck" / "sub" / "s0.safetensors", SMALL)
    shard = {"parent": "../outside.safetensors", "absolute": str(outside), "subdirectory": "sub/s0.safetensors",
             "dot-dot": ".."}[kind]
    write_json(tmp_path / "ck" / "config.json", qwen3_next_config())
    write_json(tmp_path / "ck" / INDEX_NAME, {"weight_map": {name: shard for name in SMALL}})
    [record], stderr = audited_runs([["ck", "--output-format", "json"]], cwd=tmp_path)
    assert record["code"] == 2
    assert str(outside) not in record["opened"] and str(inside_sub) not in record["opened"]
    assert f"shard name `{shard}`" in stderr and "not a plain file name inside the checkpoint directory" in stderr


# -- links only where the Hugging Face cache puts them --------------------------------------------------------------
def _cache(tmp_path: Path) -> tuple[Path, Path]:
    """A cached `Org/Tiny-GDN` (config + one shard, snapshot links into blobs); returns (cache, snapshot)."""
    shard = write_safetensors(tmp_path / "staging" / "model.safetensors", SMALL)
    config = json.dumps(qwen3_next_config()).encode()
    repo = make_hf_cache_repo(tmp_path / "hub", REPO_ID, {"config.json": config, "model.safetensors": shard})
    return tmp_path / "hub", repo / "snapshots" / ("1a2b3c4d" * 5)


def test_cache_snapshot_links_into_the_repos_blobs_are_followed(tmp_path):
    cache, snapshot = _cache(tmp_path)
    assert (snapshot / "model.safetensors").is_symlink()
    records, _ = audited_runs([[REPO_ID], [str(snapshot)], [str(snapshot.parent.parent)]], cwd=tmp_path,
                              HF_HUB_CACHE=str(cache))
    for record in records:
        assert record["code"] in (0, 1), record
        assert any("/blobs/" in path for path in record["opened"])


def test_links_out_of_the_checkpoint_are_refused_unopened(tmp_path):
    secret = write_json(tmp_path / "secret" / "config.json", qwen3_next_config())
    outside_shard = write_safetensors(tmp_path / "secret" / "model.safetensors", SMALL)
    # A plain directory whose config.json and weights are links out of it.
    (tmp_path / "plain").mkdir()
    os.symlink(secret, tmp_path / "plain" / "config.json")
    os.symlink(outside_shard, tmp_path / "plain" / "model.safetensors")
    # A cache snapshot whose shard points into another repo's blobs, and one that climbs out of blobs/.
    cache, snapshot = _cache(tmp_path)
    other = make_hf_cache_repo(cache, "Org/Other", {"model.safetensors": write_safetensors(
        tmp_path / "staging2" / "model.safetensors", SMALL)})
    other_blob = next((other / "blobs").iterdir())
    link = snapshot / "model.safetensors"
    link.unlink()
    os.symlink(os.path.relpath(other_blob, snapshot), link)
    climbing = tmp_path / "hub2"
    _, snapshot2 = _cache(climbing)
    (snapshot2 / "model.safetensors").unlink()
    # snapshots/<sha>/ -> blobs/ -> up to `tmp_path`: a path that starts in blobs/ and climbs out of it.
    os.symlink("../../blobs/../../../../secret/model.safetensors", snapshot2 / "model.safetensors")

    records, stderr = audited_runs([["plain"], [REPO_ID], [str(snapshot2)]], cwd=tmp_path,
                                   HF_HUB_CACHE=str(cache))
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert [r["code"] for r in records] == [2, 2, 2] and len(errors) == 3
    for record in records:
        assert str(secret) not in record["opened"] and str(outside_shard) not in record["opened"]
        assert str(other_blob) not in record["opened"]
    assert all("is a link to" in error and "outside" in error for error in errors), errors


def test_a_checkpoint_the_user_names_through_a_link_is_followed(tmp_path):
    # The named path is the user's choice; only links found inside a checkpoint are refused.
    write_sharded(tmp_path / "real", {"s0.safetensors": SMALL}, config=qwen3_next_config())
    os.symlink(tmp_path / "real", tmp_path / "alias")
    run = run_cli([str(tmp_path / "alias"), "--output-format", "json"])
    check_outcome(run, "json", ["alias"])
    assert run.code in (0, 1)


def test_follow_links_reads_what_the_links_point_at_read_only_and_header_only(tmp_path):
    """`--follow-links` (git-annex, DVC, shared storage): the linked files are opened for reading only, and
    the size caps and the never-unpickle rule still hold wherever a link points."""
    store = tmp_path / "store"
    write_sharded(store, {"s0.safetensors": SMALL}, config=qwen3_next_config())
    pickled = store / "pytorch_model.bin"
    pickled.write_bytes(pickle.dumps(_WritesMarker(tmp_path / "marker")))
    (tmp_path / "annexed").mkdir()
    for name in os.listdir(store):
        os.symlink(store / name, tmp_path / "annexed" / name)
    (tmp_path / "pickled").mkdir()
    os.symlink(pickled, tmp_path / "pickled" / "pytorch_model.bin")
    (tmp_path / "oversized").mkdir()
    os.symlink(_sparse(tmp_path / "big" / "config.json", MAX_CONFIG_BYTES + 1), tmp_path / "oversized" / "config.json")
    cache = tmp_path / "metadata-cache"  # the one place a check writes: its cache of validated header reads
    records, stderr = audited_runs([["annexed", "--follow-links"], ["pickled", "--follow-links"],
                                    ["oversized", "--follow-links"]], cwd=tmp_path, GDR_CHECK_CACHE_DIR=str(cache))
    followed, pickle_run, oversized = records
    assert followed["code"] in (0, 1), stderr
    assert {str(store / "config.json"), str(store / "s0.safetensors")} <= set(followed["opened"])
    assert pickle_run["code"] == 2 and str(pickled) not in pickle_run["opened"]
    assert oversized["code"] == 2 and "over the 16777216-byte limit" in stderr
    assert followed["written"] and all(path.startswith(f"{cache}{os.sep}metadata-v1{os.sep}") and
                                       path.endswith(".tmp") for path in followed["written"])
    for record in records[1:]:  # (nothing is read from a pickle or an oversized config, so nothing is kept)
        assert record["written"] == []
    for record in records:
        assert record["pickle"] == [] and record["socket"] == []
    assert not (tmp_path / "marker").exists()


# -- caps, enforced before reading -----------------------------------------------------------------------------------
def _sparse(path: Path, size: int, prefix: bytes = b"{") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(prefix)
        handle.truncate(size)
    return path


@pytest.mark.parametrize("what", ["config", "index", "header"])
def test_size_caps_refuse_before_reading(tmp_path, what):
    """A file over its cap is refused from its size (or the header's length prefix) alone: the run's memory
    stays far below the file, which is a sparse hole of real size."""
    directory = tmp_path / "ck"
    if what == "config":
        _sparse(directory / "config.json", MAX_CONFIG_BYTES + 1)
        name = "config.json"
    elif what == "index":
        write_json(directory / "config.json", qwen3_next_config())
        _sparse(directory / INDEX_NAME, MAX_INDEX_BYTES + 1)
        name = INDEX_NAME
    else:
        write_json(directory / "config.json", qwen3_next_config())
        write_raw_safetensors(directory / "model.safetensors", b"{}", 0, length=MAX_HEADER_BYTES + 1,
                              total_size=8 + MAX_HEADER_BYTES + 1)
        name = "model.safetensors"
    run = run_cli([str(directory), "--output-format", "json"], trace_memory=True)
    check_outcome(run, "json", [name])
    assert run.code == 2 and run.peak is not None and run.peak < 2 << 20, run.peak
    code = json.loads(run.stdout)["error"]["code"]
    assert code == ("GDR031" if what == "header" else "GDR005")


def test_a_file_just_under_the_json_cap_is_read(tmp_path):
    """The other side of the cap: a real (if odd) config of MAX_CONFIG_BYTES is parsed, not refused."""
    config = json.dumps(qwen3_next_config()).encode()
    padded = config[:-1] + b"," + b'"pad": "' + b"x" * (MAX_CONFIG_BYTES - len(config) - 10) + b'"}'
    assert len(padded) == MAX_CONFIG_BYTES
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "config.json").write_bytes(padded)
    run = run_cli([str(tmp_path / "ck"), "--output-format", "json"])
    assert run.code in (0, 1), run.stderr


# -- no network ------------------------------------------------------------------------------------------------------
def test_repo_ids_never_touch_the_network(tmp_path):
    """An uncached repo id: the built-in description for a known model, not-found (exit 2) otherwise; any
    socket the run creates raises and is recorded."""
    empty = tmp_path / "empty-cache"
    empty.mkdir()
    records, stderr = audited_runs(
        [[BUILTIN_ID, "--output-format", "json"], ["nobody/NoSuchModel-1B"]], cwd=tmp_path,
        HF_HUB_CACHE=str(empty), HF_HOME=str(tmp_path / "hf-home"),
    )
    known, unknown = records
    assert known["socket"] == [] and unknown["socket"] == []
    assert known["code"] in (0, 1) and unknown["code"] == 2
    assert "nobody/NoSuchModel-1B" in stderr and "Traceback" not in stderr


def test_the_builtin_fallback_says_so(tmp_path, monkeypatch):
    """In-process, with every socket constructor replaced: the report notes the fallback."""
    import socket

    def refuse(*args, **kwargs):
        raise AssertionError("network access in a gdr-check run")

    for name in ("socket", "create_connection", "getaddrinfo"):
        monkeypatch.setattr(socket, name, refuse)
    run = run_cli([BUILTIN_ID, "--output-format", "json"], HF_HUB_CACHE=str(tmp_path))
    check_outcome(run, "json", [BUILTIN_ID])
    notes = json.loads(run.stdout)["source"]["notes"]
    assert any("not in the local cache: using the built-in description" in note for note in notes), notes


# -- the CLI never imports torch or triton ---------------------------------------------------------------------------
_SITECUSTOMIZE = textwrap.dedent("""
    # Injected by tests/test_safety.py: report the heavy modules loaded when the process exits.
    import atexit, json, os, sys, types
    if os.environ.get("GDR_CHECK_TEST_FAKE_TORCH"):
        sys.modules["torch"] = types.ModuleType("torch")  # what an accidental `import torch` leaves
    def _report():
        with open(os.environ["GDR_CHECK_TEST_MODULES_OUT"], "w") as handle:
            json.dump(sorted(m for m in ("torch", "triton") if m in sys.modules), handle)
    atexit.register(_report)
""")


def _cli_command(how: str = "script") -> list[str]:
    script = Path(sysconfig.get_path("scripts")) / "gdr-check"
    if how == "script" and script.is_file():
        return [str(script)]
    return [sys.executable, "-m", "gdr_check"]


def _heavy_modules_after(tmp_path: Path, args: list[str], *, fake_torch: bool = False,
                         how: str = "script") -> tuple[list[str], int]:
    """Run the installed `gdr-check` (or `python -m gdr_check`) with an exit hook injected through
    sitecustomize; returns the heavy modules loaded at exit and the exit code."""
    hook_dir = tmp_path / "hook"
    hook_dir.mkdir(exist_ok=True)
    (hook_dir / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    out = tmp_path / "modules.json"
    env = {k: v for k, v in os.environ.items()
           if k != "TRITON_INTERPRET" and (not k.startswith("GDR_CHECK_") or k == "GDR_CHECK_CACHE_DIR")}
    env.update(PYTHONPATH=os.pathsep.join(filter(None, [str(hook_dir), env.get("PYTHONPATH")])),
               GDR_CHECK_TEST_MODULES_OUT=str(out))
    if fake_torch:
        env["GDR_CHECK_TEST_FAKE_TORCH"] = "1"
    env["HF_HUB_CACHE"] = str(tmp_path / "empty-cache")  # the repo id below falls back to the built-in model
    done = subprocess.run([*_cli_command(how), *args, "--isolated"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert out.exists(), done.stderr  # the hook ran: an existing sitecustomize did not shadow it
    return json.loads(out.read_text()), done.returncode


def _small_checkpoints(tmp_path: Path) -> list[str]:
    """One target of each kind the CLI reads; returns them as arguments."""
    write_sharded(tmp_path / "qwen", {"s0.safetensors": SMALL}, config=qwen3_next_config())
    kimi = kimi_config()
    write_checkpoint(tmp_path / "kimi", kimi, kimi_tensors(kimi))
    write_json(tmp_path / "config-only" / "config.json", qwen3_next_config())
    write_sharded(tmp_path / "broken", {"s0.safetensors": SMALL, "s1.safetensors": {"x": ("F32", [1])}},
                  config=qwen3_next_config())
    (tmp_path / "broken" / "s0.safetensors").unlink()
    return ["qwen", "kimi", "config-only", BUILTIN_ID, "broken"]


@pytest.mark.parametrize("fmt, how", [("full", "script"), ("sarif", "script"), ("json", "module")])
def test_the_cli_never_imports_torch_or_triton(tmp_path, fmt, how):
    targets = _small_checkpoints(tmp_path)
    heavy, code = _heavy_modules_after(tmp_path, [*targets, "--tp", "1,2", "--output-format", fmt], how=how)
    assert code == 2  # one target could not be read: the error path ran too
    assert heavy == []


def test_the_import_guard_detects_torch(tmp_path):
    """Meta-test: with torch in sys.modules, the same harness reports it (so the test above can fail)."""
    _small_checkpoints(tmp_path)
    heavy, _ = _heavy_modules_after(tmp_path, ["qwen"], fake_torch=True)
    assert heavy == ["torch"]

