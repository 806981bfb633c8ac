"""Tests marked ``xdist_group`` run on one pytest-xdist worker (pyproject's ``--dist
loadgroup``). The suite relies on it for time: the getting-started walkthrough and the reach
campaign are minutes-long fixtures that a second worker would otherwise wait on (under a file
lock) or run again. pytest 9.2 with pytest-xdist 3.8 ignored the marks (setup.cfg pins
pytest below 9.2 in the test extra); this fails if a release pair does so again.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

GROUPED = """
import pytest

pytestmark = pytest.mark.xdist_group("one")


@pytest.mark.parametrize("i", range(8))
def test_grouped(i):
    pass
"""


def test_a_group_runs_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v", "-p",
         "no:cacheprovider", "-p", "no:randomly", "test_grouped.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    workers = set(re.findall(r"\[(gw\d+)\].*PASSED .*test_grouped", done.stdout))
    assert len(re.findall(r"PASSED .*test_grouped", done.stdout)) == 8, done.stdout[-3000:]
    assert len(workers) == 1, f"the group's tests ran on workers {sorted(workers)}"
