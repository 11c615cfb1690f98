"""The environment variables that switch the engine plugins on (standard library only: read in every process of
an engine that has gdr-check installed).

- `GDR_CHECK_GUARD=raise|warn|record`: enter the runtime guard in each engine worker.
- `GDR_CHECK_CAPTURE=PATH`: record the packed-decode calls of each worker to PATH (`{rank}` and `{pid}` are
  filled in per worker, as `gdr_check.capture` does).
- `GDR_CHECK_REPORT=PATH`: with the guard, each worker's findings as a JSON report (`{rank}`, `{pid}`).

Unset or empty, each is off; with neither of the first two set, the plugins do nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

GUARD_VARIABLE = "GDR_CHECK_GUARD"
CAPTURE_VARIABLE = "GDR_CHECK_CAPTURE"
REPORT_VARIABLE = "GDR_CHECK_REPORT"
VARIABLES = (GUARD_VARIABLE, CAPTURE_VARIABLE, REPORT_VARIABLE)
GUARD_MODES = ("raise", "warn", "record")
_SHOWN = 200  # characters of a refused value quoted in a message


class SettingsError(ValueError):
    """A variable set to a value the plugins cannot use: one line naming the variable and the value."""


class PluginSettings(NamedTuple):
    """What the variables ask for: a guard mode, a capture path, a report path (each None when unset)."""

    guard: str | None = None
    capture: str | None = None
    report: str | None = None


def _quoted(value: str) -> str:
    shown = value if len(value) <= _SHOWN else value[:_SHOWN] + "..."
    return repr(shown)  # control characters escaped: the value goes to the engine's log


def read_settings(environ: Mapping[str, str]) -> PluginSettings | None:
    """The settings `environ` asks for, or None when neither the guard nor the capture is asked for (the
    plugins then do nothing). SettingsError for a guard mode that is not one of GUARD_MODES, or a report path
    without the guard."""
    guard = environ.get(GUARD_VARIABLE, "").strip()
    capture = environ.get(CAPTURE_VARIABLE, "")
    report = environ.get(REPORT_VARIABLE, "")
    if not guard and not capture:
        return None
    if guard and guard.lower() not in GUARD_MODES:
        raise SettingsError(f"{GUARD_VARIABLE}={_quoted(guard)} is not a guard mode: use one of "
                            f"{', '.join(GUARD_MODES)}")
    if report and not guard:
        raise SettingsError(f"{REPORT_VARIABLE} is set but {GUARD_VARIABLE} is not: the report holds the guard's "
                            f"findings; set {GUARD_VARIABLE}=warn (or record, raise) too")
    for name, template in ((CAPTURE_VARIABLE, capture), (REPORT_VARIABLE, report)):
        if template and not _placeholders_ok(template):
            raise SettingsError(f"{name}={_quoted(template)} is not a path template: its only placeholders may be "
                                f"{{rank}} and {{pid}} (a literal brace is written twice)")
    return PluginSettings(guard=guard.lower() or None, capture=capture or None, report=report or None)


def _placeholders_ok(template: str) -> bool:
    """Whether `template` formats with `rank` and `pid` alone (`str.format_map`'s rules: `{{` is a brace)."""
    try:
        template.format_map({"rank": 0, "pid": 0})
    except (KeyError, IndexError, ValueError, AttributeError, TypeError):
        return False
    return True


class ServedDeployment(NamedTuple):
    """What a worker serves, read from the engine's own config objects: the engine and its release
    ("vllm@0.33.0"), the model (path or repo id), the attention TP size and this worker's rank in it, the SSM
    state dtype the engine was told (None: the engine's default for the model)."""

    engine: str
    model: str | None
    tp: int
    rank: int
    state_dtype: str | None
