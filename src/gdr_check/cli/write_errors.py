"""The CLI's own error that ends a run with exit code 2 (input errors are `gdr_check.base.errors.InputError`s)."""

from __future__ import annotations


class ReportWriteError(Exception):
    """The report file (`-o/--output-file`) cannot be written: one line, exit 2, and no second attempt to
    write the error record there."""

    code = "output"
