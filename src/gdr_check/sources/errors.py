"""`SourceError`: a checkpoint that cannot be read, as one line naming the file, tied to a GDR0xx rule.

The classes live in `gdr_check.errors` (the base layer) and the rules' subclasses in
`gdr_check.sources.rules`; this module keeps the names the readers import.
"""

from __future__ import annotations

from ..errors import SourceError, display_path, printable

__all__ = ["SourceError", "display_path", "printable"]
