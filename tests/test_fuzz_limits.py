"""Campaigns end: a hanging example fails as "timed out" (per-example SIGALRM in the worker),
a worker stuck where that cannot reach is killed by the watchdog, and a crashed worker lists
every property it did not run. Real worker processes, real signals."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.test_fuzz import _run, report_of, write_suite

pytestmark = pytest.mark.slow

BACKENDS = '''
import os
import signal
import time


class Hangs:
    """flop_counter blocks (interruptibly): the per-example limit must end it."""
    name = "hangs"

    def flop_counter(self, **kwargs):
        time.sleep(3600)


class Stuck:
    """flop_counter blocks with SIGALRM masked: only the watchdog can end it."""
    name = "stuck"

    def flop_counter(self, **kwargs):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGTERM})
        time.sleep(3600)


class Crashes:
    """fx_graph_cse kills its own process."""
    name = "crashes"

    def fx_graph_cse(self, graph):
        os.kill(os.getpid(), signal.SIGKILL)
'''

FLOPS_SUITE = '''
from hypothesis import given, strategies as st
from refimpl.oracle import component


@given(x=st.integers(0, 3))
def test_counts(refimpl_backend, x):
    component(refimpl_backend, "flop_counter")()
'''

CSE_SUITE = '''
from hypothesis import given, strategies as st
from refimpl.oracle import component


@given(x=st.integers())
def test_a_runs(refimpl_backend, x):
    pass


@given(x=st.integers())
def test_b_crashes(refimpl_backend, x):
    component(refimpl_backend, "fx_graph_cse")(None)


@given(x=st.integers())
def test_c_never_reached(refimpl_backend, x):
    pass
'''


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "limit_backends.py").write_text(BACKENDS)
    return tmp_path


def _orphans(marker: str) -> list[str]:
    """Processes whose command line mentions ``marker`` (a test's own tmp path)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if marker in cmd and "pytest" in cmd and proc.name.isdigit():
            found.append(cmd)
    return found


def test_a_hanging_example_fails_as_timed_out_with_a_reproducer(home: Path):
    props = write_suite(home / "props", "test_flops_hang.py", FLOPS_SUITE)
    start = time.monotonic()
    done = _run("fuzz", "--target", "limit_backends:Hangs", "--component", "flops",
                "--properties", str(props), "--out", str(home / "o"), "--max-examples", "2",
                "--timeout", "1", cwd=home, timeout=400)
    assert done.returncode == 1, done.stdout + done.stderr
    row = report_of(home / "o")["test_counts"]
    assert row["outcome"] == "failed" and row["timed_out"], row
    assert "timed out" in row["message"]
    assert time.monotonic() - start < 300
    replayed = subprocess.run([sys.executable, row["reproducer"]], cwd=home,
                              capture_output=True, text=True, timeout=120)
    assert replayed.returncode == 1, replayed.stdout + replayed.stderr
    assert "timed out" in replayed.stdout


def test_the_watchdog_kills_a_worker_the_timeout_cannot_interrupt(home: Path):
    props = write_suite(home / "props", "test_flops_stuck.py", FLOPS_SUITE)
    done = _run("fuzz", "--target", "limit_backends:Stuck", "--component", "flops",
                "--properties", str(props), "--out", str(home / "o"), "--max-examples", "2",
                "--timeout", "1", cwd=home, timeout=400)
    assert done.returncode == 1, done.stdout + done.stderr
    row = report_of(home / "o")["test_counts"]
    assert row["outcome"] == "failed" and row["timed_out"], row
    assert "watchdog" in row["message"]
    assert "x=" in row["example"] and row["reproducer"]  # the example it was stuck in
    assert not _orphans(str(props))
    # the reproducer is bounded too: a child process, killed past twice the limit + grace
    replayed = subprocess.run([sys.executable, row["reproducer"]], cwd=home,
                              capture_output=True, text=True, timeout=300)
    assert replayed.returncode == 1, replayed.stdout + replayed.stderr
    assert "REPRODUCED" in replayed.stdout and "killed" in replayed.stdout


def test_a_crashed_worker_lists_what_it_did_not_run(home: Path):
    props = write_suite(home / "props", "test_cse_crash.py", CSE_SUITE)
    done = _run("fuzz", "--target", "limit_backends:Crashes", "--component", "cse",
                "--properties", str(props), "--out", str(home / "o"), "--max-examples", "3",
                cwd=home)
    assert done.returncode == 1, done.stdout + done.stderr
    rows = report_of(home / "o")
    assert rows["test_a_runs"]["outcome"] == "passed"
    assert rows["test_b_crashes"]["outcome"] == "failed"
    assert "killed by signal 9" in rows["test_b_crashes"]["message"]
    assert rows["test_c_never_reached"]["outcome"] == "not run"
    assert "test_c_never_reached" in done.stdout  # in the summary table, not dropped
    report = json.loads((home / "o" / "report.json").read_text())
    assert report["not_run"] == 1


def test_minutes_ends_the_campaign_on_time_mid_round(home: Path):
    props = write_suite(home / "props", "test_cse_slow.py", textwrap.dedent('''
        import time
        from hypothesis import given, strategies as st

        @given(x=st.integers())
        def test_slow(refimpl_backend, x):
            time.sleep(2)  # 10 examples in the first round: 20 s, more than --minutes
    '''))
    start = time.monotonic()
    done = _run("fuzz", "--component", "cse", "--properties", str(props), "--out",
                str(home / "o"), "--minutes", "0.2", cwd=home)  # 12 s
    took = time.monotonic() - start
    assert done.returncode == 3, done.stdout + done.stderr  # incomplete: no round finished
    row = report_of(home / "o")["test_slow"]
    assert row["outcome"] == "interrupted" and 0 < row["examples"] < 10, row
    assert took < 12 + 60, f"--minutes 0.2 took {took:.0f}s"  # startup + stop grace
