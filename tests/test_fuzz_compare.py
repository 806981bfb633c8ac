"""`refimpl fuzz --compare OLD/report.json` (issue 22, item 4): new failures, fixed ones and
reach changes since an earlier campaign, read from the two reports alone."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from refimpl.fuzz.compare import (
    CompareError,
    check_comparable,
    compare,
    describe,
    describe_against,
    load_report,
)
from tests.test_fuzz import SUITE, _run, write_suite


def row(nodeid: str, outcome: str, reach: float | None, examples: int = 10) -> dict:
    return {"nodeid": nodeid, "outcome": outcome, "reach": reach, "examples": examples}


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


# issue 32, item 5 and issue 30, item 2: a report that lacks fields is refused before the
# campaign runs; campaigns that did not draw alike are refused or nothing is called fixed.

def report(rows: list, seed: int | None = 1, max_examples: int | None = 30,
           target: str = "refimpl (refimpl 0.1); components: cse") -> dict:
    return {"target": target, "options": {"seed": seed, "max_examples": max_examples,
                                          "minutes": None}, "properties": rows}


@pytest.mark.parametrize("rows, words", [
    ([{"nodeid": "a", "examples": 3, "reach": 0.5}], "properties[0] has no 'outcome'"),
    ([row("a", "passed", None) | {"reach": "50%"}], "properties[0]['reach'] is '50%'"),
    ([row("a", "passed", 0.5), {"nodeid": "b"}], "properties[1] has no 'outcome'"),
    ([row("a", "green", 0.5)], "properties[0]['outcome'] is 'green'"),
])
def test_a_report_that_lacks_fields_is_refused_naming_what_is_missing(tmp_path: Path, rows,
                                                                       words):
    path = tmp_path / "old.json"
    path.write_text(json.dumps(report(rows)))
    with pytest.raises(CompareError, match=re.escape(words)):
        load_report(path)


def test_compare_with_a_report_lacking_fields_stops_before_the_campaign(tmp_path: Path):
    """It used to pass the pre-run check, run the whole campaign and die with KeyError."""
    props = write_suite(tmp_path / "props", "test_cse_tiny.py", SUITE)
    old = tmp_path / "old.json"
    old.write_text(json.dumps(report([{"nodeid": "props/test_cse_tiny.py::test_small"}])))
    done = _run("fuzz", "--component", "cse", "--properties", str(props), "--max-examples",
                "30", "--seed", "1", "--compare", str(old), "--out", str(tmp_path / "o"),
                cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert "--compare" in done.stderr and "has no 'outcome'" in done.stderr
    assert "KeyError" not in done.stderr and not (tmp_path / "o" / "report.json").exists()


@pytest.mark.parametrize("args, words", [
    (["--seed", "2", "--max-examples", "30"], "ran with --seed 1, this run with --seed 2"),
    (["--max-examples", "30"], "ran with --seed 1, this run with no --seed"),
    (["--seed", "1", "--max-examples", "5"], "--max-examples 30, this run with --max-examples 5"),
])
def test_compare_refuses_campaigns_that_draw_differently(tmp_path: Path, args, words):
    props = write_suite(tmp_path / "props", "test_cse_tiny.py", SUITE)
    old = tmp_path / "old.json"
    old.write_text(json.dumps(report([row("x", "failed", 1.0)])))
    done = _run("fuzz", "--component", "cse", "--properties", str(props), "--compare",
                str(old), "--out", str(tmp_path / "o"), *args, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and words in done.stderr, done.stderr


def test_unseeded_campaigns_warn_and_call_nothing_fixed(tmp_path: Path):
    old = report([row("a", "failed", 1.0)], seed=None)
    assert check_comparable(old, None, 30, None, tmp_path / "old.json")  # a warning
    new = report([row("a", "passed", 1.0)], seed=None)
    text = describe_against(old, new, tmp_path / "old.json")
    assert "fixed: 0" in text and "passed now" in text and "    a" in text, text


def test_a_property_that_did_not_run_in_one_campaign_is_never_fixed():
    old = {r["nodeid"]: r for r in (row("a", "failed", 1.0), row("b", "failed", 1.0, 0),
                                    row("c", "failed", 1.0))}
    new = {r["nodeid"]: r for r in (row("a", "not run", None, 0), row("b", "passed", 1.0),
                                    row("c", "passed", 1.0, 0))}
    assert compare(old, new).fixed == []


def test_comparing_with_a_report_of_another_target_says_so(tmp_path: Path):
    old = report([row("a", "failed", 1.0)], target="torch (torch 2.13.0); components: cse")
    new = report([row("a", "passed", 1.0)])
    text = describe_against(old, new, tmp_path / "old.json")
    assert "report of target 'torch', this run of 'refimpl'" in text, text
