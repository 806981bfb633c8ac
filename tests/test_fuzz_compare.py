"""`refimpl fuzz --compare OLD/report.json` (issue 22, item 4): new failures, fixed ones and
reach changes since an earlier campaign, read from the two reports alone."""

from __future__ import annotations

import json
from pathlib import Path

from refimpl.fuzz.compare import compare, describe
from tests.test_fuzz import SUITE, _run, write_suite


def row(nodeid: str, outcome: str, reach: float | None) -> dict:
    return {"nodeid": nodeid, "outcome": outcome, "reach": reach}


def test_the_comparison_of_two_reports():
    old = {r["nodeid"]: r for r in (row("a", "failed", 0.5), row("b", "passed", 0.9),
                                     row("c", "passed", 0.5), row("gone", "passed", 1.0))}
    new = {r["nodeid"]: r for r in (row("a", "passed", 0.55), row("b", "failed", 0.9),
                                     row("c", "passed", 0.2), row("new", "failed", None))}
    result = compare(old, new)
    assert result.new_failures == ["b", "new"] and result.fixed == ["a"]
    assert result.reach_moved == [("c", 0.5, 0.2)]  # a moved 5 points: noise
    assert result.added == ["new"] and result.gone == ["gone"]
    assert "c: 50% -> 20%" in describe(result, Path("old.json"))


def test_compare_after_a_fix_says_what_was_fixed(tmp_path: Path):
    props = write_suite(tmp_path / "props", "test_cse_tiny.py", SUITE)
    args = ["fuzz", "--component", "cse", "--properties", str(props), "--max-examples", "30",
            "--seed", "1"]
    first = _run(*args, "--out", str(tmp_path / "before"), cwd=tmp_path)
    assert first.returncode == 1, first.stdout + first.stderr
    (props / "test_cse_tiny.py").write_text(SUITE.replace("box.x < 100", "box.x == box.x"))
    old = tmp_path / "before" / "report.json"
    second = _run(*args, "--out", str(tmp_path / "before"), "--force", "--compare", str(old),
                  cwd=tmp_path)  # --force cleans the folder the old report is in: read first
    assert second.returncode == 0, second.stdout + second.stderr
    tail = second.stdout.split("compared with", 1)[1]
    assert "fixed: 1" in tail and "test_small" in tail and "new failures: 0" in tail


def test_compare_with_a_file_that_is_no_report_is_a_usage_error(tmp_path: Path):
    (tmp_path / "x.json").write_text(json.dumps({"not": "a report"}))
    done = _run("fuzz", "--component", "cse", "--compare", str(tmp_path / "x.json"),
                "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert done.returncode == 2 and "--compare" in done.stderr, done.stdout + done.stderr
