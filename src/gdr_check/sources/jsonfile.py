"""Load config.json and model.safetensors.index.json: size cap, strict UTF-8, errors with line and column."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..base.errors import not_utf8
from ..base.files import json_error_reason, loads_bounded
from ..base.limits import MAX_CONFIG_BYTES, MAX_INDEX_BYTES
from ..base.source_error import SourceError
from .metadata_reader import MetadataReader
from .rules import GitLfsPointers, OversizedJsonFiles
from .safetensors_header import LFS_POINTER_PREFIX


def load_json_file(reader: MetadataReader, path: Path, *, what: str, invalid: type[SourceError],
                   index: bool = False) -> tuple[Any, str]:
    """(parsed value, text) of the JSON file at `path`, a config or (`index`) a safetensors index, each under its
    own cap (limits.py); `invalid` (a rule's error) is raised for unparseable content."""
    return parse_json_bytes(read_json_bytes(reader, path, what=what, index=index), path, invalid=invalid)


def read_json_bytes(reader: MetadataReader, path: Path, *, what: str, index: bool = False) -> bytearray:
    """The bytes of the JSON file at `path` (see `load_json_file`); an LFS pointer in its place is refused."""
    if index:  # the help for a big index does not take it for a fake one
        raw = reader.read_small_file(path, MAX_INDEX_BYTES, what, fix=OversizedJsonFiles.rule.fixes[1])
    else:
        raw = reader.read_small_file(path, MAX_CONFIG_BYTES, what)
    if raw.startswith(LFS_POINTER_PREFIX):
        raise GitLfsPointers.at(path, reader.cache_repo)
    return raw


def parse_json_bytes(raw: bytearray, path: Path, *, invalid: type[SourceError]) -> tuple[Any, str]:
    """(parsed value, text) of a JSON file's bytes read by `read_json_bytes`."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        reason = not_utf8(raw, exc, at=None)
        raise invalid(path, line=line, column=column, reason=reason) from None
    try:
        return loads_bounded(text, raw), text
    except json.JSONDecodeError as exc:
        raise invalid(path, line=exc.lineno, column=exc.colno, reason=json_error_reason(exc)) from None
    except RecursionError:
        raise invalid(path, line=1, column=1, reason="JSON nested too deeply") from None
    except ValueError as exc:
        raise invalid(path, line=1, column=1, reason=str(exc)) from None
