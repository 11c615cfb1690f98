"""Entry point: `gdr-check PATH...` (the default `check` command), `explain`, `call`, `dry-run`.

`main()` maps every failure to one line and exit code 2 (never a traceback), so exit code 1 always means
"problems found". GDR_CHECK_DEBUG=1 re-raises for the full traceback.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import typer
import typer.core
import typer.main

from ..base.errors import InputError
from ..base.identity import VERSION
from .coercion import ClickContext, click_exceptions, install_plain_coercion, untyped_flags
from .output import GuardedStdout, Output, protect_inputs
from .write_errors import ReportWriteError

HELP_OPTIONS = ("--help", "-h", "--version")
INTERRUPTED = 130  # the exit code of a run stopped by Ctrl-C (SIGINT), 128 + 2, as shells and ruff give it
TERMINATED = 143  # ... and by SIGTERM, 128 + 15


# Every command, in the order `--help` lists them: name -> the module of this package that defines it. A
# module is imported only when its command can run (see `commands_for`), so `gdr-check ckpt --tp 4` does not
# load the explain, call and dry-run commands and what they import.
COMMANDS: dict[str, str] = {"explain": "explain", "check": "check", "call": "call", "dry-run": "dryrun",
                            "launch": "launch", "hook": "hook"}
DEFAULT_COMMAND = "check"

CommandFunction = TypeVar("CommandFunction", bound=Callable[..., Any])


class Terminated(BaseException):
    """SIGTERM during a run, raised where the run is, so that what it started (a dry-run's child) is stopped on
    the way out and no report is written. A BaseException: no `except Exception` on the way takes it for a
    failure of its own."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated


class Interrupted(Exception):
    """Ctrl-C inside typer, which would answer it with a silent exit 130: carried out to `_run` instead."""


class DefaultCommandGroup(typer.core.TyperGroup):
    """Runs `check` when the first argument is not a command: `gdr-check model.safetensors --tp 4`."""

    # typer turns a KeyboardInterrupt into exit 130 without a word: it is passed on as `Interrupted`, for one line.
    def make_context(self, *args: Any, **kwargs: Any) -> ClickContext:
        try:
            return super().make_context(*args, **kwargs)
        except KeyboardInterrupt:
            raise Interrupted from None

    def invoke(self, ctx: ClickContext) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise Interrupted from None

    def parse_args(self, ctx: ClickContext, args: list[str]) -> list[str]:
        # Typer's own value conversion would import pydantic for the first option: see `.coercion`.
        params = self.get_params(ctx)
        install_plain_coercion(params)
        untyped_flags(params)
        if not args or (args[0] not in self.commands and args[0] not in HELP_OPTIONS):
            args = ["check", *args]
        return super().parse_args(ctx, args)


def commands_for(args: Sequence[str]) -> tuple[str, ...]:
    """The commands an invocation can reach: the command named first, all of them for the root's own
    options (`--help` lists them), else the default command (`gdr-check ckpt --tp 4`)."""
    if args and args[0] in COMMANDS:
        return (args[0],)
    if args and args[0] in HELP_OPTIONS:
        return tuple(COMMANDS)
    return (DEFAULT_COMMAND,)


class _Command(typer.core.TyperCommand):
    """A typer command whose options are converted without pydantic where typer's result is known: see
    `.coercion`. The parameters (and the help option, made for the context) are complete only here."""

    def parse_args(self, ctx: ClickContext, args: list[str]) -> list[str]:
        params = self.get_params(ctx)
        install_plain_coercion(params)
        untyped_flags(params)
        return super().parse_args(ctx, args)


class _Typer(typer.Typer):
    """A Typer app whose commands are `_Command`s, and that imports the modules of the commands an invocation
    can reach just before typer builds its command group from the registered commands."""

    def command(self, name: str | None = None, *, cls: type[typer.core.TyperCommand] | None = None,
                **kwargs: Any) -> Callable[[CommandFunction], CommandFunction]:
        return super().command(name, cls=cls or _Command, **kwargs)

    _built: tuple[tuple[str | None, ...], Any] | None = None  # (the registered commands, their click group)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        argv = kwargs["args"] if "args" in kwargs else (args[0] if args else None)
        _register_commands(commands_for(list(sys.argv[1:] if argv is None else argv)))
        # Typer builds the click group from the commands' signatures on every call (~4 ms, most of an in-process
        # run: tests, tools that call `main` repeatedly); it depends only on the commands registered, so it is
        # built again only when a call has registered another. (What `Typer.__call__` adds around the group, its
        # exception hook, changes nothing with pretty exceptions off.)
        registered = tuple(info.name for info in self.registered_commands)
        if self._built is None or self._built[0] != registered:
            self._built = (registered, typer.main.get_command(self))
        return self._built[1](*args, **kwargs)


app = _Typer(
    cls=DefaultCommandGroup,
    name="gdr-check",
    help=("Shape diagnostics for the GDN/KDA packed recurrent decode kernels (sglang, vLLM).\n\n"
          "`check` is the default command: `gdr-check TARGET --tp 4` is `gdr-check check TARGET --tp 4`, and its "
          "options (`--list-models`, `--show-settings`, ...) work without naming it. `gdr-check check -h` lists "
          "them."),
    add_completion=False,
    pretty_exceptions_enable=False,
    no_args_is_help=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"gdr-check {VERSION}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version_callback, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """gdr-check: every precondition of the packed-decode kernels, before deployment, without a GPU."""


def _register_commands(names: Sequence[str] = tuple(COMMANDS)) -> None:
    """Import the modules of the commands `names` (each adds its command to `app`), and keep the commands
    registered so far in `COMMANDS` order, whatever order they were imported in."""
    for name in names:
        module = f"{__package__}.{COMMANDS[name]}"
        if module in sys.modules:
            continue
        try:
            __import__(module)
        except ModuleNotFoundError as error:
            if name == "explain" or error.name != module:
                raise
    order = list(COMMANDS)
    app.registered_commands.sort(key=lambda info: order.index(info.name) if info.name in order else len(order))


def main(argv: Sequence[str] | None = None) -> int:
    # The cyclic collector is paused for the whole run, here only (the library leaves the caller's collector
    # alone). Reading a checkpoint builds hundreds of thousands of small dicts, lists and tuples (a 41-shard MoE
    # checkpoint has ~76k header entries; the description as many again) that stay alive and form no cycles.
    # With the collector on, every 700 new objects start a collection and the older generations are walked
    # again and again as they grow: on that checkpoint the collector took about as long as the reading. Reference
    # counting still frees everything as usual; the imports on the way are not walked for nothing either.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _main(argv)
    finally:
        if collecting:
            gc.enable()


def before_exit() -> None:
    """Called by the console script once the run is over, just before the process exits. On the way out the
    interpreter runs one last cyclic collection over every object still alive: after a large checkpoint, hundreds
    of thousands that reference counting frees anyway (~40 ms on the 41-shard 80B checkpoint, docs/performance.md).
    Frozen, they are left out of it; exit handlers and the flushing of standard output and files run as before.
    Not after a command that loaded triton: its bindings (nanobind) report every object of theirs that exit did
    not finalize as a leak, on stderr."""
    if "triton" not in sys.modules:
        gc.freeze()


def _main(argv: Sequence[str] | None) -> int:
    # Whoever writes to stdout during the run (the report, typer's help, click's version), a stdout that cannot
    # take it is one error line and exit 2 (`GuardedStdout`); the stream is given back afterwards.
    guarded = GuardedStdout(sys.stdout)
    sys.stdout = guarded  # a stand-in that has the stream's attributes
    try:
        return _run(argv)
    finally:
        sys.stdout = guarded.give_back()


def _run(argv: Sequence[str] | None) -> int:
    try:  # (only the main thread may set a handler: a run in another thread keeps the default)
        previous = signal.signal(signal.SIGTERM, _terminate)
    except ValueError:
        return _run_command(argv)
    try:
        return _run_command(argv)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run_command(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    output = Output.from_argv(argv)
    protect_inputs(argv)  # what the run reads, which its report must never replace
    try:
        result = app(args=argv, prog_name="gdr-check", standalone_mode=False)
        return int(result or 0)
    except typer.Exit as stop:
        return stop.exit_code
    except typer.Abort:
        output.fatal("usage", "interrupted")
    except (KeyboardInterrupt, Interrupted):  # Ctrl-C: one line, no partial report, the shell's code for SIGINT
        output.error_line("interrupted")
        return INTERRUPTED
    except Terminated:
        output.error_line("terminated")
        return TERMINATED
    except click_exceptions.ClickException as error:
        output.fatal("usage", error.format_message().replace("\n", " "))
    except ReportWriteError as error:  # the record of the failure could not go there either
        output.error_line(str(error))
    except InputError as error:  # bad input: one line naming it, exit 2
        if os.environ.get("GDR_CHECK_DEBUG"):
            raise
        output.fatal(error.code, str(error), path=error.path)
    except Exception as error:  # the one place that turns any other failure into exit 2 (raised under DEBUG)
        if os.environ.get("GDR_CHECK_DEBUG"):
            raise
        output.fatal("internal", f"internal error: {type(error).__name__}: {error}",
                     hint="set GDR_CHECK_DEBUG=1 for the full traceback")
    return 2


def run() -> None:
    sys.exit(main())  # (the console script enters through `gdr_check.cli.entry.run`, which also covers imports)
