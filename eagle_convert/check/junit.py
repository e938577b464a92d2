"""JUnit XML of a check: one testcase per check, with its figure and threshold as properties.

CI systems (GitHub test reporters, GitLab, Jenkins) show each check as a test: failures carry the
message, skipped checks say why, passes keep their message in system-out.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from eagle_convert.check.checks import TITLES, format_value
from eagle_convert.check.run import CheckReport

SUITE = "eagle-convert check"


def to_junit(report: CheckReport) -> str:
    """The report as a JUnit XML document (a string)."""
    cases, failures, skips = [], 0, 0
    for r in report.results:
        case = ET.Element(
            "testcase", classname=f"check.{r.stage}", name=f"{TITLES[r.stage]}: {r.name}", time=f"{r.seconds:.3f}"
        )
        props = ET.SubElement(case, "properties")
        ET.SubElement(props, "property", name="figure", value=format_value(r.figure))
        ET.SubElement(props, "property", name="threshold", value=format_value(r.threshold))
        if r.passed is False:
            failures += 1
            ET.SubElement(
                case, "failure", message=r.message, type="not-run" if r.not_run else "threshold"
            ).text = f"figure: {format_value(r.figure)}\nthreshold: {format_value(r.threshold)}\n{r.message}"
        elif r.passed is None:
            skips += 1
            ET.SubElement(case, "skipped", message=r.message)
        else:
            ET.SubElement(case, "system-out").text = r.message
        cases.append(case)
    n, total_s = str(len(cases)), f"{report.seconds:.3f}"
    root = ET.Element("testsuites", name=SUITE, tests=n, failures=str(failures), time=total_s)
    suite = ET.SubElement(
        root, "testsuite", name=SUITE, tests=n, failures=str(failures), errors="0", skipped=str(skips), time=total_s
    )
    props = ET.SubElement(suite, "properties")
    for name, value in (
        ("draft", report.draft),
        ("target", report.target),
        ("baseline", report.baseline),
        ("policy", report.policy.source),
        ("vllm_version", report.vllm_version),
        ("engine_starts", report.engine_starts),
        ("draft_swaps", report.draft_swaps),
    ):
        ET.SubElement(props, "property", name=name, value=format_value(value))
    suite.extend(cases)
    ET.SubElement(props, "property", name="verdict", value=report.verdict())
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
