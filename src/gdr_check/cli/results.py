"""The result types live in the library (`gdr_check.results`); the renderers import them from here too."""

from ..results import FAILING_DEFAULT, FAILING_WITH_WARNINGS, FatalError, Run, TargetResult, exit_code

__all__ = ["FAILING_DEFAULT", "FAILING_WITH_WARNINGS", "FatalError", "Run", "TargetResult", "exit_code"]
