"""What the engine plugins and the start-up hook cost a process when no GDR_CHECK_* variable is set.

Each figure is the median over fresh interpreters (ROUNDS of each, taking turns), on the machine it runs on:

- plugin load: importing `gdr_check.integrations.vllm_plugin` (or `sglang_plugin`) and calling `register()`, as
  an engine's loader does once per process (`entry_point.load()`, then the function), timed inside the process,
  in a bare interpreter and after the standard modules the engines' loaders import themselves;
- `.pth` line: the start-up hook's one line (`gdr_check.cli.hook.PTH_LINE`) executed as `site` executes it,
  timed inside the process;
- interpreter start: `python -c pass` wall time with the hook's `.pth` in a throw-away virtual environment's
  site-packages, against the same environment without it;
- with `--vllm TREE` (an unpacked vLLM 0.33.0 holding `vllm/plugins/__init__.py` and `vllm/envs.py`): vLLM's own
  `load_general_plugins()` with gdr-check's entry point declared (a dist-info folder on the path) and without.

    python benchmarks/plugin_startup.py [--rounds 30] [--vllm /tmp/vllm-tree]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GDR_CHECK_", "VLLM_", "SGLANG_"))}
    return {**env, **extra}


def _inside(python: str, code: str, env: dict[str, str]) -> float:
    """Seconds the code reports for itself (it prints a float)."""
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    return float(out.strip().splitlines()[-1])


def _wall(python: str, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([python, "-c", "pass"], env=env, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--vllm", type=Path, default=None)
    args = parser.parse_args()
    env = _clean_env(PYTHONPATH=str(SRC))
    sys.path.insert(0, str(SRC))
    from gdr_check.cli.hook import PTH_LINE, PTH_NAME

    timed = {
        "plugin load, vLLM (ms)": ("import time; t = time.perf_counter(); "
                                   "from gdr_check.integrations.vllm_plugin import register; register(); "
                                   "print(time.perf_counter() - t)"),
        "plugin load, sglang (ms)": ("import time; t = time.perf_counter(); "
                                     "from gdr_check.integrations.sglang_plugin import register; register(); "
                                     "print(time.perf_counter() - t)"),
        # vLLM's and sglang's loaders import logging and importlib.metadata before they call a plugin
        # (`vllm/plugins/__init__.py:4, 38`, `sglang/srt/plugins/__init__.py:13, 15`): what the plugin adds there.
        "plugin load after the loader's imports, vLLM (ms)": (
            "import logging, importlib.metadata, time; t = time.perf_counter(); "
            "from gdr_check.integrations.vllm_plugin import register; register(); print(time.perf_counter() - t)"),
        ".pth line (µs)": f"import time; t = time.perf_counter(); exec({PTH_LINE!r}); print(time.perf_counter() - t)",
    }
    results: dict[str, list[float]] = {name: [] for name in timed}
    with tempfile.TemporaryDirectory() as folder:
        venv.create(folder, system_site_packages=True, with_pip=False)
        python = str(Path(folder) / "bin" / "python")
        purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                 capture_output=True, text=True, check=True).stdout.strip()
        pth = Path(purelib) / PTH_NAME
        walls: dict[str, list[float]] = {"python -c pass, no hook (ms)": [], "python -c pass, hook installed (ms)": []}
        loader: dict[str, list[float]] = {"vLLM load_general_plugins, no gdr-check (ms)": [],
                                          "vLLM load_general_plugins, gdr-check declared (ms)": []}
        dist = Path(folder) / "dist"
        info = dist / "gdr_check-0.1.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gdr-check\nVersion: 0.1.0\n")
        (info / "entry_points.txt").write_text(
            "[vllm.general_plugins]\ngdr_check = gdr_check.integrations.vllm_plugin:register\n")
        for _ in range(args.rounds):
            for name, code in timed.items():
                results[name].append(_inside(sys.executable, code, env))
            pth.unlink(missing_ok=True)
            walls["python -c pass, no hook (ms)"].append(_wall(python, env))
            pth.write_text(PTH_LINE)
            walls["python -c pass, hook installed (ms)"].append(_wall(python, env))
            pth.unlink()
            if args.vllm is not None:
                code = ("import sys, types; root = sys.argv[1]\n"
                        "for name in ('vllm',):\n"
                        "    m = types.ModuleType(name); m.__path__ = [root + '/' + name]; sys.modules[name] = m\n"
                        "import time; t = time.perf_counter()\n"
                        "import vllm.plugins; vllm.plugins.load_general_plugins()\n"
                        "print(time.perf_counter() - t)")
                for name, path in (("vLLM load_general_plugins, no gdr-check (ms)", str(SRC)),
                                   ("vLLM load_general_plugins, gdr-check declared (ms)",
                                    os.pathsep.join([str(dist), str(SRC)]))):
                    out = subprocess.run([sys.executable, "-c", code, str(args.vllm)], capture_output=True,
                                         text=True, env=_clean_env(PYTHONPATH=path), check=True).stdout
                    loader[name].append(float(out.strip().splitlines()[-1]))
    summary = {}
    for name, values in {**results, **walls, **(loader if args.vllm else {})}.items():
        scale = 1e6 if "µs" in name else 1e3
        summary[name] = {"median": round(statistics.median(values) * scale, 3),
                         "min": round(min(values) * scale, 3), "max": round(max(values) * scale, 3)}
    print(json.dumps({"rounds": args.rounds, "python": sys.version.split()[0], "figures": summary}, indent=1))


if __name__ == "__main__":
    main()
