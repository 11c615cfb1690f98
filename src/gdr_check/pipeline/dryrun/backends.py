"""What can be said about an engine backend without importing torch: the parent decides these before a child.

An engine that is not in this environment at all is an unusable environment, as a missing torch is: the dry-run
stops with one line naming what is missing and how to get it (`missing_backend`, exit 2). vLLM is missing when it
is not importable; sglang's kernel file when sglang is not installed and GDR_CHECK_SGLANG_PATH is not set, or when
that variable names a path that holds no such file. What an engine that is there cannot run is GDR313
(`known_unavailable`): vLLM's KDA packed op has another API; an installed sglang holds no kernel file.

Loading the kernel itself (sglang's file, vLLM's module) needs triton, so it happens in the child
(`runner.kernels`), which reports what only the import can tell (a vLLM module without the packed decode op).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import zipfile
from collections.abc import Callable
from pathlib import Path

from ...base.errors import printable
from ...base.records import dataclass
from ...engines.profiles import kernel_files, profile_for

# Where `kernel.engines.find_sglang_source` looks (that module imports triton, which the parent never does; a test
# keeps the two equal).
SGLANG_PATH_ENV = "GDR_CHECK_SGLANG_PATH"
SGLANG_FILE = "sglang/kernels/ops/attention/fla/fused_recurrent.py"
# Every release layout's file, the newest first (before 0.5.16 under sglang/srt/layers/attention/fla/).
SGLANG_FILES = kernel_files("sglang")
SGLANG_TREE_FILES = (*SGLANG_FILES, *(f"python/{name}" for name in SGLANG_FILES))  # an unpacked wheel, a checkout


@dataclass(frozen=True)
class Lookup:
    """Where an engine's kernel stands in this environment."""

    missing: str | None = None  # the environment has no kernel to load: the one-line error (exit 2)
    unusable: str | None = None  # the engine is here but has no kernel to run: GDR313's reason


def _given_sglang(path: Path) -> str | None:
    """What keeps `path` (GDR_CHECK_SGLANG_PATH) from holding sglang's kernel file, or None when it holds it."""
    if path.is_file() and path.suffix == ".whl":
        try:
            with zipfile.ZipFile(path) as archive:
                names = set(archive.namelist())
        except (OSError, zipfile.BadZipFile) as error:
            return f"is not a readable wheel: {printable(error)}"
        return None if names.intersection(SGLANG_FILES) else f"is a wheel without {SGLANG_FILE}"
    if path.is_file() or any((path / name).is_file() for name in SGLANG_TREE_FILES):
        return None
    return f"holds no {SGLANG_FILE}" if path.exists() else "does not exist"


def _sglang_lookup() -> Lookup:
    """sglang's kernel file, looked for as `kernel.engines.find_sglang_source` does, reading no more than a wheel's
    list of files: GDR_CHECK_SGLANG_PATH when set (never falling back to another copy), else the installed sglang."""
    given = os.environ.get(SGLANG_PATH_ENV) or None
    if given is not None:
        problem = _given_sglang(Path(given))
        if problem is None:
            return Lookup()
        return Lookup(missing=f"sglang's packed-decode kernel is not available ({SGLANG_PATH_ENV}=`{printable(given)}` "
                              f"{problem}); `--backend sglang` needs {SGLANG_PATH_ENV} set to an sglang wheel or "
                              "source tree (or unset, to use an installed sglang)")
    try:
        distribution = importlib.metadata.distribution("sglang")
    except importlib.metadata.PackageNotFoundError:
        return Lookup(missing=f"sglang's packed-decode kernel is not available (sglang is not installed and "
                              f"{SGLANG_PATH_ENV} is not set); `--backend sglang` needs `pip install sglang`, or "
                              f"{SGLANG_PATH_ENV} set to an sglang wheel or source tree")
    if any(Path(str(distribution.locate_file(name))).is_file() for name in SGLANG_FILES):
        return Lookup()
    return Lookup(unusable=f"sglang {printable(distribution.version)} is installed but has no {SGLANG_FILE}")


# Engines whose kernel is read from their files rather than imported (profile `import_name` None), by profile name.
_FILE_LOOKUPS: dict[str, Callable[[], Lookup]] = {"sglang": _sglang_lookup}


def _lookup(backend: str) -> Lookup:
    profile = profile_for(backend)
    if profile.import_name is None:
        return _FILE_LOOKUPS[profile.name]()
    if importlib.util.find_spec(profile.import_name) is None:
        return Lookup(missing=f"{profile.import_name} is not importable (No module named {profile.import_name!r}); "
                              f"`--backend {backend}` needs `pip install {profile.import_name}`")
    return Lookup()


def missing_backend(backend: str, variant: str) -> str | None:
    """The one line (exit 2) when the engine `backend` names is not in this environment, so that its kernel cannot
    even be looked at; None when it is, or when no install would let it run a `variant` call (`known_unavailable`)."""
    if backend == "builtin" or _other_api(backend, variant) is not None:
        return None
    return _lookup(backend).missing


def known_unavailable(backend: str, variant: str) -> str | None:
    """Why the engine `backend`, which is here, cannot run a `variant` call, when that is known up front (GDR313);
    None when it may run it.

    "builtin" is always available; an engine backend is unavailable for KDA when its KDA op has another API, and
    when the engine present holds no kernel (an installed sglang without the file). An engine that is not here at
    all is `missing_backend`'s."""
    if backend == "builtin":
        return None
    return _other_api(backend, variant) or _lookup(backend).unusable


def _other_api(backend: str, variant: str) -> str | None:
    return profile_for(backend).decode_of(variant).other_api
