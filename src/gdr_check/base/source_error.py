"""`SourceError`: a checkpoint that cannot be read, as one line naming the file, tied to its GDR0xx rule.

The readers raise a subclass per rule (`sources/rules.py`); its message is the rule's template filled with the
fields, so the one-line error and the rule's docs never drift apart.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

from .errors import InputError, display_path, printable
from .registry import Rule, check_values, declared_rule
from .report import Diagnostic, KeyLocation, Location

# Fields that may be given without appearing in the message: they locate the error.
LOCATION_FIELDS = frozenset({"line", "column", "tensor", "shard"})


class SourceError(InputError):
    """The checkpoint cannot be read. `str(e)` is one line: the file, the rule's message, and the fix.

    Raise a subclass, one per GDR0xx rule (`MalformedIndexes(path, reason=...)`); its message is the rule's
    template filled with the fields, so the one-line error and the rule's docs never drift apart.
    """

    rule: ClassVar[Rule]
    fields: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        rule, cls.fields = declared_rule(cls, LOCATION_FIELDS)
        cls.code = rule.code

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        /,
        *,
        fix: str | None = None,
        location: KeyLocation | None = None,
        **values: Any,
    ) -> None:
        rule = self.rule
        check_values(type(self), rule, self.fields, values)
        self.name = rule.name
        self.path = display_path(path) if path is not None else None
        self.values = {key: printable(value) for key, value in values.items()}
        self.message = rule.message.format(**self.values)
        self.fixes: list[str] = [printable(fix, 400)] if fix else list(rule.fixes[:1])
        # Template values that are also parts of the location (`line`, `tensor`, ...) serve both.
        self.line: int | None = location.line if location else values.get("line")
        self.column: int | None = location.column if location else values.get("column")
        self.end_line: int | None = location.end_line if location else None
        self.end_column: int | None = location.end_column if location else None
        self.tensor: str | None = values.get("tensor")
        self.shard: str | None = values.get("shard")
        where = printable(self.path, 400) if self.path else None
        # Prefix the file unless the message already names it (`path ... does not exist`).
        text = f"{where}: {self.message}" if where and f"`{where}`" not in self.message else self.message
        if self.fixes and not self.message.endswith(self.fixes[0]):  # a message may end with its own fix
            text += f"; help: {self.fixes[0]}"
        super().__init__(text)

    def diagnostic(self) -> Diagnostic:
        """The error as a `Diagnostic` of its rule, located at the file (and line) it names."""
        location = Location(
            file=self.path, line=self.line, column=self.column, end_line=self.end_line,
            end_column=self.end_column, tensor=self.tensor, shard=self.shard,
        )
        return self.rule.located(dict(self.values), list(self.fixes), location)
