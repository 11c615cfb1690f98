"""A cache of validated metadata reads, keyed by the bytes read: a safetensors header's tensors, a sharded checkpoint's.

Reading a large checkpoint is mostly parsing and validating JSON: 41 headers and an index of ~76k tensors take
hundreds of milliseconds (docs/performance.md, *Metadata path*), the same work on every run over the same files.
This cache keeps the result of that work between runs, addressed by content:

- **Key**: the SHA-256 of a tag (what was read, this cache's format and the package version) followed by the exact
  bytes the reader has already read (a header's N bytes; a sharded checkpoint's index). A file whose bytes change
  can never meet an old entry, and no byte of a checkpoint is read for the cache that a run without it would not.
- **Value**: only what a full validation returned, and only after it passed. For a safetensors file read on its
  own: its tensor names, dtypes, shapes and the end of its data region (`parse_header`'s result). For a sharded
  checkpoint, one entry under its index's key: each shard's header key and end of data, which a hit checks against
  the header bytes it reads and the file's size, then every tensor of the merged, cross-checked reading and its
  notes (one entry, not one per header: a hit then skips parsing the index and cross-checking it with the headers
  too, ~100 ms against ~135 on the 80B checkpoint, and a first run writes one file, not 43). So a miss runs the
  reader unchanged (every error path included), and a hit returns what the miss returned for the same bytes.
  Never tensor data, never a path: an entry holds what the bytes say and nothing about where they came from.
- **Format**: our own, parsed here: a fixed header (magic, format, byte order, kind, key, payload length and
  CRC-32), then length-prefixed sections of UTF-8 text and `array` buffers. No pickle, no marshal. A file that is
  not exactly what this module writes (foreign, truncated, corrupt, another key, another user's) is a miss.
- **Writes** go to a temporary file in the same folder, then `os.replace`: an entry is whole or absent. A folder
  that cannot be created or written, a full disk, a path that is a file: the run goes on without the cache, with
  the same result and exit code. The folder is kept under `MAX_CACHE_BYTES` by deleting its least recently used
  entries (a hit refreshes an entry's time at most once a day).

Trust: the folder is the user's own, as `__pycache__` is: an entry is checked for damage, not for intent, and
whoever can write the folder can make a hit report what the entry says (README and docs/ci.md say so).

Where: `$GDR_CHECK_CACHE_DIR`, else `$XDG_CACHE_HOME/gdr-check`, else `~/.cache/gdr-check` (absolute paths only).
Off with `GDR_CHECK_NO_CACHE=1` or the command line's `--no-cache`. Any change to what reading a header or an index
accepts or returns must change `FORMAT` (the package version is in the key too).
"""

from __future__ import annotations

import os
import stat
import struct
import sys
import time
import zlib
from array import array
from collections.abc import Mapping
from hashlib import sha256
from pathlib import Path

from ..base.identity import VERSION

CACHE_DIR_VARIABLE = "GDR_CHECK_CACHE_DIR"
NO_CACHE_VARIABLE = "GDR_CHECK_NO_CACHE"
FORMAT = 1
MAGIC = b"GDRCACHE"
SUBDIR = f"metadata-v{FORMAT}"  # entries of another format live in another folder
SUFFIX = ".gdrc"
MAX_CACHE_BYTES = 512 * 1024 * 1024  # ~50 checkpoints of the 80B model's size (~10 MB of entries each)
PRUNED_TO = 0.75  # pruning deletes down to this share of the limit, so that it does not run on every write
TOUCH_AFTER_S = 86_400  # a hit moves an entry's time forward at most this often
HEADER = "HEADER"
CHECKPOINT = "CHECKPOINT"
_KINDS = {HEADER: b"H", CHECKPOINT: b"C"}
_ORDER = b"<" if sys.byteorder == "little" else b">"
_PREFIX = struct.Struct("<8sBcc32sQI")  # magic, format, byte order, kind, key, payload length, payload CRC-32
_LENGTH = struct.Struct("<Q")
_OFF_VALUES = ("", "0", "false", "no", "off")
_WORD = {"Q": 8, "I": 4, "B": 1}
Header = tuple[list[str], list[str], list[tuple[int, ...]], int]  # names, dtypes, shapes, end of the data region


def cache_disabled(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether `GDR_CHECK_NO_CACHE` turns the cache off (any value but empty, 0, false, no, off)."""
    return environ.get(NO_CACHE_VARIABLE, "").strip().lower() not in _OFF_VALUES


def cache_directory(environ: Mapping[str, str] = os.environ) -> Path | None:
    """`$GDR_CHECK_CACHE_DIR`, else `$XDG_CACHE_HOME/gdr-check`, else `~/.cache/gdr-check`; None (no cache) where
    the folder named is not an absolute path: a relative one would put entries in whatever folder a run starts
    in, and `~user` that names no user, or a home that is unset or empty (`HOME=` gives `/`), names no folder."""
    given = environ.get(CACHE_DIR_VARIABLE)
    if given:
        folder = os.path.expanduser(given)  # (`Path.expanduser` raises on an unknown `~user`)
        return Path(folder) if os.path.isabs(folder) else None
    xdg = environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):  # the XDG spec: a relative path is invalid and ignored
        return Path(xdg) / "gdr-check"
    home = environ.get("HOME") if "HOME" in environ else os.path.expanduser("~")
    if not home or not os.path.isabs(home) or os.path.normpath(home) == "/":
        return None
    return Path(home) / ".cache" / "gdr-check"


class Sharded:
    """What reading a sharded checkpoint's index and headers gave: the shards (sorted, as read), each header's key
    and end of data, every tensor in the order the checkpoint holds them (the shard each is in), and the notes.
    (A plain class: a dataclass's generated methods are compiled on every import, for a record built once a run.)"""

    __slots__ = ("data_ends", "dtypes", "header_keys", "names", "notes", "shapes", "shards", "tensor_shards")

    def __init__(self, shards: list[str], header_keys: list[bytes], data_ends: list[int], names: list[str],
                 dtypes: list[str], shapes: list[tuple[int, ...]], tensor_shards: list[str], notes: list[str]) -> None:
        self.shards, self.header_keys, self.data_ends = shards, header_keys, data_ends
        self.names, self.dtypes, self.shapes, self.tensor_shards = names, dtypes, shapes, tensor_shards
        self.notes = notes


def _native_arrays() -> bool:
    return all(array(code).itemsize == size for code, size in _WORD.items())


class HeaderCache:
    """One run's view of the cache folder: look-ups by key, writes of validated reads, pruning once at the end."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.folder = directory / SUBDIR
        self.written = 0  # entries written by this run
        self.writable = True  # False after a write failed: the run does not try again
        self._tag: dict[str, bytes] = {}

    @classmethod
    def from_environment(cls, enabled: bool | None = None, environ: Mapping[str, str] = os.environ
                         ) -> HeaderCache | None:
        """The cache to use: None when `enabled` is False, or when it is None and the environment turns it off."""
        if enabled is False or (enabled is None and cache_disabled(environ)) or not _native_arrays():
            return None
        directory = cache_directory(environ)
        return cls(directory) if directory is not None else None

    # -- keys ---------------------------------------------------------------------------------------------------
    def key(self, kind: str, raw: bytes | bytearray) -> bytes:
        """The entry's key: SHA-256 of the tag of `kind` and the bytes `raw` as read."""
        tag = self._tag.get(kind)
        if tag is None:
            tag = self._tag[kind] = f"gdr-check {kind} metadata, cache format {FORMAT}, {VERSION}\0".encode()
        digest = sha256(tag)
        digest.update(raw)
        return digest.digest()

    # -- reading ------------------------------------------------------------------------------------------------
    def load_header(self, key: bytes) -> Header | None:
        """A header's validated tensors, or None (absent, or not an entry this module wrote for `key`)."""
        sections = self._load(HEADER, key, 6)
        if sections is None:
            return None
        try:
            data_end, count = struct.unpack("<QQ", sections[0])
            names, dtypes, shapes = _tensor_table(sections[1:6], count)
            return names, dtypes, shapes, data_end
        except (ValueError, struct.error, UnicodeDecodeError):
            return None

    def load_checkpoint(self, index_key: bytes) -> Sharded | None:
        """What reading the index with key `index_key` and every shard it names gave, or None."""
        sections = self._load(CHECKPOINT, index_key, 11)
        if sections is None:
            return None
        try:
            (count,) = _LENGTH.unpack(sections[0])
            shards = _strings(sections[1], -1)
            header_keys = sections[2]
            data_ends = array("Q", sections[3])
            if len(header_keys) != 32 * len(shards) or len(data_ends) != len(shards):
                return None
            names, dtypes, shapes = _tensor_table(sections[4:9], count)
            shard_index = array("I", sections[9])
            notes = _strings(sections[10], -1)
            if len(shard_index) != count or (count and max(shard_index) >= len(shards)):
                return None
            keys = [header_keys[at:at + 32] for at in range(0, len(header_keys), 32)]
            return Sharded(shards, keys, list(data_ends), names, dtypes, shapes,
                           list(map(shards.__getitem__, shard_index)), notes)
        except (ValueError, struct.error, UnicodeDecodeError):
            return None

    def _load(self, kind: str, key: bytes, count: int) -> list[bytes] | None:
        path = self.folder / (key.hex() + SUFFIX)
        try:
            handle = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return None
        try:
            info = os.fstat(handle)
            if (not stat.S_ISREG(info.st_mode) or info.st_size > MAX_CACHE_BYTES
                    or (hasattr(os, "getuid") and info.st_uid != os.getuid())):  # another user's file is foreign
                return None
            with os.fdopen(handle, "rb", closefd=False) as file:
                # The fixed prefix first: a file whose size is not the one its prefix gives (garbage, a file
                # grown or cut) is a miss before its bulk is read.
                prefix = file.read(_PREFIX.size)
                if len(prefix) < _PREFIX.size or _PREFIX.size + _PREFIX.unpack(prefix)[5] != info.st_size:
                    return None
                data = prefix + file.read(info.st_size + 1 - _PREFIX.size)
            if info.st_mtime < time.time() - TOUCH_AFTER_S and os.utime in os.supports_fd:
                try:
                    os.utime(handle)  # least recently used goes first when pruning
                except OSError:
                    pass
        except OSError:
            return None
        finally:
            os.close(handle)
        return _sections(data, _KINDS[kind], key, count)

    # -- writing ------------------------------------------------------------------------------------------------
    def store_header(self, key: bytes, names: list[str], dtypes: list[str], shapes: list[tuple[int, ...]],
                     data_end: int) -> None:
        """Keep a header's validated tensors under `key` (nothing is kept for names the format cannot hold)."""
        if data_end < 1 << 64:
            self._store(HEADER, key, [struct.pack("<QQ", data_end, len(names)), *_table_sections(names, dtypes,
                                                                                              shapes)])

    def store_checkpoint(self, index_key: bytes, read: Sharded) -> None:
        """Keep what reading an index and its shards gave, under the index's key (see `Sharded`)."""
        position = {shard: index for index, shard in enumerate(read.shards)}
        notes = _joined(read.notes) if read.notes else b""
        if (any(len(key) != 32 for key in read.header_keys) or any(end >= 1 << 64 for end in read.data_ends)
                or notes is None):
            return
        sections = [_LENGTH.pack(len(read.names)), _joined(read.shards), b"".join(read.header_keys),
                    array("Q", read.data_ends).tobytes(), *_table_sections(read.names, read.dtypes, read.shapes),
                    array("I", map(position.__getitem__, read.tensor_shards)).tobytes(), notes]
        self._store(CHECKPOINT, index_key, sections)

    def _store(self, kind: str, key: bytes, sections: list[bytes | None]) -> None:
        if not self.writable or any(section is None for section in sections):
            return
        payload = b"".join(_LENGTH.pack(len(section)) + section for section in sections if section is not None)
        prefix = _PREFIX.pack(MAGIC, FORMAT, _ORDER, _KINDS[kind], key, len(payload), zlib.crc32(payload))
        path = self.folder / (key.hex() + SUFFIX)
        temporary = self.folder / f"{key.hex()}.{os.getpid()}.{time.monotonic_ns()}.tmp"
        try:
            os.makedirs(self.folder, mode=0o700, exist_ok=True)
            handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                             | getattr(os, "O_CLOEXEC", 0), 0o600)
            try:
                with os.fdopen(handle, "wb", closefd=False) as file:
                    file.write(prefix)
                    file.write(payload)
            finally:
                os.close(handle)
            os.replace(temporary, path)
            self.written += 1
        except (OSError, ValueError):  # unwritable, full, or a file where the folder should be: no cache
            self.writable = False
            _remove(temporary)
        except BaseException:  # interrupted mid-write (Ctrl-C): no temporary file is left behind
            _remove(temporary)
            raise

    def prune(self, limit: int = MAX_CACHE_BYTES) -> None:
        """After this run wrote entries: delete the least recently used ones while the folder holds over `limit`
        bytes (only this module's files: entries, and temporary files over an hour old)."""
        if not self.written:
            return
        try:
            entries: list[tuple[float, int, str]] = []
            stale = time.time() - 3600
            with os.scandir(self.folder) as scan:
                for entry in scan:
                    name = entry.name
                    if not entry.is_file(follow_symlinks=False):
                        continue
                    info = entry.stat(follow_symlinks=False)
                    if name.endswith(SUFFIX) and len(name) == 64 + len(SUFFIX):
                        entries.append((info.st_mtime, info.st_size, entry.path))
                    elif name.endswith(".tmp") and info.st_mtime < stale:
                        os.unlink(entry.path)
            total = sum(size for _, size, _ in entries)
            if total <= limit:
                return
            for _, size, path in sorted(entries):
                os.unlink(path)
                total -= size
                if total <= limit * PRUNED_TO:
                    break
        except OSError:
            pass


def _joined(strings: list[str]) -> bytes | None:
    """The strings as one UTF-8 text, NUL between them; None where one holds a NUL (or is not UTF-8-encodable)."""
    text = "\0".join(strings)
    if text.count("\0") != max(len(strings) - 1, 0) or (len(strings) == 1 and not strings[0]):
        return None  # a NUL inside a name, or the one empty string (which would read back as no strings)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return None


def _table_sections(names: list[str], dtypes: list[str], shapes: list[tuple[int, ...]]) -> list[bytes | None]:
    """Tensors as five sections: names, the distinct dtypes, the distinct shapes, each tensor's dtype and shape."""
    dtype_table, shape_table = list(dict.fromkeys(dtypes)), list(dict.fromkeys(shapes))
    if len(dtype_table) > 256:
        return [None]
    dtype_position = {dtype: position for position, dtype in enumerate(dtype_table)}
    shape_position = {shape: position for position, shape in enumerate(shape_table)}
    flat = array("Q")
    for shape in shape_table:
        flat.append(len(shape))
        flat.extend(shape)
    return [_joined(names), _joined(dtype_table), flat.tobytes(),
            array("B", map(dtype_position.__getitem__, dtypes)).tobytes(),
            array("I", map(shape_position.__getitem__, shapes)).tobytes()]


def _tensor_table(sections: list[bytes], count: int) -> tuple[list[str], list[str], list[tuple[int, ...]]]:
    """The names, dtypes and shapes of `count` tensors from `_table_sections`' five sections; ValueError if they
    do not hold that."""
    names = _strings(sections[0], count)
    dtype_table = _strings(sections[1], -1)
    shape_table = _shapes(sections[2])
    dtype_index, shape_index = array("B", sections[3]), array("I", sections[4])
    if len(dtype_index) != count or len(shape_index) != count or (count and (
            max(dtype_index) >= len(dtype_table) or max(shape_index) >= len(shape_table))):
        raise ValueError("table")
    return names, list(map(dtype_table.__getitem__, dtype_index)), list(map(shape_table.__getitem__, shape_index))


def _strings(section: bytes, count: int) -> list[str]:
    """The strings of a `_joined` section; ValueError unless there are `count` of them (-1: any number)."""
    strings = section.decode("utf-8").split("\0") if section else []
    if count >= 0 and len(strings) != count:
        raise ValueError("count")
    return strings


def _shapes(section: bytes) -> list[tuple[int, ...]]:
    flat = array("Q", section)
    shapes: list[tuple[int, ...]] = []
    at = 0
    while at < len(flat):
        end = at + 1 + flat[at]
        if end > len(flat):
            raise ValueError("shape")
        shapes.append(tuple(flat[at + 1:end]))
        at = end
    return shapes


def _sections(data: bytes, kind: bytes, key: bytes, count: int) -> list[bytes] | None:
    """The `count` sections of an entry file's bytes, or None unless it is exactly an entry of `kind` for `key`."""
    if len(data) < _PREFIX.size:
        return None
    magic, version, order, found_kind, found_key, length, crc = _PREFIX.unpack_from(data)
    if (magic != MAGIC or version != FORMAT or order != _ORDER or found_kind != kind or found_key != key
            or len(data) != _PREFIX.size + length):
        return None
    payload = memoryview(data)[_PREFIX.size:]
    if zlib.crc32(payload) != crc:
        return None
    sections: list[bytes] = []
    at = 0
    while at < length:
        if at + 8 > length:
            return None
        (size,) = _LENGTH.unpack_from(payload, at)
        at += 8
        if at + size > length:
            return None
        sections.append(bytes(payload[at:at + size]))
        at += size
    return sections if len(sections) == count else None


def _remove(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
