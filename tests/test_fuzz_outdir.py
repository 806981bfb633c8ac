"""Each run starts a clean --out (or refuses a non-empty one), its logs are its own, and
--junitxml writes JUnit XML beside report.json."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.test_fuzz import SUITE, _run, report_of, write_suite

pytestmark = pytest.mark.slow


def test_reruns_replace_or_resume_and_never_mix_runs(tmp_path: Path):
    props = write_suite(tmp_path / "props", "test_cse_tiny.py", SUITE)
    out = tmp_path / "o"
    args = ["fuzz", "--component", "cse", "--properties", str(props), "--out", str(out),
            "--max-examples", "20", "--no-shrink"]
    assert _run(*args, cwd=tmp_path).returncode == 1
    assert list((out / "reproducers").iterdir())
    refused = _run(*args, cwd=tmp_path)
    assert refused.returncode == 2 and "--resume" in refused.stderr
    # the bug fixed: the second run passes; the first run's reproducer must not survive
    (props / "test_cse_tiny.py").write_text(SUITE.replace("box.x < 100", "box.x == box.x"))
    done = _run(*args, "--force", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not list((out / "reproducers").iterdir())
    assert not list((out / "examples").iterdir())
    assert (out / "logs" / "cse.log").read_text().count("=== round 0") == 1  # not appended
    database = out / "hypothesis-db"
    database.mkdir(exist_ok=True)  # a passing run may have stored nothing
    marker = database / "kept-by-resume"
    marker.write_text("")
    assert _run(*args, "--resume", cwd=tmp_path).returncode == 0
    assert marker.exists()  # --resume keeps the example database
    assert _run(*args, "--force", cwd=tmp_path).returncode == 0
    assert not marker.exists()  # --force replaces it


def test_junitxml_reports_failures_skips_and_passes(tmp_path: Path):
    props = write_suite(tmp_path / "props", "test_cse_tiny.py", SUITE)
    write_suite(props, "test_layout_skip.py", '''
        from hypothesis import given, strategies as st
        from refimpl.oracle import component

        @given(x=st.integers())
        def test_layout(refimpl_backend, x):
            component(refimpl_backend, "optimize_layout")
    ''')
    junit = tmp_path / "reports" / "fuzz.xml"
    done = _run("fuzz", "--target", "torch", "--component", "cse,layout", "--properties",
                str(props), "--out", str(tmp_path / "o"), "--max-examples", "20",
                "--junitxml", str(junit), cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    root = ET.parse(junit).getroot()
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert suites["cse"].get("failures") == "1" and suites["cse"].get("tests") == "2"
    assert suites["layout"].get("skipped") == "1"
    failure = next(root.iter("failure"))
    assert "observed 100" in failure.text and "reproducer:" in failure.text
    skipped = next(root.iter("skipped"))
    assert "has no optimize_layout" in skipped.get("message")
    assert report_of(tmp_path / "o")["test_layout"]["outcome"] == "skipped"


def test_force_never_deletes_a_users_files_named_like_a_campaigns(tmp_path: Path):
    """Issue 22: `--out d --force` where d held only the user's examples/ and logs/ deleted
    them. Only a folder carrying the campaign marker is ever cleaned."""
    out = tmp_path / "d"
    for name in ("examples", "logs"):
        (out / name).mkdir(parents=True)
        (out / name / "mine.txt").write_text("the user's")
    for flag in ("--force", "--resume"):
        done = _run("fuzz", "--component", "cse", "--out", str(out), flag, cwd=tmp_path)
        assert done.returncode == 2 and "not a refimpl fuzz output folder" in done.stderr, \
            done.stdout + done.stderr
    assert (out / "examples" / "mine.txt").read_text() == "the user's"
    assert (out / "logs" / "mine.txt").read_text() == "the user's"


@pytest.mark.parametrize("name", ["report.json", "reproducers/x.xml", "summary.txt"])
def test_junitxml_may_not_overwrite_the_campaigns_files(tmp_path: Path, name: str):
    out = tmp_path / "o"
    done = _run("fuzz", "--component", "cse", "--out", str(out), "--junitxml",
                str(out / name), cwd=tmp_path)
    assert done.returncode == 2 and "--junitxml" in done.stderr, done.stdout + done.stderr
    assert not out.exists()


def test_a_campaign_leaves_nothing_in_the_folder_it_runs_in(tmp_path: Path):
    """Only --out is written: no .hypothesis/ or .benchmarks/ beside it (issue 22)."""
    props = write_suite(tmp_path / "props", "test_cse_tiny.py", SUITE)
    run_in = tmp_path / "here"
    run_in.mkdir()
    done = _run("fuzz", "--component", "cse", "--properties", str(props), "--out",
                str(tmp_path / "o"), "--max-examples", "5", "--profile", "fuzz", cwd=run_in)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    assert sorted(p.name for p in run_in.iterdir()) == []


@pytest.mark.parametrize("kind", ["file", "dangling link"])
def test_resume_refuses_a_database_that_is_not_a_folder(tmp_path: Path, kind: str):
    """Issue 32, item 8: `--resume` where --out's hypothesis-db is a file ran the campaign
    without its example database and said nothing. It is one line naming the path and
    --resume, exit 2, before anything runs or is removed."""
    props = write_suite(tmp_path / "props", "test_cse_tiny.py", SUITE)
    out = tmp_path / "o"
    args = ["fuzz", "--component", "cse", "--properties", str(props), "--out", str(out),
            "--max-examples", "5", "--no-shrink"]
    assert _run(*args, cwd=tmp_path).returncode == 1  # a campaign's folder, with a failure
    database = out / "hypothesis-db"
    shutil.rmtree(database, ignore_errors=True)
    if kind == "file":
        database.write_text("not a database")
    else:
        database.symlink_to(tmp_path / "nowhere")
    done = _run(*args, "--resume", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert str(database) in lines[0] and "--resume" in lines[0], lines[0]
    assert database.is_symlink() or database.read_text() == "not a database"
    assert (out / "report.json").exists() and list((out / "reproducers").iterdir())
