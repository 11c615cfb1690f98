"""Write the rules reference generated from the registry.

    python scripts/generate_rules_doc.py docs/rules.md           # write it
    python scripts/generate_rules_doc.py docs/rules.md --check   # exit 1 when the file is stale
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gdr_check.checks import RULES
from gdr_check.checks.docs import render


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", type=Path, help="the Markdown file to write (docs/rules.md)")
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when the file differs")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is out of date: run `python scripts/generate_rules_doc.py {args.output}`",
                  file=sys.stderr)
            return 1
        return 0
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output} ({len(RULES)} rules)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
