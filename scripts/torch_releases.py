"""Run refimpl on every torch release from the floor up; write docs/torch-releases.md.

    python scripts/torch_releases.py                          # every release in RELEASES
    python scripts/torch_releases.py --releases 2.12.1        # one; the others' rows are kept
    python scripts/torch_releases.py --render                 # rewrite the page from the data

For each release, in a virtualenv of its own (``--venvs``, reused when it already holds that
torch): install torch and this checkout with its test extra (as the README does, the release
named instead of ``constraints.txt``'s), then run

1. the main job: ``refimpl fuzz`` (target refimpl, every component, the ci profile) from an
   empty folder;
2. the seeds: ``tests/test_*_seed.py``, the numbers PyTorch's own tests assert;
3. the suite: the README's test command, under pytest-xdist (``-n --jobs``), reading the main
   job's report for the reach tests instead of running that campaign again.

Every step imports this checkout's refimpl (``PYTHONPATH``, and a reused virtualenv is
re-pointed at this checkout, whose install maps its ``properties/`` as
``refimpl.properties``). Each step's outcome (exit status, passed/failed/skipped counts,
seconds) is one record in ``docs/torch-releases.json``, keyed by release; the page
is rendered from all records, so a release can be re-run alone. Invariant: the page shows
only what a run recorded; a release that was not run has no row.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "docs" / "torch-releases.json"
PAGE = ROOT / "docs" / "torch-releases.md"
#: the newest patch of every minor release from the floor (setup.cfg) up.
RELEASES = ("2.10.0", "2.11.0", "2.12.1", "2.13.0", "2.14.1")
#: what a release needs beside torch (torchvision where PyPI has one that loads beside it).
COMPANIONS = {"2.14.1": ("torchvision==0.29.1",)}


@dataclass(frozen=True)
class StepResult:
    """One step of one release: how pytest (or refimpl fuzz) ended, and its counts."""

    exit_status: int
    passed: int
    failed: int
    skipped: int
    seconds: float


def run(cmd: list[str], *, cwd: Path, env: dict | None = None, log: Path) -> tuple[int, float]:
    """Run ``cmd``, its output appended to ``log``; (exit status, seconds)."""
    start = time.monotonic()
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(cmd)}   (in {cwd})\n")
        out.flush()
        done = subprocess.run(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, check=False)
    return done.returncode, round(time.monotonic() - start, 1)


def ensure_venv(release: str, venvs: Path, log: Path) -> tuple[Path, float | None]:
    """The release's virtualenv's python, made and filled if missing; (python, install
    seconds, or None when an existing one already had the release)."""
    venv = venvs / f"torch-{release}"
    python = venv / "bin" / "python"
    if python.exists() and installed_torch(python) == release:
        # PYTHONPATH gives this checkout's refimpl/, but only an install maps its property
        # suite (properties/ as refimpl.properties): re-point a reused one at this checkout
        run([str(python), "-m", "pip", "install", "-q", "--no-deps", "-e", str(ROOT)],
            cwd=ROOT, log=log)
        return python, None
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pins = [f"torch=={release}", *COMPANIONS.get(release, ())]
    status, _ = run([str(python), "-m", "pip", "install", "-q", *pins, "-e", f"{ROOT}[test]"],
                    cwd=ROOT, log=log)
    if status != 0 or installed_torch(python) != release:
        raise SystemExit(f"could not install torch {release} into {venv}: see {log}")
    return python, round(time.monotonic() - start, 1)


def installed_torch(python: Path) -> str:
    """The torch release ``python`` imports, without a local suffix (``2.13.0+cpu`` ->
    ``2.13.0``); "" if it imports none."""
    done = subprocess.run([str(python), "-c", "import torch; print(torch.__version__)"],
                          capture_output=True, text=True, check=False)
    return done.stdout.strip().split("+")[0] if done.returncode == 0 else ""


def main_job(python: Path, log: Path) -> tuple[StepResult, Path]:
    """``refimpl fuzz`` from an empty folder; (its result, its report.json)."""
    workdir = Path(tempfile.mkdtemp(prefix="refimpl-main-job-"))
    refimpl = python.parent / "refimpl"
    env = dict(os.environ, CI="true", PYTHONPATH=str(ROOT))
    status, seconds = run([str(refimpl), "fuzz", "--out", "out"], cwd=workdir, env=env, log=log)
    report = workdir / "out" / "report.json"
    rows = json.loads(report.read_text())["properties"] if report.exists() else []
    count = lambda outcome: sum(r["outcome"] == outcome for r in rows)
    return StepResult(status, count("passed"), count("failed"), count("skipped"),
                      seconds), report


def pytest_step(python: Path, args: list[str], log: Path, env_extra: dict) -> StepResult:
    """The suite (or a part of it) under pytest, counted from its JUnit XML."""
    junit = Path(tempfile.mkdtemp(prefix="refimpl-junit-")) / "junit.xml"
    env = dict(os.environ, CI="true", PYTHONPATH=str(ROOT), **env_extra)
    status, seconds = run([str(python), "-m", "pytest", *args, f"--junitxml={junit}"],
                          cwd=ROOT, env=env, log=log)
    passed = failed = skipped = 0
    if junit.exists():
        for suite in ET.parse(junit).getroot().iter("testsuite"):
            total, skip = int(suite.get("tests", 0)), int(suite.get("skipped", 0))
            bad = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
            passed, failed, skipped = passed + total - skip - bad, failed + bad, skipped + skip
    return StepResult(status, passed, failed, skipped, seconds)


def checkout_commit() -> str:
    """The checkout's commit, ``-dirty`` when tracked files differ from it."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True, check=False).stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD"], cwd=ROOT, check=False).returncode
    return head + ("-dirty" if dirty else "")


def run_release(release: str, venvs: Path, jobs: int, logs: Path) -> dict:
    """Every step for one release; the record the page is rendered from."""
    log = logs / f"torch-{release}.log"
    log.unlink(missing_ok=True)
    python, install_seconds = ensure_venv(release, venvs, log)
    print(f"torch {release}: main job ...", flush=True)
    main, report = main_job(python, log)
    print(f"torch {release}: seeds ...", flush=True)
    seeds = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_*_seed.py"))
    seed_result = pytest_step(python, ["-q", *seeds], log, {})
    print(f"torch {release}: suite (-n {jobs}) ...", flush=True)
    suite = pytest_step(python, ["-q", "-n", str(jobs)], log,
                        {"REFIMPL_REACH_REPORT": str(report)} if report.exists() else {})
    return {"release": release, "install_seconds": install_seconds, "commit": checkout_commit(),
            "python": platform.python_version(), "machine": f"{os.cpu_count()} cores",
            "date": time.strftime("%Y-%m-%d"), "main_job": asdict(main),
            "seeds": asdict(seed_result), "suite": asdict(suite)}


def cell(step: dict) -> str:
    """One step as a table cell: verdict, counts, time."""
    verdict = "pass" if step["exit_status"] == 0 and step["failed"] == 0 else \
        f"**FAIL** (exit {step['exit_status']})"
    counts = f"{step['passed']} passed, {step['failed']} failed, {step['skipped']} skipped"
    return f"{verdict}: {counts}, {step['seconds']:.0f} s"


def render(records: dict[str, dict]) -> str:
    """docs/torch-releases.md from every recorded release, oldest first."""
    order = sorted(records, key=lambda r: tuple(int(p) for p in r.split(".")))
    lines = [
        "# torch releases", "",
        "refimpl's torch floor is **2.10** (setup.cfg: `torch>=2.10`). Every release from the",
        "floor up was run by `python scripts/torch_releases.py`, which writes this page from",
        "`docs/torch-releases.json`: each release in a virtualenv of its own (torch from PyPI,",
        "this checkout with its test extra), then the main job (`refimpl fuzz` from an empty",
        "folder, the ci profile), the seeds (`tests/test_*_seed.py`) and the whole suite under",
        "pytest-xdist. CI runs the floor, 2.13.0 and 2.14.1 on every change.", "",
        "Skipped tests are tests that say why: a CUDA test on a machine without a GPU, an",
        "optional package not installed, or a finding pinned to other releases",
        "(`@pytest.mark.torch_releases`).", "",
        "Below the floor: on 2.9.1 (refimpl installed with `--no-deps`, since setup.cfg",
        "refuses it) the main job fails 27 of its 47 properties, every FLOP one, with",
        "`AttributeError: type object 'torch._C.Tag' has no attribute 'reduction'`: the tag",
        "refimpl's table of free ops reads is new in 2.10. Older releases were not run.", "",
        "| torch | install | main job (`refimpl fuzz`) | seeds | suite (`pytest -n 2`) | run on |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for release in order:
        rec = records[release]
        install = "reused" if rec["install_seconds"] is None else f"{rec['install_seconds']:.0f} s"
        lines.append(f"| {release} | {install} | {cell(rec['main_job'])} | {cell(rec['seeds'])} "
                     f"| {cell(rec['suite'])} | {rec['date']}, commit {rec['commit']}, "
                     f"Python {rec['python']}, {rec['machine']} |")
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--releases", nargs="+", default=list(RELEASES),
                        help=f"torch releases to run (default: {' '.join(RELEASES)})")
    parser.add_argument("--venvs", type=Path, default=ROOT / ".venvs",
                        help="folder of the per-release virtualenvs (default: .venvs/)")
    parser.add_argument("--jobs", type=int, default=2, help="pytest-xdist workers (default 2)")
    parser.add_argument("--render", action="store_true",
                        help="only rewrite the page from docs/torch-releases.json")
    args = parser.parse_args(argv)
    unknown = [r for r in args.releases if r.count(".") != 2]
    if unknown:
        parser.error(f"--releases takes full releases like 2.12.1, not {', '.join(unknown)}")
    if args.jobs < 1:
        parser.error(f"--jobs={args.jobs} must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    records = json.loads(DATA.read_text()) if DATA.exists() else {}
    if not args.render:
        logs = args.venvs / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        for release in args.releases:
            records[release] = run_release(release, args.venvs, args.jobs, logs)
            DATA.write_text(json.dumps(records, indent=2, sort_keys=True) + "\n")
    PAGE.write_text(render(records))
    print(f"wrote {PAGE.relative_to(ROOT)} ({len(records)} releases)")
    failed = [r for r, rec in records.items()
              if any(rec[s]["exit_status"] or rec[s]["failed"]
                     for s in ("main_job", "seeds", "suite"))]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
