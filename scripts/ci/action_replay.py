"""CI: replay the composite GitHub Action (action.yml) without GitHub.

    python scripts/ci/action_replay.py

Its steps run as a runner runs them: `${{ ... }}` expressions substituted in `env`, `with`, `working-directory`
and `run` (inputs from the defaults and the step's `with:`), each `run` script in `bash --noprofile --norc -eo
pipefail`, with GITHUB_WORKSPACE, GITHUB_ACTION_PATH (a snapshot of this checkout), GITHUB_OUTPUT,
GITHUB_STEP_SUMMARY and RUNNER_TEMP set. `actions/setup-python` is stood in for by a local interpreter of the
requested version (its `python-path` output), and `python`, `python3` and `pip` on PATH are shims that fail:
the action must use its own venv, never the runner's Python.

Checked, besides each scenario's exit code and output: every `uses:` is pinned by a full commit SHA; no `run:`
script contains an expression (inputs reach scripts through the environment only, so they cannot inject shell
code); inputs with spaces survive (`paths: "my models/good"`, `args: --gpu-memory "20 GiB"`); annotations name
files relative to the workspace; the SARIF file and the step summary are written.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from hook_repo import ROOT, snapshot_repository

from checkpoint_builders import qwen3_next_config, qwen_tensors, write_checkpoint

EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")


class ReplayFailed(Exception):
    pass


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise ReplayFailed(message)


@dataclass
class Runner:
    """The parts of a GitHub runner the action sees."""

    workspace: Path
    action_path: Path
    temp: Path
    base_env: dict[str, str]
    python_for: dict[str, str] = field(default_factory=dict)  # python-version -> interpreter


def evaluate(expression: str, context: dict[str, Any]) -> str:
    """The value of a `${{ }}` expression; only plain property paths (what action.yml uses) are supported."""
    value: Any = context
    for part in expression.split("."):
        if not re.fullmatch(r"[A-Za-z_][\w-]*", part) or not isinstance(value, dict):
            raise ReplayFailed(f"expression `{expression}` is not supported by the replay")
        value = value.get(part, "")
    return "" if value is None else str(value)


def substitute(value: Any, context: dict[str, Any]) -> str:
    """A YAML value as the runner passes it (a string; booleans as `true`/`false`), expressions substituted."""
    text = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return EXPRESSION.sub(lambda match: evaluate(match.group(1), context), text)


def read_outputs(path: Path) -> dict[str, str]:
    outputs: dict[str, str] = {}
    lines = path.read_text().splitlines() if path.exists() else []
    position = 0
    while position < len(lines):
        line = lines[position]
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            end = lines.index(delimiter, position + 1)
            outputs[name] = "\n".join(lines[position + 1:end])
            position = end + 1
            continue
        if "=" in line:
            name, value = line.split("=", 1)
            outputs[name] = value
        position += 1
    return outputs


def static_checks(action: dict[str, Any]) -> None:
    for step in action["runs"]["steps"]:
        if "uses" in step:
            expect(bool(PINNED.match(step["uses"])), f"`uses: {step['uses']}` is not pinned by a full commit SHA")
        if "run" in step:
            expect(not EXPRESSION.search(step["run"]),
                   f"step `{step.get('name')}`: an expression inside `run:` (pass it through `env:`)")


def setup_python(step_with: dict[str, str], runner: Runner) -> dict[str, str]:
    """Stand-in for actions/setup-python: the requested version's interpreter, PATH left alone."""
    version = step_with.get("python-version", "")
    expect(step_with.get("update-environment") == "false", "setup-python would change the job's PATH")
    return {"python-path": runner.python_for.get(version, sys.executable), "python-version": version}


def run_action(action: dict[str, Any], runner: Runner, inputs: dict[str, str], summary: Path,
               reuse: dict[str, Any] | None = None) -> tuple[int, str, dict[str, Any]]:
    """Run every step; returns (exit code of the first failing step or 0, combined output, each step's outputs).

    `reuse`: the step outputs of an earlier run; steps found there (setting up Python, installing) are not run
    again, so that the scenarios after the first cost one check each instead of one install each."""
    defaults = {name: str(spec.get("default", "")) for name, spec in action["inputs"].items()}
    unknown = set(inputs) - set(defaults)
    expect(not unknown, f"inputs the action does not declare: {sorted(unknown)}")
    context: dict[str, Any] = {
        "inputs": {**defaults, **inputs},
        "github": {"workspace": str(runner.workspace), "action_path": str(runner.action_path)},
        "runner": {"temp": str(runner.temp), "os": "Linux"},
        "steps": {},
    }
    log = []
    for index, step in enumerate(action["runs"]["steps"]):
        step_id = step.get("id", f"step{index}")
        if reuse and step_id in reuse and step_id != "check":
            context["steps"][step_id] = reuse[step_id]
            continue
        with_values = {key: substitute(value, context) for key, value in (step.get("with") or {}).items()}
        if "uses" in step:
            expect(step["uses"].startswith("actions/setup-python@"), f"no stand-in for `{step['uses']}`")
            context["steps"][step_id] = {"outputs": setup_python(with_values, runner)}
            continue
        output_file = runner.temp / f"output-{step_id}"
        output_file.write_text("")
        env = {**runner.base_env,
               **{key: substitute(value, context) for key, value in (step.get("env") or {}).items()},
               "GITHUB_OUTPUT": str(output_file), "GITHUB_STEP_SUMMARY": str(summary),
               "GITHUB_ACTION": f"__gdr-check_{step_id}"}
        cwd = Path(substitute(step.get("working-directory", str(runner.workspace)), context))
        script = runner.temp / f"script-{step_id}.sh"
        script.write_text(substitute(step["run"], context))
        expect(step.get("shell") == "bash", f"step `{step.get('name')}`: shell {step.get('shell')!r}, not bash")
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=900)
        log.append(done.stdout + done.stderr)
        context["steps"][step_id] = {"outputs": read_outputs(output_file)}
        if done.returncode != 0:
            return done.returncode, "".join(log), context["steps"]
    return 0, "".join(log), context["steps"]


def failing_shims(directory: Path) -> Path:
    """`python`, `python3` and `pip` that fail loudly: the action must not touch the runner's Python."""
    directory.mkdir()
    for name in ("python", "python3", "pip", "pip3"):
        shim = directory / name
        shim.write_text(f"#!/bin/sh\necho 'the action ran the runner'\"'\"'s {name}' >&2\nexit 97\n")
        shim.chmod(shim.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return directory


def local_pythons() -> dict[str, str]:
    """python-version -> a local interpreter of that version (pyenv's where present), like setup-python."""
    found = {f"{sys.version_info.major}.{sys.version_info.minor}": sys.executable}
    versions = Path.home() / ".pyenv" / "versions"
    for interpreter in sorted(versions.glob("3.*/bin/python")) if versions.is_dir() else []:
        minor = ".".join(interpreter.parent.parent.name.split(".")[:2])
        found.setdefault(minor, str(interpreter))
    return found


def main() -> int:
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    static_checks(action)
    print("-- action.yml: setup actions pinned by SHA, no expression inside a run script", flush=True)

    scratch = Path(tempfile.mkdtemp(prefix="gdr-check-action-"))
    action_path = scratch / "action"
    snapshot_repository(action_path)
    workspace = scratch / "workspace"
    good = qwen3_next_config()
    write_checkpoint(workspace / "my models" / "good", good, qwen_tensors(good))
    broken = qwen3_next_config(H=3, HV=6)  # 3 key heads: tp=2 does not divide them (GDR121)
    write_checkpoint(workspace / "models" / "broken", broken, qwen_tensors(broken))
    temp = scratch / "runner-temp"
    temp.mkdir()
    shims = failing_shims(scratch / "shims")
    base_env = {key: value for key, value in os.environ.items()
                if not key.startswith(("GDR_", "PYTHON", "GITHUB_", "VIRTUAL_ENV", "PIP_REQUIRE"))}
    base_env.update(PATH=f"{shims}{os.pathsep}{os.environ['PATH']}", CI="true", GITHUB_ACTIONS="true",
                    GITHUB_WORKSPACE=str(workspace), GITHUB_ACTION_PATH=str(action_path), RUNNER_TEMP=str(temp),
                    NO_COLOR="1")
    runner = Runner(workspace, action_path, temp, base_env, local_pythons())

    try:
        print('-- paths: "my models/good", args: --gpu-memory "20 GiB": passes, step summary written', flush=True)
        summary = scratch / "summary-1.md"
        code, log, installed = run_action(action, runner,
                                          {"paths": "my models/good", "args": '--gpu-memory "20 GiB"'}, summary)
        print(log, end="")
        expect(code == 0, f"exit {code}, expected 0")
        expect("Traceback" not in log and "ran the runner's" not in log, "a traceback or the runner's Python")
        expect("## gdr-check" in summary.read_text(), "no step summary")

        print("-- paths: a line with a space and a glob line, tp 2: fails, annotations relative to the workspace",
              flush=True)
        summary = scratch / "summary-2.md"
        code, log, _ = run_action(action, runner, {"paths": "my models/good\nmodels/*", "tp": "2"}, summary, installed)
        print(log, end="")
        expect(code == 1, f"exit {code}, expected 1")
        errors = [line for line in log.splitlines() if line.startswith("::error ")]
        expect(len(errors) == 1 and "file=models/broken/config.json," in errors[0] and "GDR121" in errors[0],
               f"annotations: {errors}")
        expect("GDR121" in summary.read_text(), "the step summary does not list GDR121")

        print("-- an absolute path in the workspace: the annotation is still relative", flush=True)
        code, log, _ = run_action(action, runner, {"paths": str(workspace / "models" / "broken"), "tp": "2"},
                               scratch / "summary-3.md", installed)
        expect(code == 1 and "file=models/broken/config.json," in log, f"exit {code}:\n{log}")

        print("-- sarif into a path with a space, --exit-zero: exit 0, a valid log, the output set", flush=True)
        sarif_inputs = {"paths": "models/*\nmy models/good", "tp": "2", "output-format": "sarif",
                        "sarif-file": "reports/gdr check.sarif", "args": "--exit-zero"}
        code, log, _ = run_action(action, runner, sarif_inputs, scratch / "summary-4.md", installed)
        print(log, end="")
        expect(code == 0, f"exit {code}, expected 0")
        sarif = json.loads((workspace / "reports" / "gdr check.sarif").read_text())
        uris = {location["physicalLocation"]["artifactLocation"]["uri"]
                for run in sarif["runs"] for result in run["results"] for location in result["locations"]}
        expect("models/broken/config.json" in uris, f"SARIF locations: {sorted(uris)}")
        expect(not any(uri.startswith(("/", "file:")) for uri in uris), f"absolute SARIF paths: {sorted(uris)}")
        outputs = read_outputs(temp / "output-check")
        expect(outputs.get("sarif-file") == "reports/gdr check.sarif", f"step outputs: {outputs}")

        print("-- args with an unbalanced quote: exit 2 with one error line, nothing checked", flush=True)
        code, log, _ = run_action(action, runner, {"paths": "models/broken", "tp": "2", "args": '--select "GDR1'},
                                  scratch / "summary-6.md", installed)
        expect(code == 2, f"exit {code}, expected 2:\n{log}")
        expect("Traceback" not in log and "::error " not in log and "summary:" not in log, log)
        expect("error: the `args` input cannot be split as a shell would (No closing quotation): "
               "'--select \"GDR1'" in log.splitlines(), log)

        print("-- a missing path: exit 2 with one error line, no traceback", flush=True)
        code, log, _ = run_action(action, runner, {"paths": "no such model dir/x"}, scratch / "summary-5.md", installed)
        expect(code == 2, f"exit {code}, expected 2:\n{log}")
        expect("Traceback" not in log and any(line.startswith("error: ") for line in log.splitlines()), log)
    except (ReplayFailed, subprocess.TimeoutExpired) as error:
        print(f"FAILED: {error}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print("action replay: every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
