"""The dry-run: the deployment's exact per-rank call, run on synthetic tensors in a child process.

Torch-free modules (safe on the metadata path): `api` (`dry_run`, `dry_run_check`), `plan` (what to run),
`geometry` (launch sizes, interpreter reductions), `tolerances`, `launch` (the child process) and `diagnose`
(results -> GDR3xx diagnostics). The child (`python -m gdr_check.pipeline.dryrun.child`) imports torch and triton and
runs `session`, which uses `tensors`, `kernels`, `verify` and `timing`.
"""

from ...base.lazy import lazy_dir, lazy_getattr

_EXPORTS = {
    "dry_run": ".driver",
    "dry_run_check": ".driver",
    "DryRunResult": ".driver",
    "DryRunEnvironmentError": ".driver",
    "DryRunPlan": ".plan",
    "launch_geometry": ".geometry",
}

# Written out so that type checkers and linters see the public names; tests/test_exports.py keeps it
# equal to the keys of `_EXPORTS`.
__all__ = [
    "DryRunEnvironmentError", "DryRunPlan", "DryRunResult", "dry_run", "dry_run_check", "launch_geometry",
]

__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())
__dir__ = lazy_dir(_EXPORTS, globals())
