"""Write docs/limits.md from `gdr_check.limits.LIMITS`, the one table the checks use.

    python scripts/generate_limits_doc.py docs/limits.md
"""

from __future__ import annotations

import sys
from pathlib import Path

from gdr_check.limits import LIMITS, MAX_RECORDING_BYTES, MAX_SMALL_FILE_BYTES


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
        "This page is generated from `src/gdr_check/limits.py` (`python scripts/generate_limits_doc.py docs/limits.md`).",
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
        "- `config.json` and `model.safetensors.index.json`: 16 MiB (GDR0xx).",
        "- JSON and TOML nested too deeply for the parser are an error naming the file, not a crash.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    Path(sys.argv[1] if len(sys.argv) > 1 else "docs/limits.md").write_text(render(), encoding="utf-8")
