"""One report tail for both engines, checked without HypoFuzz installed.

``--engine hypofuzz`` merges its workers' status files into the same results the plain runner
makes and hands them to :func:`refimpl.fuzz.campaign.report_campaign`, so ``--junitxml``,
report.json, summary.txt and the exit status come out as under the default engine. Here the
HypoFuzz process is replaced by a stand-in that writes one worker's status file (what the
plugin half of :mod:`refimpl.fuzz.hypofuzz` writes), and everything after it runs for real.
"""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from refimpl.fuzz import hypofuzz
from refimpl.fuzz.options import FuzzOptions
from refimpl.oracle import load_backend

SOUND = "properties/test_cse.py::test_cse_is_sound"
IDEMPOTENT = "properties/test_cse.py::test_cse_is_idempotent"


def _one_worker(opts, files, status_dir: Path, stopped_by) -> None:
    """Stand-in for HypoFuzz: one worker's tallies, one property failed."""
    status_dir.mkdir(parents=True, exist_ok=True)
    rows = {
        SOUND: {"examples": 7, "reach_recorded": 7, "reached": 4, "failure": None},
        IDEMPOTENT: {"examples": 3, "reach_recorded": 3, "reached": 3,
                     "failure": {"example": "test_cse_is_idempotent(spec=None)",
                                 "message": "AssertionError: graph changed", "at": time.time()}},
    }
    (status_dir / "worker-1.json").write_text(json.dumps(rows))


def test_hypofuzz_engine_writes_junitxml_through_the_shared_tail(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(hypofuzz, "_supervise", _one_worker)
    junit = tmp_path / "junit.xml"
    opts = FuzzOptions(components=("cse",), max_examples=None, minutes=0.01,
                       out=tmp_path / "out", junitxml=junit, engine="hypofuzz", shrink=False)
    status = hypofuzz.run_hypofuzz(opts, load_backend("refimpl"))
    assert status == 1  # a property failed
    suites = {s.get("name"): s for s in ET.parse(junit).getroot()}
    assert suites["cse"].get("tests") == "2" and suites["cse"].get("failures") == "1"
    failed = [c for c in suites["cse"] if c.find("failure") is not None]
    assert [c.get("name") for c in failed] == ["test_cse_is_idempotent"]
    assert "graph changed" in failed[0].find("failure").get("message", "") + \
        (failed[0].find("failure").text or "")
    report = json.loads((opts.out / "report.json").read_text())
    assert report and "(engine hypofuzz)" in (opts.out / "summary.txt").read_text()
