"""Write the rules reference generated from the registry: an index and one page per rule.

    python scripts/generate_rules_doc.py docs/rules.md           # write docs/rules.md and docs/rules/<CODE>.md
    python scripts/generate_rules_doc.py docs/rules.md --check   # exit 1 when a page is stale, missing or extra

The pages go to a folder beside the index named after it (docs/rules.md -> docs/rules/). Writing also removes
pages of rules that no longer exist.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gdr_check.checks import RULES
from gdr_check.checks.docs import render_index, render_pages


def expected_files(index: Path) -> dict[Path, str]:
    """Every file the reference consists of, with its text."""
    pages_dir = index.parent / index.stem
    files = {index: render_index(pages_dir.name)}
    files.update({pages_dir / name: text for name, text in render_pages(index.name).items()})
    return files


def problems(index: Path, files: dict[Path, str]) -> list[str]:
    """What differs between the files on disk and the expected ones, one line each."""
    found = []
    for path, text in files.items():
        if not path.is_file():
            found.append(f"{path} is missing")
        elif path.read_text(encoding="utf-8") != text:
            found.append(f"{path} is out of date")
    pages_dir = index.parent / index.stem
    if pages_dir.is_dir():
        found += [f"{path} is not a rule page" for path in sorted(pages_dir.glob("*.md")) if path not in files]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", type=Path, help="the index to write (docs/rules.md); pages go beside it")
    parser.add_argument("--check", action="store_true",
                        help="only compare; exit 1 when a page is stale, missing or extra")
    args = parser.parse_args(argv)
    index: Path = args.output
    files = expected_files(index)
    if args.check:
        found = problems(index, files)
        for line in found:
            print(line, file=sys.stderr)
        if found:
            print(f"run `python scripts/generate_rules_doc.py {index}`", file=sys.stderr)
            return 1
        return 0
    pages_dir = index.parent / index.stem
    pages_dir.mkdir(parents=True, exist_ok=True)
    for path in sorted(pages_dir.glob("*.md")):
        if path not in files:
            path.unlink()
    for path, text in files.items():
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
    print(f"wrote {index} and {len(files) - 1} pages in {pages_dir} ({len(RULES)} rules)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
