"""The library behind `gdr-check check`: `check_targets` returns one `Run` (see `gdr_check.pipeline.results`) that
every output format renders, and raises only `gdr_check.base.errors.InputError`s for input it cannot use (the CLI
reports them as one line, exit 2). The other commands' library functions sit beside it, one module each, so a
command imports only its own: `call_check.check_recording` (`gdr-check call`), `dryrun.entry.dry_run`
(`gdr-check dry-run`), `explain_numbers.model_numbers` (the widths `gdr-check explain --model` reads a paste with).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import field
from typing import Any

from ..base.errors import InputError
from ..base.limits import LimitError, SizeError, parse_size
from ..base.records import dataclass
from ..base.registry import without_superseded
from ..base.report import Diagnostic
from ..checks.rules_model import NoLinearLayers
from ..deployment.settings import MAMBA_STRATEGIES, Deployment
from ..engines.profiles import choose_engine
from ..sources import SourceError
from .model_check import ModelCheck, check_model
from .pyproject_config import Config
from .results import FatalError, TargetResult
from .selection import Selection


class DeploymentError(InputError):
    """A deployment that cannot exist (tp < 1, an unknown state dtype, ...): exit 2."""

    code = "usage"



def deployment_of(**settings: Any) -> Deployment:
    try:
        return Deployment(**settings)
    except ValueError as error:
        raise DeploymentError(str(error)) from None


def selected_diagnostics(selection: Selection | None, diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    return without_superseded(list(diagnostics)) if selection is None else list(selection.filter(diagnostics))


def without_linear_layers(check: ModelCheck) -> str | None:
    """The model's name (as GDR101 gives it) when the check found no GDN or KDA layer, else None."""
    if check.model is not None:
        return None
    none = next((d for d in check.report if d.code == NoLinearLayers.rule.code), None)
    return None if none is None else str(none.bindings.get("subject"))


# -- check -----------------------------------------------------------------------------------------------------------
DEFAULT_TP = (1,)
DEFAULT_BATCH = 8


@dataclass(frozen=True)
class TargetSettings:
    """What one target is checked with: its config (nearest `pyproject.toml`) under the command line. The
    defaults are `gdr-check check`'s: `TargetSettings(tp_sizes=[2, 4])` checks at TP 2 and 4, every rule."""

    config: Config = field(default_factory=Config)  # where the settings came from (`--show-settings`)
    selection: Selection = field(default_factory=Selection)
    # The engine release checked for; None: the installed engine, else sglang (as `gdr-check check` chooses).
    engine: str | None = None
    tp_sizes: Sequence[int] = DEFAULT_TP
    batch: int = DEFAULT_BATCH
    slots: int | None = None
    state_dtype: str | None = None
    gpu_memory: str | int | None = None  # the per-rank budget as written ("80GiB") or in bytes
    mamba_strategy: str = MAMBA_STRATEGIES[0]  # auto: sglang's own choice (`deployment.state_pool.resolve_strategy`)
    speculative_tokens: int = 0
    overlap_schedule: bool = True  # sglang's overlap schedule (`--disable-overlap-schedule` turns it off)
    radix_cache: bool = True  # sglang's radix cache (`--disable-radix-cache`)
    sm: int | None = None  # the GPU's compute capability x10 (`--gpu`, `--sm`); None: not given
    # Why `engine` was chosen (gdr_check.engines.profiles.ENGINE_REASONS); None: "argument" for an engine given,
    # else "installed" or "default".
    engine_reason: str | None = None

    def __post_init__(self) -> None:
        if self.engine is None:
            engine, reason = choose_engine(None, None)
            object.__setattr__(self, "engine", engine)
            object.__setattr__(self, "engine_reason", self.engine_reason or reason)
        elif self.engine_reason is None:
            object.__setattr__(self, "engine_reason", "argument")
        self.gpu_memory_bytes  # noqa: B018 - a budget that is no size is refused here, not at the first check

    @property
    def gpu_memory_bytes(self) -> int | None:
        """The budget in bytes; SizeError (naming `gpu_memory`) when it is not a size or is out of range."""
        if self.gpu_memory is None:
            return None
        try:
            return parse_size(self.gpu_memory)
        except LimitError:
            raise  # it names gpu_memory already
        except SizeError as error:
            raise SizeError(f"gpu_memory: {error}") from None


def check_targets(targets: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
                  settings_for: Callable[[str], TargetSettings], *,
                  unreadable: Mapping[str, Exception] | None = None, revision: str | None = None,
                  follow_links: bool = False, metadata_cache: bool | None = None,
                  progress: Callable[[int, str], None] | None = None) -> list[TargetResult]:
    """Check every (target, tp) pair (`targets`: paths or repo ids, or one of them); unreadable targets become
    FatalErrors, not exceptions. `unreadable`
    holds the targets that already failed (a directory with no checkpoint below it); `progress` is told each
    target before it is checked; `metadata_cache` is `open_checkpoint`'s. `Run(check_targets(...))` is what
    `gdr-check check` renders."""
    named = [targets] if isinstance(targets, (str, os.PathLike)) else list(targets)  # one: not its characters
    results: list[TargetResult] = []
    for index, target in enumerate(os.fspath(each) for each in named):
        if progress is not None:
            progress(index, target)
        failed = (unreadable or {}).get(target)
        if isinstance(failed, SourceError):
            fatal = FatalError(failed.code, str(failed), failed.path, diagnostic=failed.diagnostic())
            results.append(TargetResult(target, error=fatal))
            continue
        settings = settings_for(target)
        for tp in dict.fromkeys(settings.tp_sizes):  # a size listed twice is checked once
            dep = deployment_of(tp=tp, batch=settings.batch, slots=settings.slots, state_dtype=settings.state_dtype,
                              engine=settings.engine, gpu_memory=settings.gpu_memory_bytes,
                              mamba_strategy=settings.mamba_strategy, speculative_tokens=settings.speculative_tokens,
                              overlap_schedule=settings.overlap_schedule, radix_cache=settings.radix_cache,
                              sm=settings.sm, engine_reason=settings.engine_reason)
            try:
                check = check_model(target, dep, revision=revision, follow_links=follow_links,
                                    metadata_cache=metadata_cache)
            except SourceError as error:
                fatal = FatalError(error.code, str(error), error.path, diagnostic=error.diagnostic())
                results.append(TargetResult(target, error=fatal, tp=tp))
                break  # the files are the same for every TP size
            results.append(TargetResult(target, check=check, diagnostics=settings.selection.filter(check.report),
                                        tp=tp))
    return results


