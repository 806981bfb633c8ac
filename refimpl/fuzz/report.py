"""What a campaign leaves behind: the summary table, report.json and one reproducer per failure."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from tabulate import tabulate

from refimpl.fuzz.options import FuzzOptions
from refimpl.fuzz.runner import PropertyResult

REPRODUCER = '''"""Reproducer written by `refimpl fuzz`.

property: {nodeid}
target:   {target}
failure (expected vs observed):
{message}

Run `python {filename}`: it exits 1 while the failure reproduces, 0 once it is fixed
(2 if the property suite cannot be loaded).
"""

import sys

from refimpl.fuzz.replay import replay

# The shrunk failing example: the property called with these inputs.
CALL = {call!r}

sys.exit(replay(properties={properties!r}, nodeid={nodeid!r}, target={target!r},
                call=CALL, database={database!r}))
'''


def summary_table(results: Sequence[PropertyResult]) -> str:
    rows = [(r.nodeid, r.examples, f"{r.seconds:.1f}", 1 if r.outcome == "failed" else 0,
             r.reason if r.outcome == "skipped" else "") for r in results]
    return tabulate(rows, headers=("property", "examples", "seconds", "failures",
                                   "skipped because"))


def _filename(result: PropertyResult) -> str:
    name = result.nodeid.split("/")[-1].replace(".py::", "__")
    return re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_") + ".py"


def write_reproducers(results: Sequence[PropertyResult], opts: FuzzOptions,
                      properties: Path) -> dict[str, str]:
    """One runnable file per failed property; returns nodeid -> path."""
    folder = opts.out / "reproducers"
    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    for r in results:
        if r.outcome != "failed" or r.example is None:
            continue
        path = folder / _filename(r)
        path.write_text(REPRODUCER.format(
            nodeid=r.nodeid, target=opts.target, message=r.message.strip() or "(no message)",
            filename=path.name, call=r.example, properties=str(properties.resolve()),
            database=opts.database or str((opts.out / "hypothesis-db").resolve())))
        written[r.nodeid] = str(path)
    return written


def write_json(results: Sequence[PropertyResult], reproducers: dict[str, str],
               opts: FuzzOptions, header: str) -> Path:
    path = opts.out / "report.json"
    path.write_text(json.dumps({
        "target": header,
        "properties": [dict(asdict(r), reproducer=reproducers.get(r.nodeid)) for r in results],
        "failed": sum(r.outcome == "failed" for r in results),
    }, indent=2))
    return path
