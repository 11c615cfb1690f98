"""Load config.json and model.safetensors.index.json: size cap, strict UTF-8, errors with line and column."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import SourceError
from ..files import bounded_int, json_error_reason
from .files import MetadataReader
from .rules import GitLfsPointers
from .safetensors_header import LFS_POINTER_PREFIX

# Real configs and indexes are kilobytes to a few megabytes (a 41-shard index is ~60 KB).
MAX_JSON_BYTES = 16 * 1024 * 1024
def load_json_file(reader: MetadataReader, path: Path, *, what: str, invalid: type[SourceError]) -> tuple[Any, str]:
    """(parsed value, text) of the JSON file at `path`; `invalid` (a rule's error) is raised for unparseable content."""
    raw = reader.read_small_file(path, MAX_JSON_BYTES, what)
    if raw.startswith(LFS_POINTER_PREFIX):
        raise GitLfsPointers.at(path, reader.cache_repo)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        reason = f"not valid UTF-8 (byte 0x{raw[exc.start]:02x})"
        raise invalid(path, line=line, column=column, reason=reason) from None
    try:
        return json.loads(text, parse_int=bounded_int), text
    except json.JSONDecodeError as exc:
        raise invalid(path, line=exc.lineno, column=exc.colno, reason=json_error_reason(exc)) from None
    except RecursionError:
        raise invalid(path, line=1, column=1, reason="JSON nested too deeply") from None
    except ValueError as exc:
        raise invalid(path, line=1, column=1, reason=str(exc)) from None
