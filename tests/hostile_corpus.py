"""What every hostile-input case asserts, in every output format: the exit code, at most one
`error:` line (exactly one when the run fails with 2), a machine document that parses, no raw control or bidi
character on stdout or stderr, no line a CI runner would run as a command, nothing written but the report."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

FORMATS = ("full", "concise", "json", "json-lines", "github", "sarif", "junit", "gitlab")
# What data may carry: terminal escapes (title, clear screen), bidi reversal, line breaks that would start a
# GitHub workflow command, the legacy command form, and a pipe for Markdown tables.
EVIL = "\x1b]0;pwned\x07\x1b[2J\u202eevil\u2066\n::add-mask::secret\r\n::stop-commands::tok\n##[add-mask]x|\x85\x9b"
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
ANNOTATION = re.compile(r"^::(error|warning|notice)( [^:]*)?::")


@dataclass
class Outcome:
    exit_code: int
    stdout: str
    stderr: str
    max_rss_mib: float = 0.0  # the child's own peak resident memory (not the session's children's maximum)


# `python -m gdr_check ARGS`, writing the process's own peak RSS (KiB) to the file named first when it exits.
# VmHWM is this process image's high-water mark; `ru_maxrss` is not: Linux carries it over from the parent
# across fork and exec, so a child of a large pytest process would report the parent's peak.
_MEASURED_MAIN = (
    "import atexit, runpy, sys\n"
    "report = sys.argv.pop(1)\n"
    "def peak():\n"
    "    for line in open('/proc/self/status'):\n"
    "        if line.startswith('VmHWM:'):\n"
    "            return line.split()[1]\n"
    "    return '0'\n"
    "atexit.register(lambda: open(report, 'w').write(peak()))\n"
    "runpy.run_module('gdr_check', run_name='__main__', alter_sys=True)\n"
)


def run_subprocess(*args: str, cwd: Path, env: dict[str, str] | None = None, stdin=None) -> Outcome:
    """`python -m gdr_check ARGS` in `cwd`; output decoded strictly as UTF-8 (a failure is a test failure)."""
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith(("GDR_CHECK_", "GITHUB_", "FORCE_COLOR")) or k == "GDR_CHECK_CACHE_DIR"}
    environment.update({"NO_COLOR": "1", "PYTHONIOENCODING": "utf-8"}, **(env or {}))
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "maxrss"
        done = subprocess.run([sys.executable, "-c", _MEASURED_MAIN, str(report), *args], check=False, cwd=cwd,
                              env=environment, capture_output=True, timeout=60, stdin=stdin)
        rss_kib = int(report.read_text() or 0) if report.exists() else 0
    return Outcome(done.returncode, done.stdout.decode("utf-8"), done.stderr.decode("utf-8"), rss_kib / 1024)


def run_in_process(*args: str, cwd: Path) -> Outcome:
    """`gdr-check ARGS` in this process, from `cwd` (no RSS figure: the session's peak is not this run's). For
    cases run in every format, where a child process per run would cost seconds each; the caller clears the
    CI environment (`cli_checkpoints.clean_output_env`)."""
    from cli_checkpoints import run_cli

    before = os.getcwd()
    os.chdir(cwd)
    try:
        done = run_cli(*args)
    finally:
        os.chdir(before)
    return Outcome(done.exit_code, done.stdout, done.stderr)


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else b"")
            for p in sorted(root.rglob("*")) if not p.is_symlink()}


def assert_safe_text(text: str, where: str) -> None:
    raw = RAW.search(text)
    assert raw is None, f"raw {raw.group()!r} in {where}: {text[max(0, raw.start() - 60):raw.end() + 20]!r}"
    assert "##[" not in text, f"legacy CI command marker in {where}"
    for line in text.splitlines():
        if line.lstrip().startswith("::"):
            assert where == "github stdout" and ANNOTATION.match(line), f"CI command line in {where}: {line!r}"
            assert "::add-mask::" not in line.split("::", 2)[1], line


def parse_document(fmt: str, text: str) -> object:
    """The machine document in `text` (None for the human formats); raises when it does not parse."""
    if fmt in ("json", "sarif", "gitlab"):
        return json.loads(text)
    if fmt == "json-lines":
        return [json.loads(line) for line in text.splitlines()]
    if fmt == "junit":
        return ET.fromstring(text.encode("utf-8"))
    return None


def assert_outcome(fmt: str, outcome: Outcome, *, exit_code: int, error: str | None = None,
                   report: str | None = None) -> object:
    """Check one run; `error` is a fragment of its one `error:` line when it fails; `report` the report's
    text when it went to a file. Returns the parsed document."""
    assert outcome.exit_code == exit_code, (fmt, outcome.exit_code, outcome.stderr[-2000:])
    assert_safe_text(outcome.stdout, f"{fmt} stdout")
    assert_safe_text(outcome.stderr, f"{fmt} stderr")
    errors = [line for line in outcome.stderr.splitlines() if line.startswith("error:")]
    assert "Traceback" not in outcome.stderr and "internal error" not in outcome.stderr, outcome.stderr
    if error is not None:
        assert len(errors) == 1 and error in errors[0], (fmt, errors)
    else:
        assert errors == [] if exit_code != 2 else len(errors) >= 1, (fmt, errors)
    body = outcome.stdout if report is None else report
    if report is not None:
        assert outcome.stdout == ""
    if report == "":  # the report could not be written anywhere: nothing to parse
        return None
    if exit_code != 2 or fmt not in ("full", "concise"):
        return parse_document(fmt, body)
    return None
