"""Every command's settings, resolved once and in one order: the command line, then the nearest
`[tool.gdr-check]`, then the defaults.

`check`, `call` and `dry-run` parse their options into a `CommandLine` and ask `RunSettings` for the rest: the
settings of the whole run (output format, exit-zero, error-on-warning: the first target's config, else the
working directory's) and each target's (`for_target`: its own config's selection, engine, TP sizes, ...). Which
folders discovery skips (`--exclude` over the config's `exclude` over the defaults) is `exclusion_test`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import field, replace
from pathlib import Path
from typing import TypeVar

from ..base.records import dataclass
from ..deployment.settings import MAMBA_STRATEGIES
from ..engines.profiles import choose_engine
from ..sources.discover import ExcludePatterns, is_excluded
from .library import DEFAULT_BATCH, DEFAULT_TP, TargetSettings
from .pyproject_config import Config, ConfigError, ConfigResolver, discover, load_config
from .results import FAILING_DEFAULT, FAILING_WITH_WARNINGS
from .selection import RuleSelection, Selection

T = TypeVar("T")


def first_given(given: T | None, configured: T | None, default: T) -> T:
    """The command line's value, else the config's, else the default (None is "not given")."""
    return given if given is not None else configured if configured is not None else default


@dataclass(frozen=True)
class CommandLine:
    """What a command's options gave; None (or an empty selection) is "not given", so the config decides."""

    selection: RuleSelection = field(default_factory=RuleSelection)  # --select, --extend-select, --ignore
    tp_sizes: Sequence[int] | None = None
    batch: int | None = None
    slots: int | None = None
    state_dtype: str | None = None
    engine: str | None = None
    gpu_memory: str | None = None
    mamba_strategy: str = MAMBA_STRATEGIES[0]
    speculative_tokens: int = 0
    overlap_schedule: bool = True
    radix_cache: bool = True
    sm: int | None = None
    exit_zero: bool | None = None
    error_on_warning: bool | None = None
    output_format: str | None = None


def config_resolver(config_file: Path | None, isolated: bool, output_formats: Sequence[str]) -> ConfigResolver:
    """Where each target's config comes from: `--config` for all, none with `--isolated`, else the nearest
    `pyproject.toml` with a `[tool.gdr-check]` table. ConfigError (exit 2) for a `--config` that does not exist."""
    if isolated:
        return ConfigResolver(isolated=True, output_formats=output_formats)
    if config_file is not None:
        try:
            os.stat(config_file)
        except (FileNotFoundError, NotADirectoryError):
            raise ConfigError(config_file, None, "no such file (given with --config)") from None
        except OSError:
            pass  # unreadable, or a FIFO or a directory: the bounded read says which
        return ConfigResolver(explicit=load_config(config_file, explicit=True, output_formats=output_formats),
                              output_formats=output_formats)
    return ConfigResolver(output_formats=output_formats)


def exclusion_test(resolver: ConfigResolver, exclude: Sequence[str] | None,
                   extend_exclude: Sequence[str] | None) -> Callable[[Path], bool]:
    """Whether discovery skips a directory: `exclude` (else the nearest config's `exclude`, else the defaults),
    plus the config's `extend-exclude` and `extend_exclude`. Command-line globs are relative to the working
    directory, a config's to its pyproject's directory, as in ruff."""

    cwd = Path.cwd()

    def excluded(path: Path) -> bool:
        config = resolver.for_target(str(path))
        base = config.root or cwd
        if exclude is not None:
            replacing = ExcludePatterns(tuple(exclude), cwd)
        elif config.exclude is not None:
            replacing = ExcludePatterns(tuple(config.exclude), base)
        else:
            replacing = None
        extending = (ExcludePatterns(tuple(config.extend_exclude), base),
                     ExcludePatterns(tuple(extend_exclude or ()), cwd))
        return is_excluded(path, exclude=replacing, extend=extending)

    return excluded


def run_config(resolver: ConfigResolver, targets: Sequence[str]) -> Config:
    """The config of the whole run: `--config`, else the first target's config, else the working directory's."""
    if resolver.explicit is not None or resolver.isolated:
        return resolver.for_target(".")
    found = discover(targets)
    return load_config(found, output_formats=resolver.output_formats) if found is not None else Config()


class RunSettings:
    """The settings of one run (the command line over the configs over the defaults): the run's own, from
    `config` (`run_config`), and each target's (`for_target`, `selection_for`)."""

    def __init__(self, command_line: CommandLine, resolver: ConfigResolver, config: Config) -> None:
        self.command_line = command_line
        self.resolver = resolver
        self.config = config
        self.output_format = first_given(command_line.output_format, config.output_format, "full")
        self.exit_zero = first_given(command_line.exit_zero, config.exit_zero, False)
        self.error_on_warning = first_given(command_line.error_on_warning, config.error_on_warning, False)
        self.failing = FAILING_WITH_WARNINGS if self.error_on_warning else FAILING_DEFAULT
        self._by_config: dict[int, TargetSettings] = {}  # a config's settings, for its targets without overrides

    def for_target(self, target: str) -> TargetSettings:
        """What `target` is checked with: its config's settings under the command line's."""
        config = self.resolver.for_target(target)
        known = self._by_config.get(id(config))
        if known is None:
            known = self._by_config[id(config)] = self._settings(config)
        if not config.overrides:
            return known
        return replace(known, selection=self._selection([*config.layers_for(target), self.command_line.selection]))

    def selection_for(self, target: str) -> Selection:
        """The rules reported for `target`: its config's selection and matching overrides, then the command
        line's."""
        config = self.resolver.for_target(target)
        return self._selection([*config.layers_for(target), self.command_line.selection])

    @staticmethod
    def _selection(layers: Sequence[RuleSelection]) -> Selection:
        return Selection(tuple(layer for layer in layers if not layer.is_empty))

    def _settings(self, config: Config) -> TargetSettings:
        given = self.command_line
        engine, reason = choose_engine(given.engine, config.engine)  # the option, the config, the installed engine
        return TargetSettings(
            config=config, selection=self._selection([config.selection, given.selection]),
            engine=engine, engine_reason=reason,
            tp_sizes=given.tp_sizes or config.tp or DEFAULT_TP,
            batch=first_given(given.batch, config.batch, DEFAULT_BATCH),
            slots=given.slots if given.slots is not None else config.slots,
            state_dtype=given.state_dtype if given.state_dtype is not None else config.state_dtype,
            gpu_memory=given.gpu_memory if given.gpu_memory is not None else config.gpu_memory,  # (checked when read)
            mamba_strategy=given.mamba_strategy, speculative_tokens=given.speculative_tokens,
            overlap_schedule=given.overlap_schedule, radix_cache=given.radix_cache, sm=given.sm,
        )
