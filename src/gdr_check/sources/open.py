"""`open_checkpoint`: turn what the user named into a `Checkpoint`, reading metadata only."""

from __future__ import annotations

import os
from collections import Counter
from itertools import repeat
from operator import attrgetter, eq
from pathlib import Path

from ..base.errors import display_path, printable
from ..base.files import (
    CONFIG_NAME,
    INDEX_SUFFIX,
    PICKLE_SUFFIXES,
    RECORDING_KIND,
    SAFETENSORS_SUFFIX,
    is_cache_repo_dir,
)
from ..base.source_error import SourceError
from .checkpoint import Checkpoint, TensorInfo
from .header_cache import CHECKPOINT, HEADER, HeaderCache, Sharded
from .hf_cache import (
    CacheEntry,
    enclosing_cache_repo,
    looks_like_repo_id,
    resolve_cache_repo,
    resolve_repo_id,
    split_revision,
)
from .jsonfile import load_json_file, parse_json_bytes, read_json_bytes
from .jsonpos import LazyKeyLocations, member_spans
from .key_locator import KeyLocator
from .metadata_reader import MetadataReader, broken_link, permission_denied
from .rules import (
    DuplicateTensors,
    IndexWithoutShards,
    InvalidConfigJson,
    InvalidIndexJson,
    MalformedIndexes,
    MissingPaths,
    MissingShards,
    NonObjectConfigs,
    PickleCheckpoints,
    ShardPathsOutsideCheckpoint,
    TensorsMissingFromShards,
    UnreadableFiles,
    UnrecognizedInputs,
)
from .safetensors_header import header_tensors, json_type, read_header_bytes

SINGLE_NAME = "model.safetensors"
INDEX_NAME = "model.safetensors.index.json"
CONFIG_ONLY_NOTE = "only `config.json` was read: no weights were cross-checked"
_NAME = attrgetter("name")


def open_checkpoint(
    target: str | os.PathLike[str], *, cache_dir: str | None = None, revision: str | None = None,
    follow_links: bool = False, metadata_cache: bool | None = None,
) -> Checkpoint:
    """Read the metadata of `target`: a `.safetensors` file, a sharded index or its directory, a model
    directory, a bare `config.json`, a Hugging Face cache entry, or an `org/name` id (`org/name@rev`) found in
    the local cache.

    `revision` picks the snapshot of a cached model (a branch, tag, commit or commit prefix; `@rev` in the
    target wins). `follow_links` follows links inside a checkpoint wherever they point (git-annex, DVC,
    shared storage); without it only the Hugging Face cache's own links are followed. `metadata_cache` turns the
    cache of validated header and index reads on or off (`sources/header_cache.py`); None: on unless
    `GDR_CHECK_NO_CACHE` says off.

    Reads config.json, indexes and safetensors headers only (never tensor data, never a pickle). Raises
    `SourceError` (one line naming the file, with a GDR0xx code) when the checkpoint cannot be read.
    """
    cache = HeaderCache.from_environment(metadata_cache)
    try:
        return _open_checkpoint(target, cache_dir, revision, follow_links, cache)
    finally:
        if cache is not None:
            cache.prune()  # only where this run wrote entries


def _open_checkpoint(
    target: str | os.PathLike[str], cache_dir: str | None, revision: str | None, follow_links: bool,
    cache: HeaderCache | None,
) -> Checkpoint:
    text = os.fspath(target)
    path = Path(os.path.abspath(os.path.expanduser(text)))
    # Behind a folder that cannot be searched (the path, or where it links to): unreadable, not missing.
    if permission_denied(os.stat, path):
        raise UnreadableFiles(path, file=text, reason="permission denied (a folder on its path cannot be searched)")
    if not os.path.lexists(path):
        if looks_like_repo_id(text):
            repo_id, at_revision = split_revision(text)
            reader = MetadataReader(follow_links=follow_links, metadata_cache=cache)
            entry = resolve_repo_id(repo_id, reader, cache_dir, at_revision or revision)
            checkpoint = _open_cache_entry(text, entry, reader)
            if at_revision and revision is not None and revision != at_revision:
                checkpoint.notes.append(f"revision `{printable(revision)}` not used for `{printable(text)}`: the "
                                        f"target names its own, `{printable(at_revision)}`, which wins")
            return checkpoint
        raise MissingPaths(None, path=text)
    cache_repo = enclosing_cache_repo(path)
    if path.is_symlink() and not os.path.exists(path) and cache_repo is None:
        raise broken_link(path)
    if path.is_dir():
        if is_cache_repo_dir(path):
            reader = MetadataReader(path, follow_links=follow_links, metadata_cache=cache)
            return _open_cache_entry(text, resolve_cache_repo(path, reader, revision=revision), reader)
        kind = "hf-cache" if cache_repo else "directory"
        reader = MetadataReader(cache_repo, follow_links=follow_links, metadata_cache=cache)
        builder = _Builder(text, path, kind, reader)
        return _unrevised(builder.directory(path), text, revision)
    reader = MetadataReader(cache_repo, named=path, follow_links=follow_links, metadata_cache=cache)
    return _unrevised(_Builder(text, path.parent, "", reader).file(path), text, revision)


def _unrevised(checkpoint: Checkpoint, target: str, revision: str | None) -> Checkpoint:
    """`checkpoint`, with a note when a revision was asked for: only a cached model's repository has snapshots to
    choose from; a folder or file on disk (a snapshot's own included) is read as it is."""
    if revision is not None:
        checkpoint.notes.append(f"revision `{printable(revision)}` picks nothing here: `{printable(target)}` is not a "
                                "cached Hugging Face model's repository, so it was read as it is on disk")
    return checkpoint


def _open_cache_entry(target: str, entry: CacheEntry, reader: MetadataReader) -> Checkpoint:
    reader.cache_repo = entry.repo_dir
    builder = _Builder(target, entry.snapshot, "hf-cache", reader)
    builder.checkpoint.notes.append(entry.note)
    return builder.directory(entry.snapshot)


class _Builder:
    """Fills one `Checkpoint` from the files of one checkpoint directory."""

    def __init__(self, target: str, root: Path, kind: str, reader: MetadataReader) -> None:
        self.reader = reader
        self.root = root
        self.checkpoint = Checkpoint(target=target, root=root, kind=kind)
        self.headers: list[tuple[bytes | None, int]] = []  # each header read: its cache key and end of data

    # -- entry points -------------------------------------------------------------------------------------
    def file(self, path: Path) -> Checkpoint:
        name = path.name
        if name.endswith(PICKLE_SUFFIXES):
            raise _pickle_error(path)
        if name.endswith(SAFETENSORS_SUFFIX):
            self.checkpoint.kind = "safetensors-file"
            self._config_beside()
            self._shard(path, name)
        elif name.endswith(INDEX_SUFFIX):
            self.checkpoint.kind = "sharded"
            self._config_beside()
            self._sharded(path)
        elif name.endswith(".json"):
            self._config_only(path)
        else:
            raise UnrecognizedInputs(path, path=display_path(path),
                reason="expected a `.safetensors` file, a safetensors index or a `config.json`",
            )
        return self._finish()

    def directory(self, directory: Path) -> Checkpoint:
        try:
            entries = sorted(os.listdir(directory))
        except OSError as exc:
            raise UnreadableFiles(directory, file=directory.name, reason=(exc.strerror or "error").lower()) from None
        indexes = [e for e in entries if e.endswith(INDEX_SUFFIX)]
        weights = [e for e in entries if e.endswith(SAFETENSORS_SUFFIX)]
        if SINGLE_NAME in entries:
            self._set_kind("directory")
            self._config_beside()
            self._shard(directory / SINGLE_NAME, SINGLE_NAME)
        elif INDEX_NAME in entries or len(indexes) == 1:
            self._set_kind("sharded")
            self._config_beside()
            self._sharded(directory / (INDEX_NAME if INDEX_NAME in entries else indexes[0]))
        elif weights:
            # No index: every safetensors file is part of the checkpoint (e.g. `consolidated.safetensors`).
            self._set_kind("directory")
            self._config_beside()
            for name in weights:
                self._shard(directory / name, name)
        elif pickles := [e for e in entries if e.endswith(PICKLE_SUFFIXES)]:
            raise _pickle_error(directory / pickles[0])
        elif CONFIG_NAME in entries:
            self._config_only(directory / CONFIG_NAME)
        else:
            raise UnrecognizedInputs(directory, path=display_path(directory),
                reason="the directory holds no `config.json`, `.safetensors` file or safetensors index",
            )
        return self._finish()

    # -- parts --------------------------------------------------------------------------------------------
    def _set_kind(self, kind: str) -> None:
        if self.checkpoint.kind != "hf-cache":
            self.checkpoint.kind = kind

    def _config_beside(self) -> None:
        path = self.root / CONFIG_NAME
        if os.path.lexists(path):
            self._config(path)

    def _config_only(self, path: Path) -> None:
        self.checkpoint.kind = "config-only"
        self._config(path)
        self.checkpoint.notes.append(CONFIG_ONLY_NOTE)

    def _config(self, path: Path) -> None:
        value, text = load_json_file(self.reader, path, what=f"`{path.name}`", invalid=InvalidConfigJson)
        if not isinstance(value, dict):
            raise NonObjectConfigs(path, json_type=json_type(value))
        tool = value.get("tool")
        report = isinstance(tool, dict) and tool.get("name") == "gdr-check" and value.get("kind") != RECORDING_KIND
        if report:
            raise UnrecognizedInputs(path, path=display_path(path), reason="it is a gdr-check report, not a model "
                                                                           "config")
        if value.get("kind") == RECORDING_KIND or ("schema_version" in value and "calls" in value):
            raise UnrecognizedInputs(path, path=display_path(path), reason=(
                "it is a recording of kernel calls, not a model config (`gdr-check call` checks one)"))
        self.checkpoint.config = value
        self.checkpoint.config_file = display_path(path)
        self.checkpoint.config_keys = KeyLocator(text)  # located when a diagnostic asks (key_locator.py)

    def _shard(self, path: Path, shard: str, read: tuple[bytearray, int] | None = None, *, keep: bool = True
               ) -> list[str]:
        """Read one shard's header into the checkpoint (`read`: its bytes and file size, read already; `keep`: with
        an entry of its own in the cache, where a whole sharded checkpoint has one); returns its tensor names, in
        header order."""
        raw, size = read if read is not None else read_header_bytes(self.reader, path)
        infos, key, data_end = header_tensors(self.reader, path, shard, raw, size, keep=keep)
        self.headers.append((key, data_end))
        tensors = self.checkpoint.tensors
        names = list(map(_NAME, infos))
        if not tensors.keys().isdisjoint(names):  # a name an earlier shard holds: find the first, in order
            for info in infos:
                prior = tensors.get(info.name)
                if prior is not None:
                    raise DuplicateTensors(path, tensor=info.name, shard=prior.shard, other_shard=shard)
                tensors[info.name] = info
        tensors.update(zip(names, infos, strict=True))  # one name per header entry
        return names

    def _sharded(self, index_path: Path) -> None:
        raw = read_json_bytes(self.reader, index_path, what=f"`{index_path.name}`", index=True)
        notes = len(self.checkpoint.notes)
        # Located only when first used: see LazyKeyLocations.
        lines = LazyKeyLocations(lambda: member_spans(raw.decode("utf-8"), "weight_map"))
        self.checkpoint.index_file = display_path(index_path)
        self.checkpoint.index_lines = lines
        cache = self.reader.metadata_cache
        key = cache.key(CHECKPOINT, raw) if cache is not None else None
        # What an earlier run read from this very index and shards, checked against their bytes (header_cache.py)
        read = self._sharded_from_cache(cache, key) if cache is not None and key is not None else {}
        if read is None:
            return
        value, _ = parse_json_bytes(raw, index_path, invalid=InvalidIndexJson)
        if not isinstance(value, dict):
            raise MalformedIndexes(index_path, reason=f"the index is a JSON {json_type(value)}, not an object")
        weight_map = value.get("weight_map")
        if weight_map is None:
            raise MalformedIndexes(index_path, reason="it has no `weight_map`")
        if not isinstance(weight_map, dict):
            raise MalformedIndexes(
                index_path, reason=f"`weight_map` is a JSON {json_type(weight_map)}, not an object")

        # An index of a large checkpoint has ~76k entries: the checks below run as C-level passes over it, and
        # walk it in order only to name the first entry at fault.
        def first_tensor(shard: str) -> str:
            tensor: str = next(tensor for tensor, value in weight_map.items() if value == shard)  # JSON keys: str
            return tensor

        if not set(map(type, weight_map.values())) <= {str}:
            for tensor, shard in weight_map.items():
                if type(shard) is not str:
                    raise MalformedIndexes(index_path, location=lines.get(tensor),
                        reason=f"`weight_map` maps `{tensor}` to a JSON {json_type(shard)}, not a file name",
                    )
        listed = Counter(weight_map.values())  # index entries per shard, shards in order of first mention
        shards = list(listed)
        for shard in shards:
            if not is_plain_file_name(shard):
                tensor = first_tensor(shard)
                raise ShardPathsOutsideCheckpoint(index_path, location=lines.get(tensor), shard=shard, tensor=tensor)

        # Report every missing shard before reading any header: re-downloading is one step.
        missing = [s for s in sorted(shards) if not os.path.lexists(self.root / s)]
        if missing and len(missing) == len(shards) and not _holds_weights(self.root):
            # Only the JSON files were downloaded (`--include "*.json"`): check the config, and say so.
            self.checkpoint.diagnostics.append(IndexWithoutShards(
                index_path, shards=len(shards), index=index_path.name, tensors=len(weight_map),
            ).diagnostic())
            self.checkpoint.index_tensors = list(weight_map)
            return
        if missing:
            first = missing[0]
            also = f" (and {len(missing) - 1} more missing shards)" if len(missing) > 1 else ""
            raise MissingShards(index_path, location=lines.get(first_tensor(first)), shard=first,
                fix=f"re-download `{first}`{also}",
            )
        for shard in sorted(shards):
            names = self._shard(self.root / shard, shard, read.get(shard), keep=False)
            # Every tensor the index puts in this shard is in its header: as many of the header's (distinct)
            # names are put in this shard by the index as the index puts there in all.
            if sum(map(eq, map(weight_map.get, names), repeat(shard))) != listed[shard]:
                present = set(names)
                for tensor, value in weight_map.items():
                    if value == shard and tensor not in present:
                        raise TensorsMissingFromShards(
                            index_path, location=lines.get(tensor), tensor=tensor, shard=shard,
                            fix=f"download the index and `{shard}` of one revision again",
                        )
        # Every tensor of the index is in the shards by now, so only unlisted ones make the counts differ.
        if len(self.checkpoint.tensors) != len(weight_map):
            unlisted = [name for name in self.checkpoint.tensors if name not in weight_map]
            self.checkpoint.notes.append(
                f"{len(unlisted)} tensor(s) in the shards are not listed in `{index_path.name}`, "
                f"e.g. `{unlisted[0]}`"
            )
        if cache is not None and key is not None and all(header_key is not None for header_key, _ in self.headers):
            infos = list(self.checkpoint.tensors.values())
            cache.store_checkpoint(key, Sharded(
                shards=sorted(shards), header_keys=[k for k, _ in self.headers if k is not None],
                data_ends=[end for _, end in self.headers], names=list(self.checkpoint.tensors),
                dtypes=[info.dtype for info in infos], shapes=[info.shape for info in infos],
                tensor_shards=[info.shard for info in infos], notes=self.checkpoint.notes[notes:]))

    def _sharded_from_cache(self, cache: HeaderCache, index_key: bytes) -> dict[str, tuple[bytearray, int]] | None:
        """None where the cache holds what reading this index (key `index_key`) and its shards gave, and every
        shard's header and size are those it was read from: the checkpoint is then filled from the cache. Else the
        headers read on the way (shard -> bytes and file size), for the reading to go on with."""
        entry = cache.load_checkpoint(index_key)
        # A missing shard is the reading's to report, before any header is read; an entry naming anything but plain
        # file names, sorted and distinct (as an index read gives them), is no entry of ours
        if (entry is None or entry.shards != sorted(set(entry.shards))
                or not all(map(is_plain_file_name, entry.shards))
                or not all(os.path.lexists(self.root / shard) for shard in entry.shards)):
            return {}
        read: dict[str, tuple[bytearray, int]] = {}
        for shard, header_key, data_end in zip(entry.shards, entry.header_keys, entry.data_ends, strict=True):
            raw, size = read[shard] = read_header_bytes(self.reader, self.root / shard)
            if size != 8 + len(raw) + data_end or cache.key(HEADER, raw) != header_key:
                return read
        tensors = list(map(TensorInfo, entry.names, entry.dtypes, entry.shapes, entry.tensor_shards))
        self.checkpoint.tensors = dict(zip(entry.names, tensors, strict=True))
        self.checkpoint.notes.extend(entry.notes)
        return None

    def _finish(self) -> Checkpoint:
        checkpoint = self.checkpoint
        checkpoint.files_read = list(self.reader.files_read)
        checkpoint.bytes_read = self.reader.bytes_read
        return checkpoint


def _holds_weights(directory: Path) -> bool:
    """Whether any safetensors file is in `directory` (then a shard the index lists but lacks is missing)."""
    try:
        return any(name.endswith(SAFETENSORS_SUFFIX) for name in os.listdir(directory))
    except OSError:
        return True


def is_plain_file_name(name: str) -> bool:
    """A shard name from an index: one file name in the checkpoint directory, nothing that walks out of it."""
    return (
        bool(name)
        and name not in (".", "..")
        and "/" not in name
        and "\\" not in name
        and "\0" not in name
        and not os.path.isabs(name)
        and not (len(name) >= 2 and name[1] == ":")  # a Windows drive
    )


def _pickle_error(path: Path) -> SourceError:
    return PickleCheckpoints(path, file=path.name,
        fix=(
            "convert it to safetensors (e.g. with the `safetensors` convert script, or `transformers` "
            "`save_pretrained(..., safe_serialization=True)`) and check the converted directory"
        ),
    )
