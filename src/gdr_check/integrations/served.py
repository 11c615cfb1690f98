"""The guard or the capture of one engine worker, entered by an engine plugin (`hooks.enter`), kept until the
process ends.

- `GDR_CHECK_GUARD=warn|record`: the guard runs in its record mode; each distinct fault (rule, message, layer) is
  one line on the engine's logger (warn: WARNING, record: INFO), naming the worker's TP rank, the layer, the row
  and the slot. `raise`: the guard raises `GuardError` in the engine's call, as the engine's own argument checks
  raise, after the fault has been logged and reported.
- `GDR_CHECK_REPORT=PATH`: the worker's findings as a JSON document (`command: "guard"` in the CLI's report
  schema, src/gdr_check/schema/report-v1.json), written when the guard starts, at each new distinct fault (a
  worker may be killed without running exit handlers) and at exit. `gdr-check call` reads it.
- `GDR_CHECK_CAPTURE=PATH`: the calls, recorded by `gdr_check.capture`, written when `max_calls` calls have been
  recorded and at exit; with the guard on too, the calls as the engine made them (the capture wraps the guard).

At exit one summary line per worker. This module imports torch (the worker's own: an engine worker has it
imported already), as the guard's device check and the capture's tensors need it. A failure here never stops
the engine: what could not be done is said once and the worker is left as it was (the guard and the capture
restore every binding when their entry fails).
"""

from __future__ import annotations

import atexit
import json
import logging
import multiprocessing.util
import os
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ..base.files import write_whole
from ..base.identity import REPORT_SCHEMA_VERSION, tool_info
from ..base.limits import counted
from ..pipeline.capture import Capture
from ..pipeline.guard import Guard
from .variables import PluginSettings, ServedDeployment

REPORT_COMMAND = "guard"
_MAX_LOGGED = 1000  # distinct faults logged per worker; later ones are counted in the report and the summary


def _global_rank(deployment: ServedDeployment) -> int:
    """This process's rank in the default process group (unique per worker), else its TP rank."""
    try:
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            return int(torch.distributed.get_rank())
    except Exception:  # noqa: BLE001 - a half-initialised group: the TP rank
        pass
    return deployment.rank


def _filled(template: str, deployment: ServedDeployment) -> Path:
    return Path(template.format_map({"rank": _global_rank(deployment), "pid": os.getpid()}))


def _where(diagnostic: Any) -> str:
    return next((note for note in diagnostic.notes if note.startswith("in ")), "")


class _ServedGuard(Guard):
    """The guard, telling its worker's session of every diagnostic it acts on."""

    session: Session | None = None

    def _act(self, diagnostics: list[Any], unlisted: int = 0, earlier: bool = False) -> None:
        try:
            super()._act(diagnostics, unlisted, earlier)
        finally:
            if self.session is not None and (diagnostics or unlisted):
                self.session.found(diagnostics, unlisted)


class _ServedCapture(Capture):
    """The capture, writing its recording once `max_calls` calls are recorded (workers may end unannounced)."""

    on_full: Callable[[], None] | None = None

    def _record(self, site: Any, args: tuple[Any, ...], kwargs: dict[str, Any], frame: Any) -> None:
        super()._record(site, args, kwargs, frame)
        if self.on_full is not None and len(self._calls) >= self.max_calls:
            on_full, self.on_full = self.on_full, None
            on_full()


class Session:
    """One worker's guard and capture, its report, its log lines."""

    def __init__(self, settings: PluginSettings, deployment: ServedDeployment, logger: logging.Logger) -> None:
        self.settings = settings
        self.deployment = deployment
        self.logger = logger
        self.who = f"{deployment.engine}, TP rank {deployment.rank} of {deployment.tp}"
        self.guard: _ServedGuard | None = None
        self.capture: _ServedCapture | None = None
        self.report_path: Path | None = None
        self.model: str | None = None  # the model the guard compares calls with (None: the contract only)
        self._logged: set[tuple[str, str, str]] = set()
        self._unlisted = 0
        self._lock = threading.RLock()
        self.pid = os.getpid()
        self.closed = False

    # -- entering ----------------------------------------------------------------------------------------------
    def enter(self) -> None:
        if self.settings.guard is not None:
            self.guard = self._enter_guard(self.settings.guard)
        if self.settings.capture is not None:
            self.capture = self._enter_capture(self.settings.capture)

    def _say(self, caught: list[warnings.WarningMessage]) -> None:
        for warning in caught:
            self.logger.warning("gdr-check (%s): %s", self.who, warning.message)

    def _enter_guard(self, mode: str) -> _ServedGuard | None:
        deployment = self.deployment
        # The model, then without it (a checkpoint this process cannot read), then without the state dtype too
        # (one gdr-check does not know): each retry said once.
        attempts: list[tuple[str | None, str | None]] = []
        for attempt in ((deployment.model, deployment.state_dtype), (None, deployment.state_dtype), (None, None)):
            if attempt not in attempts:
                attempts.append(attempt)
        if self.settings.report is not None:  # (its template was checked with the variables)
            self.report_path = _filled(self.settings.report, deployment)
        problem = ""
        for model, state_dtype in attempts:
            if problem and deployment.model is not None and model is None and state_dtype == deployment.state_dtype:
                self.logger.warning("gdr-check guard (%s): cannot compare the calls with %s (%s); checking the "
                                    "kernel contract and the slots only", self.who, deployment.model, problem)
            elif problem:
                self.logger.warning("gdr-check guard (%s): cannot use the state dtype %s (%s); checking with the "
                                    "engine's default", self.who, deployment.state_dtype, problem)
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    guard = _ServedGuard(deployment.engine, model, tp=deployment.tp,
                                         mode="raise" if mode == "raise" else "record", state_dtype=state_dtype)
                    guard.session = self
                    guard.__enter__()
            except Exception as error:  # noqa: BLE001 - the engine starts whatever the guard finds here
                problem = f"{type(error).__name__}: {error}"
                continue
            self._say(caught)
            self.model = model
            bindings = sum(len(site.holders) for site in guard.sites)
            self.logger.info("gdr-check guard on (%s mode) in %s: %s, %s; %s of %s wrapped%s", mode, self.who,
                             f"model {model}" if model else "no model (contract and slots only)",
                             f"state dtype {state_dtype}" if state_dtype else "the engine's state dtype",
                             counted(bindings, "binding"), counted(len(guard.sites), "packed-decode function"),
                             f"; report: {self.report_path}" if self.report_path else "")
            self.write_report(guard=guard)
            return guard
        self.logger.warning("gdr-check guard (%s): not entered (%s); the worker runs unguarded", self.who, problem)
        return None

    def _enter_capture(self, template: str) -> _ServedCapture | None:
        engine = self.deployment.engine
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                # {rank} and {pid} filled here as for the report (the capture's own {rank} has no TP rank to
                # fall back on), what is left escaped for the capture's own filling.
                filled = str(_filled(template, self.deployment)).replace("{", "{{").replace("}", "}}")
                capture = _ServedCapture(filled, engine=engine)
                capture.on_full = self.write_capture
                capture.__enter__()
        except Exception as error:  # noqa: BLE001
            self.logger.warning("gdr-check capture (%s): not entered (%s: %s); the worker runs without it", self.who,
                                type(error).__name__, error)
            return None
        self._say(caught)
        self.logger.info("gdr-check capture on in %s: up to %s to %s", self.who,
                         counted(capture.max_calls, "packed-decode call"), capture._path())
        return capture

    # -- findings ----------------------------------------------------------------------------------------------
    def found(self, diagnostics: list[Any], unlisted: int) -> None:
        """Log each fault not logged before (one line each), and rewrite the report if anything was new. Never
        raises: it runs inside the engine's call."""
        try:
            with self._lock:
                new = False
                for d in diagnostics:
                    key = (d.code, d.message, _where(d))
                    if key in self._logged:
                        continue
                    new = True
                    if len(self._logged) < _MAX_LOGGED:
                        self._logged.add(key)
                        level = logging.WARNING if self.settings.guard != "record" else logging.INFO
                        where = f" [{key[2]}]" if key[2] else ""
                        self.logger.log(level, "gdr-check guard (%s): %s: %s%s", self.who, d.code, d.message, where)
                if unlisted:
                    new = True
                    self._unlisted += unlisted
                    self.logger.warning("gdr-check guard (%s): %s that the fault buffer no longer held", self.who,
                                        counted(unlisted, "more fault"))
                if new and self.report_path is not None:
                    self.write_report()
        except Exception:  # noqa: BLE001 - never into the engine's call
            return

    def document(self, guard: Guard) -> dict[str, Any]:
        """The report: the CLI's JSON schema (report-v1.json), `command: "guard"`."""
        diagnostics = [d.to_dict() for d in guard.diagnostics]
        counts = {severity: sum(1 for d in guard.diagnostics if d.severity == severity)
                  for severity in ("error", "warning", "info")}
        deployment = self.deployment
        return {
            "schema_version": REPORT_SCHEMA_VERSION,
            "tool": tool_info(),
            "command": REPORT_COMMAND,
            "source": {"engine": deployment.engine, "model": deployment.model, "tp": deployment.tp,
                       "rank": deployment.rank, "pid": os.getpid()},
            "guard": {"mode": self.settings.guard, "compared_with_model": self.model is not None,
                      "state_dtype": deployment.state_dtype, "calls": guard.calls,
                      "functions": sorted(h for site in guard.sites for h in site.holders),
                      "unlisted_faults": guard.unlisted_faults, "dropped_diagnostics": guard.dropped_diagnostics},
            "diagnostics": diagnostics,
            "summary": counts,
        }

    def write_report(self, guard: Guard | None = None) -> None:
        guard = guard or self.guard
        if guard is None or self.report_path is None:
            return
        try:
            text = json.dumps(self.document(guard), indent=1) + "\n"
            write_whole(self.report_path, text.encode("utf-8"))
        except Exception as error:  # noqa: BLE001
            self.logger.warning("gdr-check guard (%s): cannot write the report to %s (%s); findings go to the log "
                                "only", self.who, self.report_path, error)
            self.report_path = None

    def write_capture(self) -> None:
        capture = self.capture
        if capture is None:
            return
        try:
            capture.write()
        except Exception as error:  # noqa: BLE001
            self.logger.warning("gdr-check capture (%s): %s", self.who, error)

    # -- exit --------------------------------------------------------------------------------------------------
    def close(self) -> None:
        """At exit: faults already flagged on the device, the report and the recording written, one summary.
        Once per process, whichever exit hook runs it first."""
        if self.closed or self.pid != os.getpid():
            return
        self.closed = True
        guard, capture = self.guard, self.capture
        if guard is not None:
            try:
                guard.poll()  # (flagged faults only: no wait on a device that may be gone)
            except Exception:  # noqa: BLE001 - raise mode: acted on, and reported, already
                pass
            self.write_report()
            errors = sum(1 for d in guard.diagnostics if d.severity == "error")
            self.logger.info("gdr-check guard (%s): %s checked, %s%s", self.who,
                             counted(guard.calls, "packed-decode call"), counted(errors + self._unlisted, "fault"),
                             f"; report: {self.report_path}" if self.report_path else "")
        if capture is not None:
            self.write_capture()
            self.logger.info("gdr-check capture (%s): %s recorded to %s", self.who,
                             counted(len(capture.calls), "call"), capture.path or capture._path())


_SESSION: Session | None = None
_START = threading.Lock()


def start(settings: PluginSettings, deployment: ServedDeployment, logger: logging.Logger) -> Session | None:
    """Enter what `settings` asks for in this worker, once per process (a forked worker starts its own). Never
    raises."""
    global _SESSION
    with _START:
        if _SESSION is not None and _SESSION.pid == os.getpid():
            return _SESSION
        try:
            session = Session(settings, deployment, logger)
            session.enter()
        except Exception as error:  # noqa: BLE001
            logger.warning("gdr-check: cannot start in %s (%s: %s); the worker runs without the guard",
                           deployment.engine, type(error).__name__, error)
            return None
        if session.guard is None and session.capture is None:
            return None
        _SESSION = session
        # At exit: `atexit` for a spawned worker or the main process; multiprocessing's finalizers for a forked
        # worker, which leaves through `os._exit` (no atexit) after running them, on SIGTERM's SystemExit too.
        atexit.register(session.close)
        multiprocessing.util.Finalize(None, session.close, exitpriority=0)
        return session


def current() -> Session | None:
    """This process's session, if a plugin started one."""
    return _SESSION
