"""The process environment, data loss, options and identities: a closed standard stream, Ctrl-C at any moment of
start-up, a report path that is (through a hard link) a file the run found or read, `--show-settings` with
`--output-format` and `-o`, a repo revision that is not cached. Each is one `error:` line and its documented exit
code (2; 130 for SIGINT, as ruff gives it), never a traceback, an ignored option or an overwritten input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cli_checkpoints import clean_output_env, write_good
from hostile_corpus import FORMATS, assert_outcome, run_in_process, run_subprocess, tree

OLD = b"the previous report\n"


def _environment() -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith(("GDR_CHECK_", "GITHUB_", "FORCE_COLOR")) or k == "GDR_CHECK_CACHE_DIR"}
    environment.update(NO_COLOR="1", PYTHONIOENCODING="utf-8")
    return environment


def _closed(descriptor: int, *args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """`python -m gdr_check ARGS` with `descriptor` closed before Python starts (as `>&-` or `<&-` do)."""
    streams = {"stdin": subprocess.DEVNULL, "stdout": subprocess.PIPE}
    streams["stdin" if descriptor == 0 else "stdout"] = None
    return subprocess.run([sys.executable, "-m", "gdr_check", *args], cwd=cwd, env=_environment(), check=False,
                          stderr=subprocess.PIPE, timeout=60, preexec_fn=lambda: os.close(descriptor), **streams)


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("environment")
    write_good(root / "good")
    return root


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_closed_stdout_is_one_line_in_every_format(repo, fmt):
    done = _closed(1, "good", "--isolated", "--output-format", fmt, cwd=repo)
    assert (done.returncode, done.stderr.decode()) == (2, "error: cannot write to standard output: it is closed\n")


def test_a_closed_stdin_for_explain_is_one_line(repo):
    done = _closed(0, "explain", "-", cwd=repo)
    assert (done.returncode, done.stderr.decode()) == (
        2, "error: standard input is closed: pipe a log into `gdr-check explain -`\n")


def test_a_stdin_that_fails_to_read_is_one_line(repo, tmp_path):
    """A descriptor that reads EISDIR (a directory opened as stdin after Python started its streams)."""
    script = textwrap.dedent("""
        import os, runpy, sys
        fd = os.open(".", os.O_RDONLY)
        os.dup2(fd, 0)
        sys.argv = ["gdr-check", "explain", "-"]
        runpy.run_module("gdr_check", run_name="__main__")
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=repo, env=_environment(), capture_output=True,
                          check=False, timeout=60)
    assert (done.returncode, done.stderr.decode()) == (2, "error: cannot read standard input: is a directory\n")


# `python -m gdr_check ARGS` that sends itself SIGINT when Python looks for module MODULE: Ctrl-C at that moment
# of start-up (an import hook sees every import before it runs).
_INTERRUPTING = textwrap.dedent("""
    import os, runpy, signal, sys
    module = sys.argv.pop(1)
    class Interrupt:
        def find_spec(self, name, path=None, target=None):
            if name == module:
                os.kill(os.getpid(), signal.SIGINT)
            return None
    sys.meta_path.insert(0, Interrupt())
    runpy.run_module("gdr_check", run_name="__main__", alter_sys=True)
""")


@pytest.mark.parametrize("module,fmt", [
    ("gdr_check.cli.entry", "full"),  # before the CLI's own imports
    ("typer", "json"), ("gdr_check.cli.main", "sarif"),  # while they run
    ("gdr_check.sources.open", "junit"),  # in the command, before anything is read
    ("gdr_check.cli.formats.full", "full"),  # as the report is about to be rendered
    ("gdr_check.cli.formats.gitlab", "gitlab"),
])
def test_ctrl_c_at_start_up_is_one_line_and_exit_130(repo, tmp_path, module, fmt):
    report = tmp_path / "report"
    report.write_bytes(OLD)
    done = subprocess.run([sys.executable, "-c", _INTERRUPTING, module, "good", "--isolated", "--output-format",
                           fmt, "-o", str(report)], cwd=repo, env=_environment(), capture_output=True, check=False,
                          timeout=60)
    assert (done.returncode, done.stdout, done.stderr.decode()) == (130, b"", "error: interrupted\n")
    assert report.read_bytes() == OLD and list(tmp_path.iterdir()) == [report]  # no partial report


@pytest.mark.parametrize("variant", [{"TERM": "dumb"}, {"TERM": ""}, {"NO_COLOR": ""}, {"COLUMNS": "-5"},
                                     {"COLUMNS": "abc"}, {"COLUMNS": "99999999999"}, {"NO_COLOR": "1",
                                                                                     "FORCE_COLOR": "1"}])
def test_terminal_variables_never_break_a_run(repo, variant):
    outcome = run_subprocess("good", "--isolated", cwd=repo, env=variant)
    assert_outcome("full", outcome, exit_code=0)
    assert "\x1b" not in outcome.stdout  # not a terminal: no colour unless FORCE_COLOR asks (and NO_COLOR wins)


# -- never overwrite an input ------------------------------------------------------------------------------------
INPUT = ("it is an input of this run (named on the command line, a file of a checkpoint named or found there, or a "
         "settings file it read): write the report elsewhere")


@pytest.fixture
def found(tmp_path, monkeypatch) -> Path:
    """`models/a` (found by searching `models`) and the `pyproject.toml` that sets its batch, each also reachable
    through a hard link in the working directory."""
    clean_output_env(monkeypatch)
    write_good(tmp_path / "models" / "a")
    (tmp_path / "pyproject.toml").write_text("[tool.gdr-check]\nbatch = 4\n")
    os.link(tmp_path / "models" / "a" / "config.json", tmp_path / "config-link.json")
    os.link(tmp_path / "models" / "a" / "model.safetensors", tmp_path / "weights-link.sarif")
    os.link(tmp_path / "pyproject.toml", tmp_path / "settings-link.json")
    return tmp_path


@pytest.mark.parametrize("link", ["config-link.json", "weights-link.sarif", "settings-link.json"])
@pytest.mark.parametrize("fmt", ["json", "sarif", "full"])
def test_a_report_path_linked_to_a_found_input_is_refused(found, link, fmt):
    before = tree(found)
    outcome = run_in_process("models", "--output-format", fmt, "-o", link, cwd=found)
    assert_outcome(fmt, outcome, exit_code=2, error=f"cannot write `{link}`: {INPUT}", report="")
    assert tree(found) == before  # every input byte for byte, and no report anywhere


def test_show_settings_never_overwrites_the_settings_it_read(found):
    before = tree(found)
    outcome = run_in_process("models", "--show-settings", "-o", "settings-link.json", cwd=found)
    assert_outcome("full", outcome, exit_code=2, error=f"cannot write `settings-link.json`: {INPUT}", report="")
    assert tree(found) == before


# -- every option honoured by every mode ---------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", FORMATS)
def test_show_settings_honours_the_format_and_the_report_file(found, fmt):
    outcome = run_in_process("models", "--show-settings", "--output-format", fmt, "-o", "settings.out", cwd=found)
    written = found / "settings.out"
    if fmt not in ("full", "concise", "github", "json"):  # a file format: refused, as `--list-models` refuses it
        assert_outcome(fmt, outcome, exit_code=2, report=written.read_text(),
                       error=f"--show-settings writes full, concise, github or json, not '{fmt}'")
        return
    assert_outcome(fmt, outcome, exit_code=0, report=written.read_text())
    if fmt == "json":
        document = json.loads(written.read_text())
        assert document["run"]["config"] == "pyproject.toml"
        (target,) = document["targets"]
        assert (target["target"], target["config"], target["batch"], target["tp"]) == (
            "models/a", "pyproject.toml", 4, [1])
        assert target["rules"]["not_selected"] == [] and "GDR104" in target["rules"]["selected"]
    else:
        assert "models/a:\n  config: pyproject.toml\n  engine: sglang\n  tp: 1\n  batch: 4\n" in written.read_text()


@pytest.mark.parametrize("fmt", ["full", "json"])
def test_list_models_writes_the_report_file(found, fmt):
    outcome = run_in_process("--list-models", "--output-format", fmt, "-o", "models.out", cwd=found)
    text = (found / "models.out").read_text()
    assert_outcome(fmt, outcome, exit_code=0, report=text)
    assert "Qwen/Qwen3-Next-80B-A3B-Instruct" in text


# -- identities -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("args,shown,download", [
    (("org/tiny@abc123",), "org/tiny@abc123", "org/tiny --revision abc123"),
    (("org/tiny", "--revision", "v1.0"), "org/tiny@v1.0", "org/tiny --revision v1.0"),
    (("Qwen/Qwen3-Next-80B-A3B-Instruct@abc123",), "Qwen/Qwen3-Next-80B-A3B-Instruct@abc123",
     "Qwen/Qwen3-Next-80B-A3B-Instruct --revision abc123"),
])
def test_a_revision_that_is_not_cached_is_named(tmp_path, args, shown, download):
    (tmp_path / "hub").mkdir()
    outcome = run_subprocess(*args, "--isolated", cwd=tmp_path,
                             env={"HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"})
    revision = shown.split("@")[1]
    assert_outcome("full", outcome, exit_code=2, error=(
        f"error: `{shown}` is neither a local path nor a model in the local Hugging Face cache `{tmp_path}/hub`; "
        f"help: download it (`hf download {download}`), or set `HF_HUB_CACHE` to the cache that holds it; a "
        f"revision (`@{revision}`) is read from the cache only, never from the built-in description"))



@pytest.mark.parametrize("args,error", [
    # click words it "No such option: -o" or, at the floors, "No such option '-o'."
        (("explain", "GDR104", "-o", "x.json"), "No such option"),
    (("explain", "GDR104", "--output-format", "sarif"), "explain writes full or json, not 'sarif'"),
])
def test_explain_refuses_what_it_cannot_write_with_one_line(repo, args, error):
    """`explain` prints a rule or a paste's matches (full or json) to standard output only: a report file or a
    file format is refused, exit 2, and nothing is written."""
    before = tree(repo)
    outcome = run_subprocess(*args, cwd=repo)
    assert_outcome("full", outcome, exit_code=2, error=error)
    assert outcome.stdout == "" and tree(repo) == before
