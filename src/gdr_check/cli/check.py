"""`gdr-check [check] PATH...`: per-rank kernel shapes and every diagnostic for models and deployments.

Parsing and rendering only: the checks run in `gdr_check.pipeline.library.check_targets`, rule selection
in `pipeline.selection`, the `[tool.gdr-check]` file in `pipeline.settings`, the grouping of
file names into checkpoints in `.targets`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar, overload

import typer

from ..base.errors import display_path
from ..base.identity import REPORT_SCHEMA_VERSION, tool_info
from ..base.limits import LimitError, SizeError, checked, parse_size, shorten
from ..deployment.settings import MAMBA_STRATEGIES
from ..engines.profiles import choose_engine
from ..pipeline.library import DEFAULT_BATCH, DEFAULT_TP, TargetSettings, check_targets
from ..pipeline.model_check import open_target
from ..pipeline.results import FAILING_DEFAULT, FAILING_WITH_WARNINGS, Run, TargetResult
from ..pipeline.selection import Selection, SelectorError, known_rules, rule_selection
from ..pipeline.settings import Config, ConfigError, ConfigResolver, discover, load_config
from ..sources import SourceError
from ..sources.discover import ExcludePatterns, checkpoint_inputs, expand_targets, is_excluded
from .deployment_flags import FLAGS
from .engine_option import engine_help, engine_option, gpu_option, mamba_strategy_option, state_dtype_option
from .escape import dump_json, neutralise_log, text
from .formats import FORMATS, format_module
from .formats.common import summary_line
from .formats.console import style_for_destination
from .main import app
from .models_list import render
from .numbers import MAX_DIGITS, whole_number
from .output import Output, format_option_name, report_path
from .progress import target_progress
from .run_options import ISOLATED_HELP, OUTPUT_FILE_HELP, QUIET_HELP, check_format
from .statistics import render as render_statistics
from .targets import group_targets

# One way to split any text (no two quantifiers compete for the same characters): linear, never backtracking.
EPILOG = """Examples:
  gdr-check ./Qwen3-Next-80B --tp 4

  gdr-check models/* --tp 1,2,4,8                         (one table of which TP sizes pass)

  gdr-check ckpt --output-format sarif -o gdr-check.sarif  (GitHub code scanning)

  gdr-check ckpt --select GDR1,GDR2 --ignore GDR253 --error-on-warning
"""


NOTHING_TO_CHECK = "warning: no checkpoint to check: every target is excluded"


def gpu_memory_option(text: str) -> None:
    """Refuse a `--gpu-memory` that is no size ('80GiB', '141GB', '1.5e10': `limits.parse_size`) in one usage line."""
    try:
        parse_size(text)
    except LimitError:
        raise  # a size outside its range: said as every other number's range is
    except SizeError as error:
        raise typer.BadParameter(str(error), param_hint="--gpu-memory") from None


def parse_tp_list(text: str) -> list[int]:
    """'4' or '1,2,4,8' -> TP sizes, in the order given."""
    parts = [part.strip() for part in text.split(",")]  # an empty item ("1,,2", "4,") is a mistake, not a skip
    # ASCII digits only (int() also takes "1_6", "+4" and other scripts' digits); a negative number is a number,
    # refused below by its range, as 0 is
    if not all(part.removeprefix("-").isascii() and part.removeprefix("-").isdigit() and len(part) <= MAX_DIGITS
               for part in parts):
        raise typer.BadParameter(f"expected a whole number or a comma-separated list of them, got {shorten(text)!r}",
                                 param_hint="--tp")
    return [checked("tp", int(part)) for part in parts]  # the range in the words of every other number's


def exclusion_test(resolver: ConfigResolver, cli_exclude: list[str] | None,
                   cli_extend_exclude: list[str] | None) -> Callable[[Path], bool]:
    """Whether discovery skips a directory: `--exclude` (else the nearest config's `exclude`, else the
    defaults), plus the config's `extend-exclude` and `--extend-exclude`. Command-line globs are relative to the
    working directory, a config's to its pyproject's directory, as in ruff."""

    cwd = Path.cwd()

    def excluded(path: Path) -> bool:
        config = resolver.for_target(str(path))
        base = config.root or cwd
        if cli_exclude is not None:
            replacing = ExcludePatterns(tuple(cli_exclude), cwd)
        elif config.exclude is not None:
            replacing = ExcludePatterns(tuple(config.exclude), base)
        else:
            replacing = None
        extending = (ExcludePatterns(tuple(config.extend_exclude), base),
                     ExcludePatterns(tuple(cli_extend_exclude or ()), cwd))
        return is_excluded(path, exclude=replacing, extend=extending)

    return excluded


def list_models(out: Output, output_format: str) -> None:
    out.write_report(render(output_format))


def _resolver(config_file: Path | None, isolated: bool) -> ConfigResolver:
    if isolated:
        return ConfigResolver(isolated=True, output_formats=FORMATS)
    if config_file is not None:
        try:
            os.stat(config_file)
        except (FileNotFoundError, NotADirectoryError):
            raise ConfigError(config_file, None, "no such file (given with --config)") from None
        except OSError:
            pass  # unreadable, or a FIFO or a directory: the bounded read says which
        return ConfigResolver(explicit=load_config(config_file, explicit=True, output_formats=FORMATS),
                              output_formats=FORMATS)
    return ConfigResolver(output_formats=FORMATS)


def _run_config(targets: list[str], resolver: ConfigResolver) -> Config:
    """The settings of the whole run: `--config`, else the first target's config, else the cwd's."""
    if resolver.explicit is not None or resolver.isolated:
        return resolver.for_target(".")
    found = discover(targets)
    return load_config(found, output_formats=FORMATS) if found is not None else Config()


def render_settings(targets: list[str], unreadable: Mapping[str, Exception],
                    settings_for: Callable[[str], TargetSettings], run_config: Config, *, fmt: str, exit_zero: bool,
                    error_on_warning: bool, revision: str | None, follow_links: bool) -> str:
    """`--show-settings`: the config file and resolved settings of each target, as ruff shows them; a JSON
    document for `fmt` json."""

    def shown(path: Path | None) -> str:
        return ConfigError(path, None, "").path if path is not None else "none (defaults)"

    rules = sorted(known_rules())
    if fmt == "json":
        return _settings_document(targets, unreadable, settings_for, run_config, rules, exit_zero=exit_zero,
                                  error_on_warning=error_on_warning, revision=revision, follow_links=follow_links)
    lines = [
        f"run: config {shown(run_config.path)}; output-format {fmt}; exit-zero {str(exit_zero).lower()}; "
        f"error-on-warning {str(error_on_warning).lower()}; follow-links {str(follow_links).lower()}"
        + (f"; revision {revision}" if revision else ""),
    ]
    for target in targets:
        lines.append("")
        lines.append(f"{target}:")
        if target in unreadable:
            lines.append(f"  error: {unreadable[target]}")
            continue
        settings = settings_for(target)
        enabled = settings.selection.codes(rules)
        disabled = [code for code in rules if code not in enabled]
        lines += [
            f"  config: {shown(settings.config.path)}",
            f"  engine: {settings.engine}",
            f"  tp: {', '.join(map(str, settings.tp_sizes))}",
            f"  batch: {settings.batch}",
            f"  slots: {settings.slots if settings.slots is not None else 'batch + 1'}",
            f"  state-dtype: {settings.state_dtype or 'the engine default'}",
            f"  gpu-memory: {settings.gpu_memory or 'not set'}",
            f"  rules: {len(enabled)} of {len(rules)} selected"
            + (f"; not selected: {', '.join(disabled)}" if disabled else ""),
        ]

    return neutralise_log("\n".join(text(line) for line in lines)) + "\n"  # each entry one line, whatever the data


def _settings_document(targets: list[str], unreadable: Mapping[str, Exception],
                       settings_for: Callable[[str], TargetSettings], run_config: Config, rules: list[str], *,
                       exit_zero: bool, error_on_warning: bool, revision: str | None, follow_links: bool) -> str:
    """`--show-settings --output-format json`: what the text shows, as one document."""
    def shown(path: Path | None) -> str | None:
        return ConfigError(path, None, "").path if path is not None else None

    entries: list[dict[str, Any]] = []
    for target in targets:
        if target in unreadable:
            entries.append({"target": target, "error": str(unreadable[target])})
            continue
        settings = settings_for(target)
        enabled = settings.selection.codes(rules)
        entries.append({
            "target": target, "config": shown(settings.config.path), "engine": settings.engine,
            "tp": list(settings.tp_sizes), "batch": settings.batch, "slots": settings.slots,
            "state_dtype": settings.state_dtype, "gpu_memory": settings.gpu_memory,
            "rules": {"selected": [code for code in rules if code in enabled],
                      "not_selected": [code for code in rules if code not in enabled]},
        })
    return dump_json({
        "schema_version": REPORT_SCHEMA_VERSION, "tool": tool_info(), "command": "show-settings",
        "run": {"config": shown(run_config.path), "output_format": "json", "exit_zero": exit_zero,
                "error_on_warning": error_on_warning, "follow_links": follow_links, "revision": revision},
        "targets": entries,
    }, indent=2) + "\n"


T = TypeVar("T")


@overload
def _first(first: T | None, second: T | None, default: T, /) -> T: ...


@overload
def _first(*values: T | None) -> T | None: ...


def _first(*values: Any) -> Any:
    """The first value that is not None (the command line, then the config file, then the default)."""
    return next((value for value in values if value is not None), None)


# What `--list-models` and `--statistics` write: a text table (full, concise and github alike: github is a job's
# log) or a JSON document; a file format (SARIF, JUnit, ...) is refused. A format from the settings'
# pyproject.toml is the report's, so there they write the text table.
LISTING_FORMATS = ("full", "concise", "github", "json")


@app.command("check", epilog=EPILOG)
def check_command(
    targets: list[str] | None = typer.Argument(
        None,
        help="Checkpoint directories or files (a config.json, shard or index stands for its directory), or Hugging "
             "Face repo ids. Default: the current directory."),
    tp: str | None = typer.Option(
        None, FLAGS["tp"], help="Tensor-parallel size, or a comma-separated list (a matrix); default 1."),
    batch: int | None = typer.Option(None, FLAGS["batch"], parser=whole_number(FLAGS["batch"]),
                                     help=f"Largest decode batch B; default {DEFAULT_BATCH}."),
    slots: int | None = typer.Option(None, FLAGS["slots"], parser=whole_number(FLAGS["slots"]),
                                     help="State pool rows (default: batch + 1, slot 0 reserved; batch x 3 + 1 "
                                          "under sglang's extra_buffer)."),
    state_dtype: str | None = typer.Option(
        None, FLAGS["state_dtype"], help="float32, bfloat16 or float16 (default: the engine's choice)."),
    engine: str | None = typer.Option(
        None, FLAGS["engine"], help=engine_help("the engine installed in this Python environment, else sglang")),
    gpu_memory: str | None = typer.Option(
        None, FLAGS["gpu_memory"], help="Per-rank budget for the state pools, e.g. 20GiB."),
    mamba_strategy: str = typer.Option(
        MAMBA_STRATEGIES[0], FLAGS["mamba_strategy"], help=f"sglang --mamba-radix-cache-strategy: "
                                                      f"{' or '.join(MAMBA_STRATEGIES)} (ping-pong slots)."),
    speculative_tokens: int = typer.Option(
        0, FLAGS["speculative_tokens"], parser=whole_number(FLAGS["speculative_tokens"]),
        help="Draft tokens per speculative verify step (0: none); sizes the verify state."),
    gpu: str | None = typer.Option(
        None, "--gpu", help="The GPU served on (h100, h200, b200, ...), where the engine release's decode path "
                            "depends on it; default: not given."),
    sm: int | None = typer.Option(
        None, FLAGS["sm"], parser=whole_number(FLAGS["sm"]),
        help="The GPU's compute capability times ten (90: H100/H200, 100: B200), instead of --gpu."),
    select: list[str] | None = typer.Option(
        None, "--select", help="Rules to report: codes (GDR213), prefixes (GDR2), names, or ALL; comma-separated or "
                               "repeated. Replaces the configured selection."),
    extend_select: list[str] | None = typer.Option(
        None, "--extend-select", help="Rules to report in addition to the selection."),
    ignore: list[str] | None = typer.Option(None, "--ignore", help="Rules not to report (codes, prefixes, names)."),
    exit_zero: bool | None = typer.Option(
        None, "--exit-zero", help="Exit 0 even when diagnostics fail the run (2 still means the run could not "
                                  "complete)."),
    error_on_warning: bool | None = typer.Option(
        None, "--error-on-warning", help="Warnings fail the run too (exit 1)."),
    output_format: str | None = typer.Option(
        None, "--output-format", envvar="GDR_CHECK_OUTPUT_FORMAT", help=f"One of: {', '.join(FORMATS)}; default full."),
    output_file: Path | None = typer.Option(
        None, "--output-file", "-o", envvar="GDR_CHECK_OUTPUT_FILE", parser=report_path, metavar="PATH",
        help=OUTPUT_FILE_HELP),
    config_file: Path | None = typer.Option(
        None, "--config", help="Read the tool.gdr-check table of this pyproject.toml instead of searching for one."),
    isolated: bool = typer.Option(False, "--isolated", help=ISOLATED_HELP),
    list_models_flag: bool = typer.Option(
        False, "--list-models", help="List the built-in model geometries and exit (text, or a JSON document with "
                                     "--output-format json)."),
    show_info: bool = typer.Option(
        False, "--show-info", help="Report info notes as SARIF results, GitHub annotations and GitLab issues too (by "
                                   "default only the other formats list them: nothing can be changed to close them)."),
    statistics: bool = typer.Option(
        False, "--statistics", help="Print how often each rule fired, most frequent first, instead of the diagnostics "
                                    "(a JSON list with --output-format json)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help=QUIET_HELP),
    silent: bool = typer.Option(
        False, "--silent", "-s", help="Print nothing but the errors that stop the run (an --output-file is still "
                                      "written); the exit code says the rest."),
    exclude: list[str] | None = typer.Option(
        None, "--exclude", help="Directories not to search for checkpoints (globs, relative to the working directory, "
                                "or names); replaces the default excludes. Repeatable."),
    extend_exclude: list[str] | None = typer.Option(
        None, "--extend-exclude", help="Like --exclude, in addition to the default and configured excludes."),
    force_exclude: bool = typer.Option(
        False, "--force-exclude", help="Apply the excludes to targets named on the command line too (for pre-commit)."),
    revision: str | None = typer.Option(
        None, "--revision", help="Snapshot of a cached Hugging Face model: a branch, tag, commit or commit prefix (or "
                                 "write org/name@REV)."),
    follow_links: bool = typer.Option(
        False, "--follow-links", help="Follow links inside checkpoints wherever they point (git-annex, DVC, shared "
                                      "storage); still read-only and header-only."),
    show_settings: bool = typer.Option(
        False, "--show-settings", help="Print the config file and settings each target would be checked with, and "
                                       "exit."),
) -> int:
    """Check models: per-rank shapes of every kernel argument, and every problem, for each deployment."""

    check_format(output_format)
    for mode, chosen in (("--list-models", list_models_flag), ("--statistics", statistics),
                         ("--show-settings", show_settings)):
        if chosen and output_format is not None and output_format not in LISTING_FORMATS:
            raise typer.BadParameter(f"{mode} writes {', '.join(LISTING_FORMATS[:-1])} or {LISTING_FORMATS[-1]}, "
                                     f"not {output_format!r}", param_hint=format_option_name())
    if list_models_flag and targets:  # (as `explain --all` refuses a query: nothing would be checked)
        shown = ", ".join(repr(shorten(target)) for target in targets[:3]) + (", ..." if len(targets) > 3 else "")
        raise typer.BadParameter(f"it lists the built-in models and checks nothing, so it takes no target (got "
                                 f"{shown})", param_hint="--list-models")
    if list_models_flag:
        list_models(Output(output_format or "full", output_file), output_format or "full")
        return 0

    if config_file is not None and isolated:  # (as ruff refuses them together: one would be ignored)
        raise typer.BadParameter("it ignores every settings file, and --config names one: give one of them",
                                 param_hint="--isolated")
    resolver = _resolver(config_file, isolated)
    unsearchable: list[str] = []
    if targets and "" in targets:  # not the current directory: an empty argument is a mistake (an unset variable)
        raise typer.BadParameter("an empty path names no checkpoint", param_hint="TARGETS")
    paths, unreadable = expand_targets(group_targets(targets or ["."]),
                                       exclusion_test(resolver, exclude, extend_exclude),
                                       force_exclude=force_exclude, follow_links=follow_links,
                                       on_unsearchable=unsearchable.append)
    config = _run_config(paths, resolver)
    fmt = _first(output_format, config.output_format, "full")
    out = Output(fmt, output_file)
    if not (quiet or silent):  # skipped, as ruff skips a folder it cannot read, but not without a word
        for folder in unsearchable:
            out.info_line(f"warning: {display_path(folder)}: permission denied (the folder cannot be searched); "
                          "skipped")

    rules = known_rules()
    for option, values in (("--select", select), ("--extend-select", extend_select), ("--ignore", ignore)):
        try:
            rule_selection(values, rules=rules)
        except SelectorError as error:
            out.fatal("usage", f"{option}: {error}")
            raise typer.Exit(2) from None
    cli_layer = rule_selection(select, extend_select, ignore, rules=rules)
    if engine is not None:
        engine_option(engine)
    if state_dtype is not None:
        state_dtype_option(state_dtype)
    mamba_strategy_option(mamba_strategy)
    cli_tp = parse_tp_list(tp) if tp is not None else None
    if revision == "":
        raise typer.BadParameter("names no branch, tag or commit", param_hint="--revision")
    if gpu_memory is not None:
        gpu_memory_option(gpu_memory)
    gpu_sm_value = gpu_option(gpu, sm)
    settings_by_config: dict[int, TargetSettings] = {}

    def settings_for(target: str) -> TargetSettings:
        target_config = resolver.for_target(target)
        known = settings_by_config.get(id(target_config))
        if known is None:
            known = settings_by_config[id(target_config)] = _settings(target_config)
        if not target_config.overrides:
            return known
        layers = [*target_config.layers_for(target), cli_layer]
        return replace(known, selection=Selection(tuple(layer for layer in layers if not layer.is_empty)))

    def _settings(target_config: Config) -> TargetSettings:
        budget = _first(gpu_memory, target_config.gpu_memory)  # a table's value was checked when it was read
        chosen = choose_engine(engine, target_config.engine)  # the option, the config, the installed engine
        layers = [target_config.selection, cli_layer]
        return TargetSettings(
            config=target_config, selection=Selection(tuple(layer for layer in layers if not layer.is_empty)),
            engine=chosen[0], engine_reason=chosen[1],
            tp_sizes=cli_tp or target_config.tp or DEFAULT_TP,
            batch=_first(batch, target_config.batch, DEFAULT_BATCH), slots=_first(slots, target_config.slots),
            state_dtype=_first(state_dtype, target_config.state_dtype), gpu_memory=budget,
            mamba_strategy=mamba_strategy, speculative_tokens=speculative_tokens, sm=gpu_sm_value,
        )

    if show_settings:
        if out.output_file is not None:
            out.protect(_files_found(paths, [], resolver))
        unreadable = dict(unreadable)
        for target in paths:  # what a run could not read (a missing path or model, a link, an LFS pointer): its
            # metadata only, as the run reads it, and never checked
            if target not in unreadable:
                try:
                    open_target(target, revision=revision, follow_links=follow_links)
                except SourceError as error:
                    unreadable[target] = error
        # The settings as a JSON document, or as text for the other listing formats (as `--list-models`); to
        # `-o` when given, as any report.
        out.write_report(render_settings(paths, unreadable, settings_for, config, fmt=fmt,
                                         exit_zero=bool(_first(exit_zero, config.exit_zero)),
                                         error_on_warning=bool(_first(error_on_warning, config.error_on_warning)),
                                         revision=revision, follow_links=follow_links))
        if not paths and not silent:
            out.info_line(NOTHING_TO_CHECK)  # as the run would say it
        return 2 if unreadable else 0  # a target it could not read is an error line there: the run failed

    if not paths:  # every target named was excluded (`--force-exclude`): an empty report still, so that a report
        # file or a CI step reading one finds a valid document, not last run's or none
        if not silent:
            out.info_line(NOTHING_TO_CHECK)
        results = []
    else:
        with target_progress(len(paths), quiet=quiet or silent) as progress:
            results = check_targets(paths, settings_for, unreadable=unreadable, revision=revision,
                                    follow_links=follow_links, progress=progress)
    if out.output_file is not None:  # (what no report file can replace: worked out only when one is written)
        out.protect(_files_found(paths, results, resolver))
    run = Run(
        results,
        failing=FAILING_WITH_WARNINGS if _first(error_on_warning, config.error_on_warning) else FAILING_DEFAULT,
        exit_zero=bool(_first(exit_zero, config.exit_zero)),
        show_info=show_info, quiet=quiet,
    )
    style_for_destination(run, fmt, output_file)
    renderer = format_module(fmt)
    if silent and output_file is None:
        pass  # the exit code says it all
    elif statistics:
        out.write_report(render_statistics(run, fmt))
    else:
        out.write_report(renderer.render(run))
    for result in results:
        if result.error is not None:
            out.error_line(result.error.message)
    if fmt in ("concise", "github") and not (quiet or silent or statistics):
        out.info_line(summary_line(run))
    if fmt == "github":
        out.append_step_summary(renderer.step_summary(run))
    return run.exit_code


def _files_found(paths: list[str], results: list[TargetResult], resolver: ConfigResolver) -> list[str | None]:
    """What the run found or read beyond its command line, which no report may replace: the files of every
    checkpoint found below a folder it searched, every file a check read, and the settings files it used."""
    found: list[str | None] = []
    for path in paths:
        found.extend(checkpoint_inputs(path))
        settings = resolver.for_target(path).path
        found.append(str(settings) if settings is not None else None)
    for result in results:
        if result.check is not None:
            source = result.check.source_dict()
            found.extend([source.get("config_file"), source.get("index_file"), *source.get("files_read", ())])
        if result.error is not None:
            found.append(result.error.path)
    return found
