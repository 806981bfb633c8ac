"""SIGINT and SIGTERM to `refimpl fuzz`: the workers stop (nothing orphaned), report.json and
the summary say what ran, and the exit status is 128 + the signal (130 for Ctrl-C)."""

from __future__ import annotations

import json
import os
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


# `refimpl fuzz` with one report function wrapped so that the process sends itself SIGTERM
# from inside the report tail, after the campaign ended: the window of issue 32, item 3.
LATE_SIGNAL = '''
import os
import signal
import sys

import refimpl.fuzz.campaign as campaign
from refimpl.cli import main

WRAPPED = os.environ["WRAPPED"]
original = getattr(campaign, WRAPPED)


def signal_then_call(*args, **kwargs):
    if WRAPPED == "write_json":  # report.json is written, then the signal comes
        path = original(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGTERM)
        return path
    os.kill(os.getpid(), signal.SIGTERM)  # the last step: the exit status
    return original(*args, **kwargs)


setattr(campaign, WRAPPED, signal_then_call)
sys.exit(main(sys.argv[1:]))
'''

FAILS_AND_PASSES = '''
from hypothesis import given, strategies as st


@given(x=st.integers(min_value=100))
def test_fails(refimpl_backend, x):
    assert x < 100, f"expected x < 100, observed {x}"


@given(x=st.integers())
def test_passes(refimpl_backend, x):
    pass
'''

PASSES = '''
from hypothesis import given, strategies as st


@given(x=st.integers())
def test_passes(refimpl_backend, x):
    pass
'''


@pytest.mark.parametrize(("suite", "wrapped", "status"), [
    (FAILS_AND_PASSES, "write_json", 1),
    (FAILS_AND_PASSES, "exit_status", 1),
    (PASSES, "write_json", 0),
], ids=["failing-after-report-json", "failing-at-exit-status", "passing-after-report-json"])
def test_a_signal_while_the_report_is_written_keeps_the_reports_status(
        suite: str, wrapped: str, status: int, tmp_path: Path):
    """Issue 32, item 3: SIGTERM after the campaign ended, while its report is written, used
    to kill the process with exit 143 (the default handler was back), the report holding a
    failure and ``stopped_by_signal: null``. The report is finished and the exit status is
    the report's: 1 for a failure, 0 for a pass; the signal is mentioned on stderr."""
    props = write_suite(tmp_path / "props", "test_cse_late.py", suite)
    script = tmp_path / "late_signal.py"
    script.write_text(LATE_SIGNAL)
    out = tmp_path / "o"
    done = subprocess.run([sys.executable, str(script), "fuzz", "--component", "cse",
                           "--properties", str(props), "--out", str(out),
                           "--max-examples", "5", "--no-shrink"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "WRAPPED": wrapped})
    assert done.returncode == status, done.stdout + done.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["stopped_by_signal"] is None
    assert report["failed"] == (1 if status else 0)
    assert f"signal {signal.SIGTERM} arrived after the campaign ended" in done.stderr
    assert "report: " in done.stdout  # the summary was printed to the end
