"""`--seed` repeats a campaign: two runs with the same seed and --max-examples give the same
report rows (outcome, examples, reach, message, shrunk example; only seconds may differ).

What used to leak into the rows, and is fixed by the workers (refimpl.fuzz.worker):

- wall time: after a property's first failure Hypothesis searched on for up to 10 s, so a
  slower run (a loaded machine) counted fewer examples; the second campaign below has one
  slow example, as a busy machine would;
- the process's string hashing (a fresh PYTHONHASHSEED per worker): any set order in a
  property or a backend; the suite below fails with a string's hash in its message.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_fuzz import write_suite

pytestmark = pytest.mark.slow

#: seconds one example of the second campaign takes: past Hypothesis's 10 s search window.
SLOW_SECONDS = 11

SUITE = '''
import os
import time

from hypothesis import given, strategies as st

from refimpl.properties.reach import reach

CALLS = []


@given(x=st.integers(0, 9))
def test_every_example_fails(refimpl_backend, x):
    """Fails on every example; the process's second example sleeps REFIMPL_TEST_SLOW s."""
    CALLS.append(x)
    if len(CALLS) == 2:
        time.sleep(float(os.environ.get("REFIMPL_TEST_SLOW", "0")))
    reach(x > 4)
    assert False, "every example fails"


@given(x=st.integers(0, 9))
def test_fails_naming_a_hash(refimpl_backend, x):
    reach(x > 4)
    assert x < 7, f"x={x} is too large; hash('refimpl') here is {hash('refimpl')}"
'''

ADDRESS = re.compile(r" at 0x[0-9a-f]+")
COMPARED = ("nodeid", "outcome", "examples", "reach_recorded", "reached", "reach", "message",
            "example")


def _campaign(suite: Path, out: Path, slow: float) -> list[dict]:
    env = dict(os.environ, REFIMPL_TEST_SLOW=str(slow))
    env.pop("CI", None)  # the fuzz profile, as a user's run (not the derandomised ci one)
    done = subprocess.run([sys.executable, "-m", "refimpl", "fuzz", "--component", "cse",
                           "--properties", str(suite), "--max-examples", "3", "--seed", "1",
                           "--out", str(out)], cwd=out.parent, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    rows = json.loads((out / "report.json").read_text())["properties"]
    return [{key: _no_address(row[key]) for key in COMPARED} for row in rows]


def _no_address(value):
    """``value`` with object addresses (the backend fixture prints as ``<... at 0x7f...>``,
    a new address in every process) read as ``0x?``."""
    return ADDRESS.sub(" at 0x?", value) if isinstance(value, str) else value


def test_two_runs_with_one_seed_give_the_same_rows(tmp_path: Path):
    suite = write_suite(tmp_path / "props", "test_cse_repeat.py", SUITE)
    first = _campaign(suite, tmp_path / "first", slow=0)
    second = _campaign(suite, tmp_path / "second", slow=SLOW_SECONDS)
    assert [r["outcome"] for r in first] == ["failed", "failed"], first
    for one, other in zip(first, second, strict=True):
        assert one == other, f"\nfirst:  {one}\nsecond: {other}"
