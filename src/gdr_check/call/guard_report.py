"""A served engine worker's guard report (the engine plugins' `GDR_CHECK_REPORT`, `"command": "guard"` in the
CLI's report schema), read back for `gdr-check call`: its findings as diagnostics, where it came from as notes.

The file is untrusted input: every field taken is checked (a rule code, a severity, text without control
characters and of bounded length), and a report that does not hold what the plugins write is one line naming
the file and the field.
"""

from __future__ import annotations

import re
from dataclasses import field
from typing import Any

from ..base.errors import printable
from ..base.records import dataclass
from ..base.report import Diagnostic

COMMAND = "guard"
_CODE = re.compile(r"^GDR[0-9]{3}$")
_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_SEVERITIES = ("error", "warning", "info")
_TEXT = 2000  # characters kept of a message, a fix or a note
_LIST = 50  # fixes or notes kept per diagnostic
MAX_DIAGNOSTICS = 4096  # as many as a guard keeps (`KEPT_DIAGNOSTICS`)


@dataclass(frozen=True)
class GuardReport:
    """The report's findings and a description of its worker."""

    diagnostics: list[Diagnostic] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    calls: int = 0  # the packed-decode calls the worker's guard checked


def is_guard_report(document: Any) -> bool:
    return isinstance(document, dict) and document.get("command") == COMMAND


def _texts(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"`{where}` must be a list of strings")
    return [printable(v, _TEXT) for v in value[:_LIST]]


def _diagnostic(data: Any, where: str) -> Diagnostic:
    if not isinstance(data, dict):
        raise ValueError(f"`{where}` must be an object")
    code, name, severity, message = (data.get(k) for k in ("code", "name", "severity", "message"))
    if not isinstance(code, str) or not _CODE.match(code):
        raise ValueError(f"`{where}.code` must be a rule code such as GDR241")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"`{where}.name` must be a rule name such as slot-indices-out-of-range")
    if severity not in _SEVERITIES:
        raise ValueError(f"`{where}.severity` must be one of {', '.join(_SEVERITIES)}")
    if not isinstance(message, str) or not message:
        raise ValueError(f"`{where}.message` must be a non-empty string")
    return Diagnostic(code=code, name=name, severity=severity, message=printable(message, _TEXT),
                      fixes=_texts(data.get("fixes"), f"{where}.fixes"),
                      notes=_texts(data.get("notes"), f"{where}.notes"))


def _count(data: dict[str, Any], key: str) -> int | None:
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def read_guard_report(document: dict[str, Any]) -> GuardReport:
    """The findings of a guard report (`is_guard_report`). ValueError names the first field that is wrong."""
    diagnostics = document.get("diagnostics")
    if not isinstance(diagnostics, list):
        raise ValueError("`diagnostics` must be a list")
    if len(diagnostics) > MAX_DIAGNOSTICS:
        raise ValueError(f"`diagnostics` holds {len(diagnostics)} entries; a guard report holds at most "
                         f"{MAX_DIAGNOSTICS}")
    found = [_diagnostic(d, f"diagnostics[{i}]") for i, d in enumerate(diagnostics)]
    source: dict[str, Any] = document["source"] if isinstance(document.get("source"), dict) else {}
    guard: dict[str, Any] = document["guard"] if isinstance(document.get("guard"), dict) else {}
    engine, model = source.get("engine"), source.get("model")
    tp, rank = _count(source, "tp"), _count(source, "rank")
    who = [f"{printable(engine, 80)}" if isinstance(engine, str) else "an engine",
           f"TP rank {rank} of {tp}" if rank is not None and tp is not None else None,
           f"model {printable(model, 200)}" if isinstance(model, str) else None]
    notes = [f"guard report of a served worker: {', '.join(part for part in who if part)}"]
    calls, mode = _count(guard, "calls"), guard.get("mode")
    if isinstance(mode, str):
        notes.append(f"the guard ran in {printable(mode, 20)} mode")
    if guard.get("compared_with_model") is False:
        notes.append("the worker could not read the model: calls were checked against the kernel contract and "
                     "the pool's slots only")
    for key, what in (("unlisted_faults", "fault(s) the device counted past the records it keeps"),
                      ("dropped_diagnostics", "diagnostic(s) past what the guard keeps")):
        count = _count(guard, key)
        if count:
            notes.append(f"{count} more {what}")
    return GuardReport(found, notes, calls or 0)
