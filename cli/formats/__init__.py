"""One renderer per output format; each turns the run's results into text."""

from __future__ import annotations

from typing import Callable

from ..results import TargetResult

Renderer = Callable[[list[TargetResult]], str]


def renderer(fmt: str) -> Renderer:
    if fmt == "json":
        from .json import render
    else:
        from .full import render
    return render
