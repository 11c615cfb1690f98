"""The rich console every human report prints on, and one diagnostic in rustc style (`full` and the `call` and
`dry-run` sections)."""

from __future__ import annotations

import os
import sys
from typing import IO

from rich.console import Console

from ...report import Diagnostic
from ..escape import markup as escape

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
    console.print(f"[{STYLE[d.severity]}]{LABEL[d.severity]}[{d.code}][/]: [bold]{escape(d.message)}[/bold]"
                  f"{escape(suffix)}", soft_wrap=True)
    where = _location(d)
    if origin is not None and (d.location is None or d.location.file is None):
        where = f"{origin}, {where}" if where else origin
    if where:
        console.print(f"  [blue]-->[/blue] {escape(where)}", soft_wrap=True)
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
        console.print(f"   [blue]=[/blue] [bold]note[/bold]: {escape(note)}", soft_wrap=True)
    for fix in d.fixes:
        console.print(f"[bold green]help[/bold green]: {escape(fix)}", soft_wrap=True)
    console.print()


def make_console(stream: IO[str], color: bool) -> Console:
    return Console(file=stream, force_terminal=color, no_color=not color, highlight=False, width=120,
                   soft_wrap=False, emoji=False)


def use_color() -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    return bool(os.environ.get("FORCE_COLOR")) or sys.stdout.isatty()
