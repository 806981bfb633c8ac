"""docs/oracle-strength.md's figures are the run records' figures.

Every fresh-seed run leaves its record in ``benchmarks/mutation-runs/seed-<N>.json``. The page
reports each record in a section headed "... the first run of seed <N> ...", whose first
table holds one row per component: sampled, killed, survived, equivalent, score, interval,
wall. A run may measure some components only (``--component``): its table has their rows
alone, and the all-seeds table shows a dash where a run measured nothing. These tests read
both and require the page's numbers to be the record's, so a figure typed by hand cannot
drift from what was measured.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "oracle-strength.md"
RECORDS = sorted((ROOT / "benchmarks" / "mutation-runs").glob("seed-*.json"))
COMPONENTS = ("flops", "cse", "partition", "checkpoint", "layout")


def _percent(share: float) -> str:
    return f"{round(100 * share)}%"


def _section(page: str, seed: int) -> str:
    """The text of the section headed with the first run of ``seed``, up to the next ``## ``."""
    heading = re.search(rf"^## .*first run of seed {seed}\b.*$", page, re.MULTILINE)
    assert heading, f"docs/oracle-strength.md has no section for seed {seed}"
    rest = page[heading.end():]
    end = re.search(r"^## ", rest, re.MULTILINE)
    return rest[:end.start()] if end else rest


def _rows(section: str) -> dict[str, list[str]]:
    """component -> the cells of its row in the section's first per-component table (the
    one headed ``| component | sampled |``)."""
    lines = section.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| component | sampled"))
    rows = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        rows[cells[0]] = cells[1:]
    return rows


def test_every_record_is_on_the_page():
    assert len(RECORDS) >= 5
    page = PAGE.read_text()
    for record in RECORDS:
        _section(page, json.loads(record.read_text())["seed"])


@pytest.mark.parametrize("record", RECORDS, ids=lambda path: path.stem)
def test_each_run_s_table_is_its_record(record: Path):
    run = json.loads(record.read_text())
    rows = _rows(_section(PAGE.read_text(), run["seed"]))
    assert sorted(rows) == sorted(run["components"])
    for name, figures in run["components"].items():
        low, high = figures["interval_95"]
        expected = [str(figures["sampled"]), str(figures["killed"]), str(figures["survived"]),
                    str(figures["equivalent"]), f"**{_percent(figures['score'])}**",
                    f"{_percent(low)}-{_percent(high)}", f"{figures['seconds']} s"]
        assert rows[name] == expected, f"seed {run['seed']}, {name}"


def test_the_newest_seeds_table_lists_every_first_run_score():
    """The table of all fresh seeds (in the newest section) has one column a record, in
    the order the runs started, with each component's score (a dash: not measured)."""
    runs = sorted((json.loads(path.read_text()) for path in RECORDS),
                  key=lambda run: run["started"])
    assert all(run["first_run"] for run in runs)
    header = "| component | " + " | ".join(f"seed {run['seed']}" for run in runs) + " |"
    page = PAGE.read_text()
    assert header in page, f"no table headed {header!r}"
    table = page[page.index(header):].splitlines()
    for name in COMPONENTS:
        row = next(line for line in table if line.startswith(f"| {name} |"))
        scores = [_percent(run["components"][name]["score"]) if name in run["components"]
                  else "–" for run in runs]
        expected = "| " + " | ".join([name, *scores]) + " |"
        assert row == expected
