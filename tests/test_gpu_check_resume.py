"""scripts/gpu_check.py's command line around its steps (issue 31, item 3), on CPU: the steps
are fake (small Python commands) and the CUDA device is pretended, so what is checked is the
folder handling -- a result per step, a report, at most 8 files in OUT, and ``--resume``
carrying the results of an earlier session into a new folder without running them again."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import gpu_check  # noqa: E402
import gpu_steps  # noqa: E402

#: appends "ran " to a file named after the step; exits with the status given.
RUN = "import pathlib, sys; p = pathlib.Path(sys.argv[1]); " \
      "p.write_text((p.read_text() if p.exists() else '') + 'ran '); sys.exit(int(sys.argv[2]))"


@pytest.fixture
def fake_machine(monkeypatch, tmp_path: Path) -> Path:
    """A pretended CUDA device, and three fake steps marking runs in MARKS/<step>."""
    marks = tmp_path / "marks"
    marks.mkdir()
    statuses = {"one": 0, "two": 1, "three": 0}

    def plan(args, work):
        return [gpu_steps.Step(name, f"step {name}", (sys.executable, "-c", RUN,
                                                      str(marks / name), str(status)),
                               60, phase) for phase, (name, status) in enumerate(
                                   statuses.items())]

    monkeypatch.setattr(gpu_check.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(gpu_check, "machine", lambda: {"device": "pretended", "torch": "x",
                                                        "cuda": "y"})
    monkeypatch.setattr(gpu_check, "plan", plan)
    return marks


def test_a_run_writes_a_result_per_step_and_a_report(fake_machine: Path, tmp_path: Path):
    out = tmp_path / "out"
    assert gpu_check.main(["--out", str(out), "--work", str(tmp_path / "work")]) == 1
    files = sorted(p.name for p in out.iterdir())
    assert files == ["gpu-report.md", "logs.tar.gz", "one.json", "three.json", "two.json"]
    assert len(files) <= 8  # what the device tool brings back
    results = gpu_steps.done(out)
    assert {n: r["status"] for n, r in results.items()} == {"one": 0, "two": 1, "three": 0}
    assert results["one"]["device"] == "pretended"
    assert "| step two | 1 |" in (out / "gpu-report.md").read_text()


def test_resume_into_another_folder_carries_the_results_and_runs_only_the_rest(
        fake_machine: Path, tmp_path: Path):
    first = tmp_path / "first"
    first.mkdir()
    earlier = {"step": "one", "title": "step one", "status": 0, "timed_out": False,
               "seconds": 1.0, "budget_s": 60, "counts": None, "failures": []}
    (first / "one.json").write_text(json.dumps(earlier))
    (first / "install.json").write_text(json.dumps({**earlier, "step": "install"}))
    second = tmp_path / "second"
    assert gpu_check.main(["--resume", str(first), "--out", str(second)]) == 1
    assert not (fake_machine / "one").exists()  # done in the first session
    assert (fake_machine / "two").read_text() == (fake_machine / "three").read_text() == "ran "
    assert json.loads((second / "one.json").read_text()) == earlier
    assert not (second / "install.json").exists()  # a new machine installs again
    assert sorted(gpu_steps.done(second)) == ["one", "three", "two"]
    assert gpu_check.main(["--resume", str(second)]) == 1  # all done: nothing runs again
    assert (fake_machine / "two").read_text() == "ran "
