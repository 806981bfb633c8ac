"""`refimpl fuzz` reads at a glance (issue 22, item 4): the header names the components that
run and the limits; a CI log gets a line per finished property; the table fits 100 columns;
a failed row's note is its failure; reach is explained where it is shown."""

from __future__ import annotations

import json
from pathlib import Path

from refimpl.fuzz.report import TABLE_WIDTH
from tests.test_fuzz import SUITE, _run, write_suite

LONG_NAMES = '''
from hypothesis import given, strategies as st


@given(x=st.integers(0, 10))
def test_a_property_with_a_name_far_longer_than_any_table_column_should_hold(refimpl_backend, x):
    assert x < 5, f"refimpl: below 5, target: {x}"
'''


def test_the_output_reads_at_a_glance(tmp_path: Path):
    props = write_suite(tmp_path / "props", "test_cse_tiny.py", SUITE)
    write_suite(props, "test_cse_long.py", LONG_NAMES)
    out = tmp_path / "o"
    done = _run("fuzz", "--target", "torch", "--component", "cse", "--properties",
                str(props), "--out", str(out), "--max-examples", "30", "--seed", "3",
                cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("refimpl fuzz: target torch")
    assert "components: cse" in lines  # what runs, not what the target has
    assert any(line.startswith("limits: 30 examples per property") for line in lines)
    assert any(line.startswith("cse 1/3: ") for line in lines)  # progress off a terminal
    summary = (out / "summary.txt").read_text().splitlines()
    too_wide = [line for line in summary if len(line) > TABLE_WIDTH]
    assert not too_wide, too_wide
    row = next(i for i, line in enumerate(summary) if "far_longe" in line)
    assert summary[row].split()[1] == "failed"
    assert summary[row + 1].strip().startswith("AssertionError: refimpl: below 5, target: ")
    assert any(line.startswith("reach: the share of") for line in summary)
    report = json.loads((out / "report.json").read_text())
    assert any("far_longer_than_any_table_column" in r["nodeid"] for r in report["properties"])
