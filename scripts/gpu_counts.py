"""The counts a GPU check step leaves behind, read as plain data.

Two sources: pytest's JUnit XML (``pytest -m cuda``, each upstream module) and ``refimpl
fuzz``'s ``report.json``. Each is read into ``{"passed", "failed", "errors", "skipped"}``
counts (as pytest's summary counts them: a test that fails, then errors in its teardown,
counts once in each), the failures with the first line of their message, and (fuzz) each
property's reach; an upstream module's run also leaves how often each swap was reached.
Invariant: a count is read from what the step wrote, never inferred from its exit status; a
file that was not written reads as None ("no result"), never as zero tests.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

OUTCOMES = ("passed", "failed", "errors", "skipped")
#: failures kept per step (the log holds the rest).
MAX_FAILURES = 40


def junit(path: Path) -> dict | None:
    """Counts and failures of one JUnit XML file; None when it was not written."""
    if not path.is_file():
        return None
    root = ET.parse(path).getroot()
    cases = root.iter("testcase")
    tally = dict.fromkeys(OUTCOMES, 0)
    failures = []
    for case in cases:
        outcome = _case_outcome(case)
        tally[outcome] += 1
        if outcome in ("failed", "errors"):
            failures.append(_failure(case, outcome))
    return {"counts": tally, "failures": failures[:MAX_FAILURES]}


def _case_outcome(case: ET.Element) -> str:
    tags = {child.tag for child in case}
    if "error" in tags:
        return "errors"
    if "failure" in tags:
        return "failed"
    return "skipped" if "skipped" in tags else "passed"


def _failure(case: ET.Element, outcome: str) -> dict:
    detail = case.find("error" if outcome == "errors" else "failure")
    message = (detail.get("message") or detail.text or "").strip().splitlines()
    test = "::".join(filter(None, [case.get("classname", "").split(".")[-1], case.get("name")]))
    return {"test": test, "outcome": outcome, "message": message[0][:200] if message else ""}


def total(parts: list[dict | None]) -> dict | None:
    """The counts of several results added up; None when none was written."""
    written = [part for part in parts if part is not None]
    if not written:
        return None
    tally = {k: sum(part["counts"][k] for part in written) for k in OUTCOMES}
    failures = [f for part in written for f in part["failures"]]
    return {"counts": tally, "failures": failures[:MAX_FAILURES]}


def fuzz(path: Path) -> dict | None:
    """Counts, failures and reach of a ``refimpl fuzz`` report.json; None when not written.
    A property the run stopped ("interrupted", "not run") counts as unfinished."""
    if not path.is_file():
        return None
    rows = json.loads(path.read_text())["properties"]
    tally = {**dict.fromkeys(OUTCOMES, 0), "unfinished": 0}
    for row in rows:
        tally[row["outcome"] if row["outcome"] in tally else "unfinished"] += 1
    failures = [{"test": row["nodeid"].split("::")[-1], "outcome": row["outcome"],
                 "message": str(row.get("message") or "").strip()[:200]}
                for row in rows if row["outcome"] == "failed"]
    reach = {row["nodeid"].split("::")[-1]: row["reach"] for row in rows
             if row.get("reach") is not None}
    examples = sum(int(row.get("examples") or 0) for row in rows)
    return {"counts": tally, "failures": failures[:MAX_FAILURES], "reach": reach,
            "examples": examples}


def reached(path: Path) -> dict[str, int] | None:
    """{swap: times reached} that scripts/upstream_tests.py wrote for a module; None when it
    was not written (the module's run did not end)."""
    return json.loads(path.read_text()) if path.is_file() else None


def line(counts: dict | None) -> str:
    """'P passed, F failed, E errors, S skipped', or 'no result written'."""
    if counts is None:
        return "no result written"
    return ", ".join(f"{counts[k]} {k}" for k in (*OUTCOMES, "unfinished") if k in counts)
