"""CI: build the sdist and the wheel with build isolation, install the wheel (not editable) into a fresh venv and
run gdr-check there as a user would, from a directory outside the checkout.

    python scripts/ci/installed_wheel.py [--keep]

Checks: the README's main job in every output format (exit 0; the machine formats parse), the same model at
a TP size that fails (exit 1, the error in every format), `explain`, `--list-models`, a checkpoint directory,
a corrupt one and a missing path (exit 2, one line), `python -m gdr_check --version`; then the wheel with the
`kernel` extra (torch pinned to the CPU build) and a CPU dry-run under the Triton interpreter. No output may
hold a traceback. Exits 1 on the first failed check, naming it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from checkpoint_builders import qwen3_next_config, qwen_tensors, write_checkpoint  # noqa: E402

CODE = re.compile(r"\bGDR\d{3}\b")
MODEL = "Qwen/Qwen3-Next-80B-A3B-Instruct"
FORMATS = ("full", "concise", "json", "json-lines", "github", "sarif", "junit", "gitlab")
TORCH = "torch==2.13.0"  # the CPU build; an unpinned torch would download gigabytes
NOT_SOURCES = shutil.ignore_patterns(".git", "__pycache__", "*.py[cod]", "*.egg-info", "build", "dist", ".sglang",
                                     ".whl", ".device", ".hypothesis", ".pytest_cache", ".venv*", ".mypy_cache",
                                     ".ruff_cache")


class CheckFailed(Exception):
    pass


def step(name: str) -> None:
    print(f"-- {name}", flush=True)


class Installed:
    """Runs commands of the fresh venv in a scratch directory, with an environment a user's shell would have."""

    def __init__(self, venv: Path, cwd: Path, env: dict[str, str]) -> None:
        self.bin = venv / ("Scripts" if os.name == "nt" else "bin")
        self.cwd = cwd
        self.env = env

    def run(self, name: str, argv: list[str], *, code: int, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        executable = str(self.bin / argv[0])
        started = time.monotonic()
        done = subprocess.run([executable, *argv[1:]], cwd=self.cwd, env=self.env, capture_output=True, text=True,
                              timeout=timeout)
        print(f"   {name}: exit {done.returncode} ({time.monotonic() - started:.1f} s)", flush=True)
        for stream, text in (("stdout", done.stdout), ("stderr", done.stderr)):
            if "Traceback (most recent call last)" in text:
                raise CheckFailed(f"{name}: a traceback on {stream}:\n{text[-3000:]}")
        if done.returncode != code:
            raise CheckFailed(f"{name}: exit {done.returncode}, expected {code}\n"
                              f"stdout: {done.stdout[-2000:]}\nstderr: {done.stderr[-2000:]}")
        return done


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


def codes_in(fmt: str, out: str) -> set[str]:
    """The rule codes a machine format reports, parsed as a program would read it."""
    if fmt == "json":
        document = json.loads(out)
        return {d["code"] for d in document.get("diagnostics", [])}
    if fmt == "json-lines":
        return {json.loads(line)["code"] for line in out.splitlines() if line.strip()}
    if fmt == "sarif":
        log = json.loads(out)
        expect(log["version"] == "2.1.0", f"sarif version {log['version']!r}")
        return {result["ruleId"] for run in log["runs"] for result in run["results"]}
    if fmt == "gitlab":
        return {issue["check_name"] for issue in json.loads(out)}
    if fmt == "junit":
        root = ET.fromstring(out)
        expect(root.tag == "testsuites", f"junit root <{root.tag}>")
        return {code for case in root.iter("testcase") if case.find("failure") is not None
                for code in CODE.findall(case.get("name", ""))}
    if fmt == "github":
        return {code for line in out.splitlines() if line.startswith("::error ") for code in CODE.findall(line)}
    return set(CODE.findall(out))


def check_formats(installed: Installed) -> None:
    step(f"the README's main job in every format: gdr-check {MODEL} --tp 4")
    for fmt in FORMATS:
        done = installed.run(f"--tp 4 --output-format {fmt}", ["gdr-check", MODEL, "--tp", "4", "--output-format", fmt],
                             code=0)
        expect(done.stdout.strip() != "" or fmt == "github", f"{fmt}: nothing printed")
        if fmt in ("json", "json-lines", "sarif", "junit", "gitlab"):
            expect(not codes_in(fmt, done.stdout) & {"GDR121"}, f"{fmt}: GDR121 reported at tp=4")
    expect(MODEL in installed.run("full", ["gdr-check", MODEL, "--tp", "4"], code=0).stdout, "full: no model name")

    step(f"a TP size that fails: gdr-check {MODEL} --tp 3 exits 1 in every format")
    for fmt in FORMATS:
        done = installed.run(f"--tp 3 --output-format {fmt}", ["gdr-check", MODEL, "--tp", "3", "--output-format", fmt],
                             code=1)
        expect("GDR121" in codes_in(fmt, done.stdout), f"{fmt}: GDR121 not reported at tp=3:\n{done.stdout[-2000:]}")


def check_commands(installed: Installed, scratch: Path) -> Path:
    step("explain, --list-models, python -m gdr_check")
    done = installed.run("explain GDR121", ["gdr-check", "explain", "GDR121"], code=0)
    expect("GDR121" in done.stdout and "tp" in done.stdout, f"explain GDR121 printed {done.stdout[:500]!r}")
    done = installed.run("--list-models", ["gdr-check", "--list-models"], code=0)
    expect(MODEL in done.stdout, "--list-models does not list the README's model")
    done = installed.run("python -m gdr_check --version", ["python", "-m", "gdr_check", "--version"], code=0)
    expect(done.stdout.startswith("gdr-check "), f"--version printed {done.stdout!r}")
    done = installed.run("import location", ["python", "-c", "import gdr_check; print(gdr_check.__file__)"], code=0)
    expect("site-packages" in done.stdout and str(ROOT) not in done.stdout,
           f"gdr_check imported from {done.stdout.strip()}, not from the installed wheel")

    step("a checkpoint directory (config.json + safetensors header), a corrupt one, a missing path")
    config = qwen3_next_config()
    good = write_checkpoint(scratch / "checkpoints" / "tiny qwen3-next", config, qwen_tensors(config))
    done = installed.run("good checkpoint, json", ["gdr-check", str(good), "--output-format", "json"], code=0)
    document = json.loads(done.stdout)
    expect(document["source"]["kind"] != "builtin" and document["source"]["files_read"],
           f"the checkpoint was not read from its files: {document['source']}")
    installed.run("good checkpoint, full", ["gdr-check", str(good)], code=0)
    bad = shutil.copytree(good, scratch / "checkpoints" / "corrupt")
    with open(bad / "model.safetensors", "r+b") as handle:
        handle.write(b"\xff" * 8)  # a header length far past the end of the file
    for name, target in (("corrupt safetensors header", bad), ("missing path", scratch / "no-such-model")):
        done = installed.run(name, ["gdr-check", str(target)], code=2)
        lines = done.stderr.splitlines()
        expect(len(lines) == 1 and lines[0].startswith("error: "), f"{name}: stderr is not one error line: {lines}")
        expect(done.stdout == "", f"{name}: printed on stdout: {done.stdout[:500]!r}")
    return good


def check_dry_run(installed: Installed, checkpoint: Path) -> None:
    step("CPU dry-run with the kernel extra (Triton interpreter)")
    done = installed.run("dry-run, json", ["gdr-check", "dry-run", str(checkpoint), "--device", "cpu", "--batch", "2",
                                           "--steps", "2", "--output-format", "json"], code=0, timeout=600)
    document = json.loads(done.stdout)
    expect(document["launched"] is True and document["passed"] is True, f"dry-run did not pass: {done.stdout[:2000]}")
    expect(len(document["steps"]) == 2, f"{len(document['steps'])} steps verified, expected 2")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory and print its path")
    options = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="gdr-check-installed-"))
    try:
        step("build the sdist and the wheel with build isolation (the wheel from the sdist)")
        shutil.copytree(ROOT, scratch / "tree", ignore=NOT_SOURCES)
        subprocess.run([sys.executable, "-m", "build", "--outdir", str(scratch / "dist"), str(scratch / "tree")],
                       check=True, stdout=subprocess.DEVNULL)
        wheel = next((scratch / "dist").glob("gdr_check-*.whl"))
        expect(any((scratch / "dist").glob("gdr_check-*.tar.gz")), "no sdist was built")

        step(f"a fresh venv; pip install {wheel.name} (not editable)")
        venv = scratch / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
        subprocess.run([*pip, str(wheel)], check=True)

        work = scratch / "work"
        work.mkdir()
        # A user's environment: no PYTHONPATH into the checkout, an empty Hugging Face cache (the built-in
        # description answers for the README's model), no inherited output settings.
        env = {key: value for key, value in os.environ.items()
               if not key.startswith(("GDR_CHECK_", "PYTHON", "HF_", "HUGGINGFACE_", "GITHUB_"))}
        env.update(HF_HOME=str(scratch / "hf-home"), PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
                   NO_COLOR="1")
        installed = Installed(venv, work, env)
        check_formats(installed)
        checkpoint = check_commands(installed, scratch)

        step(f"pip install '{wheel.name}[kernel]' {TORCH}")
        subprocess.run([*pip, f"{wheel}[kernel]", TORCH], check=True)
        check_dry_run(installed, checkpoint)
    except (CheckFailed, subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
        print(f"FAILED: {error}", file=sys.stderr)
        return 1
    finally:
        if options.keep:
            print(f"scratch directory kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    print("installed wheel: every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
