"""Every GPU check refimpl has, in one command, with one report.

    python scripts/gpu_check.py --out DIR [--examples N] [--upstream UPSTREAM_DIR] [--jobs J]

Steps, each a child process whose exit status and counts go into ``DIR/gpu-report.md``:

1. ``pytest -m cuda tests`` on J workers (JUnit XML in DIR): the seeds' CUDA ports, the
   activation meter against the CUDA allocator, checkpoint's CUDA RNG state, the layout pass
   on cuDNN in both precisions, the profile estimator on a busy GPU, the inductor target's
   layout on GPU;
2. with ``--upstream``: PyTorch's own tests with refimpl swapped in
   (``scripts/upstream_tests.py``);
3. ``refimpl fuzz --target inductor --component layout,partition``: inductor itself, its
   layout decision as the layout properties' reach;
4. ``refimpl fuzz --target refimpl`` over every component, N examples per property: on a GPU
   machine the properties with a device axis draw CUDA as well as CPU examples.

The report is rewritten after every step, so a run cut short still says what it did.

Refuses to run without a CUDA device (exit 2): on a CPU machine every step would skip or
check nothing, and a report of that would read as a pass. Exit status: 0 when every step
passed, else 1.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Step:
    """One check: what it is, its command, and where its counts are read from."""

    name: str
    command: tuple[str, ...]
    counts_from: Path | None  # a JUnit XML or a refimpl fuzz report.json


@dataclass(frozen=True)
class Outcome:
    step: Step
    status: int
    seconds: float
    counts: str


def steps(out: Path, examples: int, jobs: int, upstream: Path | None) -> list[Step]:
    python = sys.executable
    fuzz = (python, "-m", "refimpl", "fuzz", "--max-examples", str(examples), "--jobs",
            str(jobs))
    found = [Step("pytest -m cuda", (python, "-m", "pytest", "-m", "cuda", "-q", "-n", str(jobs),
                                      "-p", "no:cacheprovider",
                                      f"--junitxml={out / 'cuda.xml'}", str(ROOT / "tests")),
                  out / "cuda.xml")]
    if upstream is not None:
        found.append(Step("upstream tests, refimpl swapped in",
                          (python, str(ROOT / "scripts" / "upstream_tests.py"), str(upstream),
                           "--xml-dir", str(out / "upstream"), "-q"), out / "upstream"))
    found += [
        Step("refimpl fuzz --target inductor", (*fuzz, "--target", "inductor", "--component",
                                                "layout,partition", "--out",
                                                str(out / "fuzz-inductor")),
             out / "fuzz-inductor" / "report.json"),
        Step("refimpl fuzz --target refimpl", (*fuzz, "--target", "refimpl", "--out",
                                               str(out / "fuzz-refimpl")),
             out / "fuzz-refimpl" / "report.json"),
    ]
    return found


def counts(path: Path | None) -> str:
    """'P passed, F failed, S skipped' read from a JUnit XML or a fuzz report.json."""
    if path is None or not path.exists():
        return "no result written"
    if path.suffix == ".json":
        rows = json.loads(path.read_text())["properties"]
        tally = {k: sum(r["outcome"] == k for r in rows) for k in ("passed", "failed", "skipped")}
        reach = [f"{r['nodeid'].split('::')[-1]} {r['reach']:.0%}" for r in rows
                 if r.get("reach") is not None]
        return (f"{tally['passed']} passed, {tally['failed']} failed, {tally['skipped']} "
                f"skipped; reach: {', '.join(reach) or 'none recorded'}")
    total = failed = errors = skipped = 0
    for xml in sorted(path.glob("*.xml")) if path.is_dir() else [path]:
        suite = ET.parse(xml).getroot()
        suite = suite.find("testsuite") if suite.tag == "testsuites" else suite
        total += int(suite.get("tests", 0))
        failed += int(suite.get("failures", 0))
        errors += int(suite.get("errors", 0))
        skipped += int(suite.get("skipped", 0))
    return (f"{total - failed - errors - skipped} passed, {failed} failed, {errors} errors, "
            f"{skipped} skipped")


def run(step: Step, log: Path) -> Outcome:
    start = time.monotonic()
    with log.open("w") as sink:
        status = subprocess.run(step.command, cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT)
    return Outcome(step, status.returncode, time.monotonic() - start, counts(step.counts_from))


def report(outcomes: list[Outcome]) -> str:
    device = torch.cuda.get_device_name()
    lines = ["# refimpl GPU check", "",
             f"{device}, torch {torch.__version__} (CUDA {torch.version.cuda}), "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "",
             "| step | exit | seconds | result |", "| --- | --- | --- | --- |"]
    lines += [f"| {o.step.name} | {o.status} | {o.seconds:.0f} | {o.counts} |" for o in outcomes]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--examples", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--upstream", type=Path, default=None)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("gpu_check.py: no CUDA device: every GPU check would skip", file=sys.stderr)
        return 2
    if args.upstream is not None and not args.upstream.exists():
        print(f"gpu_check.py: --upstream {args.upstream} does not exist", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    outcomes = []
    for step in steps(args.out.resolve(), args.examples, args.jobs, args.upstream):
        outcomes.append(run(step, args.out / f"{len(outcomes) + 1}.log"))
        print(f"{step.name}: exit {outcomes[-1].status}, {outcomes[-1].counts}", flush=True)
        (args.out / "gpu-report.md").write_text(report(outcomes))
    print(report(outcomes))
    return 0 if all(o.status == 0 for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
