"""SIGINT and SIGTERM to `refimpl fuzz`: the workers stop (nothing orphaned), report.json and
the summary say what ran, and the exit status is 128 + the signal (130 for Ctrl-C)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.test_fuzz import report_of, write_suite
from tests.test_fuzz_limits import _orphans

pytestmark = pytest.mark.slow

SUITE = '''
import time
from hypothesis import given, strategies as st


@given(x=st.integers())
def test_a_fast(refimpl_backend, x):
    pass


@given(x=st.integers())
def test_b_slow(refimpl_backend, x):
    time.sleep(1)


@given(x=st.integers())
def test_c_later(refimpl_backend, x):
    pass
'''


def _wait_for_start(events: Path, name: str, limit: float = 240) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if events.exists() and any(name in line and '"start"' in line
                                   for line in events.read_text().splitlines()):
            return
        time.sleep(0.2)
    raise AssertionError(f"{name} never started")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_a_signal_stops_workers_and_reports_what_ran(signum: int, tmp_path: Path):
    props = write_suite(tmp_path / "props", "test_cse_sig.py", SUITE)
    out = tmp_path / "o"
    proc = subprocess.Popen([sys.executable, "-m", "refimpl", "fuzz", "--component", "cse",
                             "--properties", str(props), "--out", str(out),
                             "--max-examples", "30"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_start(out / "events" / "cse-0.jsonl", "test_b_slow")
        time.sleep(1.5)  # inside an example
        proc.send_signal(signum)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signum, stdout + stderr
    assert "Traceback" not in stderr
    rows = report_of(out)
    assert rows["test_a_fast"]["outcome"] == "passed"
    assert rows["test_b_slow"]["outcome"] == "interrupted"
    assert 0 < rows["test_b_slow"]["examples"] < 30
    assert rows["test_c_later"]["outcome"] == "not run"
    assert json.loads((out / "report.json").read_text())["stopped_by_signal"] == signum
    assert "test_b_slow" in stdout and f"stopped by signal {signum}" in stdout
    assert not _orphans(str(props))


SETUP_SUITE = '''
import time

import pytest
from hypothesis import given, strategies as st


@pytest.fixture
def slow_setup():
    time.sleep(3)


@given(x=st.integers())
def test_a_slow_setup(refimpl_backend, slow_setup, x):
    pass
'''


def test_a_signal_during_setup_leaves_the_property_not_run(tmp_path: Path):
    """A stop that lands while a property's fixtures are set up ends the property "not run"
    (it ran no example); it is never a failure, and the call never runs half set up."""
    props = write_suite(tmp_path / "props", "test_cse_setup.py", SETUP_SUITE)
    out = tmp_path / "o"
    proc = subprocess.Popen([sys.executable, "-m", "refimpl", "fuzz", "--component", "cse",
                             "--properties", str(props), "--out", str(out)], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_start(out / "events" / "cse-0.jsonl", "test_a_slow_setup")
        time.sleep(1)  # inside the fixture's setup
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, stdout + stderr
    row = report_of(out)["test_a_slow_setup"]
    assert (row["outcome"], row["examples"]) == ("not run", 0), row
    assert row["reason"] == "the campaign was stopped first", row
