"""`--output-format junit`: one `<testsuite>` per file, one `<testcase>` per diagnostic.

Errors and warnings are `<failure>`s, info diagnostics pass, a target that could not be read is an `<error>`,
and a checkpoint with nothing to report is one passing test case, so that CI shows it was checked.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from ...base.report import Diagnostic
from ...pipeline.results import FatalError, Run, TargetResult
from ..escape import text as safe
from ..escape import xml_text
from .common import entries, tp_suffix, where
from .options import RenderOptions

# XML 1.0 cannot hold most control characters, even escaped.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _xml_text(text: str) -> str:
    """Data as one line of safe text (see `..escape.text`) that XML 1.0 can hold."""
    return _NOT_XML.sub("\ufffd", safe(text))


def _details(result: TargetResult, diagnostic: Diagnostic) -> str:
    place = where(result, diagnostic)
    lines = [f"{diagnostic.severity}[{diagnostic.code}]: {diagnostic.message}", f"  --> {place.prefix()}"]
    location = diagnostic.location
    if location is not None and location.argument and not location.file:
        lines.append(f"  kernel argument `{location.argument}`")
    if location is not None and location.tensor:
        lines.append(f"  tensor `{location.tensor}`" + (f" in {location.shard}" if location.shard else ""))
    lines += [f"  = note: {note}" for note in diagnostic.notes]
    lines += [f"help: {fix}" for fix in diagnostic.fixes]
    return "\n".join(_xml_text(line) for line in lines)  # each line made safe: data cannot start one


class _Suites:
    """Test suites keyed by file, in first-seen order."""

    def __init__(self) -> None:
        self.cases: dict[str, list[ET.Element]] = {}

    def add(self, suite: str, case: ET.Element) -> None:
        self.cases.setdefault(suite, []).append(case)

    def element(self) -> ET.Element:
        root = ET.Element("testsuites", name="gdr-check")
        totals = {"tests": 0, "failures": 0, "errors": 0}
        for name, cases in self.cases.items():
            failures = sum(case.find("failure") is not None for case in cases)
            errors = sum(case.find("error") is not None for case in cases)
            suite = ET.SubElement(root, "testsuite", name=_xml_text(name), tests=str(len(cases)),
                                  failures=str(failures), errors=str(errors))
            suite.extend(cases)
            totals["tests"] += len(cases)
            totals["failures"] += failures
            totals["errors"] += errors
        for key, value in totals.items():
            root.set(key, str(value))
        return root


def _case(name: str, classname: str, **attributes: object) -> ET.Element:
    case = ET.Element("testcase", name=_xml_text(name), classname=_xml_text(classname))
    for key, value in attributes.items():
        if value is not None:
            case.set(key, _xml_text(str(value)))
    return case


def _serialise(root: ET.Element) -> str:
    ET.indent(root, space="  ")
    return xml_text('<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n")


def render(run: Run, options: RenderOptions) -> str:
    suites = _Suites()
    for result, diagnostic in entries(run):
        place = where(result, diagnostic)
        suite = place.path or place.target
        line, column = place.start
        case = _case(f"gdr-check.{diagnostic.code}{tp_suffix(run, result)}", suite,
                     file=place.path, line=line if place.path else None, column=column if place.path else None)
        if result.error is not None:
            problem = ET.SubElement(case, "error", message=_xml_text(diagnostic.message), type=diagnostic.code)
            problem.text = _details(result, diagnostic)
        elif diagnostic.severity in ("error", "warning"):
            problem = ET.SubElement(case, "failure", message=_xml_text(diagnostic.message), type=diagnostic.severity)
            problem.text = _details(result, diagnostic)
        suites.add(suite, case)
    for result in run.results:
        if result.error is not None and result.error.diagnostic is None:
            case = _case(f"gdr-check.{result.error.code}", result.target)
            ET.SubElement(case, "error", message=_xml_text(result.error.message), type=result.error.code)
            suites.add(result.error.path or result.target, case)
        elif result.error is None and not result.diagnostics:
            suite = result.fallback_file() or result.target
            suites.add(suite, _case(f"gdr-check{tp_suffix(run, result)}", suite))
    return _serialise(suites.element())


def render_fatal(error: FatalError) -> str:
    suites = _Suites()
    case = _case(f"gdr-check.{error.code}", "gdr-check")
    ET.SubElement(case, "error", message=_xml_text(error.message), type=error.code)
    suites.add(error.path or "gdr-check", case)
    return _serialise(suites.element())
