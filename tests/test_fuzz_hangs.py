"""A hang is a failure, found once and fast; a campaign that is stopped keeps what it found;
a campaign that ran nothing never passes; workers die with their parent (issue 22, item 1).

Real `refimpl fuzz` processes against backends that hang, on refimpl's own property suite
and on small suites of our own making.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from refimpl.fuzz.campaign import INCOMPLETE
from refimpl.fuzz.suite import component_files, default_properties_dir
from tests.test_fuzz import (
    _run,
    report_of,
    skipped_for_want_of_a_package,
    skipped_for_want_of_cuda,
    write_suite,
)
from tests.test_fuzz_limits import BACKENDS, _orphans

pytestmark = pytest.mark.slow

SHRINKS_SLOWLY = '''
import os
import time
from pathlib import Path
from hypothesis import given, strategies as st

FAILURES = []  # every call fails (min_size=40): the second is a shrink step


@given(xs=st.lists(st.integers(), min_size=40))
def test_fails_then_shrinks_slowly(refimpl_backend, xs):
    time.sleep(0.3)
    FAILURES.append(xs)
    if len(FAILURES) == 2:  # shrinking: the first failure's test case has been observed
        Path(os.environ["SHRINKING_MARKER"]).touch()
    assert len(xs) < 40, f"refimpl: fewer than 40, target: {len(xs)}"
'''

SLOW_FOREVER = '''
import time
from hypothesis import given, strategies as st


@given(x=st.integers())
def test_slow(refimpl_backend, x):
    time.sleep(0.5)
'''


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "limit_backends.py").write_text(BACKENDS)
    return tmp_path


def unshrunk_first_call(row: dict) -> bool:
    """The property failed at the first example that called the backend, unshrunk: its first
    drawn example, or an explicit example (run in order before the drawn ones, never shrunk),
    after explicit ones that were refused before reaching the backend."""
    return row["examples"] == 1 or "Failing explicit example" in row["message"]


def test_a_hanging_backend_fails_every_flops_property_once_within_the_limits(home: Path):
    """The 18 flops properties against a flop_counter that never returns: each fails at its
    first example, unshrunk, as timed out, with a reproducer; the whole campaign takes
    about 18 x --timeout plus the worker's start-up (595 s for ONE property before)."""
    timeout = 2
    count = len(component_files(default_properties_dir(), "flops"))
    start = time.monotonic()
    done = _run("fuzz", "--target", "limit_backends:Hangs", "--component", "flops",
                "--out", str(home / "o"), "--max-examples", "5", "--timeout", str(timeout),
                cwd=home, timeout=900)
    took = time.monotonic() - start
    assert done.returncode == 1, done.stdout + done.stderr
    rows = report_of(home / "o")
    assert len(rows) >= count
    hung = [r for r in rows.values() if r["outcome"] == "failed" and r["timed_out"]]
    ran = [r for r in rows.values() if not skipped_for_want_of_cuda(r)
           and not skipped_for_want_of_a_package(r)]
    assert sorted(r["nodeid"] for r in hung) == sorted(r["nodeid"] for r in ran)
    assert [r for r in hung if not (r["reproducer"] and unshrunk_first_call(r))] == []
    assert took < len(rows) * timeout * 2 + 180, f"{len(rows)} hangs took {took:.0f} s"


def test_a_hang_found_before_minutes_ran_out_is_kept(home: Path):
    """The issue's case: --minutes 0.75 --timeout 3 used to end "interrupted", exit 0."""
    props = write_suite(home / "props", "test_flops_hang.py", '''
        from hypothesis import given, strategies as st
        from refimpl.oracle import component

        @given(x=st.integers())
        def test_counts(refimpl_backend, x):
            component(refimpl_backend, "flop_counter")()
    ''')
    done = _run("fuzz", "--target", "limit_backends:Hangs", "--component", "flops",
                "--properties", str(props), "--out", str(home / "o"), "--minutes", "0.75",
                "--timeout", "3", cwd=home, timeout=400)
    assert done.returncode == 1, done.stdout + done.stderr
    row = report_of(home / "o")["test_counts"]
    assert row["outcome"] == "failed" and row["timed_out"] and row["reproducer"], row


def test_a_failure_found_while_shrinking_survives_an_interrupt(tmp_path: Path):
    props = write_suite(tmp_path / "props", "test_cse_shrink.py", SHRINKS_SLOWLY)
    out = tmp_path / "o"
    marker = tmp_path / "shrinking"  # the property's second failing call: it is shrinking
    proc = subprocess.Popen([sys.executable, "-m", "refimpl", "fuzz", "--component", "cse",
                             "--properties", str(props), "--out", str(out),
                             "--max-examples", "20"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "SHRINKING_MARKER": str(marker)})
    try:
        deadline = time.monotonic() + 240
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert marker.exists(), "the property never failed twice"
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 1, stdout + stderr
    row = report_of(out)["test_fails_then_shrinks_slowly"]
    assert row["outcome"] == "failed" and row["reproducer"], row
    assert "shrinking was cut short" in row["message"]


def test_a_campaign_that_ran_nothing_is_incomplete_not_passed(tmp_path: Path):
    """--minutes too short for any property to complete a round: not exit 0, and nothing in
    the report passed. On a loaded machine the worker may not even have collected the
    property in 3 s; its row is then the component's worker, "not run" with that reason
    (refimpl.fuzz.worker.collect_results), never a missing or passing row."""
    props = write_suite(tmp_path / "props", "test_cse_slow.py", SLOW_FOREVER)
    done = _run("fuzz", "--component", "cse", "--properties", str(props), "--out",
                str(tmp_path / "o"), "--minutes", "0.05", cwd=tmp_path)
    assert done.returncode == INCOMPLETE, done.stdout + done.stderr
    rows = report_of(tmp_path / "o")
    assert set(rows) in ({"test_slow"}, {"cse (worker)"}), rows
    assert all(r["outcome"] in ("interrupted", "not run") for r in rows.values()), rows


def test_a_timeout_beyond_the_os_timer_is_a_usage_error(tmp_path: Path):
    done = _run("fuzz", "--component", "cse", "--timeout", "1e308", "--out",
                str(tmp_path / "o"), cwd=tmp_path)
    assert done.returncode == 2 and "--timeout" in done.stderr, done.stdout + done.stderr
    assert not (tmp_path / "o").exists()


def test_workers_die_when_the_campaign_is_killed(tmp_path: Path):
    props = write_suite(tmp_path / "props", "test_cse_slow.py", SLOW_FOREVER)
    out = tmp_path / "o"
    proc = subprocess.Popen([sys.executable, "-m", "refimpl", "fuzz", "--component", "cse",
                             "--properties", str(props), "--out", str(out),
                             "--max-examples", "1000"], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while not _orphans(str(props)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _orphans(str(props)), "the worker never started"
    proc.kill()  # SIGKILL: the campaign cannot stop its workers itself
    proc.wait()
    deadline = time.monotonic() + 30
    while _orphans(str(props)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _orphans(str(props))


DEAF = '''
import signal
import time


class Deaf:
    """flop_counter hangs with SIGALRM, SIGTERM and SIGINT blocked (for 120 s at most, so
    that nothing outlives a test): neither --timeout nor a stop reaches it."""
    name = "deaf"

    def flop_counter(self, **kwargs):
        signal.pthread_sigmask(signal.SIG_BLOCK,
                               {signal.SIGALRM, signal.SIGTERM, signal.SIGINT})
        time.sleep(120)
'''

DEAF_SUITE = '''
from hypothesis import given, strategies as st
from refimpl.oracle import component


@given(x=st.integers(0, 3))
def test_counts(refimpl_backend, x):
    component(refimpl_backend, "flop_counter")()
'''


def _stop_a_deaf_example(home: Path, timeout: str, signals: list[int],
                         wait: float) -> tuple[subprocess.CompletedProcess, dict, Path]:
    """Run DEAF_SUITE against Deaf, send ``signals`` to the campaign ``wait`` s after its
    example started; return the ended campaign, its report row and the property folder."""
    (home / "deaf_backend.py").write_text(DEAF)
    props = write_suite(home / "props", "test_flops_deaf.py", DEAF_SUITE)
    out = home / "o"
    args = [sys.executable, "-m", "refimpl", "fuzz", "--target", "deaf_backend:Deaf",
            "--component", "flops", "--properties", str(props), "--out", str(out),
            "--max-examples", "3", "--timeout", timeout]
    proc = subprocess.Popen(args, cwd=home, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        current, deadline = out / "events" / "flops-current.json", time.monotonic() + 240
        while not current.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert current.exists(), "the example never started"
        time.sleep(wait)
        for signum in signals:
            proc.send_signal(signum)
            time.sleep(0.5)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
    done = subprocess.CompletedProcess(args, proc.returncode, stdout, stderr)
    return done, report_of(out)["test_counts"], props


def test_a_stop_that_must_kill_a_hung_example_keeps_it_as_timed_out(tmp_path: Path):
    """Issue 32, item 4: SIGTERM to the campaign while an example hangs with signals blocked.
    The worker answers no SIGTERM and is killed after the grace period; the example had run
    past --timeout, so the property fails as timed out, with that example and a reproducer
    that replays it (it was reported "not run: the campaign was stopped first", no example)."""
    done, row, props = _stop_a_deaf_example(tmp_path, "2", [signal.SIGTERM], wait=3)
    assert done.returncode == 1, done.stdout + done.stderr
    assert row["outcome"] == "failed" and row["timed_out"], row
    assert "x=" in row["example"] and row["examples"] >= 1, row
    assert "--timeout 2s" in row["message"] and "SIGTERM" in row["message"], row
    assert row["reproducer"], row
    assert not _orphans(str(props))
    replayed = subprocess.run([sys.executable, row["reproducer"]], cwd=tmp_path,
                              capture_output=True, text=True, timeout=300)
    assert replayed.returncode == 1, replayed.stdout + replayed.stderr
    assert "REPRODUCED" in replayed.stdout


def test_two_ctrl_c_during_a_deaf_example_report_it_interrupted_with_the_example(
        tmp_path: Path):
    """Issue 32, item 4, the other way in: two SIGINTs while an example hangs with signals
    blocked, well inside --timeout. The stop kills the worker after the grace period; the
    property is "interrupted" (not "not run"), with the example it was running."""
    done, row, props = _stop_a_deaf_example(tmp_path, "100", [signal.SIGINT] * 2, wait=1)
    assert done.returncode == 128 + signal.SIGINT, done.stdout + done.stderr
    assert row["outcome"] == "interrupted" and not row["timed_out"], row
    assert "x=" in row["example"] and row["examples"] >= 1, row
    assert "killed" in row["reason"], row
    assert not _orphans(str(props))
