"""`gdr-check hook install|uninstall|status`: the opt-in start-up hook for engine releases without a plugin
loader (docs/production-guard.md).

`install` writes one `.pth` file into the environment's site-packages (or `--site-dir`); Python runs its one
line at every interpreter start-up, and that line imports `gdr_check.integrations.startup_hook` only when
GDR_CHECK_GUARD or GDR_CHECK_CAPTURE is set (and gdr-check is still installed). `uninstall` removes it;
`status` says whether it is there, current, and whether the variables are set in this shell.
"""

from __future__ import annotations

import os
import sysconfig
from pathlib import Path

import typer

from ..base.errors import InputError
from ..base.files import write_whole
from .main import app

PTH_NAME = "gdr_check_startup_hook.pth"
HOOK_MODULE = "gdr_check.integrations.startup_hook"
VARIABLES = ("GDR_CHECK_GUARD", "GDR_CHECK_CAPTURE")
# One line (site.py executes a `.pth` line that starts with `import`): the variables first, nothing imported
# without them; then gdr-check only if it is still installed, so a hook left behind by an uninstall stays silent.
PTH_LINE = ("import os; (os.environ.get('GDR_CHECK_GUARD') or os.environ.get('GDR_CHECK_CAPTURE')) and "
            f"__import__('importlib.util').util.find_spec('gdr_check') and __import__('{HOOK_MODULE}')\n")
ACTIONS = ("install", "uninstall", "status")


class HookError(InputError):
    code = "hook"


def _site_dir(given: Path | None) -> Path:
    folder = given if given is not None else Path(sysconfig.get_paths()["purelib"])
    if not folder.is_dir():
        raise HookError(f"{folder}: not a folder (the site-packages folder the hook goes into)")
    return folder


@app.command("hook")
def hook_command(
    action: str = typer.Argument(..., metavar="install|uninstall|status",
                                 help="Write, remove, or show the start-up hook's .pth file."),
    site_dir: Path | None = typer.Option(None, "--site-dir", metavar="DIR",
                                         help="The site-packages folder (default: this environment's)."),
) -> int:
    """The opt-in start-up hook: the engine plugins in every Python process of this environment, for engine
    releases without a plugin loader; it does nothing unless GDR_CHECK_GUARD or GDR_CHECK_CAPTURE is set."""
    if action not in ACTIONS:
        raise HookError(f"unknown hook action {action!r}: use one of {', '.join(ACTIONS)}")
    path = _site_dir(site_dir) / PTH_NAME
    if action == "install":
        try:
            write_whole(path, PTH_LINE.encode("utf-8"))
        except OSError as error:
            raise HookError(f"cannot write {path}: {error.strerror or error}") from None
        typer.echo(f"installed {path}: the engine plugins load at every Python start-up in this environment "
                   f"when {' or '.join(VARIABLES)} is set")
        return 0
    present = path.is_file()
    if action == "uninstall":
        if not present:
            typer.echo(f"not installed: {path} does not exist")
            return 0
        try:
            path.unlink()
        except OSError as error:
            raise HookError(f"cannot remove {path}: {error.strerror or error}") from None
        typer.echo(f"removed {path}")
        return 0
    if not present:
        typer.echo(f"not installed ({path} does not exist)")
    else:
        current = path.read_text(encoding="utf-8", errors="replace") == PTH_LINE
        typer.echo(f"installed: {path}" + ("" if current else " (written by another gdr-check version: run "
                                                              "`gdr-check hook install` again)"))
    chosen = [f"{name}={os.environ[name]!r}" for name in VARIABLES if os.environ.get(name)]
    typer.echo(f"variables: {', '.join(chosen)}" if chosen else f"variables: none of {', '.join(VARIABLES)} is set "
               "(the hook does nothing)")
    return 0
