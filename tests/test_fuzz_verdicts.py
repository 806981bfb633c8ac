"""Verdicts are about the target: a component the target lacks is all skipped (with the reason),
never passed; the summary gives each property's examples, failures and reach, and flags a
property that records no reach event as a harness defect."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from refimpl.fuzz.campaign import INCOMPLETE
from refimpl.fuzz.options import COMPONENTS
from tests.test_fuzz import (
    _run,
    report_of,
    skipped_for_want_of_a_package,
    skipped_for_want_of_cuda,
    write_suite,
)

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_a_backend_with_no_components_gets_no_property_passed(tmp_path: Path):
    done = _run("fuzz", "--target", "tests.broken_backends:NoComponents", "--profile", "ci",
                "--max-examples", "2", "--jobs", "2", "--out", str(tmp_path / "o"),
                cwd=ROOT, timeout=900)
    assert done.returncode == INCOMPLETE, done.stdout + done.stderr  # nothing ran: no pass
    rows = json.loads((tmp_path / "o" / "report.json").read_text())["properties"]
    assert {r["component"] for r in rows} == set(COMPONENTS)
    passed = [r["nodeid"] for r in rows if r["outcome"] != "skipped"]
    assert not passed, f"reported as not skipped against a backend with nothing: {passed}"
    assert all(("has no" in r["reason"] or skipped_for_want_of_cuda(r)
                or skipped_for_want_of_a_package(r)) and r["examples"] == 0
               for r in rows)


def test_summary_shows_reach_and_flags_properties_that_record_none(tmp_path: Path):
    props = write_suite(tmp_path / "props", "test_cse_reach.py", textwrap.dedent('''
        from hypothesis import given, strategies as st
        from refimpl.properties.reach import reach

        @given(x=st.integers(0, 1000))
        def test_half(refimpl_backend, x):
            reach(x % 2 == 0)

        @given(x=st.integers())
        def test_always(refimpl_backend, x):
            reach(True)

        @given(x=st.integers())
        def test_silent(refimpl_backend, x):
            pass
    '''))
    done = _run("fuzz", "--component", "cse", "--properties", str(props), "--out",
                str(tmp_path / "o"), "--max-examples", "40", "--seed", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = report_of(tmp_path / "o")
    assert rows["test_always"]["reach"] == 1.0
    assert 0.2 < rows["test_half"]["reach"] < 0.8
    assert rows["test_silent"]["reach"] is None and rows["test_silent"]["harness_defect"]
    assert not rows["test_always"]["harness_defect"]
    table = (tmp_path / "o" / "summary.txt").read_text().splitlines()
    row = next(i for i, line in enumerate(table) if line.startswith("cse_reach::test_silent"))
    assert "n/a" in table[row] and "harness defect" in table[row + 1]
    assert "1 harness defect" in done.stdout


def test_a_property_that_crashes_reports_the_crash_not_a_missing_reach(tmp_path: Path):
    """Issue 18: on torch < 2.13 a strategy's ``next(reversed(graph.nodes))`` raised
    TypeError in every CSE property, and the report called each "harness defect: records no
    reach event", hiding the error. A crash is the property's failure, with its message."""
    props = write_suite(tmp_path / "props", "test_cse_crash.py", textwrap.dedent('''
        from hypothesis import given, strategies as st

        class Nodes:  # like torch < 2.13's fx node list: reversible, not an iterator
            def __iter__(self):
                return iter(())

            def __reversed__(self):
                return Nodes()

        @given(x=st.integers())
        def test_crashes_before_reach(refimpl_backend, x):
            next(reversed(Nodes()))
    '''))
    done = _run("fuzz", "--component", "cse", "--properties", str(props), "--out",
                str(tmp_path / "o"), "--max-examples", "5", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    row = report_of(tmp_path / "o")["test_crashes_before_reach"]
    assert row["outcome"] == "failed" and not row["harness_defect"]
    assert "TypeError" in row["message"]
    table = (tmp_path / "o" / "summary.txt").read_text().splitlines()
    row = next(i for i, ln in enumerate(table) if ln.startswith("cse_crash::test_crashes"))
    assert "TypeError" in table[row + 1] and "harness defect" not in "\n".join(table)


def test_minutes_on_components_the_target_lacks_ends_at_once(tmp_path: Path):
    """docs' nightly job ran `--target torch --component layout --minutes 60`: round after
    round of worker start-up, skipping everything, for the whole hour."""
    import time

    start = time.monotonic()
    done = _run("fuzz", "--target", "torch", "--component", "layout", "--minutes", "10",
                "--out", str(tmp_path / "o"), cwd=tmp_path, timeout=600)
    assert done.returncode == 3, done.stdout + done.stderr  # nothing ran: not a pass
    assert time.monotonic() - start < 300
    assert len(re.findall(r"^layout: \d+ properties", done.stdout, re.MULTILINE)) == 1  # a round
