"""`gdr-check explain CODE|NAME|"<pasted error message>"`."""

from __future__ import annotations

import difflib
import os
import re
import sys
from typing import NoReturn

import typer

from ..base.errors import InputError
from ..base.identity import tool_info
from ..base.limits import checked
from ..base.records import dataclass
from ..base.registry import get
from ..checks import RULES
from ..checks.explanations import MAX_PASTE, Context, Explanation, find_all
from ..engines.profiles import EngineProfile, UnknownEngineError, profile_for
from ..pipeline.explain_numbers import model_numbers
from ..pipeline.pyproject_config import TABLE, ConfigError, discover, load_config
from .escape import dump_json
from .escape import text as safe
from .formats import FORMATS
from .main import app
from .numbers import whole_number
from .output import EXPLAIN_FORMATS, FORMAT_ENV, Output
from .run_options import ISOLATED_HELP

# How much of an unmatched paste the error line quotes.
_QUOTED = 120


def explain_all(query: str, context: Context | None = None) -> list[Explanation]:
    """A rule by code or name, or every known error in a paste (matched without backtracking)."""
    if len(query) <= 64:  # a code or a name is short: a long paste is no lookup key
        rule = get(query)
        if rule is not None:
            return [Explanation(rule)]
    return find_all(query, context)


def explain(query: str, context: Context | None = None) -> Explanation | None:
    found = explain_all(query, context)
    return found[0] if found else None


def _profile(engine: str) -> EngineProfile:
    try:
        return profile_for(engine)
    except UnknownEngineError as error:
        raise typer.BadParameter(str(error), param_hint="--engine") from None


def _cut(query: str) -> str:
    return query if len(query) <= _QUOTED else query[:_QUOTED] + "…"


def _quoted(query: str) -> str:
    return repr(_cut(query))


def _render_full(found: Explanation) -> str:
    rule = found.rule
    lines = [f"{rule.code} {rule.name} ({rule.severity}): {rule.summary}", ""]
    if found.matched_message:
        where = f" (line {found.line}" + (f", {found.count} times)" if found.count > 1 else ")")
        lines += [f"matched{where}: {safe(found.matched_message)}"]
        if found.values:
            lines += ["values:  " + ", ".join(f"{k}={safe(v)}" for k, v in found.values.items())]
        if found.reasons:
            lines += ["numbers:"] + [f"  - {safe(reason)}" for reason in found.reasons]
        lines.append("")
    lines += ["message template:", f"  {rule.message}", "", rule.explanation]
    if rule.causes:
        lines += ["", "when it happens:"] + [f"  - {cause}" for cause in rule.causes]
    if rule.fixes:
        lines += ["", "fix:"] + [f"  - {fix}" for fix in rule.fixes]
    if rule.example is not None:  # an executable example (checks/examples.py), shown as its text
        lines += ["", "example:"] + [f"  {line}" for line in str(rule.example).splitlines()]
    if rule.engines:
        lines += ["", f"engines: {rule.engines}"]
    return "\n".join(lines)


# A query of one code-like or kebab-case token is a rule's code or name, not a pasted message.
_RULE_ID = re.compile(r"^(?:[A-Za-z]{3}[0-9]+|[a-z0-9]+(?:-[a-z0-9]+)+)$")


def _suggestion(token: str) -> str:
    listed = " (`gdr-check explain --all` lists every rule)"
    prefix = token.upper()
    started = sorted(code for code in RULES if code.startswith(prefix)) if prefix.startswith("GDR") else []
    if started:  # a code cut short: the rules it begins, not the nearest spelling (GDR21 is not GDR321)
        shown = ", ".join(f"`{code}`" for code in started[:4]) + (", ..." if len(started) > 4 else "")
        return f"; {len(started)} rule(s) start with `{prefix}`: {shown}" + listed
    if re.fullmatch(r"GDR[0-9]+", prefix):  # a code: one digit off, or one too many; never a spelling of digits
        near = [code for code in RULES if code[:-1] == prefix[:-1] or prefix[:-1] == code]
        close = difflib.get_close_matches(prefix, near, n=1, cutoff=0.0)
    else:
        close = difflib.get_close_matches(token.lower(), [rule.name for rule in RULES.values()], n=1, cutoff=0.6)
    return (f"; did you mean `{close[0]}`?" if close else "") + listed


def _explain_format(given: str | None) -> str:
    """The format asked for on the command line (`_refuse_format` checked it); else json when the environment
    asks for json. Another format in the environment (set for `check` in CI) gives full."""
    if given is None:
        return "json" if os.environ.get(FORMAT_ENV) == "json" else "full"
    return given


def _refuse_format(given: str | None) -> str | None:
    """--output-format's callback, run before the other options are read (it is eager): a format `explain` does
    not write is the usage error, whatever else the command line holds (`Output.from_argv` keeps its record to
    the formats `explain` writes: nothing on stdout for `sarif`)."""
    if given is not None and given not in EXPLAIN_FORMATS:
        raise typer.BadParameter(f"explain writes full or json, not {safe(given)!r}", param_hint="--output-format")
    return given


# The size of the paste that is read, in the words of the notes.
_CAP = f"{MAX_PASTE // 1024} KiB"


@dataclass(frozen=True)
class _Unread:
    """What the paste's cap left unread: `read` names the part that was read, `lines` its lines, `missed` where an
    error is missed."""

    read: str
    lines: str
    missed: str

    def note(self) -> str:
        """The note of the report (full and json)."""
        return f"only {self.read} were read ({self.lines}): {self.missed} is not explained"

    def scope(self) -> str:
        """The same, for the error line of a paste in which no known error is found."""
        return f"{self.read} ({self.lines}; {self.missed} is not read)"


@dataclass(frozen=True)
class _Stdin:
    """What `explain -` read: the text of the tail that is matched, the lines before it, and the size of the
    whole input in bytes."""

    text: str
    dropped: int
    size: int

    def unread(self) -> _Unread | None:
        if self.size <= MAX_PASTE or not self.text:
            return None
        first, last = self.dropped + 1, self.dropped + len(self.text.splitlines())
        return _Unread(f"the last {_CAP} of the {self.size} bytes of standard input", f"lines {first}-{last}",
                       f"an error before line {first}")


class StdinError(InputError):
    """Standard input cannot be read: closed, a directory, or failing."""


def _read_stdin() -> _Stdin:
    """The paste piped into `explain -`: its last `MAX_PASTE` bytes from a line start (a log ends with its error),
    read in chunks so that a log of any size takes bounded memory (bytes that are not UTF-8 replaced), and how
    many lines before it were dropped."""
    stream = sys.stdin
    if stream is None:  # the descriptor was closed when Python started
        raise StdinError("standard input is closed: pipe a log into `gdr-check explain -`")
    binary = getattr(stream, "buffer", None)
    tail, size, dropped, starts_line = b"", 0, 0, True
    while True:
        try:
            chunk = binary.read(1 << 16) if binary is not None else stream.read(1 << 16).encode("utf-8", "replace")
        except (OSError, ValueError) as failure:  # a directory, a closed or revoked descriptor
            reason = (failure.strerror or type(failure).__name__) if isinstance(failure, OSError) else "it is closed"
            raise StdinError(f"cannot read standard input: {reason[:1].lower() + reason[1:]}") from None
        if not chunk:
            break
        size += len(chunk)
        tail += chunk
        if len(tail) > MAX_PASTE:
            cut = len(tail) - MAX_PASTE
            dropped += tail.count(b"\n", 0, cut)
            tail, starts_line = tail[cut:], tail[cut - 1:cut] == b"\n"
    if not starts_line:  # the first line was cut: it is not a whole message (nor, cut there, whole UTF-8)
        end = tail.find(b"\n")
        tail = tail[end + 1:] if end >= 0 else b""
        dropped += 1
    return _Stdin(tail.decode("utf-8", "replace"), dropped, size)


def _argument_unread(query: str) -> _Unread | None:
    """What `find_all` leaves unread of a pasted argument: all past its first `MAX_PASTE` characters."""
    if len(query) <= MAX_PASTE:
        return None
    last = len(query[:MAX_PASTE].splitlines())
    return _Unread(f"the first {_CAP} of the {len(query)} characters given", f"lines 1-{last}",
                   f"an error after line {last}")


@app.command("explain")
def explain_command(
    query: str = typer.Argument(None,
                                help=("A rule code (GDR212), name (state-pool-not-4d) or a pasted error message; "
                                      "- reads the paste from standard input (its last 64 KiB).")),
    all_rules: bool = typer.Option(False, "--all", help="Explain every rule."),
    output_format: str = typer.Option(
        None, "--output-format", callback=_refuse_format, is_eager=True,
        help=f"full or json (default: json when {FORMAT_ENV} is json, else full)."),
    model: str = typer.Option(None, "--model", help=("The model whose widths the numbers are compared with: a "
                                                     "checkpoint path or a repo id (as `call --model`).")),
    tp: int = typer.Option(None, "--tp", parser=whole_number("--tp"),
                           help="The tensor-parallel size of the deployment."),
    batch: int = typer.Option(None, "--batch", parser=whole_number("--batch"),
                              help="The decode batch size of the deployment."),
    engine: str = typer.Option(None, "--engine", help="sglang or vllm (name@version selects a version)."),
    isolated: bool = typer.Option(False, "--isolated", help=ISOLATED_HELP),
) -> int:
    """Explain a rule, or find every known error in pasted text (a message, log lines, a traceback)."""
    if all_rules and query:
        raise typer.BadParameter(f"it explains every rule, so it takes no query (got {_quoted(query)})",
                                 param_hint="--all")
    for name, value in (("tp", tp), ("batch", batch)):
        if value is not None:
            checked(name, value)  # the range of docs/limits.md, in the words of every other command's
    output_format = _explain_format(output_format)
    out = Output(output_format)
    dropped = 0
    unread = None  # what the paste's cap left unread
    model_source = None  # the pyproject.toml that named the model, when no --model did
    if query == "-" and not all_rules:
        piped = _read_stdin()
        if not piped.size:
            out.error_line("standard input is empty: pipe a log into `gdr-check explain -`")
            raise typer.Exit(2)
        if not piped.text:  # no line ends inside the tail that was kept: nothing whole to match
            reason = (f"the last {_CAP} of the {piped.size} bytes of standard input hold no complete line (its last "
                      f"line is longer than {_CAP})")
            _no_match(out, output_format, f"no rule matches: {reason}: pass the lines that name the error", "", reason)
        query, dropped, unread = piped.text, piped.dropped, piped.unread()
    elif query and not all_rules:
        unread = _argument_unread(query)
    note = unread.note() if unread else None
    if query and not all_rules and not isolated and (model is None or tp is None or batch is None or engine is None):
        found_config = discover([])  # the working directory's `[tool.gdr-check]` gives the context's defaults
        if found_config is not None:
            config = load_config(found_config, output_formats=FORMATS)
            if model is None and config.model is not None:
                model = config.model
                model_source = found_config
            engine = engine or config.engine
            batch = batch if batch is not None else (config.batch or None)
            tp = tp if tp is not None else (config.tp[0] if config.tp and len(config.tp) == 1 else None)
    if model is not None and not model.strip() and model_source is None:  # as `gdr-check ""` is refused
        raise typer.BadParameter("an empty path names no checkpoint", param_hint="--model")
    try:  # the model read as `call --model` reads it: a checkpoint path, a cached repo id, a built-in description
        widths, head_dims = model_numbers(model) if model else ({}, {})
    except InputError as refused:  # unreadable, or no GDN/KDA layers: named by the option or the file that gave it
        if model_source is None:
            raise typer.BadParameter(str(refused), param_hint="--model") from None
        raise ConfigError(model_source, f"{TABLE}.model", str(refused)) from None
    context = Context(tp=tp, batch=batch, profile=_profile(engine) if engine else None, widths=widths,
                      head_dims=head_dims)
    if all_rules:
        found = [entry for code in sorted(RULES) if (entry := explain(code)) is not None]
    elif query:
        found = explain_all(query, context)
        for entry in found:  # line numbers of the whole log, not of the tail that was read
            entry.line = entry.line + dropped if entry.line is not None else None
        if not found and _RULE_ID.match(query.strip()):
            token = query.strip()
            suggestion = _suggestion(token) if len(token) <= 64 else ""
            _no_match(out, output_format, f"unknown rule `{_cut(token)}`{suggestion}", query, None, "unknown rule")
        if not found:
            # One line, as README promises for bad input: the hint rides on the error line. A paste cut at the
            # cap is named by the part that was read, not quoted.
            _no_match(out, output_format, f"no rule matches {unread.scope() if unread else _quoted(query)}: pass a "
                      "code (GDR212), a rule name, or the whole error message as printed", query, note)
    else:
        raise typer.BadParameter("give a code, a rule name or an error message, or --all", param_hint="QUERY")
    if output_format == "json":
        docs = [f.to_dict() | ({"note": note} if note else {}) for f in found]
        # One error: its document (as before); several: the list, in order of appearance.
        out.write(dump_json(docs if all_rules or len(docs) > 1 else docs[0], indent=2))
    else:
        parts = [_render_full(f) for f in found]
        if note:  # first: it says which part of the paste the explanations come from
            parts.insert(0, f"note: {note}")
        out.write("\n\n".join(parts))
    return 0


def _no_match(out: Output, output_format: str, line: str, query: str, note: str | None,
              error: str = "no rule matches") -> NoReturn:
    """A query that names no rule, or a paste in which no known error is found: one `error:` line, a JSON document
    in json, and exit 2 like any other bad input (ruff's `rule` does the same): 1 means "problems found"."""
    out.error_line(line)
    if output_format == "json":
        document = {"tool": tool_info(), "query": query[:MAX_PASTE], "error": error}
        out.write(dump_json(document | ({"note": note} if note else {})))
    raise typer.Exit(2)
