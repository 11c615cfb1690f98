"""`check_recording`: recorded kernel calls, each checked with the contract and, given a model, compared with the
call that model needs at its deployment (`gdr-check call`). One `Run`, as every command returns."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import field, replace
from typing import Any, ClassVar

from ..base.errors import InputError, described
from ..base.limits import counted
from ..base.records import dataclass
from ..base.report import Diagnostic, KeyLocation, Location
from ..call.recording import RecordedCall, Recording, load_recording
from ..checks.compare import Comparison, ModelGeometry, compare_call, contract_arguments
from ..checks.contract import run_contract
from ..engines.profiles import DEFAULT_ENGINE, installed_engine, profile_for, substitution_note
from ..models.adapters import attention_head_dim
from ..sources.key_locator import KeyLocator
from .library import deployment_of, selected_diagnostics, without_linear_layers
from .model_check import ModelCheck, check_model
from .results import FAILING_DEFAULT, Run, TargetResult
from .selection import Selection


class EmptyRecording(InputError):
    """A recording without calls: nothing was checked, which must not pass a CI gate (exit 2)."""

    code = "recording"

    def __init__(self, recording: Recording) -> None:
        seen, max_calls = recording.calls_seen, recording.max_calls
        # Say only what the file shows: a capture keeps none of the calls it saw when its `max_calls` is 0 or
        # when it could describe none of them (`unrecorded`); any other empty file was not left so by a capture.
        if not seen:
            why = " (was the kernel called inside `gdr_check.capture()`?)"
        elif max_calls == 0:
            why = f": the capture saw {counted(seen, 'call')} and kept none (its `max_calls` was 0)"
        elif recording.unrecorded_reason is not None:
            why = (f": the capture saw {counted(seen, 'call')} and could describe none of them "
                   f"(`unrecorded`: {recording.unrecorded_reason})")
        else:
            held = (f"`calls_seen` is {seen} and `max_calls` is {max_calls}, but `calls` is empty"
                    if max_calls is not None else
                    f"`calls_seen` is {seen} but `calls` is empty, and there is no `max_calls` to say why")
            why = f": {held}: the file is inconsistent (edited after the capture wrote it?)"
        super().__init__(f"{recording.path}: no recorded calls{why}")
        self.path = recording.path


class CallIndexError(InputError, TypeError):
    """`index` that is no whole number (a string, a bool, a float): exit 2."""

    code = "usage"


class NoSuchCall(InputError):
    """`--index` names a call the recording does not hold (exit 2)."""

    code = "usage"

    def __init__(self, path: str, count: int, index: int) -> None:
        held = "one call (index 0)" if count == 1 else f"{count} calls (indices 0-{count - 1})"
        super().__init__(f"--index: {path} holds {held}; there is no call {index}")
        self.path = path


# -- call ------------------------------------------------------------------------------------------------------------
@dataclass
class CheckedCall:
    recorded: RecordedCall
    engine: str
    diagnostics: list[Diagnostic]
    comparison: Comparison | None = None  # when a model was given
    engine_reason: str = "default"  # why `engine` (profiles.ENGINE_REASONS: flag, argument, recorded, config, ...)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = self.recorded.to_dict()
        data["engine"] = self.engine
        data["engine_profile"] = profile_for(self.engine).spec
        data["engine_profile_reason"] = self.engine_reason
        data["comparison"] = None if self.comparison is None else [r.to_dict() for r in self.comparison.rows]
        data["diagnostics"] = [d.to_dict() for d in self.diagnostics]
        return data


@dataclass
class CallRun:
    """The record of one `call` run: the recording, the model compared with, every checked call."""

    recording: Recording
    target: str | None = None
    tp: int = 1
    models: dict[str, ModelCheck] = field(default_factory=dict)  # by engine
    model_diagnostics: list[Diagnostic] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    calls: list[CheckedCall] = field(default_factory=list)

    def all_diagnostics(self) -> list[Diagnostic]:
        return self.model_diagnostics + [d for call in self.calls for d in call.diagnostics]

    @property
    def exit_code(self) -> int:
        return 1 if any(d.severity == "error" for d in self.all_diagnostics()) else 0

    def to_dict(self) -> dict[str, Any]:
        """The call record of the JSON document (`command: "call"`); fields are only ever added."""
        model = None
        if self.target is not None:
            model = {
                "target": self.target, "tp": self.tp,
                "source": next(iter(self.models.values())).source_dict() if self.models else None,
                "expected": {engine: (check.call.to_dict() if check.call is not None else None)
                             for engine, check in self.models.items()},
                "diagnostics": [d.to_dict() for d in self.model_diagnostics],
            }
        diagnostics = self.all_diagnostics()
        return {
            "source": self.recording.path,
            "recording": {"path": self.recording.path, "calls": len(self.recording.calls),
                          "calls_seen": self.recording.calls_seen, "calls_dropped": self.recording.calls_dropped},
            "model": model,
            "notes": list(self.notes),
            "calls": [call.to_dict() for call in self.calls],
            "summary": {"calls": len(self.calls), "errors": sum(d.severity == "error" for d in diagnostics),
                        "warnings": sum(d.severity == "warning" for d in diagnostics),
                        "infos": sum(d.severity == "info" for d in diagnostics)},
            "exit_code": self.exit_code,
        }


@dataclass
class CallResult(TargetResult):
    """A recording's calls (or a served worker's guard report) checked: the subject of `gdr-check call`."""

    kind: ClassVar[str] = "call"
    record: CallRun = field(kw_only=True)

    def fallback_file(self) -> str | None:
        """The recording: its diagnostics are about its calls, even where a model was compared."""
        return self.error.path if self.error is not None else self.path

    def document(self) -> dict[str, Any]:
        return self.unreadable_document() if self.error is not None else self.record_document(self.record.to_dict())


class CallModelError(InputError):
    """`call --model` names a model with no GDN or KDA layer: no expected call to compare with (exit 2)."""

    code = "usage"


def _model_for(run: CallRun, target: str, engine: str, state_dtype: str | None) -> ModelCheck:
    """The model check for `engine` (built once per engine); its errors are reported once, at the top."""
    if engine not in run.models:
        deployment = deployment_of(tp=run.tp, engine=engine, state_dtype=state_dtype)
        check = check_model(target, deployment)
        run.models[engine] = check
        run.notes.extend(note for note in check.source_dict()["notes"] if note not in run.notes)
        without = without_linear_layers(check)
        if without is not None:  # the recorded calls cannot be this model's: there is nothing to compare them with
            raise CallModelError(f"{target}: {without} has no GDN or KDA layers, so it makes no packed-decode call "
                                 f"to compare the recorded calls with")
        blocking = [d for d in check.report if d.severity == "error" and d.code < "GDR2"]
        run.model_diagnostics.extend(d for d in blocking if d not in run.model_diagnostics)
        if check.call is None:
            run.notes.append(f"no expected call for `{run.target}` at tp={run.tp}: the comparison is skipped")
    return run.models[engine]


# Wrapper checks that test two arguments at once but point at the first.
_PAIRED = {"a": ("a", "b"), "A_log": ("A_log", "dt_bias")}


def _defer_to_comparison(diagnostic: Diagnostic, comparison: Comparison, target: str) -> Diagnostic:
    """A contract error on an argument the comparison explains keeps its message (what the wrapper raises)
    but not its fixes: they guess the cause without the model, and the comparison names it with the model."""
    argument = diagnostic.location.argument if diagnostic.location is not None else None
    if diagnostic.severity != "error" or argument is None:
        return diagnostic
    codes: list[str] = []
    for name in _PAIRED.get(argument, (argument,)):
        codes += [code for code in comparison.causes.get(name, []) if code not in codes]
    if not codes:
        return diagnostic
    note = f"the comparison with `{target}` names the cause: see {', '.join(codes)}"
    return replace(diagnostic, fixes=[], notes=[*diagnostic.notes, note])


def check_call(recorded: RecordedCall, engine: str, run: CallRun, state_dtype: str | None) -> CheckedCall:
    diagnostics = list(run_contract(recorded.call, engine))
    comparison = None
    if run.target is not None:
        check = _model_for(run, run.target, engine, state_dtype)
        if check.call is not None and check.model is not None:
            head_dim = attention_head_dim(getattr(check.checkpoint, "config", None))
            geometry = ModelGeometry.from_model(check.model, run.target, head_dim)
            comparison = compare_call(
                recorded.call, check.call, geometry, tp=run.tp, engine=engine,
                state_dtype_reason=check.settings.state_dtype_reason if check.settings else None,
                contract_flagged=contract_arguments(diagnostics),
            )
            replaced = comparison.supersedes
            diagnostics = [_defer_to_comparison(d, comparison, run.target) for d in diagnostics
                           if d.code not in replaced] + comparison.diagnostics
    return CheckedCall(recorded, engine, diagnostics, comparison)


_REASON_WORDS = {
    "flag": "--engine {engine}",
    "argument": "engine={engine!r}",
    "recorded": "the engine the capture recorded ({engine})",
    "config": "`engine = {engine!r}` in [tool.gdr-check]",
    "installed": "{engine} is installed in this Python environment (read from its package metadata); `--engine` "
                 "checks for another",
    "default": "gdr-check's default (no --engine, no engine recorded or configured, none installed)",
}


def call_engine(recorded: RecordedCall, engine: str | None, engine_reason: str | None,
                config_engine: str | None) -> tuple[str, str]:
    """The engine a recorded call is checked for, and why (profiles.ENGINE_REASONS): the one given (`--engine`:
    "flag"; the library's `engine=`: "argument"), else the one its recording names, else `engine` in
    [tool.gdr-check], else the installed one, else the default."""
    if engine is not None:
        return engine, engine_reason or "argument"
    if recorded.engine is not None:
        return recorded.engine, "recorded"
    if config_engine is not None:
        return config_engine, "config"
    installed = installed_engine()
    return (installed, "installed") if installed is not None else (DEFAULT_ENGINE, "default")


def engine_note(engine: str, reason: str) -> str:
    """The note a `call` run prints for the profile its calls were checked for."""
    note = f"engine profile {profile_for(engine).spec}: {_REASON_WORDS[reason].format(engine=engine)}"
    substituted = substitution_note(engine)
    return note if substituted is None else f"{note}; {substituted}"


def check_recording(path: str, *, target: str | None = None, tp: int = 1, engine: str | None = None,
                    state_dtype: str | None = None, index: int | None = None,
                    selection: Selection | None = None, failing: tuple[str, ...] = FAILING_DEFAULT,
                    exit_zero: bool = False, engine_reason: str | None = None,
                    config_engine: str | None = None) -> Run:
    """Check every call of a recording made by `gdr_check.capture()` (or the one at `index`) against the contract
    and, with `target`, compare it with the call the engine makes for that model at `tp`. One result, whose
    `details` is the `CallRun` (the calls, the comparison, the notes); `selection` filters every diagnostic.
    Each call is checked for `engine` (its reason `engine_reason`, "argument" by default; the command passes
    "flag"), else the engine its recording names, else `config_engine` ([tool.gdr-check]), else the installed
    engine, else the default; the run's notes and each call's JSON name the profile and why."""
    if index is not None and (not isinstance(index, int) or isinstance(index, bool)):  # True is no call 1
        raise CallIndexError(f"index is {described(index)}: must be a whole number (a call's position in the "
                             f"recording), or None for every call")
    recording = load_recording(path)
    if recording.guard is not None:
        return _guard_report_run(recording, target, index, selection, failing, exit_zero)
    if not recording.calls:
        raise EmptyRecording(recording)
    calls = recording.calls
    if index is not None:
        if not 0 <= index < len(calls):
            raise NoSuchCall(recording.path, len(calls), index)
        calls = [calls[index]]
    run = CallRun(recording=recording, target=target, tp=tp)
    if recording.calls_dropped:
        run.notes.append(f"{recording.calls_dropped} more call(s) ran after `max_calls` and were not recorded")
    for skipped in recording.skipped_targets:
        target, reason = skipped.get("target"), skipped.get("reason")
        run.notes.append(f"capture skipped {target if isinstance(target, str) else 'a target it did not name'}: "
                         f"{reason if isinstance(reason, str) else 'no reason recorded'}")
    positions = {id(recorded): i for i, recorded in enumerate(recording.calls)}
    spans = call_spans(recording.text)
    chosen = [call_engine(recorded, engine, engine_reason, config_engine) for recorded in calls]
    run.notes.extend(engine_note(*pair) for pair in dict.fromkeys(chosen))
    for recorded, (call_engine_name, reason) in zip(calls, chosen, strict=True):
        checked = check_call(recorded, call_engine_name, run, state_dtype)
        checked.engine_reason = reason
        checked.diagnostics = [_in_recording(d, recording.path, spans, positions[id(recorded)])
                               for d in selected_diagnostics(selection, checked.diagnostics)]
        run.calls.append(checked)
    run.model_diagnostics = selected_diagnostics(selection, run.model_diagnostics)
    check = next(iter(run.models.values()), None)
    result = CallResult(recording.path, check=check, diagnostics=run.all_diagnostics(), tp=tp if target else None,
                        path=recording.path, record=run)
    return Run([result], failing=failing, exit_zero=exit_zero)


class GuardReportOptionError(InputError):
    """`--model` or `--index` given with a guard report, which holds findings, not calls (exit 2)."""

    code = "usage"


def _guard_report_run(recording: Recording, target: str | None, index: int | None, selection: Selection | None,
                      failing: tuple[str, ...], exit_zero: bool) -> Run:
    """A served worker's guard report (`GDR_CHECK_REPORT`): its findings, selected as any run's, and where they
    came from as notes. The guard compared the calls with the model in the worker already."""
    assert recording.guard is not None
    given = [option for option, value in (("--model", target), ("--index", index)) if value is not None]
    if given:
        raise GuardReportOptionError(f"{recording.path}: a guard report holds the guard's findings, not calls: "
                                     f"{' and '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to a "
                                     f"recording (GDR_CHECK_CAPTURE, `gdr_check.capture`)")
    run = CallRun(recording=recording, notes=list(recording.guard.notes))
    run.model_diagnostics = selected_diagnostics(selection, list(recording.guard.diagnostics))
    result = CallResult(recording.path, check=None, diagnostics=run.all_diagnostics(), tp=None, path=recording.path,
                        record=run)
    return Run([result], failing=failing, exit_zero=exit_zero)


def call_spans(text: str) -> Mapping[tuple[int, str | None], KeyLocation]:
    """Where each call of a recording's text sits: (position in `calls`, None) for the entry and (position,
    argument) for its `call` object's members, so that a call's diagnostics point at its lines. Located when
    asked for (`KeyLocator`): a recorded tensor's `values` or any other array is skipped, never walked."""
    return _CallSpans(KeyLocator(text))


class _CallSpans(Mapping[tuple[int, str | None], KeyLocation]):
    def __init__(self, keys: KeyLocator) -> None:
        self._keys = keys

    @staticmethod
    def _dotted(key: tuple[int, str | None]) -> str:
        position, argument = key
        return f"calls.{position}" if argument is None else f"calls.{position}.call.{argument}"

    def __getitem__(self, key: tuple[int, str | None]) -> KeyLocation:
        return self._keys[self._dotted(key)]

    def __iter__(self) -> Iterator[tuple[int, str | None]]:
        for dotted in self._keys:
            parts = dotted.split(".", 3)
            if parts[0] == "calls" and len(parts) == 2:
                yield int(parts[1]), None
            elif parts[0] == "calls" and len(parts) == 4 and parts[2] == "call" and "." not in parts[3]:
                yield int(parts[1]), parts[3]

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _in_recording(diagnostic: Diagnostic, path: str, spans: Mapping[tuple[int, str | None], KeyLocation],
                  position: int) -> Diagnostic:
    """`diagnostic` pointing at its call in the recording: the argument's member of that call where it names one,
    else the call's entry (a line-and-column location, as a config's diagnostics have)."""
    location = diagnostic.location or Location()
    if location.file is not None:
        return diagnostic
    member = spans.get((position, location.argument)) if location.argument else None
    span = member or spans.get((position, None))
    if span is None:
        return diagnostic
    key = f"calls[{position}]" + (f".call.{location.argument}" if member is not None else "")
    return replace(diagnostic, location=replace(location, file=path, json_key=key, line=span.line,
                                                column=span.column, end_line=span.end_line,
                                                end_column=span.end_column))


