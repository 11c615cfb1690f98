"""CI: the pre-commit hook end to end, as a user's repository runs it.

    python scripts/ci/precommit_replay.py

A scratch git repository gets a good checkpoint, one whose heads do not split at the hook's TP size, and a
`.pre-commit-config.yaml` whose `repo:` is a snapshot of this checkout (scripts/ci/hook_repo.py). pre-commit
installs the hook as it would from GitHub (`language: python`: a venv and `pip install` of the repository) and
`pre-commit run --all-files` must fail on the broken checkpoint, pass with only the good one, and fail (exit 2
from gdr-check, one line) on a corrupt safetensors header. A config.json of another tool must not fail it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from hook_repo import git, snapshot_repository

from checkpoint_builders import qwen3_next_config, qwen_tensors, write_checkpoint


def pre_commit(project: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "pre_commit", "run", "--all-files", "--color", "never"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=900)
    print(textwrap.indent(done.stdout + done.stderr, "   | "), end="", flush=True)
    return done


def expect(condition: bool, message: str) -> None:
    if not condition:
        print(f"FAILED: {message}", file=sys.stderr)
        sys.exit(1)


def main() -> int:
    scratch = Path(tempfile.mkdtemp(prefix="gdr-check-pre-commit-"))
    rev = snapshot_repository(scratch / "gdr-check")
    print(f"-- hook repository: a snapshot of this checkout at {rev}", flush=True)

    project = scratch / "project with spaces"
    project.mkdir()
    git("init", "-q", cwd=project)
    good = qwen3_next_config()  # H=2, HV=4: splits at tp=2
    write_checkpoint(project / "models" / "good", good, qwen_tensors(good))
    broken = qwen3_next_config(H=3, HV=6)  # 3 key heads: tp=2 does not divide them (GDR121)
    write_checkpoint(project / "models" / "broken", broken, qwen_tensors(broken))
    (project / ".vscode").mkdir()
    (project / ".vscode" / "config.json").write_text('{"editor.tabSize": 2}\n')  # matches the hook's pattern
    (project / ".pre-commit-config.yaml").write_text(textwrap.dedent(f"""\
        repos:
          - repo: {scratch / "gdr-check"}
            rev: {rev}
            hooks:
              - id: gdr-check
                args: [--tp, "2", --output-format, concise]
        """))
    git("add", "-A", cwd=project)
    # pre-commit's own cache (hook environments) stays in the scratch directory: every run installs afresh.
    env = {key: value for key, value in os.environ.items() if not key.startswith(("GDR_CHECK_", "PYTHONPATH"))}
    env.update(PRE_COMMIT_HOME=str(scratch / "pre-commit-home"), NO_COLOR="1")

    print("-- a broken checkpoint among good files: the hook fails", flush=True)
    done = pre_commit(project, env)
    expect(done.returncode == 1, f"pre-commit exited {done.returncode}, expected 1")
    expect("models/broken/config.json" in done.stdout and "GDR121" in done.stdout,
           "the failure does not name models/broken/config.json and GDR121")
    expect(not [line for line in done.stdout.splitlines() if "models/good" in line and "GDR121" in line],
           "the good checkpoint was reported as broken")
    expect("Traceback" not in done.stdout + done.stderr, "a traceback")

    print("-- only the good checkpoint (and another tool's config.json): the hook passes", flush=True)
    git("rm", "-r", "-q", "-f", "models/broken", cwd=project)
    done = pre_commit(project, env)
    expect(done.returncode == 0, f"pre-commit exited {done.returncode}, expected 0")
    expect("gdr-check" in done.stdout and "Passed" in done.stdout, "the hook did not run")

    print("-- a corrupt safetensors header: the hook fails with gdr-check's one-line error", flush=True)
    with open(project / "models" / "good" / "model.safetensors", "r+b") as handle:
        handle.write(b"\xff" * 8)
    done = pre_commit(project, env)
    expect(done.returncode == 1, f"pre-commit exited {done.returncode}, expected 1")
    expect("- exit code: 2" in done.stdout, "gdr-check did not exit 2 on the corrupt header")
    errors = [line for line in done.stdout.splitlines() if line.startswith("error: ")]
    expect(len(errors) == 1 and "model.safetensors" in errors[0], f"not one error line naming the file: {errors}")
    expect("Traceback" not in done.stdout + done.stderr, "a traceback")
    print("pre-commit replay: every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
