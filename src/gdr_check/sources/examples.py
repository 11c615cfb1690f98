"""The examples of the GDR0xx rules, as data: files to write to an empty directory and the target to read.

`CheckpointExample` holds the files (text, bytes, `Link`, `Folder`, `Safetensors` or `Sparse`) and writes them;
`gdr_check.pipeline.example_runner` reads the target as `gdr-check TARGET` would and returns the diagnostics. The rules
(`sources.rules`) sit with the readers that raise them, so their examples' data lives here, below the rules layer.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..base.records import dataclass


@dataclass(frozen=True)
class Link:
    """A symbolic link to `target`."""

    target: str

    def __str__(self) -> str:
        return f"-> {self.target}"


@dataclass(frozen=True)
class Folder:
    """An empty directory."""

    def __str__(self) -> str:
        return "(a directory)"


@dataclass(frozen=True)
class Safetensors:
    """A safetensors file: the 8-byte length prefix (`length`, default the header's), the JSON `header` (a dict
    or raw bytes), then `data` bytes of tensor data (default what the header's offsets need), written sparse;
    `size` overrides the file's size (to truncate or extend it)."""

    header: Mapping[str, Any] | bytes
    data: int | None = None
    length: int | None = None
    size: int | None = None

    def raw(self) -> bytes:
        return self.header if isinstance(self.header, bytes) else json.dumps(self.header).encode()

    def write(self, path: Any) -> None:
        raw = self.raw()
        data = self.data
        if data is None and isinstance(self.header, Mapping):
            data = max((entry["data_offsets"][1] for key, entry in self.header.items() if key != "__metadata__"),
                       default=0)
        with open(path, "wb") as handle:
            handle.write(struct.pack("<Q", len(raw) if self.length is None else self.length))
            handle.write(raw)
            handle.truncate(8 + len(raw) + (data or 0) if self.size is None else self.size)

    def __str__(self) -> str:
        text = f"safetensors, header {self.raw().decode('utf-8', 'backslashreplace')}"
        if self.length is not None:
            text += f", length prefix {self.length}"
        if self.size is not None:
            text += f", {self.size} bytes in all"
        return text


@dataclass(frozen=True)
class Sparse:
    """A file of `size` bytes that holds nothing (sparse)."""

    size: int

    def __str__(self) -> str:
        return f"({self.size:,} bytes)"


def tensor_entry(dtype: str = "F32", shape: tuple[int, ...] = (2,), offsets: tuple[int, ...] = (0, 8)
                 ) -> dict[str, Any]:
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offsets)}


@dataclass(frozen=True)
class CheckpointExample:
    """Files (path -> text, bytes, `Link`, `Folder`, `Safetensors` or `Sparse`) written to an empty directory,
    then `gdr-check TARGET` run there (`target` a path in it, or a repo id looked up in its `hub/` cache)."""

    files: Mapping[str, Any]
    target: str
    note: str = ""
    repo_id: bool = False  # `target` is an `org/name` id, looked up in the cache `hub/`

    @property
    def text(self) -> str:
        cache = "HF_HUB_CACHE=hub " if self.repo_id else ""
        lines = [f"# {cache}gdr-check {self.target}" + (f": {self.note}" if self.note else "")]
        for name, content in self.files.items():
            shown = repr(content) if isinstance(content, (str, bytes)) else str(content)
            lines.append(f"{name}: {shown}" if not isinstance(content, Link) else f"{name} {content}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text

    def write(self, root: Any) -> None:
        root = Path(root)
        for name, content in self.files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, Link):
                os.symlink(content.target, path)
            elif isinstance(content, Folder):
                path.mkdir(exist_ok=True)
            elif isinstance(content, Safetensors):
                content.write(path)
            elif isinstance(content, Sparse):
                with open(path, "wb") as handle:
                    handle.truncate(content.size)
            else:
                path.write_bytes(content if isinstance(content, bytes) else content.encode())
