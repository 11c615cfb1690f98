"""`gdr-check [check] PATH...`: per-rank kernel shapes and every diagnostic for models and deployments.

Parsing and rendering only: the checks run in `gdr_check.pipeline.library.check_targets`, rule selection
in `pipeline.selection`, the `[tool.gdr-check]` file in `pipeline.settings`, the grouping of
file names into checkpoints in `.targets`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import typer

from ..base.errors import display_path
from ..base.identity import REPORT_SCHEMA_VERSION, tool_info
from ..base.limits import LimitError, SizeError, checked, parse_size, shorten
from ..deployment.settings import MAMBA_STRATEGIES
from ..pipeline.library import DEFAULT_BATCH, check_targets
from ..pipeline.model_check import open_target
from ..pipeline.pyproject_config import ConfigError, ConfigResolver
from ..pipeline.results import Run, TargetResult
from ..pipeline.run_settings import CommandLine, RunSettings, config_resolver, exclusion_test, first_given, run_config
from ..pipeline.selection import SelectorError, known_rules, rule_selection
from ..sources import SourceError
from ..sources.discover import checkpoint_inputs, expand_targets
from .deployment_flags import FLAGS, SWITCHES_OFF
from .engine_option import engine_help, engine_option, gpu_option, mamba_strategy_option, state_dtype_option
from .escape import dump_json, neutralise_log, text
from .formats import FORMATS
from .formats.options import render_options
from .main import app
from .models_list import render
from .numbers import MAX_DIGITS, whole_number
from .output import Output, format_option_name, report_path
from .progress import target_progress
from .run_options import ISOLATED_HELP, NO_CACHE_HELP, OUTPUT_FILE_HELP, QUIET_HELP, check_format, write_run
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


def list_models(out: Output, output_format: str) -> None:
    out.write_report(render(output_format))


def render_settings(targets: list[str], unreadable: Mapping[str, Exception], settings: RunSettings, *,
                    revision: str | None, follow_links: bool) -> str:
    """`--show-settings`: the config file and resolved settings of each target, as ruff shows them; a JSON
    document for the json format."""

    def shown(path: Path | None) -> str:
        return ConfigError(path, None, "").path if path is not None else "none (defaults)"

    rules = sorted(known_rules())
    if settings.output_format == "json":
        return _settings_document(targets, unreadable, settings, rules, revision=revision, follow_links=follow_links)
    lines = [
        f"run: config {shown(settings.config.path)}; output-format {settings.output_format}; "
        f"exit-zero {str(settings.exit_zero).lower()}; error-on-warning {str(settings.error_on_warning).lower()}; "
        f"follow-links {str(follow_links).lower()}"
        + (f"; revision {revision}" if revision else ""),
    ]
    for target in targets:
        lines.append("")
        lines.append(f"{target}:")
        if target in unreadable:
            lines.append(f"  error: {unreadable[target]}")
            continue
        chosen = settings.for_target(target)
        enabled = chosen.selection.codes(rules)
        disabled = [code for code in rules if code not in enabled]
        lines += [
            f"  config: {shown(chosen.config.path)}",
            f"  engine: {chosen.engine}",
            f"  tp: {', '.join(map(str, chosen.tp_sizes))}",
            f"  batch: {chosen.batch}",
            f"  slots: {chosen.slots if chosen.slots is not None else 'batch + 1'}",
            f"  state-dtype: {chosen.state_dtype or 'the engine default'}",
            f"  gpu-memory: {chosen.gpu_memory or 'not set'}",
            f"  rules: {len(enabled)} of {len(rules)} selected"
            + (f"; not selected: {', '.join(disabled)}" if disabled else ""),
        ]

    return neutralise_log("\n".join(text(line) for line in lines)) + "\n"  # each entry one line, whatever the data


def _settings_document(targets: list[str], unreadable: Mapping[str, Exception], settings: RunSettings,
                       rules: list[str], *, revision: str | None, follow_links: bool) -> str:
    """`--show-settings --output-format json`: what the text shows, as one document."""
    def shown(path: Path | None) -> str | None:
        return ConfigError(path, None, "").path if path is not None else None

    entries: list[dict[str, Any]] = []
    for target in targets:
        if target in unreadable:
            entries.append({"target": target, "error": str(unreadable[target])})
            continue
        chosen = settings.for_target(target)
        enabled = chosen.selection.codes(rules)
        entries.append({
            "target": target, "config": shown(chosen.config.path), "engine": chosen.engine,
            "tp": list(chosen.tp_sizes), "batch": chosen.batch, "slots": chosen.slots,
            "state_dtype": chosen.state_dtype, "gpu_memory": chosen.gpu_memory,
            "rules": {"selected": [code for code in rules if code in enabled],
                      "not_selected": [code for code in rules if code not in enabled]},
        })
    return dump_json({
        "schema_version": REPORT_SCHEMA_VERSION, "tool": tool_info(), "command": "show-settings",
        "run": {"config": shown(settings.config.path), "output_format": "json", "exit_zero": settings.exit_zero,
                "error_on_warning": settings.error_on_warning, "follow_links": follow_links, "revision": revision},
        "targets": entries,
    }, indent=2) + "\n"


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
                                     help="State pool rows (default: the fewest from which the engine serves the "
                                          "batch: batch x the slots it counts per request + 1, slot 0 reserved)."),
    state_dtype: str | None = typer.Option(
        None, FLAGS["state_dtype"], help="float32, bfloat16 or float16 (default: the engine's choice)."),
    engine: str | None = typer.Option(
        None, FLAGS["engine"], help=engine_help("the engine installed in this Python environment, else sglang")),
    gpu_memory: str | None = typer.Option(
        None, FLAGS["gpu_memory"], help="Per-rank budget for the state pools, e.g. 20GiB."),
    mamba_strategy: str = typer.Option(
        MAMBA_STRATEGIES[0], FLAGS["mamba_strategy"], help=f"sglang --mamba-radix-cache-strategy: "
                                                      f"{', '.join(MAMBA_STRATEGIES)} (auto: sglang's own choice)."),
    speculative_tokens: int = typer.Option(
        0, FLAGS["speculative_tokens"], parser=whole_number(FLAGS["speculative_tokens"]),
        help="Draft tokens per speculative verify step (0: none); sizes the verify state."),
    disable_overlap_schedule: bool = typer.Option(
        False, SWITCHES_OFF["overlap_schedule"], help="sglang's overlap schedule is off: one ping-pong slot per "
                                                      "request under extra_buffer instead of two."),
    disable_radix_cache: bool = typer.Option(
        False, SWITCHES_OFF["radix_cache"], help="sglang's radix cache is off: one state slot per running request."),
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
    no_cache: bool = typer.Option(False, "--no-cache", help=NO_CACHE_HELP),
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
    resolver = config_resolver(config_file, isolated, FORMATS)
    unsearchable: list[str] = []
    if targets and "" in targets:  # not the current directory: an empty argument is a mistake (an unset variable)
        raise typer.BadParameter("an empty path names no checkpoint", param_hint="TARGETS")
    paths, unreadable = expand_targets(group_targets(targets or ["."]),
                                       exclusion_test(resolver, exclude, extend_exclude),
                                       force_exclude=force_exclude, follow_links=follow_links,
                                       on_unsearchable=unsearchable.append)
    config = run_config(resolver, paths)
    fmt = first_given(output_format, config.output_format, "full")
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
    if engine is not None:
        engine_option(engine)
    if state_dtype is not None:
        state_dtype_option(state_dtype)
    mamba_strategy_option(mamba_strategy)
    tp_sizes = parse_tp_list(tp) if tp is not None else None
    if revision == "":
        raise typer.BadParameter("names no branch, tag or commit", param_hint="--revision")
    if gpu_memory is not None:
        gpu_memory_option(gpu_memory)
    command_line = CommandLine(
        selection=rule_selection(select, extend_select, ignore, rules=rules), tp_sizes=tp_sizes, batch=batch,
        slots=slots, state_dtype=state_dtype, engine=engine, gpu_memory=gpu_memory, mamba_strategy=mamba_strategy,
        speculative_tokens=speculative_tokens, overlap_schedule=not disable_overlap_schedule,
        radix_cache=not disable_radix_cache, sm=gpu_option(gpu, sm), exit_zero=exit_zero,
        error_on_warning=error_on_warning, output_format=output_format)
    settings = RunSettings(command_line, resolver, config)
    metadata_cache = False if no_cache else None  # None: on unless GDR_CHECK_NO_CACHE turns it off

    if show_settings:
        if out.output_file is not None:
            out.protect(_files_found(paths, [], resolver))
        unreadable = dict(unreadable)
        for target in paths:  # what a run could not read (a missing path or model, a link, an LFS pointer): its
            # metadata only, as the run reads it, and never checked
            if target not in unreadable:
                try:
                    open_target(target, revision=revision, follow_links=follow_links, metadata_cache=metadata_cache)
                except SourceError as error:
                    unreadable[target] = error
        # The settings as a JSON document, or as text for the other listing formats (as `--list-models`); to
        # `-o` when given, as any report.
        out.write_report(render_settings(paths, unreadable, settings, revision=revision, follow_links=follow_links))
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
            results = check_targets(paths, settings.for_target, unreadable=unreadable, revision=revision,
                                    follow_links=follow_links, metadata_cache=metadata_cache, progress=progress)
    if out.output_file is not None:  # (what no report file can replace: worked out only when one is written)
        out.protect(_files_found(paths, results, resolver))
    run = Run(results, failing=settings.failing, exit_zero=settings.exit_zero)
    return write_run(run, out, render_options(fmt, output_file, show_info=show_info, quiet=quiet),
                     statistics=statistics, silent=silent)


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
