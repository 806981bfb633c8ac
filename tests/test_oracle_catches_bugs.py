"""The oracle catches real bugs: `refimpl fuzz` fails every deliberately broken backend.

Each broken backend (tests/broken_backends.py) is fuzzed on its one component under the
derandomised ci profile, stopping at the first failing property and without shrinking (the
shrinking and the reproducers are tested in tests/test_fuzz*.py). A pass here means a TARGET
property (properties/) failed on an example within the ci profile's budget: a property file
that cannot even be collected does not count as catching anything.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.broken_backends import BROKEN

ROOT = Path(__file__).resolve().parent.parent


def _caught_by(report: dict, component: str) -> list[dict]:
    """The failing target properties of ``component`` (collection errors excluded)."""
    return [p for p in report["properties"] if p["outcome"] == "failed" and "::" in p["nodeid"]
            and p["component"] == component and not p["message"].startswith("collection")]


@pytest.mark.slow
@pytest.mark.parametrize("backend", list(BROKEN), ids=lambda b: b.name)
def test_fuzz_fails_the_broken_backend(backend, tmp_path: Path):
    component = BROKEN[backend]
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "refimpl", "fuzz", "--target",
         f"tests.broken_backends:{backend.__name__}", "--component", component,
         "--profile", "ci", "--fail-fast", "--no-shrink", "--out", str(tmp_path / "out")],
        cwd=ROOT, capture_output=True, text=True, timeout=900)
    seconds = time.monotonic() - start
    assert done.returncode == 1, f"{backend.name} was not caught:\n{done.stdout}\n{done.stderr}"
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    caught = _caught_by(report, component)
    assert caught, f"{backend.name}: no target property failed:\n{done.stdout}"
    assert all(p["component"] == component for p in report["properties"]
               if p["outcome"] == "failed")
    print(f"\n{backend.name}: caught by {caught[0]['nodeid']} after "
          f"{caught[0]['examples']} examples, {seconds:.1f}s in all")
