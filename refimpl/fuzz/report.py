"""What a campaign leaves behind: the summary table, report.json and one reproducer per failure.

Reach: the share of a property's examples whose ``reach`` event (:mod:`refimpl.testing.reach`)
said "reached". A target property that ran examples and recorded no reach event at all is a
harness defect (it cannot say whether it tested anything) and is flagged as one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from refimpl.fuzz.examples import examples_file
from refimpl.fuzz.options import FuzzOptions
from refimpl.fuzz.worker import PropertyResult

HARNESS_DEFECT = "harness defect: records no reach event"

REPRODUCER = '''"""Reproducer written by `refimpl fuzz`.

property: {nodeid}
target:   {target}
failure (expected vs observed):
{message}

Run `python {filename}`: it exits 1 while the failure reproduces, 0 once it is fixed,
2 if the property suite or the target cannot be loaded.
"""

import sys

from refimpl.fuzz.replay import replay

# The shrunk failing example: the property called with these inputs.
CALL = {call!r}

sys.exit(replay(properties={properties!r}, nodeid={nodeid!r}, target={target!r},
                call=CALL, database={database!r}, arguments={arguments!r},
                recorded={message!r}, timeout={timeout!r}, cwd={cwd!r}))
'''


def reach_share(r: PropertyResult) -> float | None:
    """reached / examples, or None where the property recorded no reach event."""
    return r.reached / r.examples if r.reach_recorded and r.examples else None


def harness_defect(r: PropertyResult) -> bool:
    """A property that passed its examples and recorded no reach event. A property that
    failed is reported by its failure: an example that crashes before it records reach is
    the crash, not a missing event."""
    return r.outcome == "passed" and r.examples > 0 and r.reach_recorded == 0


def _note(r: PropertyResult) -> str:
    if r.outcome in ("skipped", "not run"):
        return r.reason
    if r.timed_out:
        return "timed out"
    if r.outcome == "failed":
        return first_line(r.message)
    return HARNESS_DEFECT if harness_defect(r) else ""


def first_line(message: str, width: int = 92) -> str:
    """The first non-empty line of a failure message, cut to ``width`` characters."""
    line = next((ln.strip() for ln in message.splitlines() if ln.strip()), "")
    return line if len(line) <= width else line[:width - 3] + "..."


#: the summary table fits this many columns (a CI log, a terminal); report.json has it all.
TABLE_WIDTH = 100
REACH_LEGEND = ("reach: the share of a property's examples that reached its interesting case "
                "(a budget that binds,\n  a net the pass converts, a graph with something to "
                "merge); n/a: it records none.")


def cut(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters (an ellipsis marks a cut)."""
    return text if len(text) <= width else text[:width - 3] + "..."


def short_name(nodeid: str) -> str:
    """``file::test[param]`` without the suite's folder and the file's ``test_`` prefix."""
    return nodeid.split("/")[-1].removeprefix("test_").replace(".py::", "::")


ROW = "{:<50} {:<11} {:>8} {:>6} {:>8}"  # property, outcome, examples, reach, seconds


def summary_table(results: Sequence[PropertyResult]) -> str:
    """One row per property in at most :data:`TABLE_WIDTH` columns, a row's note (why it
    failed or was skipped) on an indented line under it; then the counts and a legend."""
    lines = [ROW.format("property", "outcome", "examples", "reach", "seconds"),
             ROW.format(*("-" * n for n in (50, 11, 8, 6, 8)))]
    for r in results:
        share = reach_share(r)
        lines.append(ROW.format(cut(short_name(r.nodeid), 50), r.outcome, r.examples,
                                "n/a" if share is None else f"{share:.0%}",
                                f"{r.seconds:.1f}"))
        if _note(r):
            lines.append(cut(f"    {_note(r)}", TABLE_WIDTH))
    table = "\n".join(lines)
    counts = {o: sum(r.outcome == o for r in results)
              for o in ("passed", "failed", "skipped", "interrupted", "not run")}
    defects = sum(harness_defect(r) for r in results)
    tail = ", ".join(f"{n} {o}" for o, n in counts.items() if n)
    if not counts["passed"] and not counts["failed"]:
        tail += ": nothing ran, so nothing passed"
    tail += f"; {defects} harness defect(s)" if defects else ""
    return f"{table}\n\n{tail}\n{REACH_LEGEND}"


def _filename(result: PropertyResult) -> str:
    name = result.nodeid.split("/")[-1].replace(".py::", "__")
    return re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_") + ".py"


def write_reproducers(results: Sequence[PropertyResult], opts: FuzzOptions,
                      properties: Path, cwd: Path) -> dict[str, str]:
    """One runnable file per failed property with an example; returns nodeid -> path."""
    folder = opts.out / "reproducers"
    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    for r in results:
        if r.outcome != "failed" or (r.example is None and not r.timed_out):
            continue  # a timed-out setup ran no example: its reproducer replays the property
        path = folder / _filename(r)
        saved = examples_file(opts.out / "examples", r.nodeid)
        path.write_text(REPRODUCER.format(
            nodeid=r.nodeid, target=opts.target, message=r.message.strip() or "(no message)",
            filename=path.name, call=r.example or "", properties=str(properties.resolve()),
            database=opts.database or str((opts.out / "hypothesis-db").resolve()),
            arguments=str(saved.resolve()) if saved.exists() else None,
            timeout=opts.timeout, cwd=str(cwd)))
        written[r.nodeid] = str(path)
    return written


def write_json(results: Sequence[PropertyResult], reproducers: dict[str, str],
               opts: FuzzOptions, header: str, stopped_by: int | None) -> Path:
    path = opts.out / "report.json"
    rows = [dict(asdict(r), reach=reach_share(r), harness_defect=harness_defect(r),
                 reproducer=reproducers.get(r.nodeid)) for r in results]
    path.write_text(json.dumps({
        "target": header,
        "options": {"components": list(opts.components), "max_examples": opts.max_examples,
                    "minutes": opts.minutes, "profile": opts.profile, "timeout": opts.timeout,
                    "seed": opts.seed},
        "stopped_by_signal": stopped_by,
        "properties": rows,
        "failed": sum(r.outcome == "failed" for r in results),
        "not_run": sum(r.outcome == "not run" for r in results),
        "harness_defects": sum(harness_defect(r) for r in results),
    }, indent=2))
    return path
