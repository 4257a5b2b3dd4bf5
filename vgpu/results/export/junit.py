"""Comparisons as JUnit XML (the Jenkins/Ant schema): one <testsuite> per comparison, one
<testcase> per check. FAIL is a <failure>, INCONCLUSIVE a <skipped> with its reason, so CI
dashboards show it as neither green nor red."""

from __future__ import annotations

import socket
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from vgpu.results.verdict.compare import Check, Comparison


def _message(check: Check) -> str:
    return (
        f"{check.metric}: {check.difference_pct:+.2f}% vs reference "
        f"({check.reference_mean:.6g} {check.unit}); {check.reason}"
    )


def to_junit_xml(comparisons: Sequence[Comparison]) -> str:
    suites = ET.Element("testsuites")
    timestamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S")
    for number, comparison in enumerate(comparisons):
        failures = sum(c.verdict == "FAIL" for c in comparison.checks)
        skipped = sum(c.verdict == "INCONCLUSIVE" for c in comparison.checks)
        suite = ET.SubElement(suites, "testsuite", {
            "name": comparison.title,
            "tests": str(len(comparison.checks)),
            "failures": str(failures),
            "errors": "0",
            "skipped": str(skipped),
            "time": "0",
            "timestamp": timestamp,
            "hostname": socket.gethostname(),
            "id": str(number),
            "package": f"vgpu.{comparison.kind}",
        })
        ET.SubElement(suite, "properties")
        for check in comparison.checks:
            case = ET.SubElement(suite, "testcase", {
                "name": check.metric,
                "classname": f"vgpu.{comparison.kind}",
                "time": "0",
            })
            if check.verdict == "FAIL":
                failure = ET.SubElement(case, "failure", {
                    "message": _message(check), "type": "VerdictFailed",
                })
                failure.text = check.reason
            elif check.verdict == "INCONCLUSIVE":
                ET.SubElement(case, "skipped", {"message": _message(check)})
            out = ET.SubElement(case, "system-out")
            out.text = _message(check)
        ET.SubElement(suite, "system-out").text = (
            f"candidate: {comparison.candidate}\nreference: {comparison.reference}\n"
            f"verdict: {comparison.verdict}"
        )
        ET.SubElement(suite, "system-err").text = ""
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode")


def write_junit(comparisons: Sequence[Comparison], path: Path) -> None:
    path.write_text(to_junit_xml(comparisons) + "\n", encoding="utf-8")
