"""The rich console every human report prints on, and one diagnostic in rustc style (`full` and the `call` and
`dry-run` sections)."""

from __future__ import annotations

from typing import IO, cast

from rich.console import Console
from rich.markup import escape as escape_markup

from ...base.report import Diagnostic
from ..escape import text


def markup(value: object) -> str:
    """Data for a rich markup string: made safe (`escape.text`), then rich's own markup escaped. (Here, beside
    the console, so that the formats without one never import rich.)"""
    return escape_markup(text(value))


STYLE = {"error": "bold red", "warning": "bold yellow", "info": "bold cyan"}
LABEL = {"error": "error", "warning": "warning", "info": "info"}


def _location(d: Diagnostic) -> str | None:
    loc = d.location
    if loc is None:
        return None
    if loc.file is None:
        return f"kernel argument `{loc.argument}`" if loc.argument else None
    text = loc.file + (f":{loc.line}:{loc.column or 1}" if loc.line is not None else "")
    if loc.json_key:
        text += f"  `{loc.json_key}`"
    elif loc.tensor:
        text += f"  `{loc.tensor}`"
    return text


def render_diagnostic(console: Console, d: Diagnostic, origin: str | None = None, suffix: str = "") -> None:
    """One rustc-style diagnostic; `origin` names the checkpoint for a diagnostic without a file when no
    header above says which one (`--quiet`), `suffix` the TP size in a matrix."""
    console.print(f"[{STYLE[d.severity]}]{LABEL[d.severity]}[{d.code}][/]: [bold]{markup(d.message)}[/bold]"
                  f"{markup(suffix)}", soft_wrap=True)
    where = _location(d)
    if origin is not None and (d.location is None or d.location.file is None):
        where = f"{origin}, {where}" if where else origin
    if where:
        console.print(f"  [blue]-->[/blue] {markup(where)}", soft_wrap=True)
    notes = list(d.notes)
    location = d.location
    tensor = location.tensor if location is not None else None
    if tensor and location is not None and location.shard and not any(f"`{tensor}`" in note for note in notes):
        notes.append(f"tensor `{tensor}` in {location.shard}")
    if d.wrapper and d.severity == "error":
        notes.append("the reference wrapper raises ValueError with this message")
    dims = " ".join(f"{k}={v}" for k, v in d.bindings.items() if k in ("B", "H", "HV", "K", "V", "S", "tp"))
    if dims:
        # Kernel-call rules see one rank's tensors; the others see the whole model.
        notes.append(f"bound dims{' (per rank)' if d.code.startswith('GDR2') else ''}: {dims}")
    if notes:
        console.print("   [blue]|[/blue]")
    for note in notes:
        console.print(f"   [blue]=[/blue] [bold]note[/bold]: {markup(note)}", soft_wrap=True)
    for fix in d.fixes:
        console.print(f"[bold green]help[/bold green]: {markup(fix)}", soft_wrap=True)
    console.print()


def make_console(stream: IO[str], color: bool, ascii_only: bool = False) -> Console:
    """The human renderers' console, writing into `stream`; `ascii_only`: tables drawn with ASCII boxes."""
    file = cast("IO[str]", _AsciiStream(stream)) if ascii_only else stream
    return Console(file=file, force_terminal=color, no_color=not color, highlight=False, width=120,
                   soft_wrap=False, emoji=False)


class _AsciiStream:
    """`stream`, presented to rich as an ASCII stream: rich then draws its tables' boxes in ASCII (+, -, |). The
    text in the tables is left as it is (what stdout cannot encode is escaped on the way out)."""

    encoding = "ascii"

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return False
