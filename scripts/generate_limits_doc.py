"""Write docs/limits.md from `gdr_check.base.limits.LIMITS`, the one table the checks use.

    python scripts/generate_limits_doc.py docs/limits.md [--check]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gdr_check.base.limits import (
    INDEX_CAP_WHY,
    KEPT_DIAGNOSTICS,
    LIMITS,
    MAX_CONFIG_BYTES,
    MAX_INDEX_BYTES,
    MAX_RECORDING_BYTES,
    MAX_SMALL_FILE_BYTES,
)
from gdr_check.sources.safetensors_header import MAX_HEADER_BYTES


def render() -> str:
    lines = [
        "# Limits",
        "",
        "Every number gdr-check takes from a `config.json`, `[tool.gdr-check]`, a recording or the command line is",
        "checked against its range below before it is used. The ranges are far above any released model; they keep",
        "the arithmetic finite and the cost of a check proportional to the model's real size, not to a number",
        "written in its config. A value outside its range is an error naming the key, the value (shortened) and the",
        "range: a config field is reported as GDR108 and not used; an option, a `[tool.gdr-check]` key or a recorded",
        "value stops the run with one `error:` line and exit 2.",
        "",
        "Every range holds whole numbers but those of "
        + ", ".join(f"`{name}`" for name, limit in LIMITS.items() if not limit.whole)
        + ". A library call (`Deployment`, `gdr_check.guard`, the dry-run) that passes a whole-number limit a",
        "float, a bool or a string is refused with the same error, which says it must be a whole number.",
        "",
        "This page is generated from `src/gdr_check/base/limits.py` "
        "(`python scripts/generate_limits_doc.py docs/limits.md`).",
        "",
        "| name | allowed range | what | where it comes from |",
        "|---|---|---|---|",
    ]
    for name, limit in LIMITS.items():
        lines.append(f"| `{name}` | {limit.range_text} | {limit.what} | {limit.where} |")
    lines += [
        "",
        "## Files",
        "",
        "Files are opened non-blocking and checked with `fstat` before any byte is read: FIFOs, devices (such as",
        "`/dev/zero`) and directories are refused, and so is a file larger than its cap, however sparse.",
        "",
        f"- `pyproject.toml` and `refs/*` of the Hugging Face cache: {MAX_SMALL_FILE_BYTES // 2**20} MiB "
        "(`refs/*`: 256 bytes; a larger ref is ignored).",
        f"- a recording (`gdr-check call FILE`): {MAX_RECORDING_BYTES // 2**20} MiB; at most 16 dimensions per "
        "tensor; `dtype` must name a dtype.",
        f"- `config.json`: {MAX_CONFIG_BYTES // 2**20} MiB (GDR005).",
        f"- `model.safetensors.index.json`: {MAX_INDEX_BYTES // 2**20} MiB (GDR005). {INDEX_CAP_WHY}",
        f"- a safetensors header: {MAX_HEADER_BYTES:_} bytes, the length its 8-byte prefix gives (GDR031); only the "
        "header is read, never the tensor data.",
        "- JSON and TOML nested too deeply for the parser are an error naming the file, not a crash.",
        "",
        "## Kept in memory",
        "",
        f"- a runtime guard's `guard.diagnostics`: the first {KEPT_DIAGNOSTICS}, so that a guard left on while calls",
        "  keep faulting stays bounded; later ones are counted in `guard.dropped_diagnostics` (the mode still acts",
        "  on each).",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("output", type=Path, help="the page to write (docs/limits.md)")
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when the page is stale")
    args = parser.parse_args(argv)
    page: Path = args.output
    text = render()
    if args.check:
        if not page.is_file() or page.read_text(encoding="utf-8") != text:
            print(f"{page} is stale: run `python scripts/generate_limits_doc.py {page}`", file=sys.stderr)
            return 1
        return 0
    page.write_text(text, encoding="utf-8")
    print(f"wrote {page} ({len(LIMITS)} limits)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
