"""Errors that end a run with exit code 2: the input could not be read or the usage was wrong."""

from __future__ import annotations


class UsageFailure(Exception):
    """A bad flag or value: one line, exit 2."""

    code = "usage"
