"""Resolve a rule from its code or name, and find every known error in pasted text, in linear time.

Users paste one line, a log line with an engine's prefix (vLLM's `(Worker_TP1 pid=123) ERROR 11-30 10:00:00
[file.py:42] ValueError: ...`, sglang's `[2026-11-30 10:00:00 TP0] ValueError: ...`), a whole traceback, a log
with several errors, ANSI colours. `find_all` cleans each line (colours, control characters), and reads each
rule's message template at the start of the line's message (after the prefixes) or wherever the template's
first literal occurs in the line.

A template is literals between wildcards that hold at least one character; placing each literal at its
earliest position after the previous one is the assignment a lazy regex (`.+?`) finds first (a later placement
only leaves less room for the rest), so matching is a few `str.find` calls: no backtracking, time linear in
the line. A template that repeats a field takes that first placement and requires the repeats to agree.
When the template does not match as written, it is tried again with trailing periods, quotes and backticks
ignored on both sides (users quote messages in Markdown, or drop the final period). A Markdown code span of two
or more backticks (`` `out` must be contiguous. ``, the form for a message that starts with a backtick) is read
for the message inside it.

A template with less than `_MIN_LITERAL` characters of fixed text (gdr-check's own `` `{key}` {problem}``,
`vLLM {statement}`) would read ordinary log lines (`` `torch_dtype` is deprecated! ``, `vLLM API server version
0.29.0`) as errors: it matches only a line that names its code, as gdr-check's own reports do
(`error[GDR104]: ...`, `config.json:3:5: error[GDR104] ...`).
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterable, Mapping
from dataclasses import field
from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple

from ..base.records import dataclass
from ..base.registry import RULES, Rule, get
from ..base.variants import VARIANTS, variant_spec

if TYPE_CHECKING:
    from ..engines.profiles import EngineProfile

# A pasted message, log or traceback longer than this is cut: the lines that name the problems are short.
MAX_PASTE = 64 * 1024
# A line longer than this is cut before matching (a message is short; a huge line is noise or an attack).
MAX_LINE = 4096
_SUFFIXES = ("Error", "Exception")
# ANSI escape sequences (CSI ... final byte; OSC ... BEL/ST). Each alternative is one pass: no nesting.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]")
_SYSLOG_ESCAPE = re.compile(r"#033\[[0-?]*[ -/]*[@-~]|#015$")
_CONTROL = dict.fromkeys(c for c in range(32) if c != 9)
# Separators after which an unknown log prefix may end, and how many of them are tried per line.
_SEPARATORS = ("] ", ") ", "| ", ": ")
_MAX_STARTS = 8
# The shortest first literal a template is searched for inside a line (rather than at the message's start).
_MIN_ANCHOR = 8
# The least fixed text a template needs to be matched in a line that does not name the rule's code.
_MIN_LITERAL = 12
_LEVELS = ("ERROR", "WARNING", "WARN", "INFO", "DEBUG", "CRITICAL", "FATAL")
# Characters ignored at the end of a message and of a template: a final period, Markdown backticks, quotes.
_END = ".`'\""
_QUOTES = "`'\""  # what a Markdown span or a repr closes a message with


@dataclass
class Explanation:
    """A rule found by code or name, or matched in pasted text: the values read back from the message, the
    line it was read from, and what its numbers say (`reasons`, with the context when one is given)."""

    rule: Rule
    values: dict[str, str] = field(default_factory=dict)
    matched_message: str | None = None
    line: int | None = None  # 1-based line of the paste
    reasons: list[str] = field(default_factory=list)
    count: int = 1  # how many times the same message appears (one per rank in a TP log)

    def to_dict(self) -> dict[str, Any]:
        rule = self.rule
        return {
            "code": rule.code,
            "name": rule.name,
            "severity": rule.severity,
            "summary": rule.summary,
            "message_template": rule.message,
            "explanation": rule.explanation,
            "causes": list(rule.causes),
            "fixes": list(rule.fixes),
            "example": str(rule.example) if rule.example is not None else "",
            "engines": rule.engines,
            "wrapper": dict(rule.wrapper),
            "values": self.values,
            "matched_message": self.matched_message,
            "line": self.line,
            "count": self.count,
            "reasons": list(self.reasons),
        }


# The names `explain` gives a model's numbers in a Context (`model_widths`; `api.model_numbers` reads them from a
# checkpoint, a cached repo id or a built-in description).
H_HEADS = "num_k_heads (H)"
HV_HEADS = "num_v_heads (HV)"
KDA_HEADS = "num_heads (H = HV)"  # a KDA model whose key and value head counts are one (Kimi-Linear)
QKV_WIDTH = "mixed_qkv width (2*H*K + HV*V)"
QKVZ_WIDTH = "in_proj_qkvz width (2*H*K + 2*HV*V)"
V_WIDTH = "out/v width (HV*V)"
BA_WIDTH = "in_proj_ba width (2*HV)"
KDA_GATE_WIDTH = "a/dt_bias width (HV*K)"  # KDA's per-key-channel gate input and time-step bias
K_DIM = "head_k_dim (K)"
V_DIM = "head_v_dim (V)"


class ModelNumbers(NamedTuple):
    """A model's full (unsharded) widths and head counts, and its head sizes, by the names `explain` reports."""

    widths: dict[str, int]
    head_dims: dict[str, int]


def model_widths(kind: str, H: int, HV: int, K: int, V: int, attention_heads: int | None = None) -> ModelNumbers:
    """The numbers of a linear-attention layer with H key and HV value heads of sizes K and V: a GDN layer (`kind`
    "gdn"), whose fused projections are qkvz and ba, or a KDA one, with separate q/k/v projections (no z) and a
    per-key-channel gate; `attention_heads`, the full-attention layers' head count, when the model has one."""
    spec = variant_spec(kind)
    widths = {KDA_HEADS: HV} if spec.symmetric_heads and H == HV else {H_HEADS: H, HV_HEADS: HV}
    widths |= {QKV_WIDTH: 2 * H * K + HV * V, V_WIDTH: HV * V}
    if spec.gate_per_key:
        widths[KDA_GATE_WIDTH] = HV * K
    if spec.fused_z_projection:
        widths[QKVZ_WIDTH] = 2 * H * K + 2 * HV * V
    if spec.fused_ba_projection:
        widths[BA_WIDTH] = 2 * HV
    if attention_heads:
        widths["num_attention_heads (full attention)"] = attention_heads
    return ModelNumbers(widths, {K_DIM: K, V_DIM: V})


@dataclass(frozen=True)
class Context:
    """What the user knows about the deployment (`--model/--tp/--engine/--batch`), for reasoning on numbers.

    `widths` names the model's full (unsharded) widths and head counts: {"num_v_heads (HV)": 32, ...};
    `head_dims` its head sizes ({"head_v_dim (V)": 128, ...}), which tensor parallelism never splits;
    `profile` is the engine's (`engines.profile_for`), whose flags and limits the remedies name."""

    tp: int | None = None
    batch: int | None = None
    profile: EngineProfile | None = None
    widths: Mapping[str, int] = field(default_factory=dict)
    head_dims: Mapping[str, int] = field(default_factory=dict)


# Code -> a function of (values, context) giving sentences about the message's numbers. Rule modules add
# theirs (`reasoner`); kept here, next to the matcher, so library callers get the same reasoning as the CLI.
REASONERS: dict[str, Callable[[Mapping[str, str], Context], list[str]]] = {}  # see `Reasoner` below
# Code -> fields that must read as integers for a match to count (a template starting with a field would
# otherwise match any prose ending the same way).
NUMERIC_FIELDS: dict[str, frozenset[str]] = {}
# Code -> fields that must read as a dotted name (`torch.bfloat16`): a source line quoting the message's format
# string (`{A_log.dtype}"`) is no error.
NAME_FIELDS: dict[str, frozenset[str]] = {}

Reasoner = Callable[[Mapping[str, str], Context], list[str]]


def reasoner(code: str, numeric: Iterable[str] = (), names: Iterable[str] = ()) -> Callable[[Reasoner], Reasoner]:
    def wrap(function: Reasoner) -> Reasoner:
        REASONERS[code] = function
        if numeric:
            NUMERIC_FIELDS[code] = frozenset(numeric)
        if names:
            NAME_FIELDS[code] = frozenset(names)
        return function

    return wrap


@cache
def _pieces(message: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The literals (one more than the fields) and the fields of a template."""
    literals, fields = [""], []
    for literal, name, _, _ in string.Formatter().parse(message):
        literals[-1] += literal
        if name is not None:
            fields.append(name)
            literals.append("")
    return tuple(literals), tuple(fields)


@cache
def _match_pieces(message: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """`_pieces` with the template's end stripped of `_END` (what a line, stripped the same way, is matched to)."""
    literals, fields = _pieces(message)
    return (*literals[:-1], literals[-1].rstrip(_END)), fields


def _literal_length(rule: Rule) -> int:
    return sum(len(literal) for literal in _pieces(rule.message)[0])


def _group(name: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)


def _fullmatch(literals: tuple[str, ...], fields: tuple[str, ...], line: str) -> dict[str, str] | None:
    """The lazy regex's first match of the template against `line`, by literal search (linear)."""
    if not line.startswith(literals[0]):
        return None
    if not fields:
        return {} if line == literals[0] else None
    last = literals[-1]
    if not line.endswith(last):
        return None
    tail_start = len(line) - len(last)
    values: dict[str, str] = {}
    position = len(literals[0])
    for index, name in enumerate(fields):
        end = tail_start if index == len(fields) - 1 else line.find(literals[index + 1], position + 1)
        if end <= position:  # not found (-1), or an empty field
            return None
        value = line[position:end]
        if values.setdefault(name, value) != value:  # a repeated field must read the same
            return None
        position = end + len(literals[index + 1])
    return values if position == len(line) else None


def clean_line(line: str) -> str:
    """A pasted line without ANSI colours or control characters, cut to `MAX_LINE`, stripped."""
    if "\x1b" in line:
        line = _ANSI.sub("", line[: 4 * MAX_LINE])
    if "#0" in line:  # rsyslog writes ESC as `#033` and CR as `#015`
        line = _SYSLOG_ESCAPE.sub("", line[: 4 * MAX_LINE].rstrip())
    return line[:MAX_LINE].translate(_CONTROL).strip()


def _without_exception_prefix(line: str) -> str:
    """`ValueError: msg` / `torch.AcceleratorError: msg` -> `msg`, by scanning (no regex)."""
    colon = line.find(":")
    if colon <= 0:
        return line
    name = line[:colon].rstrip()
    if not name.endswith(_SUFFIXES) or not all(c.isalnum() or c in "._" for c in name):
        return line
    stem = name[: -len("Error")] if name.endswith("Error") else name[: -len("Exception")]
    return line[colon + 1:].lstrip() if stem.rstrip(".") else line


def message_of(line: str) -> str:
    """The message in a log line: without vLLM's `(Worker_TP1 pid=1) ERROR 11-30 10:00:00 [file.py:42] `, sglang's
    `[2026-11-30 10:00:00 TP0] `, a `<level>:<logger>:` prefix, and the exception's name."""
    body = line
    for _ in range(4):  # prefixes stack: `(Worker pid=1) ERROR <date> [file:1] `
        before = body
        if body.startswith("(") and (close := body.find(") ")) > 0:
            body = body[close + 2:].lstrip()
        word = body.split(" ", 1)[0].rstrip(":")
        if word in _LEVELS:
            body = body[len(word):].lstrip(" :")
            # `11-30 10:00:00 [file.py:42] ` after the level
            bracket = body.find("] ")
            if bracket > 0 and body[:1].isdigit() and "[" in body[:bracket]:
                body = body[bracket + 2:].lstrip()
        if body.startswith("[") and (close := body.find("] ")) > 0 and any(c.isdigit() for c in body[:close]):
            body = body[close + 2:].lstrip()
        if body == before:
            break
    return _without_exception_prefix(body)


def _is_name(value: str) -> bool:
    return bool(value) and value[0].isalpha() and all(c.isalnum() or c in "._" for c in value)


def _fields_ok(rule: Rule, values: Mapping[str, str]) -> bool:
    numeric = NUMERIC_FIELDS.get(rule.code)
    if numeric and not all(values.get(name, "").strip().isdigit() for name in numeric):
        return False
    names = NAME_FIELDS.get(rule.code)
    return not names or all(_is_name(values.get(name, "").strip()) for name in names)


def _repr_messages(line: str) -> list[str]:
    """The messages of exceptions written in Python's repr form, `ValueError('msg')` (`repr(error)`, a list of
    exceptions in a log): the text between the quotes, unescaped; by scanning."""
    found: list[str] = []
    for suffix in _SUFFIXES:
        for quote in "'\"":
            opener, closer = f"{suffix}({quote}", f"{quote})"
            position = 0
            while (at := line.find(opener, position)) >= 0 and len(found) < _MAX_STARTS:
                start = at + len(opener)
                end = line.find(closer, start)
                if end < 0:
                    break
                found.append(line[start:end].replace(f"\\{quote}", quote).replace("\\\\", "\\"))
                position = end + len(closer)
    return found


def _run_end(line: str, at: int) -> int:
    """The end of the run of backticks that starts at `at`."""
    while at < len(line) and line[at] == "`":
        at += 1
    return at


def _code_spans(line: str) -> list[str]:
    """The text inside the first Markdown code spans of two or more backticks in `line` (`` `out` must be
    contiguous. ``), without the spaces that pad it; by scanning. A span closes with a run of its opening run's
    length (a longer or shorter run is part of the text)."""
    found: list[str] = []
    position = 0
    for _ in range(_MAX_STARTS):
        start = line.find("``", position)
        if start < 0:
            break
        opened = _run_end(line, start)
        run = opened - start
        close = line.find("`" * run, opened)
        while close >= 0 and (ended := _run_end(line, close)) - close != run:
            close = line.find("`" * run, ended)
        if close < 0:
            break
        if line[opened:close].strip():
            found.append(line[opened:close].strip())
        position = close + run
    return found


def _message_starts(line: str) -> list[str]:
    """Where the message may start in `line`: after the known prefixes, inside a Markdown code span, and after
    each of the first separators (`] `, `) `, `| `, `: `) for prefixes nobody listed (docker compose's `svc  | `,
    torchrun's `[rank4]: `)."""
    starts = [message_of(line), *_repr_messages(line), *(message_of(span) for span in _code_spans(line))]
    position = 0
    for _ in range(_MAX_STARTS):
        cut = min((at + len(sep) for sep in _SEPARATORS if (at := line.find(sep, position)) >= 0), default=-1)
        if cut < 0:
            break
        starts.append(_without_exception_prefix(line[cut:].lstrip()))
        position = cut
    return list(dict.fromkeys(_unquoted(start, line) for start in starts))


def _match_line(line: str, rules: list[Rule]) -> tuple[Rule, dict[str, str], str] | None:
    """The rule (longest literal text first) whose template is the message of `line`, or starts where its
    first literal occurs in the line and runs to the line's end."""
    starts: list[str] | None = None
    for rule in rules:
        literals, fields = _match_pieces(rule.message)
        if _key_literal(rule.message) not in line:  # the cheap test first: most rules are not in a line
            continue
        if _literal_length(rule) < _MIN_LITERAL and rule.code not in line:  # too generic without its code
            continue
        if starts is None:
            starts = _message_starts(line)
        texts = list(starts)
        if len(literals[0]) >= _MIN_ANCHOR:  # a short first literal (a backtick) anchors anywhere: too loose
            at = line.find(literals[0])
            if at >= 0:
                texts.append(_unquoted(line[at:], line))
        exact = _pieces(rule.message)
        for text in texts:
            # The template as written first (what a lazy regex would read); then both ends without `_END`.
            values = _fullmatch(*exact, text)
            if values is None or not _fields_ok(rule, values):
                values = _fullmatch(literals, fields, text.rstrip(_END))
            if values is not None and _fields_ok(rule, values):
                return rule, {_group(k): v for k, v in values.items()}, text
    return None


def _unquoted(text: str, line: str) -> str:
    """`text`, a candidate message cut from `line`, without the quotes a paste put around it: `"msg"` and `'msg'` as
    a whole, or a closing quote or backtick whose twin opens the message (`RuntimeError: 'msg'`, a Markdown span)
    or the whole line (`"RuntimeError: msg"`). A message's own quotes stay: its closing backtick, an apostrophe
    (`tensor's`)."""
    while len(text) > 1 and text[-1] in _QUOTES:
        quote = text[-1]
        if quote != "`" and text[0] == quote:  # the whole candidate quoted (a message may open with a backtick)
            text = text[1:-1]
            continue
        at = line.find(text)
        if (at > 0 and line[at - 1] == quote) or line.lstrip()[:1] == quote:  # opened before it, or the whole paste
            text = text[:-1]
            continue
        break
    return text


@cache
def _key_literal(message: str) -> str:
    return max(_match_pieces(message)[0], key=len)


def _ranked() -> list[Rule]:
    return sorted(RULES.values(), key=_literal_length, reverse=True)


def _prefix_match(literals: tuple[str, ...], fields: tuple[str, ...], text: str) -> tuple[dict[str, str], str] | None:
    """A template read on a message cut short: `text` runs through the first literal and at least one field and
    stops inside the template (inside a literal, or at a literal's end with fields left); the values read, and the
    template's text that is missing. By literal search (linear)."""
    if not fields or not text.startswith(literals[0]) or len(text) <= len(literals[0]):
        return None
    values: dict[str, str] = {}
    position = len(literals[0])
    for index, name in enumerate(fields):
        following = literals[index + 1]
        end = text.find(following, position + 1) if following else -1
        if end <= position:  # the text ends inside this field's value or inside the literal after it
            for cut in range(position + 1, len(text)):
                rest = text[cut:]
                if following.startswith(rest):
                    values[name] = text[position:cut]
                    return values, _template_from(literals, fields, index + 1, len(rest))
            return None
        if values.setdefault(name, text[position:end]) != text[position:end]:
            return None
        position = end + len(following)
        if position == len(text):
            if index + 1 == len(fields):
                return None  # the whole template: a full match, not a cut one
            return values, _template_from(literals, fields, index + 2, 0)
    return None


def _template_from(literals: tuple[str, ...], fields: tuple[str, ...], literal: int, skip: int) -> str:
    """The template from literal `literal` (less its first `skip` characters) on, fields as `{name}`."""
    parts = [literals[literal][skip:]] if literal < len(literals) else []
    for index in range(literal, len(fields)):
        parts += ["{" + fields[index] + "}", literals[index + 1]]
    return "".join(parts).strip()


# A cut message must hold this much of its template's fixed text to count (besides every numeric field).
_MIN_CUT_LITERAL = 24


def _partial_match(line: str, rules: list[Rule]) -> tuple[Rule, dict[str, str], str, str] | None:
    """A template inside a longer line (a wrapper's message quoting it, then more text), or cut short (a log
    line cut before its end); the rule, the values, the message read and what is missing ("" when nothing)."""
    starts: list[str] | None = None
    for rule in rules:
        literals, fields = _match_pieces(rule.message)
        if len(literals[0]) < _MIN_ANCHOR or not fields or literals[0] not in line:
            continue
        if starts is None:
            starts = _message_starts(line)
        at = line.find(literals[0])
        texts = [text for text in starts if text.startswith(literals[0])] + [line[at:]]
        last = literals[-1]
        for text in texts:
            if len(last) >= _MIN_ANCHOR and (end := text.find(last)) >= 0:  # the message, then more text
                candidate = text[: end + len(last)]
                values = _fullmatch(literals, fields, candidate)
                if values is not None and _fields_ok(rule, values):
                    return rule, {_group(k): v for k, v in values.items()}, candidate, ""
            cut = _prefix_match(literals, fields, _unquoted(text, line).rstrip(_END))
            if cut is None or not _fields_ok(rule, cut[0]) or not NUMERIC_FIELDS.get(rule.code):
                continue
            values, missing = cut
            kept = len(text) - sum(len(value) for value in values.values())
            if kept >= _MIN_CUT_LITERAL:
                return rule, {_group(k): v for k, v in values.items()}, text.rstrip(), missing
    return None


# How many following lines a message wrapped over several lines may continue on.
_MAX_CONTINUATION = 3


def find_all(text: str, context: Context | None = None) -> list[Explanation]:
    """Every known error in `text`, in order of appearance; the same message repeated (once per rank) is one
    explanation with its count. Reasons about each one's numbers with `context`. A message wrapped over up to
    four lines is read whole; one inside a longer line or cut short is read on what is there, and the reasons
    say what is missing."""
    rules = _ranked()
    found: dict[tuple[str, str], Explanation] = {}
    seen: dict[str, tuple[Rule, dict[str, str], str] | None] = {}  # a log repeats its lines
    lines = [clean_line(raw) for raw in text[:MAX_PASTE].splitlines()]
    skip_to = 0
    for number, line in enumerate(lines, 1):
        if number <= skip_to or not line:
            continue
        hit = seen[line] if line in seen else seen.setdefault(line, _match_line(line, rules))
        missing = ""
        if hit is None:
            joined = line
            for extra, following in enumerate(lines[number:number + _MAX_CONTINUATION], 1):
                if not following:
                    break
                joined = f"{joined} {following}"
                hit = _match_line(joined, rules)
                if hit is not None and any(hit[2] in single for single in lines[number:number + extra]):
                    hit = None  # a later line holds the whole message: it is read there, on its own line
                    break
                if hit is not None:
                    skip_to = number + extra
                    break
        if hit is None:
            partial = _partial_match(line, rules)
            if partial is None:
                continue
            hit = (partial[0], partial[1], partial[2])
            missing = partial[3]
        rule, values, message = hit
        key = (rule.code, message)
        if key in found:
            found[key].count += 1
            continue
        told = reasons(rule.code, values, context or Context())
        if missing:
            missing = missing.lstrip(". ")
            shown = missing if len(missing) <= 80 else missing[:77].rsplit(" ", 1)[0] + " ..."
            told = [f"the message is cut short: the engine's text goes on with `{shown}`", *told]
        found[key] = Explanation(rule, values, message, number, told)
    _follow_ons(lines, found, context or Context())
    return sorted(found.values(), key=lambda item: item.line or 0)


def _follow_ons(lines: list[str], found: dict[tuple[str, str], Explanation], context: Context) -> None:
    """A rule whose message line is not in the paste, read from a line printed after it (`Rule.follow_on`)."""
    have = {code for code, _ in found}
    for rule in _ranked():
        if not rule.follow_on or rule.code in have:
            continue
        for number, line in enumerate(lines, 1):
            marker = next((text for text in rule.follow_on if text in line), None)
            if marker is None:
                continue
            told = [f"the message's own line (`{rule.message}`) is not in the paste: read from the line that "
                    f"follows it, which names `{marker}`", *reasons(rule.code, {}, context)]
            found[(rule.code, line)] = Explanation(rule, {}, message_of(line), number, told)
            break


def reasons(code: str, values: Mapping[str, str], context: Context) -> list[str]:
    function = REASONERS.get(code)
    if function is None:
        return []
    try:
        return function(values, context)
    except (ValueError, ZeroDivisionError, OverflowError):  # numbers the message did not hold as expected
        return []


def match_message(text: str, context: Context | None = None) -> Explanation | None:
    """The first known error in `text` (`find_all`'s first)."""
    found = find_all(text, context)
    return found[0] if found else None


def explain(query: str) -> Explanation | None:
    """A rule by code (`GDR212`), name (`state-pool-not-4d`) or the first error in a pasted message."""
    if len(query) <= 64:  # a code or a name is short: a long paste is no lookup key
        rule = get(query)
        if rule is not None:
            return Explanation(rule)
    return match_message(query)


# -- numbers ------------------------------------------------------------------------------------------------

def ints(text: str) -> list[int]:
    """The integers in `text`, in order (`(4, 32)` -> [4, 32]); by scanning."""
    out: list[int] = []
    digits = ""
    for char in text + " ":
        if char.isdigit():
            digits += char
        elif digits:
            out.append(int(digits[:18]))
            digits = ""
    return out


def tp_factor(got: int, want: int) -> int | None:
    """k > 1 with got == k * want."""
    if want > 0 and got > want and got % want == 0:
        return got // want
    return None


def full_value_heads(context: Context) -> int | None:
    """The model's (unsharded) value head count, HV, when the context names a model."""
    return context.widths.get(HV_HEADS, context.widths.get(KDA_HEADS))


def head_k_dim(context: Context) -> int | None:
    """The model's key head size, K, when the context names a model."""
    return context.head_dims.get(K_DIM)


def head_v_dim(context: Context) -> int | None:
    """The model's value head size, V, when the context names a model."""
    return context.head_dims.get(V_DIM)


def model_kind(context: Context) -> str | None:
    """"kda" or "gdn" for the model the context names (`model_widths` gives a KDA model the per-channel gate width,
    a GDN one the fused ba width), None without a model."""
    for spec in VARIANTS.values():
        if (spec.gate_per_key and KDA_GATE_WIDTH in context.widths) or (
                spec.fused_ba_projection and BA_WIDTH in context.widths):
            return spec.name
    return None


def named_widths(value: int, context: Context, only: Iterable[str] | None = None) -> list[str]:
    """Which of the model's widths `value` is, in full or per rank at some tp (tp = context's first); `only`
    keeps the widths of those names."""
    out = []
    # With a known tp, only the full and that rank's widths: other splits are coincidences.
    tps = [context.tp, 1] if context.tp else [1, 2, 4, 8, 16]
    kept = None if only is None else set(only)
    for name, full in context.widths.items():
        if kept is not None and name not in kept:
            continue
        for tp in tps:
            if full % tp == 0 and full // tp == value:
                out.append(f"{value} is the model's {name}" + (f" per rank at tp={tp} ({full}/{tp})" if tp > 1
                                                                 else f" (unsharded, {full})"))
                break
    return out


def named_head_dims(value: int, context: Context) -> list[str]:
    """Which of the model's head sizes `value` is: a size tensor parallelism never splits."""
    names = [name for name, size in context.head_dims.items() if size == value]
    if not names:
        return []
    return [f"{value} is the model's {' and '.join(names)}: tensor parallelism never splits a head's size"]


def _named(values: Iterable[int], context: Context, only: Iterable[str] | None = None) -> list[str]:
    """`named_widths` of each value, once."""
    kept = None if only is None else tuple(only)
    return [sentence for value in dict.fromkeys(values) for sentence in named_widths(value, context, kept)]


def _you_said(k: int, context: Context) -> str:
    return "" if context.tp in (None, k) else f" (you said --tp {context.tp})"


# The largest factor read as a TP split when the user gave no --tp of that size: a larger one is a head size
# (KDA's `dt_bias` [HV*K] has K values per head), not a number of ranks.
_MAX_SPLIT = 64


# The largest TP size a factor is read as without the model's head size to tell (KDA's `dt_bias` of 32 per-head
# values where 1024 = 8 heads × K=128 are due is a factor of 32: K over the TP size, not tp=32).
_LIKELY_TP = 16


def _tp_split(got: int, want: int, context: Context) -> int | None:
    k = tp_factor(got, want)
    return k if k is not None and (k <= _MAX_SPLIT or k == context.tp) else None


def _shard_sentences(got: int, HV: int, context: Context, *, unsharded: str, sharded: str) -> list[str]:
    """The TP factor between a per-value-head size `got` and the pool's HV: `unsharded` and `sharded` end the
    sentence for got = k × HV (the tensor is whole while the pool is a rank's) and HV = k × got (the reverse),
    with {k} and {got} and {HV} filled in."""
    full = full_value_heads(context)
    if full and context.tp and got not in (full, HV) and full % got == 0 and full // got != context.tp:
        # Neither whole nor this rank's: the model's HV split for another TP size (HV/j, j not the one given).
        j = full // got
        # (the fix to this rank's HV, whichever way the tensor is off: the pool is the one the TP size gives)
        fix = unsharded.format(k=j, got=got, HV=HV, said="").split("; ", 1)[-1]
        return [f"{got} = {full}/{j}: sized for tp={j} (the model's {full} value heads over {j} ranks) while the "
                f"pool holds this rank's {HV} at tp={context.tp}; {fix}"]
    if (k := _tp_split(got, HV, context)) is not None:
        return [f"{got} = {k} × {HV}: " + unsharded.format(k=k, got=got, HV=HV, said=_you_said(k, context))]
    if (k := _tp_split(HV, got, context)) is not None:
        return [f"{HV} = {k} × {got}: " + sharded.format(k=k, got=got, HV=HV, said=_you_said(k, context))]
    return []


@reasoner("GDR214")
def _gate_heads(values: Mapping[str, str], context: Context) -> list[str]:
    HV = int(values["HV"])
    got = ints(values.get("a_shape", ""))[-1:] or ints(values.get("b_shape", ""))[-1:]
    if not got:
        return []
    width = got[0]
    out = _shard_sentences(
        width, HV, context,
        unsharded=("the gates are unsharded while the pool is sharded for tp={k}{said}; pass this rank's {HV} gate "
                   "columns (the column slice [rank*{HV}:(rank+1)*{HV}])"),
        sharded=("the gates are this rank's shard for tp={k}{said} while the pool, `A_log` and `out` are sized with "
                 "the full {HV} value heads; size them with HV_l = {got}"))
    if width == 2 * HV and BA_WIDTH in context.widths:
        # A GDN model's fused in_proj_ba gives b and a together: the likeliest cause, before any split
        out.insert(0, f"{width} = 2 × {HV}: b and a together, as the fused `in_proj_ba` projection gives them for "
                      f"{HV} value heads; split its output into `b` and `a`, {HV} columns each")
    return out + _named((width, HV), context)


@reasoner("GDR215")
def _decay_sizes(values: Mapping[str, str], context: Context) -> list[str]:
    HV = int(values["HV"])
    sizes = {"A_log": int(values["A_log_numel"]), "dt_bias": int(values["dt_bias_numel"])}
    if sizes["A_log"] == sizes["dt_bias"]:  # one sentence for both, as the wrapper's message gives them
        wrong = {"`A_log` and `dt_bias` are": sizes["A_log"]}
    else:
        wrong = {f"`{name}` is": got for name, got in sizes.items() if got != HV}
    K = head_k_dim(context)
    out: list[str] = []
    for what, got in wrong.items():
        per_head = got // HV if HV > 0 and got % HV == 0 else None
        # KDA's `dt_bias` holds one value per key channel, [HV*K]: K (the model's, or more per head than any TP)
        if what.startswith("`dt_bias`") and per_head is not None and (per_head == K or per_head > _MAX_SPLIT):
            out.append(f"{got} = {HV} × {per_head}: `dt_bias` is HV*K long, KDA's per-channel layout: a KDA model "
                       f"decodes with the KDA kernel")
            continue
        out += _shard_sentences(
            got, HV, context,
            unsharded=(what + " unsharded while the pool is sharded for tp={k}{said}; pass this rank's {HV} "
                       "elements (the slice [rank*{HV}:(rank+1)*{HV}])"),
            sharded=(what + " this rank's shard for tp={k}{said} while the pool, the gates and `out` are sized "
                     "with the full {HV} value heads; size them with HV_l = {got}"))
    return out + _named((*wrong.values(), HV), context)


@reasoner("GDR216")
def _out_shape(values: Mapping[str, str], context: Context) -> list[str]:
    expected, got = ints(values["expected"]), ints(values["shape"])
    if len(expected) != 4:
        return []
    B, _, HV, V = expected
    if len(got) != 4:
        missing = " (`out` lacks the token axis: `out.unsqueeze(1)`)" if got == [B, HV, V] else ""
        return [f"`out` has {len(got)} dimensions, the kernel writes 4: [B, 1, HV, V] = ({B}, 1, {HV}, {V})"
                + missing]
    if got == [1, B, HV, V] and B != 1:
        return [f"`out` is [1, B, HV, V] = (1, {B}, {HV}, {V}), the layout after `out.transpose(0, 1)`: pass the "
                f"[B, 1, HV, V] buffer before transposing"]
    out: list[str] = []
    for axis, (name, g, e) in enumerate(zip(("B", "1", "HV", "V"), got, expected, strict=True)):
        if g == e:
            continue
        heads = _shard_sentences(  # ({B}, 1, {HV}, {V}): B and V now, the pool's HV by `_shard_sentences`
            g, e, context,
            unsharded="`out` has the full {got} value heads while the pool is sharded for tp={k}{said}; allocate "
                      f"`out` as ({B}, 1, {{HV}}, {V})",
            sharded="`out` has this rank's {got} value heads for tp={k}{said} while the pool, the gates and `A_log` "
                    "are sized with the full {HV}; size them with HV_l = {got}") if name == "HV" else []
        out += heads or [f"dim {axis} ({name}): {g} where the pool gives {e}"]
        if name == "HV":
            out += _named((g, e), context)
    return out


@reasoner("GDR217")
def _packed_width(values: Mapping[str, str], context: Context) -> list[str]:
    width, HV, V = int(values["qkv_dim"]), int(values["HV"]), int(values["V"])
    qk = width - HV * V
    left = f"{width} - HV*V = {width} - {HV}*{V} = {qk}: "
    if qk < 0:
        out = [left + f"`mixed_qkv` is narrower than the pool's HV*V ({HV * V}): no width is left for q and k"]
    elif qk == 0:
        out = [left + "`mixed_qkv` is exactly HV*V wide (the v block alone): no width is left for q and k"]
    elif qk % 2:
        out = [left + "`mixed_qkv` is wider than HV*V, but q and k are two blocks of H*K: the rest must be even"]
    else:
        out = [left + "q and k get (width - HV*V) / 2 each"]
    full_heads = full_value_heads(context)
    tp = context.tp
    if tp and tp > 1 and full_heads is not None and full_heads % tp == 0:
        if HV == full_heads:
            out.append(f"{HV} = {tp} × {HV // tp}: the pool holds the model's full {HV} value heads, unsharded for "
                       f"tp={tp}; a rank's pool holds {HV // tp}")
        full_width = context.widths.get(QKV_WIDTH)
        if full_width is not None and full_width % tp == 0:
            out.append(f"at tp={tp} a rank's `mixed_qkv` is {full_width // tp} wide ({full_width}/{tp}) with "
                       f"{full_heads // tp} value heads in its pool")
    return out + _named((width, HV), context)


# -- KDA (GDR221-GDR224): `a` and `dt_bias` hold K values per value head, [HV*K]; `b` and `A_log` one, [HV] -------

# The model's numbers a KDA message's are named by (not `out`'s HV*V, which equals HV*K when K = V).
_KDA_NAMES = (HV_HEADS, KDA_HEADS, KDA_GATE_WIDTH)


def _per_channel(got: int, HV: int, K: int | None) -> int | None:
    """got / HV when `got` holds K values for each of HV heads (the model's K, or, without a model, more values per
    head than any TP split gives)."""
    if HV <= 0 or got <= HV or got % HV:
        return None
    per = got // HV
    return per if per == K or (K is None and per > _MAX_SPLIT) else None


@reasoner("GDR221", numeric=("HV", "K"))
def _kda_gate_width(values: Mapping[str, str], context: Context) -> list[str]:
    HV, K = int(values["HV"]), int(values["K"])
    shape = ints(values["a_shape"])
    if len(shape) != 2 or HV <= 0 or K <= 0:
        return []
    B, width = shape
    want = HV * K
    out = [f"`a` must be [B, HV*K] = ({B}, {HV}*{K}) = ({B}, {want}): one gate input per key channel of each of the "
           f"pool's {HV} value heads (Kimi-Linear's `f_b_proj` output)"]
    if width == HV:
        out.append(f"{width} = HV: one value per head, the layout of `b` (the `b_proj` output) and of GDN's gate: pass "
                   f"the `f_b_proj` output, ({B}, {want}) (if `b` holds {want} columns, `a` and `b` are swapped)")
    elif width == K:
        out.append(f"{width} = K: one head's channels, the width of Kimi-Linear's low-rank `f_a_proj` output: `a` is "
                   f"`f_b_proj` applied to it, ({B}, {want})")
    elif width % K == 0:
        heads = width // K
        out.append(f"{width} = {heads} × {K}: `a` holds the channels of {heads} value heads where the pool has {HV}")
        out += _shard_sentences(
            heads, HV, context,
            unsharded=("`a` is unsharded while the pool is sharded for tp={k}{said}; pass this rank's {HV} heads' "
                       f"channels, {want} columns (the column slice [rank*{want}:(rank+1)*{want}])"),
            sharded=("`a` is this rank's shard for tp={k}{said} while the pool holds the full {HV} value heads; at "
                     "tp={k} size the pool (and `b`, `A_log`, `dt_bias`, `out`) with HV_l = {got}"))
    elif (k := _tp_split(width, HV, context)) is not None:
        out.append(f"{width} = {k} × {HV}: one value per head of {width} heads, a per-head gate (`b`'s or GDN's "
                   f"layout) unsharded for tp={k}{_you_said(k, context)}: pass this rank's `f_b_proj` output, "
                   f"({B}, {want})")
    else:
        out.append(f"{width} is not a multiple of K = {K}: `a` holds no whole heads' channels; pass the `f_b_proj` "
                   f"output, ({B}, {want})")
    return out + _named((width, HV), context, _KDA_NAMES)


@reasoner("GDR222", numeric=("HV",))
def _kda_beta_heads(values: Mapping[str, str], context: Context) -> list[str]:
    HV = int(values["HV"])
    shape = ints(values["b_shape"])
    if len(shape) != 2 or HV <= 0:
        return []
    B, width = shape
    out = [f"`b` must be [B, HV] = ({B}, {HV}): one beta logit per value head (the `b_proj` output)"]
    if (per := _per_channel(width, HV, head_k_dim(context))) is not None:
        out.append(f"{width} = {HV} × {per}: `b` holds one value per key channel (HV*K), the width of `a` and of the "
                   f"output gate (`g_b_proj`): pass the per-head `b_proj` output, ({B}, {HV})")
    else:
        out += _shard_sentences(
            width, HV, context,
            unsharded=("`b` is unsharded while the pool is sharded for tp={k}{said}; pass this rank's {HV} columns "
                       "(the column slice [rank*{HV}:(rank+1)*{HV}])"),
            sharded=("`b` is this rank's shard for tp={k}{said} while the pool and `a` hold the full {HV} value "
                     "heads; at tp={k} size them (and `A_log`, `dt_bias`, `out`) with HV_l = {got}"))
    return out + _named((width, HV), context, _KDA_NAMES)


@reasoner("GDR223", numeric=("HV", "numel"))
def _kda_a_log(values: Mapping[str, str], context: Context) -> list[str]:
    HV, got = int(values["HV"]), int(values["numel"])
    if HV <= 0:
        return []
    out = [f"`A_log` must be [HV] = ({HV},): one decay rate per value head (Kimi-Linear's parameter is "
           f"[1, 1, H, 1]: `A_log.reshape(-1)`)"]
    if (per := _per_channel(got, HV, head_k_dim(context))) is not None:
        out.append(f"{got} = {HV} × {per}: HV*K values, the size of KDA's `dt_bias`: `A_log` and `dt_bias` look "
                   f"swapped (`dt_bias` holds one value per key channel, `A_log` one per head)")
    else:
        out += _shard_sentences(
            got, HV, context,
            unsharded=("`A_log` is unsharded while the pool is sharded for tp={k}{said}; pass this rank's {HV} "
                       "values (`A_log.reshape(-1)[rank*{HV}:(rank+1)*{HV}]`)"),
            sharded=("`A_log` is this rank's shard for tp={k}{said} while the pool, `a` and `b` hold the full {HV} "
                     "value heads; at tp={k} size them (and `dt_bias`, `out`) with HV_l = {got}"))
    return out + _named((got, HV), context, _KDA_NAMES)


@reasoner("GDR224", numeric=("HVK", "numel"))
def _kda_dt_bias(values: Mapping[str, str], context: Context) -> list[str]:
    want, got = int(values["HVK"]), int(values["numel"])
    if want <= 0 or got <= 0:
        return []
    K = head_k_dim(context)
    HV = want // K if K and want % K == 0 else None
    pool = f"each of the pool's {HV} value heads" if HV else "each value head"
    out = [f"`dt_bias` must be [HV*K] = ({HV}*{K},) = ({want},)" if HV else f"`dt_bias` must be [HV*K] = ({want},)"]
    out[0] += f": one time-step bias per key channel of {pool}"
    slice_ = f"pass this rank's {want} values (the slice [rank*{want}:(rank+1)*{want}])"
    if K is None:
        if (per := want // got if want % got == 0 else 0) > _MAX_SPLIT:  # more per head than a TP split: K
            out.append(f"{want} = {got} × {per}: `dt_bias` holds one value per head ({got} heads, GDN's layout) "
                       f"where KDA's holds K = {per} per head: pass the KDA layer's [HV*K] `dt_bias` (a GDN model "
                       f"decodes with the GDN kernel)")
        elif (k := tp_factor(want, got)) is not None and k > _LIKELY_TP and k != context.tp:
            # K over the TP size (a per-head bias of the model's heads) or a shard for a TP this large: K tells
            out.append(f"{want} = {k} × {got}: one value per head ({got} heads, GDN's layout) or a shard for "
                       f"tp={k}; with --model gdr-check reads it against the model's K and head count")
        else:  # in elements: without the model's K, the heads are unknown
            out += _shard_sentences(
                got, want, context,
                unsharded="`dt_bias` is unsharded while the pool is sharded for tp={k}{said}; " + slice_,
                sharded=("`dt_bias` is this rank's shard for tp={k}{said} while the pool holds the full heads; at "
                         "tp={k} size the pool (and `a`, `b`, `A_log`, `out`) with HV/{k} heads"))
        return out + _named((got, want), context, _KDA_NAMES)
    if HV is None:
        return out + _named((got, want), context, _KDA_NAMES)
    if got % K:  # not whole heads' channels: one value per head
        out.append(f"{got} is not a multiple of K = {K}: one value per head ({got} heads), GDN's per-head layout, "
                   f"where KDA's `dt_bias` holds K = {K} per head: pass the KDA layer's [HV*K] `dt_bias` (a GDN "
                   f"model decodes with the GDN kernel)")
        if got != HV:  # the per-head count's split, and this rank's slice of the KDA `dt_bias` (not of these values)
            out += _shard_sentences(
                got, HV, context,
                unsharded=(f"the per-head values are unsharded for tp={{k}}{{said}} while the pool holds this rank's "
                           f"{{HV}} heads; this rank's KDA `dt_bias` is HV_l*K = {{HV}}*{K} = {want} values (the "
                           f"slice [rank*{want}:(rank+1)*{want}] of the layer's [HV*K] `dt_bias`, not of these "
                           f"{{got}})"),
                sharded=("the per-head values are this rank's shard for tp={k}{said} while the pool, `a`, `b` and "
                         "`A_log` hold the full {HV} value heads; at tp={k} size them (and `out`) with HV_l = {got}"))
        return out + _named((got, want, HV), context, _KDA_NAMES)
    heads = got // K
    out.append(f"{got} = {heads} × {K}: `dt_bias` holds the channels of {heads} value heads where the pool has {HV}")
    if heads != HV:
        out += _shard_sentences(
            heads, HV, context,
            unsharded="`dt_bias` is unsharded while the pool is sharded for tp={k}{said}; " + slice_,
            sharded=("`dt_bias` is this rank's shard for tp={k}{said} while the pool, `a`, `b` and `A_log` hold "
                     "the full {HV} value heads; at tp={k} size them (and `out`) with HV_l = {got}"))
    return out + _named((got, want, HV), context, _KDA_NAMES)
