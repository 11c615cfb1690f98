"""The cache of validated metadata reads (sources/header_cache.py): a hit answers exactly as the miss did, a damaged,
foreign or stale entry is a miss, a cache that cannot be written is no cache, and turned off it writes nothing."""

from __future__ import annotations

import errno
import json
import os
import struct
import time
from pathlib import Path
from typing import Any

import pytest

from checkpoint_builders import kimi_config, kimi_tensors, qwen_tensors, write_checkpoint
from cli_checkpoints import clean_output_env, run_cli
from fixtures_sources import INDEX_NAME, write_json, write_safetensors, write_sharded
from gdr_check.models.builtin import get_builtin
from gdr_check.sources import SourceError, header_cache, open_checkpoint, safetensors_header
from gdr_check.sources import open as source_open

QWEN3_NEXT = "Qwen/Qwen3-Next-80B-A3B-Instruct"
QWEN3_5_MOE = "Qwen/Qwen3.5-35B-A3B"
KIMI = "moonshotai/Kimi-Linear-48B-A3B-Instruct"
SMALL = {"a.weight": ("BF16", [4, 8]), "b.weight": ("F32", [3]), "c.bias": ("BF16", [0])}


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv(header_cache.CACHE_DIR_VARIABLE, str(folder))
    monkeypatch.delenv(header_cache.NO_CACHE_VARIABLE, raising=False)
    return folder


def entries(folder: Path) -> list[Path]:
    sub = folder / header_cache.SUBDIR
    return sorted(sub.iterdir()) if sub.is_dir() else []


def reading(target: str | Path, **options: Any) -> tuple[Any, ...]:
    """Everything a `Checkpoint` says, in a comparable form (order of the tensors included)."""
    ckpt = open_checkpoint(target, **options)
    return (ckpt.kind, list(ckpt.tensors.items()), ckpt.notes, ckpt.files_read, ckpt.bytes_read, ckpt.config,
            ckpt.config_file, ckpt.index_file, dict(ckpt.index_lines), ckpt.index_tensors,
            [d.to_dict() for d in ckpt.diagnostics])


def error_of(target: str | Path, **options: Any) -> str:
    with pytest.raises(SourceError) as caught:
        open_checkpoint(target, **options)
    return f"{caught.value.code}: {caught.value}"


@pytest.fixture
def parsing_forbidden(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if a header or an index is parsed: what follows must come from the cache."""
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("parsed although the cache holds it")
    monkeypatch.setattr(safetensors_header, "parse_header", refuse)
    monkeypatch.setattr(source_open, "parse_json_bytes", refuse)


def _full_size(kind: str, root: Path) -> Path:
    if kind == "qwen3-next-80b, 41 shards":
        config = get_builtin(QWEN3_NEXT).config_copy()
        return write_checkpoint(root, config, qwen_tensors(config), shards=41)
    if kind == "qwen3.5-35b-a3b, 14 shards":
        config = get_builtin(QWEN3_5_MOE).config_copy()
        tensors = qwen_tensors(config, namespace="model.language_model.", experts=256, expert_dim=512)
        return write_checkpoint(root, config, tensors, shards=14)
    if kind == "kimi-linear-48b, 20 shards":
        config = get_builtin(KIMI).config_copy()
        return write_checkpoint(root, config, kimi_tensors(config), shards=20)
    if kind == "qwen3-next-80b, one file":
        config = get_builtin(QWEN3_NEXT).config_copy()
        return write_checkpoint(root, config, qwen_tensors(config))
    assert kind == "two files, no index"
    write_safetensors(root / "a.safetensors", SMALL)
    write_safetensors(root / "b.safetensors", {"d.weight": ("F16", [2, 2])}, metadata={"format": "pt"})
    return root


CHECKPOINTS = ("qwen3-next-80b, 41 shards", "qwen3.5-35b-a3b, 14 shards", "kimi-linear-48b, 20 shards",
               "qwen3-next-80b, one file", "two files, no index")


@pytest.mark.parametrize("kind", CHECKPOINTS)
def test_a_hit_reads_what_the_miss_read(kind: str, tmp_path: Path, cache_dir: Path, request: pytest.FixtureRequest):
    root = _full_size(kind, tmp_path / "model")
    without = reading(root, metadata_cache=False)
    assert not cache_dir.exists()  # off: nothing written
    assert reading(root) == without  # the miss, which fills the cache
    sharded = (root / INDEX_NAME).exists()
    read = (set(json.loads((root / INDEX_NAME).read_text())["weight_map"].values()) if sharded
            else {path.name for path in root.glob("*.safetensors")})  # (an index names the shards read)
    headers = {_header_bytes(root / name) for name in read}
    # one entry per distinct header read on its own; one for the whole of a sharded checkpoint
    assert len(entries(cache_dir)) == (1 if sharded else len(headers))
    request.getfixturevalue("parsing_forbidden")
    assert reading(root) == without  # the hit: nothing parsed, every byte of the metadata read as before


@pytest.mark.parametrize("model, tp", [(QWEN3_NEXT, "4"), (QWEN3_5_MOE, "2"), (KIMI, "4")])
def test_the_readme_models_report_the_same_json_from_the_cache(model: str, tp: str, tmp_path: Path, cache_dir: Path,
                                                                monkeypatch: pytest.MonkeyPatch):
    clean_output_env(monkeypatch)
    kind = {QWEN3_NEXT: CHECKPOINTS[0], QWEN3_5_MOE: CHECKPOINTS[1], KIMI: CHECKPOINTS[2]}[model]
    root = str(_full_size(kind, tmp_path / "model"))
    off = run_cli(root, "--tp", tp, "--output-format", "json", "--no-cache")
    assert not cache_dir.exists()
    miss = run_cli(root, "--tp", tp, "--output-format", "json")
    assert entries(cache_dir)
    hit = run_cli(root, "--tp", tp, "--output-format", "json")
    assert json.loads(off.stdout)["source"]["tensors"] > 300
    assert (miss.exit_code, miss.stdout, miss.stderr) == (off.exit_code, off.stdout, off.stderr)
    assert (hit.exit_code, hit.stdout, hit.stderr) == (off.exit_code, off.stdout, off.stderr)


def _header_bytes(path: Path) -> bytes:
    with open(path, "rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        return handle.read(length)


def _sharded(root: Path) -> Path:
    return write_sharded(root, {"s1.safetensors": SMALL, "s2.safetensors": {"d.weight": ("F16", [2, 2])}},
                         config={"model_type": "x"}).parent


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x55]) + data[at + 1:]


DAMAGES = {
    "truncated": lambda data, other: data[: len(data) // 2],
    "one byte short": lambda data, other: data[:-1],
    "one byte more": lambda data, other: data + b"\0",
    "payload byte flipped": lambda data, other: _flip(data, len(data) - 3),
    "key byte flipped": lambda data, other: _flip(data, 20),
    "magic changed": lambda data, other: b"X" + data[1:],
    "empty": lambda data, other: b"",
    "foreign text": lambda data, other: b"# not an entry\n" * 40,
    "another entry's bytes": lambda data, other: other,
    "grown by garbage": lambda data, other: data + b"\0" * 65536,  # a miss on its prefix, before the bulk is read
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_or_foreign_entry_is_a_miss(damage: str, tmp_path: Path, cache_dir: Path,
                                              monkeypatch: pytest.MonkeyPatch):
    sharded = _sharded(tmp_path / "ck")  # one entry for the whole checkpoint ...
    single = write_safetensors(tmp_path / "one" / "model.safetensors", SMALL).parent  # ... and one for a header
    without = [reading(root, metadata_cache=False) for root in (sharded, single)]
    for root in (sharded, single):
        reading(root)
    files = entries(cache_dir)
    assert len(files) == 2
    originals = [path.read_bytes() for path in files]
    for number, path in enumerate(files):
        path.write_bytes(DAMAGES[damage](originals[number], originals[number - 1]))
    assert [reading(root) for root in (sharded, single)] == without  # every entry passed over, the files read again
    assert [path.read_bytes() for path in entries(cache_dir)] == originals  # and the entries written anew
    monkeypatch.setattr(safetensors_header, "parse_header", None)  # (a call would fail) ...
    monkeypatch.setattr(source_open, "parse_json_bytes", None)
    assert [reading(root) for root in (sharded, single)] == without  # ... and read from them next time


def test_an_entry_that_is_a_link_or_a_folder_is_a_miss(tmp_path: Path, cache_dir: Path):
    root = _sharded(tmp_path / "ck")
    without = reading(root, metadata_cache=False)
    reading(root)
    files = entries(cache_dir)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for number, path in enumerate(files):
        moved = elsewhere / path.name
        path.rename(moved)
        if number % 2:
            path.symlink_to(moved)  # even a link to a good entry: links are not followed
        else:
            path.mkdir()
    assert reading(root) == without
    assert reading(root) == without


def test_a_changed_header_is_a_miss(tmp_path: Path, cache_dir: Path):
    root = _sharded(tmp_path / "ck")
    before = reading(root)
    write_safetensors(root / "s2.safetensors", {"d.weight": ("BF16", [2, 3])})  # same name, new shape and dtype
    after = reading(root)
    assert after == reading(root, metadata_cache=False)
    assert dict(after[1])["d.weight"].shape == (2, 3) and dict(after[1])["d.weight"].dtype == "bfloat16"
    assert dict(before[1])["d.weight"].shape == (2, 2)


@pytest.mark.parametrize("change, message", [
    ("data region one byte longer", "GDR038: ck/s2.safetensors: safetensors file has 1 unexpected bytes after its "
                                    "tensor data: 88 bytes on disk, 87 expected; help: re-download the file, or "
                                    "re-save it with the `safetensors` library"),
    ("data region one byte shorter", "GDR030: ck/s2.safetensors: safetensors file is truncated: 86 bytes on disk, 87 "
                                     "expected (8 + 71-byte header + 8 bytes of tensor data); help: re-download or "
                                     "re-copy `s2.safetensors`"),
    ("header malformed", "GDR032: ck/s2.safetensors: malformed safetensors header: invalid JSON at line 1, column 12 "
                         "of the header: expecting ':' delimiter; help: re-download the file, or re-save it with the "
                         "`safetensors` library"),
    ("shard removed", "GDR043: ck/model.safetensors.index.json: shard `s2.safetensors` listed in the index does not "
                      "exist; help: re-download `s2.safetensors`"),
])
def test_a_hit_still_checks_what_the_cache_does_not_hold(change: str, message: str, tmp_path: Path, cache_dir: Path,
                                                         monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    root = _sharded(Path("ck"))
    reading(root)
    reading(root)
    shard = root / "s2.safetensors"
    if change == "data region one byte longer":
        os.truncate(shard, shard.stat().st_size + 1)
    elif change == "data region one byte shorter":
        os.truncate(shard, shard.stat().st_size - 1)
    elif change == "header malformed":
        data = bytearray(shard.read_bytes())
        data[8 + 11] = ord(";")
        shard.write_bytes(bytes(data))
    else:
        shard.unlink()
    assert error_of(root, metadata_cache=False) == message
    assert error_of(root) == message


def test_a_header_that_cannot_be_kept_is_read_each_time(tmp_path: Path, cache_dir: Path):
    # a NUL inside a name: the entry format separates names with NULs, so no entry is written for it
    write_safetensors(tmp_path / "model.safetensors", {"a\0b": ("F32", [1]), "c": ("F32", [2])})
    without = reading(tmp_path, metadata_cache=False)
    assert reading(tmp_path) == without
    assert entries(cache_dir) == []
    assert reading(tmp_path) == without


def test_names_in_any_script_round_trip(tmp_path: Path, cache_dir: Path, request: pytest.FixtureRequest):
    names = {"é.weight": ("F32", [1]), "名前.bias": ("BF16", [2, 1]), "\U0001f600": ("U8", []), "": ("I64", [0, 3])}
    write_safetensors(tmp_path / "model.safetensors", names)
    without = reading(tmp_path, metadata_cache=False)
    reading(tmp_path)
    request.getfixturevalue("parsing_forbidden")
    assert reading(tmp_path) == without
    assert [name for name, _ in without[1]] == list(names)


def test_a_cache_folder_that_is_a_file_is_no_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    root = _sharded(tmp_path / "ck")
    without = reading(root, metadata_cache=False)
    blocker = tmp_path / "a file"
    blocker.write_text("mine")
    for folder in (blocker, blocker / "below"):
        monkeypatch.setenv(header_cache.CACHE_DIR_VARIABLE, str(folder))
        assert reading(root) == without
    assert blocker.read_text() == "mine"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to a read-only folder")
def test_a_read_only_cache_folder_is_no_cache(tmp_path: Path, cache_dir: Path):
    root = _sharded(tmp_path / "ck")
    without = reading(root, metadata_cache=False)
    cache_dir.mkdir()
    cache_dir.chmod(0o500)
    try:
        assert reading(root) == without
        assert list(cache_dir.iterdir()) == []
    finally:
        cache_dir.chmod(0o700)


def test_a_full_disk_is_no_cache_and_leaves_no_partial_file(tmp_path: Path, cache_dir: Path,
                                                           monkeypatch: pytest.MonkeyPatch):
    root = _sharded(tmp_path / "ck")
    without = reading(root, metadata_cache=False)
    writes: list[int] = []

    def full(*args: Any) -> None:
        writes.append(1)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(header_cache.os, "replace", full)
    assert reading(root) == without
    assert writes == [1]  # the first failed write ends the run's writing
    assert entries(cache_dir) == []  # the temporary file removed
    monkeypatch.undo()


def test_a_cache_folder_that_refuses_files_is_no_cache(tmp_path: Path, cache_dir: Path,
                                                      monkeypatch: pytest.MonkeyPatch):
    # (as a read-only folder does for anyone but root, who runs this suite here)
    root = _sharded(tmp_path / "ck")
    single = write_safetensors(tmp_path / "one" / "model.safetensors", SMALL).parent
    without = [reading(target, metadata_cache=False) for target in (root, single)]
    real_open = os.open
    refused: list[str] = []

    def read_only(path: Any, flags: int, *args: Any) -> int:
        if flags & os.O_CREAT:
            refused.append(os.fspath(path))
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(header_cache.os, "open", read_only)
    assert [reading(target) for target in (root, single)] == without
    assert len(refused) == 2 and entries(cache_dir) == []  # one try a run, nothing left behind


def test_turned_off_nothing_is_written(tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch):
    clean_output_env(monkeypatch)
    root = str(_sharded(tmp_path / "ck"))
    for value in ("1", "true", "yes", "on"):
        monkeypatch.setenv(header_cache.NO_CACHE_VARIABLE, value)
        assert header_cache.cache_disabled()
        assert run_cli(root, "--output-format", "json").exit_code == 0
        open_checkpoint(root)
    monkeypatch.delenv(header_cache.NO_CACHE_VARIABLE)
    assert run_cli(root, "--output-format", "json", "--no-cache").exit_code == 0
    assert not cache_dir.exists()
    for value in ("", "0", "false", "No", "off"):
        monkeypatch.setenv(header_cache.NO_CACHE_VARIABLE, value)
        assert not header_cache.cache_disabled()
    open_checkpoint(root)
    assert len(entries(cache_dir)) == 1


def test_dry_run_takes_no_cache_too(tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch):
    """As `check` and `launch` (its flag was missing, found in review). A KDA model under vLLM, whose decode is not
    the packed kernel (GDR314): the model is read, nothing is launched."""
    clean_output_env(monkeypatch)
    config = kimi_config(layers=4, H=4, D=16)
    root = str(write_checkpoint(tmp_path / "kda", config, kimi_tensors(config), shards=2))
    command = ["dry-run", root, "--engine", "vllm", "--output-format", "json"]
    off = run_cli(*command, "--no-cache")
    assert not cache_dir.exists()
    on = run_cli(*command)
    assert len(entries(cache_dir)) == 1
    assert on.exit_code == off.exit_code == 1
    assert [json.loads(run.stdout)["refused_because"] for run in (on, off)] == [["GDR314"], ["GDR314"]]


def test_launch_takes_no_cache_too(tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch):
    clean_output_env(monkeypatch)
    config = get_builtin(QWEN3_NEXT).config_copy()
    root = str(write_checkpoint(tmp_path / "model", config, qwen_tensors(config), shards=3))
    command = ["launch", "--output-format", "json", "--", "vllm", "serve", root, "--tensor-parallel-size", "4"]
    off = run_cli(*command[:3], "--no-cache", *command[3:])
    assert not cache_dir.exists()
    on = run_cli(*command)
    assert len(entries(cache_dir)) == 1
    assert (on.exit_code, on.stdout) == (off.exit_code, off.stdout)


def test_where_the_cache_lives(tmp_path: Path):
    home = os.path.expanduser("~")
    assert header_cache.cache_directory({"GDR_CHECK_CACHE_DIR": "/c", "XDG_CACHE_HOME": "/x"}) == Path("/c")
    assert header_cache.cache_directory({"XDG_CACHE_HOME": "/x"}) == Path("/x/gdr-check")
    assert header_cache.cache_directory({"XDG_CACHE_HOME": "relative"}) == Path(home, ".cache", "gdr-check")
    assert header_cache.cache_directory({}) == Path(home, ".cache", "gdr-check")
    assert header_cache.cache_directory({"HOME": "/h"}) == Path("/h/.cache/gdr-check")
    assert header_cache.cache_directory({"GDR_CHECK_CACHE_DIR": "~/c"}) == Path(home, "c")
    # No folder, so no cache: a relative path (entries would land wherever a run starts), a `~user` that names no
    # user (this raised RuntimeError through `Path.expanduser`: an internal error, found in review), a home that is
    # empty (`HOME=` expands `~` to `/`), relative or the root.
    for environ in ({"GDR_CHECK_CACHE_DIR": "relative/c"}, {"GDR_CHECK_CACHE_DIR": "~no-such-user-gdr/c"},
                    {"HOME": ""}, {"HOME": "relative-home"}, {"HOME": "/"}, {"XDG_CACHE_HOME": "x", "HOME": ""}):
        assert header_cache.cache_directory(environ) is None, environ


@pytest.mark.parametrize("folder", ["~no-such-user-gdr/c", "relative-cache"])
def test_a_cache_folder_that_names_no_absolute_path_is_no_cache(folder: str, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch):
    root = _sharded(tmp_path / "ck")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(header_cache.CACHE_DIR_VARIABLE, folder)
    monkeypatch.delenv(header_cache.NO_CACHE_VARIABLE, raising=False)
    clean_output_env(monkeypatch)
    on = run_cli(str(root), "--output-format", "json")
    off = run_cli(str(root), "--output-format", "json", "--no-cache")
    assert (on.exit_code, on.stdout, on.stderr) == (off.exit_code, off.stdout, off.stderr) and on.exit_code == 0
    assert sorted(path.name for path in tmp_path.iterdir()) == ["ck"]  # nothing written where the run started


def test_pruning_removes_the_least_recently_used_entries_only(tmp_path: Path, cache_dir: Path):
    folder = cache_dir / header_cache.SUBDIR
    ages: dict[str, int] = {}
    for number in range(3):
        root = tmp_path / f"m{number}"
        write_safetensors(root / "model.safetensors", {f"t{number}.{i}": ("F32", [i]) for i in range(50)})
        open_checkpoint(root)
        (new,) = [path for path in folder.iterdir() if path.name not in ages]
        os.utime(new, (1_000_000 + number, 1_000_000 + number))
        ages[new.name] = number
    foreign = folder / "notes.txt"
    foreign.write_text("not an entry")
    os.utime(foreign, (1, 1))
    stale, fresh = folder / f"{'0' * 64}.1.2.tmp", folder / f"{'1' * 64}.1.2.tmp"  # a crashed run's, a running one's
    stale.write_bytes(b"partial")
    fresh.write_bytes(b"partial")
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    total = sum((folder / name).stat().st_size for name in ages)
    cache = header_cache.HeaderCache(cache_dir)
    cache.written = 1
    cache.prune(limit=total - 1)  # over by a byte: the oldest entries go, down to three quarters of the limit
    assert sorted(ages[path.name] for path in folder.iterdir() if path not in (foreign, fresh)) == [1, 2]
    assert foreign.read_text() == "not an entry" and fresh.exists() and not stale.exists()
    cache.written = 0
    cache.prune(limit=0)  # a run that wrote nothing does not prune
    assert sorted(path.name for path in folder.iterdir()) == sorted([foreign.name, fresh.name,
                                                                     *[n for n in ages if ages[n]]])


def test_an_index_change_is_a_miss(tmp_path: Path, cache_dir: Path):
    root = _sharded(tmp_path / "ck")
    reading(root)
    index = json.loads((root / INDEX_NAME).read_text())
    del index["weight_map"]["b.weight"]  # the shard holds a tensor the index does not list
    write_json(root / INDEX_NAME, index)
    with_cache = reading(root)
    assert with_cache == reading(root, metadata_cache=False)
    assert with_cache[2] == ["1 tensor(s) in the shards are not listed in `model.safetensors.index.json`, "
                             "e.g. `b.weight`"]


def test_an_entry_is_whole_or_absent(tmp_path: Path, cache_dir: Path):
    root = _sharded(tmp_path / "ck")
    reading(root)
    for path in entries(cache_dir):
        data = path.read_bytes()
        magic, version, order, kind, key, length, _ = struct.unpack_from("<8sBcc32sQI", data)
        assert (magic, version, len(data)) == (b"GDRCACHE", 1, struct.calcsize("<8sBcc32sQI") + length)
        assert path.name == key.hex() + ".gdrc" and kind in (b"H", b"C")
        assert b"\x80\x04" not in data[:2]  # (not a pickle)


def test_an_entry_naming_files_outside_the_checkpoint_is_no_entry(tmp_path: Path, cache_dir: Path):
    # An entry is written only from a validated index, whose shards are plain file names; one that names anything
    # else (written by hand into the cache folder, checksum and all) is not used, and what it names is not opened.
    root = _sharded(tmp_path / "ck")
    without = reading(root, metadata_cache=False)
    secret = write_safetensors(tmp_path / "secret.safetensors", {"s": ("F32", [1])})
    cache = header_cache.HeaderCache(cache_dir)
    index_key = cache.key(header_cache.CHECKPOINT, (root / INDEX_NAME).read_bytes())
    raw = _header_bytes(secret)
    for shards in (["../secret.safetensors"], ["s2.safetensors", "s1.safetensors"], ["s1.safetensors"] * 2):
        cache.store_checkpoint(index_key, header_cache.Sharded(
            shards=shards, header_keys=[cache.key(header_cache.HEADER, raw)] * len(shards),
            data_ends=[4] * len(shards), names=["s"], dtypes=["float32"], shapes=[(1,)], tensor_shards=shards[:1],
            notes=[]))
        assert cache.load_checkpoint(index_key) is not None  # a well-formed entry ...
        got = reading(root)
        assert got == without  # ... not used
        assert str(secret) not in got[3] and "secret.safetensors" not in str(got[3])
