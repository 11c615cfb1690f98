"""Test-wide settings.

Kernel tests run Triton kernels on the CPU through its interpreter, which must be enabled before triton is
imported; GDR_CHECK_TEST_GPU=1 runs them on a real GPU instead.
"""

import atexit
import gc
import os
import shutil
import signal
import sys
import tempfile

import pytest

import interpreter_shortcuts

# A suite started in the background of a shell without job control (`cmd &` in a script, some CI runners) inherits
# SIGINT ignored, and so does every process it starts: Python then installs no KeyboardInterrupt handler, and the
# tests that interrupt a gdr-check process (test_hostile_environment.py, test_hostile_signals.py) would see Ctrl-C
# ignored. A handler here is reset to the default in each child at exec, as a terminal would have it.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

if not os.environ.get("GDR_CHECK_TEST_GPU"):
    os.environ.setdefault("TRITON_INTERPRET", "1")

# The processes the tests start (CLI runs, dry-run children, rank workers, engine workers) load the package's
# bytecode from a cache outside the checkout, as an installed wheel's is compiled at install. Where the
# environment sets PYTHONDONTWRITEBYTECODE, each of those hundreds of processes compiled the source again.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ.setdefault("PYTHONPYCACHEPREFIX",
                      os.path.join(tempfile.gettempdir(), f"gdr-check-tests-pycache-{os.getuid()}"))

# The cache of validated header reads (sources/header_cache.py) stays on, as users run it, so that every reading
# test reads through it (a hit must answer as the miss did), but in a folder of this session's: never the real
# ~/.cache. Tests of the cache itself point it at folders of their own.
os.environ.pop("GDR_CHECK_NO_CACHE", None)
os.environ["GDR_CHECK_CACHE_DIR"] = tempfile.mkdtemp(prefix="gdr-check-tests-cache-")
atexit.register(shutil.rmtree, os.environ["GDR_CHECK_CACHE_DIR"], ignore_errors=True)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Once triton's interpreter is imported (by a test module, or by an earlier test), its shortcuts are installed
    (tests/interpreter_shortcuts.py)."""
    if "triton.runtime.interpreter" in sys.modules:
        interpreter_shortcuts.install()


# The files whose tests take seconds of CPU each (engine worker processes, multi-rank dry-runs, the guard variants'
# 52 package copies, the dry-run's child processes, the package build), longest first: they start first, so
# that the suite's last minutes are short tests the workers share (`--dist worksteal` in pyproject.toml), not one
# worker finishing a long test while the other waits.
RUN_FIRST = ("test_guard_variants.py", "test_plugins.py", "test_ranks.py", "test_dryrun.py", "test_packaging.py",
             "test_device_guard.py", "test_tma_state_probe.py")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    order = {name: rank for rank, name in enumerate(RUN_FIRST)}
    items.sort(key=lambda item: order.get(item.path.name, len(RUN_FIRST)))  # stable: files keep their order


def pytest_unconfigure(config: pytest.Config) -> None:
    """At the end, pytest collects garbage five times over to find exceptions raised in finalizers
    (`_pytest/unraisableexception.py`), ~4 s in a worker whose heap holds torch, triton, hypothesis and the suite's
    modules. One full collection here finds every unreachable object (the hook that records what a finalizer
    raises is still installed); then the survivors are frozen, so that pytest's five passes walk only what the
    finalizers left, and garbage they make is still collected and its finalizers checked. The heap is thawed at
    exit, so that the interpreter's own last collection still finalizes everything (extension modules check)."""
    gc.collect()
    gc.freeze()
    atexit.register(gc.unfreeze)
