"""Errors that end a run with exit code 2: the input could not be read or the usage was wrong."""

from __future__ import annotations


class UsageFailure(Exception):
    """A bad flag or value: one line, exit 2."""

    code = "usage"


class ReportWriteError(Exception):
    """The report file (`-o/--output-file`) cannot be written: one line, exit 2, and no second attempt to
    write the error record there."""

    code = "output"
