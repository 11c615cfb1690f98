"""Entry point: `gdr-check PATH...` (the default `check` command), `explain`, `call`, `dry-run`.

`main()` maps every failure to one line and exit code 2 (never a traceback), so exit code 1 always means
"problems found". GDR_CHECK_DEBUG=1 re-raises for the full traceback.
"""

from __future__ import annotations

import os
import sys
from typing import Sequence

import typer
import typer.core

try:  # typer >= 0.20 vendors click
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - older typer uses click itself
    from click import exceptions as click_exceptions

from .output import Output

HELP_OPTIONS = ("--help", "-h", "--version")


class DefaultCommandGroup(typer.core.TyperGroup):
    """Runs `check` when the first argument is not a command: `gdr-check model.safetensors --tp 4`."""

    def parse_args(self, ctx, args: list[str]) -> list[str]:  # type: ignore[override]
        if not args or (args[0] not in self.commands and args[0] not in HELP_OPTIONS):
            args = ["check", *args]
        return super().parse_args(ctx, args)


app = typer.Typer(
    cls=DefaultCommandGroup,
    name="gdr-check",
    help="Shape diagnostics for the GDN/KDA packed recurrent decode kernels (sglang, vLLM).",
    add_completion=False,
    pretty_exceptions_enable=False,
    no_args_is_help=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version_callback(value: bool) -> None:
    if value:
        from .. import __version__

        typer.echo(f"gdr-check {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version_callback, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """gdr-check: every precondition of the packed-decode kernels, before deployment, without a GPU."""


def _register_commands() -> None:
    # Each module adds its command to `app`; imported here so `--help` lists them all.
    from . import explain  # noqa: F401

    for optional in ("check", "call", "dryrun"):
        try:
            __import__(f"{__package__}.{optional}")
        except ModuleNotFoundError as error:
            if error.name != f"{__package__}.{optional}":
                raise


_register_commands()


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    output = Output.from_argv(argv)
    try:
        result = app(args=argv, prog_name="gdr-check", standalone_mode=False)
        return int(result or 0)
    except typer.Exit as stop:
        return stop.exit_code
    except typer.Abort:
        output.fatal("usage", "interrupted")
    except click_exceptions.ClickException as error:
        output.fatal("usage", error.format_message().replace("\n", " "))
    except Exception as error:  # noqa: BLE001 - the one place that turns failures into exit code 2
        if os.environ.get("GDR_CHECK_DEBUG"):
            raise
        code = getattr(error, "code", None)
        if isinstance(code, str) and code:
            output.fatal(code, str(error), path=getattr(error, "path", None))
        else:
            output.fatal("internal", f"internal error: {type(error).__name__}: {error}",
                         hint="set GDR_CHECK_DEBUG=1 for the full traceback")
    return 2


def run() -> None:
    sys.exit(main())
