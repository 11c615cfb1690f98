"""Report files: `-o` is written whole or not at all. Every failure is one `error:` line naming the
path and the reason, exit 2, and the report that was there stays byte for byte; `$GITHUB_STEP_SUMMARY` that is
a FIFO, a device or a directory is skipped with a warning, never waited on."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cli_checkpoints import clean_output_env, run_cli, write_bad, write_good
from fixtures_sources import make_hf_cache_repo
from hostile_corpus import FORMATS, assert_outcome, run_subprocess, tree

OLD_REPORT = b"the previous report\n"


@pytest.fixture
def repo(tmp_path, monkeypatch):
    clean_output_env(monkeypatch)
    write_good(tmp_path / "good")
    write_bad(tmp_path / "bad")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _target(repo: Path, kind: str) -> tuple[str, str]:
    """An output path that cannot be written, and the reason the error line gives."""
    if kind == "directory":
        (repo / "reports").mkdir()
        return "reports", "is a directory"
    if kind == "parent-is-a-file":
        (repo / "taken").write_bytes(OLD_REPORT)
        return "taken/deeper/report.txt", "`" + str(repo / "taken") + "` is not a directory"
    if kind == "full-disk":
        return "/dev/full", "no space left on device"
    if kind == "fifo-without-reader":
        os.mkfifo(repo / "pipe")
        return "pipe", "a FIFO with no reader"
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["directory", "parent-is-a-file", "full-disk", "fifo-without-reader"])
def test_unwritable_report_is_one_line_and_exit_2_in_every_format(repo, kind):
    path, reason = _target(repo, kind)
    before = tree(repo)
    for fmt in FORMATS:
        outcome = run_cli("bad", "--isolated", "--output-format", fmt, "-o", path)
        assert_outcome(fmt, outcome, exit_code=2, error=f"cannot write `{path}`: {reason}", report="")
        assert outcome.stderr.splitlines()[-1] == f"error: cannot write `{path}`: {reason}"
    assert tree(repo) == before  # no temporary file left behind, nothing else written


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_read_only_folder_keeps_the_old_report(repo):
    folder = repo / "ro"
    folder.mkdir()
    (folder / "report.json").write_bytes(OLD_REPORT)
    folder.chmod(0o555)
    try:
        outcome = run_cli("bad", "--isolated", "--output-format", "json", "-o", "ro/report.json")
    finally:
        folder.chmod(0o755)
    assert_outcome("json", outcome, exit_code=2, error="cannot write `ro/report.json`: permission denied", report="")
    assert (folder / "report.json").read_bytes() == OLD_REPORT


def test_a_file_size_limit_leaves_the_old_report_intact(repo):
    """Past RLIMIT_FSIZE (SIGXFSZ ignored, as CI runners do) the write fails: EFBIG, one line, old report kept."""
    (repo / "report.sarif").write_bytes(OLD_REPORT)
    script = textwrap.dedent("""
        import resource, signal, sys
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))
        from gdr_check.cli.main import main
        sys.exit(main(sys.argv[1:]))
    """)
    import subprocess

    done = subprocess.run([sys.executable, "-c", script, "bad", "--isolated", "--output-format", "sarif",
                           "-o", "report.sarif"], check=False, cwd=repo, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "NO_COLOR": "1"})
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == ["error: cannot write `report.sarif`: file too large"]
    assert (repo / "report.sarif").read_bytes() == OLD_REPORT
    assert sorted(p.name for p in repo.iterdir()) == ["bad", "good", "report.sarif"]


def test_a_report_replaces_the_old_one_whole_keeping_its_mode_and_link(repo):
    (repo / "real.json").write_bytes(OLD_REPORT)
    (repo / "real.json").chmod(0o640)
    (repo / "link.json").symlink_to("real.json")
    outcome = run_cli("bad", "--isolated", "--output-format", "json", "-o", "link.json")
    assert outcome.exit_code == 1 and outcome.stdout == ""
    assert (repo / "link.json").is_symlink()
    assert (repo / "real.json").read_text().startswith("{")
    assert stat.S_IMODE((repo / "real.json").stat().st_mode) == 0o640
    assert sorted(p.name for p in repo.iterdir()) == ["bad", "good", "link.json", "real.json"]


def test_a_missing_parent_is_refused_not_created(repo):
    # As a shell's `>`: a mistyped folder is one line and exit 2, not a tree made anywhere (the Action makes the
    # SARIF file's folder itself: action.yml)
    outcome = run_cli("good", "--isolated", "--output-format", "junit", "-o", "out/ci/report.xml")
    assert (outcome.exit_code, outcome.stdout) == (2, "")
    assert outcome.stderr == "error: cannot write `out/ci/report.xml`: folder `out/ci` does not exist\n"
    assert not (repo / "out").exists()
    (repo / "out" / "ci").mkdir(parents=True)
    outcome = run_cli("good", "--isolated", "--output-format", "junit", "-o", "out/ci/report.xml")
    assert outcome.exit_code == 0 and (repo / "out/ci/report.xml").read_text().startswith("<?xml")


def test_an_existing_file_that_cannot_be_written_says_the_oss_reason(repo):
    # /proc/version exists: writing it fails with EIO (root) or EACCES, never "no such file or directory" (the
    # temporary file beside it, which /proc cannot create, was blamed)
    outcome = run_cli("good", "--isolated", "-o", "/proc/version")
    assert (outcome.exit_code, outcome.stdout) == (2, "")
    assert outcome.stderr in ("error: cannot write `/proc/version`: input/output error\n",
                              "error: cannot write `/proc/version`: permission denied\n")


@pytest.mark.parametrize("args", [("--list-models", "--output-format", "json"), ("call", "rec.json")])
def test_other_commands_use_the_same_writer(repo, args):
    from test_hostile_injection import _recording_fields

    _recording_fields(repo)
    (repo / "reports").mkdir()
    outcome = run_cli(*args, "-o", "/dev/full")
    assert outcome.exit_code == 2 and outcome.stdout == ""
    assert outcome.stderr.splitlines() == ["error: cannot write `/dev/full`: no space left on device"]


@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_step_summary_that_is_no_regular_file_is_skipped_with_a_warning(repo, kind, monkeypatch):
    path = {"fifo": repo / "summary", "device": Path("/dev/null"), "directory": repo / "summary"}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(path))
    outcome = run_cli("bad", "--isolated", "--output-format", "github")  # would block forever on the FIFO
    assert outcome.exit_code == 1
    warning = outcome.stderr.splitlines()[-1]
    expected = {"fifo": f"warning: cannot append to $GITHUB_STEP_SUMMARY ({path}): no such device or address",
                "device": f"warning: $GITHUB_STEP_SUMMARY ({path}) is not a regular file: not written",
                "directory": f"warning: cannot append to $GITHUB_STEP_SUMMARY ({path}): is a directory"}[kind]
    assert warning == expected
    assert "error:" not in outcome.stderr


def test_step_summary_fifo_with_a_reader_is_skipped_too(repo, monkeypatch):
    os.mkfifo(repo / "summary")
    reader = os.open(repo / "summary", os.O_RDONLY | os.O_NONBLOCK)
    try:
        monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(repo / "summary"))
        outcome = run_cli("bad", "--isolated", "--output-format", "github")
    finally:
        os.close(reader)
    assert outcome.exit_code == 1
    assert outcome.stderr.splitlines()[-1].endswith("is not a regular file: not written")


def test_the_real_cli_keeps_the_old_report_when_the_disk_is_full(repo):
    outcome = run_subprocess("bad", "--isolated", "--output-format", "gitlab", "-o", "/dev/full", cwd=repo)
    assert_outcome("gitlab", outcome, exit_code=2, error="cannot write `/dev/full`: no space left on device",
                   report="")


def _run_with_stdout(args: tuple[str, ...], cwd: Path, stdout: str) -> tuple[int, list[str]]:
    """`python -m gdr_check ARGS` with stdout on a full device ("full"), closed ("closed") or a pipe whose reader
    has gone ("broken-pipe"): exit code and stderr lines (decoded strictly: a traceback's or a control
    character's bytes are test failures too)."""
    import subprocess

    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith(("GDR_CHECK_", "GITHUB_", "FORCE_COLOR")) or k == "GDR_CHECK_CACHE_DIR"}
    environment.update(NO_COLOR="1", PYTHONIOENCODING="utf-8")
    reader, writer = os.pipe()
    os.close(reader)
    target = open("/dev/full", "w") if stdout == "full" else None  # closed below
    try:
        done = subprocess.run([sys.executable, "-m", "gdr_check", *args], check=False, cwd=cwd, env=environment,
                              stdout=target if stdout == "full" else writer if stdout == "broken-pipe" else None,
                              stderr=subprocess.PIPE, timeout=60,
                              preexec_fn=(lambda: os.close(1)) if stdout == "closed" else None)
    finally:
        os.close(writer)
        if target is not None:
            target.close()
    return done.returncode, done.stderr.decode("utf-8").splitlines()


ARGS_THAT_WRITE_STDOUT = [
    *(("bad", "--isolated", "--output-format", fmt) for fmt in FORMATS),  # a report with findings, every format
    ("missing", "--isolated", "--output-format", "sarif"),  # a fatal record, machine format
    ("--help",), ("--version",), ("explain", "--all"), ("--list-models",),  # typer, click and our own printing
]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("args", ARGS_THAT_WRITE_STDOUT)
def test_a_full_stdout_is_one_line_and_exit_2(repo, args):
    assert _run_with_stdout(args, repo, "full") == (2, ["error: cannot write to standard output: no space left on "
                                                        "device"])


@pytest.mark.parametrize("args", [("bad", "--isolated", "--output-format", "json"), ("explain", "GDR241"),
                                  ("--help",), ("--version",)])
def test_a_closed_stdout_is_one_line_and_exit_2(repo, args):
    # (click skips writing to a closed stdout, and rich writes to a null file: neither is a success)
    assert _run_with_stdout(args, repo, "closed") == (2, ["error: cannot write to standard output: it is closed"])


@pytest.mark.parametrize("args", [("bad", "--isolated", "--output-format", "json"), ("bad", "--isolated"),
                                  ("--help",), ("--version",)])
def test_a_broken_pipe_is_one_line_and_exit_2(repo, args):
    # (typer and rich turn a broken pipe into exit 1 with nothing said, which reads as "problems found")
    assert _run_with_stdout(args, repo, "broken-pipe") == (2, ["error: cannot write to standard output: broken "
                                                               "pipe"])


def test_a_broken_stdout_does_not_stop_a_report_file(repo):
    assert _run_with_stdout(("bad", "--isolated", "-o", "report.txt"), repo, "broken-pipe") == (1, [])
    assert "GDR" in (repo / "report.txt").read_text()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_stderr_still_exits_2_and_the_document_reaches_stdout(repo):
    import subprocess

    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "gdr_check", "missing", "--isolated", "--output-format", "json"],
                              check=False, cwd=repo, stdout=subprocess.PIPE, stderr=full, timeout=60)
    assert done.returncode == 2
    assert "GDR001" in done.stdout.decode("utf-8")  # the JSON document, whatever became of the error line


INPUT = ("it is an input of this run (named on the command line, a file of a checkpoint named or found there, or a "
         "settings file it read): write the report elsewhere")


@pytest.mark.parametrize("args, report", [
    (("good", "--output-format", "json"), "good/config.json"),  # a file of the checkpoint checked
    (("good", "--output-format", "full"), "good/config.json"),
    (("good/config.json", "--output-format", "sarif"), "./good/config.json"),  # the target itself, spelled otherwise
    (("mine.json", "--output-format", "json"), "mine.json"),  # a config under another name
    (("mine.json", "--no-such-option", "--output-format", "json"), "mine.json"),  # a usage error's record
    (("good", "--config", "mine.json", "--output-format", "json"), "mine.json"),  # an option's value
    (("call", "rec.json", "--output-format", "json"), "rec.json"),  # a recording
    (("dry-run", "mine.json", "--device", "cpu", "--output-format", "json"), "mine.json"),
], ids=["checkpoint-file-json", "checkpoint-file-full", "target-file", "renamed-config", "usage-error",
        "config-option", "call-recording", "dry-run-target"])
def test_a_report_never_replaces_an_input_of_its_run(repo, args, report):
    """Whatever the command and however the run ends, the report is refused before anything is written."""
    (repo / "mine.json").write_bytes((repo / "good" / "config.json").read_bytes())
    (repo / "rec.json").write_bytes(OLD_REPORT)
    before = tree(repo)
    outcome = run_cli(*args, "--isolated", "-o", report)
    assert (outcome.exit_code, outcome.stdout) == (2, "")
    assert outcome.stderr.splitlines()[-1] == f"error: cannot write `{os.path.normpath(report)}`: {INPUT}"
    assert tree(repo) == before


@pytest.mark.parametrize("name", ["config.json", "model.safetensors", "model.safetensors.index.json",
                                  "pytorch_model.bin"])
@pytest.mark.parametrize("exists", [True, False], ids=["existing", "new"])
def test_no_report_is_named_as_a_checkpoint_s_file(repo, name, exists):
    """A report named as a config or weights would replace one, or pass for one in the next run's search."""
    (repo / "elsewhere").mkdir()
    if exists:
        (repo / "elsewhere" / name).write_bytes(OLD_REPORT)
    outcome = run_cli("good", "--output-format", "json", "-o", f"elsewhere/{name}")
    assert outcome.exit_code == 2
    assert outcome.stderr.splitlines()[-1] == (
        f"error: cannot write `elsewhere/{name}`: it is named as a checkpoint's file (a config or weights), which a "
        "report must not replace or pose as: name the report otherwise")
    assert os.listdir(repo / "elsewhere") == ([name] if exists else [])
    if exists:
        assert (repo / "elsewhere" / name).read_bytes() == OLD_REPORT


@pytest.mark.parametrize("where", ["blob", "new-in-blobs", "new-subfolder"])
def test_no_report_goes_into_a_hugging_face_cache_repository(repo, monkeypatch, where):
    """A model named by its id is read from the cache, whose blobs are named by hash: a report there would
    replace the cached config (or sit among the blobs), whatever its name."""
    config = (repo / "good" / "config.json").read_bytes()
    cached = make_hf_cache_repo(repo / "hub", "org/model", {"config.json": config})
    monkeypatch.setenv("HF_HUB_CACHE", str(repo / "hub"))
    blob = next((cached / "blobs").iterdir())
    report = {"blob": blob, "new-in-blobs": cached / "blobs" / "report.json",
              "new-subfolder": cached / "reports" / "report.json"}[where]
    before = tree(repo)
    outcome = run_cli("org/model", "--isolated", "--output-format", "json", "-o", str(report))
    assert (outcome.exit_code, outcome.stdout) == (2, "")
    assert outcome.stderr.splitlines()[-1] == (
        f"error: cannot write `{report}`: it lies in the Hugging Face cache repository `models--org--model`, whose "
        "files a report must not replace or add to: write the report elsewhere")
    assert tree(repo) == before and blob.read_bytes() == config


def test_dash_is_stdout_not_a_file_named_dash(repo):
    outcome = run_cli("good", "--isolated", "--output-format", "json", "-o", "-")
    assert outcome.exit_code == 0 and outcome.stdout.startswith("{") and not (repo / "-").exists()
    failed = run_cli("good", "--isolated", "--output-format", "json", "-o", "-", "--tp", "1,,2")  # a usage error
    assert failed.exit_code == 2 and '"code": "usage"' in failed.stdout and not (repo / "-").exists()


@pytest.mark.parametrize("args", [("good", "--isolated"), ("dry-run", "good"), ("call", "recording.json")],
                         ids=["check", "dry-run", "call"])
def test_an_empty_report_path_or_a_folder_s_is_refused_before_anything_is_written(repo, args, monkeypatch):
    # A trailing slash names a folder: `-o reports/` wrote a file called `reports` (Path() drops the slash), and
    # `-o ""` was the working directory ("cannot write `.`: is a directory").
    before = tree(repo)
    for given, shown in (("reports/", "`reports/` ends with a slash, so it names a folder: name the report's file"),
                         ("", "an empty path names no report file")):
        for option in (["-o", given], [f"--output-file={given}"]):
            outcome = run_cli(*args, *option)
            assert (outcome.exit_code, outcome.stdout) == (2, "")
            assert outcome.stderr == f"error: Invalid value for --output-file: {shown}\n"
    monkeypatch.setenv("GDR_CHECK_OUTPUT_FILE", "reports/")
    assert run_cli(*args).stderr == ("error: Invalid value for GDR_CHECK_OUTPUT_FILE: `reports/` ends with a slash, "
                                     "so it names a folder: name the report's file\n")
    assert tree(repo) == before
    # The command line's empty -o wins over the environment's file: its usage error is not written there.
    monkeypatch.setenv("GDR_CHECK_OUTPUT_FILE", "from-env.json")
    refused = run_cli(*args, "-o", "", "--output-format", "json")
    assert refused.exit_code == 2 and json.loads(refused.stdout)["error"]["code"] == "usage"
    assert tree(repo) == before


@pytest.mark.parametrize("name", ["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"])
def test_dev_stdout_is_standard_output_whatever_it_is(repo, name):
    """Through a pipe (`pipe:[N]` is no path to rename over) and into a file a redirection opened with `>>` (a
    temporary file renamed over it would drop what it held, and the run's other output with it)."""
    command = [sys.executable, "-m", "gdr_check", "good", "--isolated", "--output-format", "json", "-o", name]
    piped = subprocess.run(command, capture_output=True, text=True, cwd=repo, timeout=60)
    assert (piped.returncode, piped.stderr) == (0, "") and piped.stdout.startswith("{")
    log = repo / "log.txt"
    log.write_text("an earlier line\n")
    with open(log, "a") as appended:
        done = subprocess.run(command, stdout=appended, stderr=subprocess.PIPE, text=True, cwd=repo, timeout=60)
    assert done.returncode == 0
    earlier, report = log.read_text().split("\n", 1)
    assert earlier == "an earlier line" and json.loads(report) == json.loads(piped.stdout)


def test_neither_a_report_nor_the_step_summary_replaces_the_settings_or_a_checkpoint(repo, monkeypatch):
    (repo / "pyproject.toml").write_text("[tool.gdr-check]\ntp = [1]\n")
    settings = (repo / "pyproject.toml").read_bytes()
    refused = run_cli("good", "-o", "pyproject.toml")
    assert refused.exit_code == 2 and refused.stderr == (
        "error: cannot write `pyproject.toml`: it is named as the settings' file (`pyproject.toml`), which a report "
        "must not replace or pose as: name the report otherwise\n")
    config = (repo / "good" / "config.json").read_bytes()
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(repo / "good" / "config.json"))
    outcome = run_cli("bad", "--isolated", "--output-format", "github")
    assert outcome.stderr.splitlines()[-1] == (
        f"warning: $GITHUB_STEP_SUMMARY ({repo / 'good' / 'config.json'}) not written: it is named as a checkpoint's "
        "file (a config or weights), which a step summary must not replace or pose as: name the summary otherwise")
    assert (repo / "good" / "config.json").read_bytes() == config and (repo / "pyproject.toml").read_bytes() == settings


def test_any_path_to_standard_output_appends_to_what_a_redirection_opened(repo):
    """`//dev/stdout` or a link to /dev/stdout is standard output too, not a file to rename a report over."""
    (repo / "out-link").symlink_to("/dev/stdout")
    for name in ("//dev/stdout", "out-link"):
        log = repo / "log.txt"
        log.write_text("an earlier line\n")
        command = [sys.executable, "-m", "gdr_check", "good", "--isolated", "--output-format", "json", "-o", name]
        with open(log, "a") as appended:
            done = subprocess.run(command, stdout=appended, stderr=subprocess.PIPE, text=True, cwd=repo, timeout=60)
        assert done.returncode == 0, done.stderr
        earlier, report = log.read_text().split("\n", 1)
        assert earlier == "an earlier line" and isinstance(json.loads(report), dict)


def test_a_report_keeps_its_hard_links_and_takes_a_long_name(repo):
    (repo / "report.json").write_text("old")
    os.link(repo / "report.json", repo / "second-name.json")
    assert run_cli("good", "--isolated", "--output-format", "json", "-o", "report.json").exit_code == 0
    assert (repo / "second-name.json").read_text() == (repo / "report.json").read_text() != "old"
    long_name = "r" * 245 + ".json"  # 250 bytes: a temporary name with all of it would pass the 255-byte limit
    assert run_cli("good", "--isolated", "-o", long_name).exit_code == 0 and (repo / long_name).exists()
    assert sorted(os.listdir(repo)) == sorted(["bad", "good", "report.json", "second-name.json", long_name])
