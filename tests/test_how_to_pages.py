"""The how-to pages (docs/how-to/) name the files an addition touches: each named file exists, each page's
package files lie in one folder (the promise of the folder layout), and each page's commands name real scripts
and test files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs" / "how-to").glob("*.md"))
# Backticked repository paths (`src/gdr_check/models/adapters.py`, `tests/test_formats.py`), `<name>` placeholders
# allowed in the file name.
PATH = re.compile(r"`((?:src|tests|scripts|docs)/[\w./<>-]+)`")
TABLE_ROW = re.compile(r"^\| `((?:src|tests|docs)/[^`]+)`", re.M)


def test_there_is_a_page_for_each_kind_of_addition():
    assert [page.name for page in PAGES] == [
        "add-a-model-family.md", "add-a-rule.md", "add-an-engine-release.md", "add-an-output-format.md"]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.stem)
def test_every_file_a_page_names_exists(page: Path):
    text = page.read_text(encoding="utf-8")
    named = PATH.findall(text) + re.findall(r"python (?:-m pytest )?((?:scripts|tests)/[\w./-]+)", text)
    assert named, "the page names no file"
    for path in named:
        if "<" in path:  # a placeholder: its folder must exist
            assert (ROOT / path).parent.is_dir(), path
        else:
            assert (ROOT / path).exists(), path


@pytest.mark.parametrize("page", [page for page in PAGES if page.name != "add-a-rule.md"], ids=lambda page: page.stem)
def test_an_addition_touches_one_package_folder(page: Path):
    """The package files in a page's table of files to touch all lie in one folder of `src/gdr_check` (a rule is
    declared in the folder of the stage that detects it: its table is a choice of one folder per row)."""
    rows = [path for path in TABLE_ROW.findall(page.read_text(encoding="utf-8")) if path.startswith("src/")]
    folders = {Path(path).relative_to("src/gdr_check").parts[0] for path in rows}
    assert len(folders) == 1, folders
