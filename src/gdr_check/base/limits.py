"""The allowed range of every number gdr-check takes from a file or the command line.

One table, `LIMITS`, read by the checks (config fields, `[tool.gdr-check]`, options, recordings, the dry run)
and by `scripts/generate_limits_doc.py`, which writes docs/limits.md from it. A value outside its range is
refused before it is used, so the cost of a check grows with a model's real size, never with a number written
in its config: `num_hidden_layers: 1000000000` is an error, not a billion-entry loop.

The ranges are generous (about a hundred times the largest released model) and exist only to keep arithmetic
finite and memory bounded.
"""

from __future__ import annotations

import math
import numbers
import os
import re
import stat
from typing import Any

from .errors import InputError
from .records import dataclass
from .report import LIMITS_DOCS_URL

# Values in error messages are shortened: an integer of thousands of digits is shown by its first and last
# digits and its length.
_MAX_SHOWN = 40


@dataclass(frozen=True)
class Limit:
    minimum: float
    maximum: float
    what: str
    where: str  # where the value comes from, for the documentation
    whole: bool = True  # a count or a size: `checked` takes an int only (2.5 layers, or "4", is no count)

    def allows(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if isinstance(value, float) and not math.isfinite(value):
            return False
        return bool(self.minimum <= value <= self.maximum)

    @property
    def range_text(self) -> str:
        return f"{_number(self.minimum)}..{_number(self.maximum)}"

    @property
    def maximum_text(self) -> str:
        return _number(self.maximum)


def _number(value: float) -> str:
    if isinstance(value, float) and abs(value) >= 1e16:  # 1e+30, not the float's 31 digits
        return repr(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and value >= 2**20 and value & (value - 1) == 0:
        return f"2**{value.bit_length() - 1}"
    return f"{value:,}".replace(",", "_") if isinstance(value, int) else repr(value)


DEFAULT_MAX_RECORDS = 64  # fault records a runtime guard's buffer keeps unless told otherwise
# Diagnostics a runtime guard keeps in `guard.diagnostics`: a guard left on in an engine whose calls keep
# faulting would otherwise grow without end; past this, diagnostics are counted (`guard.dropped_diagnostics`).
KEPT_DIAGNOSTICS = 4096
# What a report of device faults says of those past the max_records it keeps between two reads.
UNLISTED_FAULTS = ("counted on the device but not kept (only the first max_records since the last read are): "
                   "raise max_records")
_CONFIG = "config.json"
_DEPLOY = "command line, [tool.gdr-check]"

LIMITS: dict[str, Limit] = {
    # config.json (model layer: a value outside its range is GDR108 and is not used)
    "num_hidden_layers": Limit(1, 65_536, "decoder layers", _CONFIG),
    "num_k_heads": Limit(1, 65_536, "key heads of the linear-attention layers", _CONFIG),
    "num_v_heads": Limit(1, 65_536, "value heads of the linear-attention layers", _CONFIG),
    "head_k_dim": Limit(1, 65_536, "key head dim", _CONFIG),
    "head_v_dim": Limit(1, 65_536, "value head dim", _CONFIG),
    "conv_kernel": Limit(1, 1_024, "short-convolution width", _CONFIG),
    "hidden_size": Limit(1, 2**20, "hidden size", _CONFIG),
    "num_attention_heads": Limit(1, 65_536, "full-attention heads", _CONFIG),
    "num_key_value_heads": Limit(1, 65_536, "full-attention KV heads", _CONFIG),
    # the deployment: command line, [tool.gdr-check], a recording's fields
    "tp": Limit(1, 4_096, "tensor-parallel size", _DEPLOY),
    "batch": Limit(0, 1_048_576, "decode batch", _DEPLOY),
    "slots": Limit(1, 16_777_216, "state pool rows", _DEPLOY),
    "speculative_tokens": Limit(0, 1_024, "draft tokens per verify step", "--speculative-tokens"),
    "gpu_memory": Limit(1, 2**60, "bytes per rank for the state pools", _DEPLOY),
    # the dry run
    "steps": Limit(1, 10_000, "decode steps to run and verify", "dry-run --steps"),
    "seed": Limit(0, 2**63 - 1, "random seed", "dry-run --seed"),
    "timeout": Limit(0.001, 604_800.0, "seconds before the child is killed", "dry-run --timeout", whole=False),
    # recorded kernel calls (`gdr-check call FILE`)
    "dim": Limit(0, 2**40, "one dimension of a recorded tensor", "recording"),
    # GDR245 judges a scale by this range (0 itself, and below, is not positive: GDR245 too); a recording holds
    # any finite scale of at most the maximum in magnitude, judged by GDR245 like a passed one.
    "scale": Limit(0, 1e30, "a recorded or passed scale: positive and finite (GDR245 otherwise)",
                   "recording, guard argument", whole=False),
    "lower_bound": Limit(-1e30, 1e30, "a recorded or passed KDA `lower_bound` (finite)", "recording, guard argument",
                         whole=False),
    # the runtime guard and the capture of calls
    "max_calls": Limit(0, 1_048_576, "kernel calls a capture records", "`gdr_check.capture(max_calls=...)`"),
    "max_records": Limit(1, 1_048_576, "fault records a fault buffer keeps, the first ones after each read",
                         f"`gdr_check.guard(max_records=...)` (default {DEFAULT_MAX_RECORDS}), `FaultBuffer`"),
}


def counted(count: Any, noun: str) -> str:
    """'1 slot', '9 slots' (a count that is no int, e.g. "?", takes the plural)."""
    return f"{count} {noun}" if count == 1 and not isinstance(count, bool) else f"{count} {noun}s"


def shorten(value: Any) -> str:
    """`value` as an error message shows it: short, whatever it holds."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        digits = (value.bit_length() - 1) * 30103 // 100000 + 1  # a lower bound, without str(value)
        return f"{'a negative' if value < 0 else 'an'} integer of at least {digits} digits"
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= _MAX_SHOWN else text[:_MAX_SHOWN - 3] + "..."


def range_problem(name: str, value: Any) -> str | None:
    """Why `value` is not allowed for `name` ("outside ..."), or None when it is."""
    limit = LIMITS[name]
    if limit.allows(value):
        return None
    return f"outside the allowed range {limit.range_text} ({limit.what})"


class LimitError(InputError, ValueError):
    """A number outside its documented range: one line naming the key, the value and the range."""

    code = "limit"

    def __init__(self, key: str, value: Any, name: str | None = None, *, written: str | None = None) -> None:
        """`written`: the value as the user wrote it, shown instead (a size: "0GiB")."""
        limit = LIMITS[name or key]
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        shown = (shorten(written) if written is not None else shorten(value) if number or value is None
                 else f"{shorten(repr(value))} (a {type(value).__name__})")
        kind = "a whole number " if limit.whole and written is None and not (number and isinstance(value, int)) else ""
        super().__init__(f"{key} is {shown}: must be {kind}in {limit.range_text} ({limit.what}); "
                         f"see {LIMITS_DOCS_URL}")
        self.key, self.value = key, value
        # as a file's key says it (the key named before): "must be in 1..2**60 (...), got 0GiB"
        self.in_file = f"must be {kind}in {limit.range_text} ({limit.what}), got {shown}"


def checked(name: str, value: Any, key: str | None = None) -> Any:
    """`value` when `name`'s range allows it (and it is an integer, for a whole-number limit: any integer type,
    NumPy's too, returned as an int); raises LimitError naming `key` (default `name`) otherwise."""
    limit = LIMITS[name]
    if limit.whole and isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = int(value)
    if limit.allows(value) and (isinstance(value, int) or not limit.whole):
        return value
    raise LimitError(key or name, value, name)


class SizeError(InputError, ValueError):
    """A byte size that is not one (`80GiB`, `141GB`, `1.5e10`), or one outside its limit's range."""

    code = "limit"


class SizeRangeError(LimitError, SizeError):
    """A byte size outside its limit's range, worded as every other number's range is (`LimitError`)."""


# Every unit up to exa, so that any size up to the limits' 2**60 bytes can be written with one (the range check
# then refuses what is past a limit, with the limit in its message).
_SIZE = re.compile(r"^\s*((?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:e[0-9]+)?)\s*(?:([kmgtpe]i?b?|b)\s*)?$",
                   re.IGNORECASE)
_SIZE_UNITS = {"": 1, "b": 1, **{f"{prefix}{suffix}": 1000 ** power for power, prefix in enumerate("kmgtpe", 1)
                                 for suffix in ("", "b")},
               **{f"{prefix}i{suffix}": 1024 ** power for power, prefix in enumerate("kmgtpe", 1)
                  for suffix in ("", "b")}}


def parse_size(text: str | int, name: str = "gpu_memory") -> int:
    """'80GiB', '141GB', '1.5e10' (or an int of bytes) -> bytes, inside `name`'s range; SizeError (one line)
    otherwise."""
    if isinstance(text, int) and not isinstance(text, bool):
        size: float = text
    else:
        found = _SIZE.match(text) if isinstance(text, str) else None
        if not found:
            raise SizeError(f"not a size: {shorten(text)!r} (e.g. 80GiB, 141GB or a byte count)")
        number, unit = found.groups()
        size = float(number) * _SIZE_UNITS[(unit or "").lower()]
    if not LIMITS[name].allows(size):  # 1e999 is infinity: refused before int() overflows
        raise SizeRangeError(name, size, written=str(text).strip())
    return int(size)


# Files the user names or a tool writes that are not checkpoint headers: a `pyproject.toml`, a recording,
# `refs/main` in the Hugging Face cache. Real ones are kilobytes.
MAX_SMALL_FILE_BYTES = 16 * 1024 * 1024

# A checkpoint's JSON metadata, each file with its own cap (GDR005 past it), refused by its size before a byte is
# read: a sparse or hostile file of any size costs nothing. Real configs are kilobytes (a multimodal one with its
# text and vision parts, tens of KB).
MAX_CONFIG_BYTES = 16 * 1024 * 1024
MAX_INDEX_BYTES = 256 * 1024 * 1024
# What the index's cap is measured against, in words: GDR005's fix says it, INDEX_CAP_WHY gives the numbers.
INDEX_CAP_BASIS = "ten times the largest released index"
# Why the index's cap is what it is (docs/limits.md and GDR005's explanation print it).
INDEX_CAP_WHY = (
    "An index holds one line per tensor, about 90 to 125 bytes as transformers writes it (`json.dump(indent=2)`), "
    "and a quantized MoE release that stores each expert apart lists hundreds of thousands: Qwen3-Next-80B AWQ "
    "(512 experts x 48 layers x 3 projections x qweight/qzeros/scales, ~222k tensors) is ~20 MB, its GPTQ (with "
    "g_idx) ~27 MB, Qwen3.5-397B-A17B-FP8 with its experts one by one ~21 MB. "
    f"The cap is {INDEX_CAP_BASIS} and twice the largest plausible one: a 1T-parameter MoE of 1,024 experts x "
    "64 layers with 5 tensors per projection (compressed-tensors) and long names, ~1 million tensors, ~120 MB. An "
    "index at the cap (~2.5 million tensors) is parsed in about 8 s and 1.2 GB of memory; one over it is refused "
    "unread."
)


class UnreadableInput(OSError):
    """A file refused before or while reading it; `str()` is the reason ("not a regular file")."""


def read_bounded(path: Any, cap: int = MAX_SMALL_FILE_BYTES) -> bytes:
    """The bytes of the regular file at `path`, at most `cap` of them.

    Opened non-blocking (a FIFO does not hang the open), checked with fstat (FIFOs, devices such as /dev/zero
    and directories are refused) and refused by size before reading, so a multi-GB sparse file costs nothing.
    Raises UnreadableInput with a one-line reason."""
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        raise UnreadableInput((error.strerror or type(error).__name__).lower()) from None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise UnreadableInput("not a regular file")
        if info.st_size > cap:
            raise UnreadableInput(f"too large ({info.st_size} bytes; the limit is {cap})")
        chunks, total = [], 0
        while True:
            chunk = os.read(descriptor, min(1 << 20, cap + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > cap:  # grew after the size check
                raise UnreadableInput(f"too large (more than {cap} bytes)")
        return b"".join(chunks)
    except UnreadableInput:
        raise
    except OSError as error:
        raise UnreadableInput((error.strerror or type(error).__name__).lower()) from None
    finally:
        os.close(descriptor)


# A recording of the default 1000 calls is well under a megabyte.
MAX_RECORDING_BYTES = 64 * 1024 * 1024
