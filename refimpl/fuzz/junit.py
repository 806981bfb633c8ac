"""JUnit XML for CI systems: one <testsuite> per component, one <testcase> per property.

Outcomes map as CI systems read them: failed -> <failure> (the expected and observed values,
the shrunk example, the reproducer), skipped -> <skipped> with the reason, "not run" ->
<skipped> saying so (never a pass), interrupted -> passed with a note in <system-out>.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from refimpl.fuzz.report import reach_share
from refimpl.fuzz.worker import PropertyResult


def _case(suite: ET.Element, r: PropertyResult, reproducer: str | None) -> None:
    file_part, _, name = r.nodeid.partition("::")
    classname = file_part.removesuffix(".py").replace("/", ".")
    case = ET.SubElement(suite, "testcase", classname=classname, name=name or r.nodeid,
                         time=f"{r.seconds:.3f}")
    share = reach_share(r)
    out = [f"examples: {r.examples}", f"reach: {'n/a' if share is None else f'{share:.0%}'}"]
    if r.outcome == "failed":
        kind = "timed out" if r.timed_out else "property failed"
        failure = ET.SubElement(case, "failure", message=r.message.splitlines()[0][:500]
                                if r.message else kind, type=kind)
        failure.text = "\n".join(filter(None, [r.message, f"example: {r.example}"
                                               if r.example else "",
                                               f"reproducer: python {reproducer}"
                                               if reproducer else ""]))
    elif r.outcome in ("skipped", "not run"):
        ET.SubElement(case, "skipped", message=f"{r.outcome}: {r.reason}")
    elif r.outcome == "interrupted":
        out.append("interrupted: the campaign stopped during this property")
    ET.SubElement(case, "system-out").text = "\n".join(out)


def write_junit(results: Sequence[PropertyResult], reproducers: dict[str, str], path: Path,
                target: str) -> Path:
    root = ET.Element("testsuites", name=f"refimpl fuzz --target {target}")
    for component in dict.fromkeys(r.component for r in results):
        mine = [r for r in results if r.component == component]
        suite = ET.SubElement(
            root, "testsuite", name=component, tests=str(len(mine)),
            failures=str(sum(r.outcome == "failed" for r in mine)), errors="0",
            skipped=str(sum(r.outcome in ("skipped", "not run") for r in mine)),
            time=f"{sum(r.seconds for r in mine):.3f}")
        for r in mine:
            _case(suite, r, reproducers.get(r.nodeid))
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
    return path
