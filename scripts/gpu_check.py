"""Every GPU check refimpl has, in one run under 8 minutes, resumable, with one report.

    python scripts/gpu_check.py --out DIR [--upstream] [--seeds SEEDS] [--bundle BUNDLE]
                                [--work WORK] [--examples N] [--jobs J]
    python scripts/gpu_check.py --resume DIR [--out DIR2] [the same options]
    python scripts/gpu_check.py --write-docs DIR    (docs/gpu.md from DIR's results)
    python scripts/gpu_check.py --plan              (the steps and their budgets)

The steps and their budgets (seconds of wall time on an H100 or H200 with 16 cores; a step
still running at its budget is sent SIGINT, so it writes what it has, and killed 15 s later):

=====  ==============  ======  ==========================================================
phase  step            budget  what it runs
=====  ==============  ======  ==========================================================
0      install             40  ``pip install --no-index --find-links BUNDLE/wheels -r
                               BUNDLE/requirements.txt`` (``--bundle``: every session)
1      seeds-torch        190  ``--upstream``: the five seed files, each extracted
                               verbatim as its upstream module, on torch's implementation
                               (``scripts/upstream_tests.py --implementation torch``)
1      seeds-refimpl      190  the same modules with refimpl swapped in
1      pytest-cuda        170  ``pytest -m cuda tests -n 4``: the seeds' CUDA ports, the
                               meter against the CUDA allocator, checkpoint's CUDA RNG ...
2      fuzz-inductor      180  ``refimpl fuzz --target inductor --component
                               layout,partition``: inductor's layout decision as reach
2      fuzz-refimpl       180  ``refimpl fuzz --target refimpl``, every component: the
                               properties with a device axis draw CUDA examples too
=====  ==============  ======  ==========================================================

The steps of a phase run side by side (the seed modules 3 at a time in each column), the
phases one after another: at most 40 + 190 + 180 s of budgets, 45 s of grace, a few seconds
of reporting: under 8 minutes, the install included (the fuzz of inductor is cut at its
budget in every run; CHANGELOG.md says how the budgets moved).
Children run on this checkout's refimpl (``PYTHONPATH`` is the repository root; the install
step adds the checkout as an editable install, which maps ``properties/`` to
``refimpl.properties``).

Each step writes ``OUT/<step>.json`` the moment it ends (counts, failures with their first
line, device, torch, CUDA, seconds); ``OUT/gpu-report.md`` and ``OUT/logs.tar.gz`` (the
steps' logs, JUnit XML and fuzz reports) are rewritten after each. OUT holds at most those 8
files (the device tool brings back 8). A run cut short keeps the results of the steps that
ended; ``--resume DIR`` skips the steps with a result in DIR (copied into ``--out`` when it
names another folder), so two short runs in two sessions make one report.

SEEDS defaults to ``shared/seeds`` in the folder that holds the repository: the workplace's
seed files (five upstream PyTorch test modules, each in one ``NNN_*.txt``; they are not part
of this repository, and the issue that asked for this check names that place). A device
machine sees only the repository, so ``scripts/gpu_bundle.py`` copies them into the bundle,
and the device run names ``--seeds BUNDLE/seeds``.

The next session lent a GPU: here (network, CPU), then with the device tool:

1. ``.venv/bin/python scripts/gpu_bundle.py`` (writes ``.gpu-bundle/``: wheels,
   requirements.txt, seeds/; under a minute);
2. the device tool's ``run`` with ``carry: [".gpu-bundle"]``, ``timeout_s: 560`` and the
   command ``PYTHONUNBUFFERED=1 python3 scripts/gpu_check.py --upstream --bundle .gpu-bundle
   --seeds .gpu-bundle/seeds --out $OUT/gpu`` (the device's ``python3`` holds its CUDA
   torch); then ``give_back``;
3. here: ``cp -r <files_at>/gpu .gpu-bundle/resume`` (what came back is read-only), add
   notes on failures in ``.gpu-bundle/resume/notes.json`` ({"<step>/<test>": "finding N in
   docs/findings.md" or "fixed by ..."}), ``python scripts/gpu_check.py --write-docs
   .gpu-bundle/resume``, and commit docs/gpu.md. If the run was cut short, the next session
   lent a GPU repeats step 2 with ``--resume .gpu-bundle/resume`` added (the steps with a
   result there are not run again) and step 3 on what comes back.

Expected timeline of step 2: 1 to 2 minutes starting the machine and copying the tree (not
in the 8 minutes), the install under 40 s, phase 1 under 3.5 minutes, phase 2 under 3.5, the
report: the reply within 10 of the session's 15 minutes of device time, 5 left over for a
rerun in the same session if the machine was taken back. ``--examples`` (5 by default) is
per fuzz property; a fuzz step cut at its budget reports the properties it did not finish
as unfinished, never as passed.

Refuses to run without a CUDA device (exit 2): on a CPU machine every step would skip or
check nothing, and a report of that would read as a pass. Exit status: 0 when every step
passed, else 1; bad options: one line naming the option, exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tarfile
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling modules

import gpu_counts
import gpu_report
import gpu_steps
import upstream_tests

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SEEDS = ROOT.parent / "shared" / "seeds"
DOCS_PAGE = ROOT / "docs" / "gpu.md"
#: seconds of wall time per step on an H100/H200 with 16 cores (the table above).
BUDGET_S = {"install": 40, "seeds-torch": 190, "seeds-refimpl": 190, "pytest-cuda": 170,
            "fuzz-inductor": 180, "fuzz-refimpl": 180}
GRACE_S = 15.0
SEED_JOBS = 3
#: files of the logs archive larger than this are left out of it (the device returns 16 MiB).
LOG_FILE_LIMIT = 2 * 1024 * 1024


class UsageError(Exception):
    """A bad option: one line naming it, exit 2."""


def tree_env() -> dict[str, str]:
    """The children import this checkout's refimpl, whatever wheel is installed, and compile
    inductor's kernels in their own thread: inductor's pool of compile workers is shut down
    by an exit hook that can wait forever (the seed module test_layout_optim.py passed in
    14 s, then its process waited at exit until the step's budget killed it)."""
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                        os.environ.get("PYTHONPATH")])),
            "TORCHINDUCTOR_COMPILE_THREADS": "1"}


def install_step(bundle: Path) -> gpu_steps.Step:
    """The bundle's wheels, then this checkout as an editable install (no network, no build
    isolation: the bundle carries setuptools). The editable install is what maps
    ``properties/`` to ``refimpl.properties`` for a child that imports refimpl from the
    checkout (``PYTHONPATH``); the wheel alone would be shadowed there."""
    pip = (sys.executable, "-m", "pip", "install", "-q", "--no-index")
    bundle_install = shlex.join((*pip, "--find-links", str(bundle / "wheels"),
                                 "-r", str(bundle / "requirements.txt")))
    checkout_install = shlex.join((*pip, "--no-deps", "--no-build-isolation", "-e", str(ROOT)))
    command = ("sh", "-c", f"{bundle_install} && {checkout_install}")
    return gpu_steps.Step("install", "install the bundle offline", command, BUDGET_S["install"],
                          phase=0)


def seed_steps(seeds: Path, work: Path, pytest_args: tuple[str, ...] = ("-q",),
               jobs: int = SEED_JOBS) -> list[gpu_steps.Step]:
    """The seed files extracted twice (one folder per column) and their two runs."""
    found = []
    for implementation in upstream_tests.IMPLEMENTATIONS[::-1]:  # torch's column first
        name = f"seeds-{implementation}"
        folder = work / name
        upstream_tests.extract_seeds(seeds, folder / "modules")
        command = (sys.executable, str(ROOT / "scripts" / "upstream_tests.py"),
                   str(folder / "modules"), "--implementation", implementation, "--jobs",
                   str(jobs), "--xml-dir", str(folder / "xml"), *pytest_args)
        title = ("seed files, torch's implementation" if implementation == "torch"
                 else "seed files, refimpl swapped in")
        found.append(gpu_steps.Step(name, title, command, BUDGET_S[name], phase=1,
                                    reads=("seeds", str(folder)), env=tree_env()))
    return found


def check_steps(work: Path, examples: int, jobs: int) -> list[gpu_steps.Step]:
    python = sys.executable
    root = str(ROOT)
    xml = work / "pytest-cuda.xml"
    fuzz = (python, "-m", "refimpl", "fuzz", "--max-examples", str(examples))
    return [
        gpu_steps.Step("pytest-cuda", "pytest -m cuda", (
            python, "-m", "pytest", "-m", "cuda", "-q", "-n", str(jobs), "-p",
            "no:cacheprovider", f"--junitxml={xml}", "tests"), BUDGET_S["pytest-cuda"], 1,
            reads=("junit", str(xml)), cwd=root, env=tree_env()),
        gpu_steps.Step("fuzz-inductor", "refimpl fuzz --target inductor (layout, partition)", (
            *fuzz, "--target", "inductor", "--component", "layout,partition", "--jobs", "2",
            "--out", str(work / "fuzz-inductor")), BUDGET_S["fuzz-inductor"], 2,
            reads=("fuzz", str(work / "fuzz-inductor" / "report.json")), cwd=root,
            env=tree_env()),
        gpu_steps.Step("fuzz-refimpl", "refimpl fuzz --target refimpl (every component)", (
            *fuzz, "--target", "refimpl", "--jobs", "6", "--out", str(work / "fuzz-refimpl")),
            BUDGET_S["fuzz-refimpl"], 2,
            reads=("fuzz", str(work / "fuzz-refimpl" / "report.json")), cwd=root,
            env=tree_env()),
    ]


def machine() -> dict[str, str]:
    """The device, torch and CUDA each result records (steps of two sessions may differ)."""
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA device"
    return {"device": device, "torch": torch.__version__, "cuda": str(torch.version.cuda)}


def describe(step: gpu_steps.Step, status: int, timed_out: bool) -> dict:
    """A step's counts, read from what it wrote, with the machine it ran on."""
    kind, path = step.reads
    if kind == "seeds":
        xml = Path(path) / "xml"
        modules = sorted((Path(path) / "modules").glob("test_*.py"))
        per_file = {m.name: gpu_counts.junit(xml / f"{m.stem}.xml") for m in modules}
        reached = {m.name: gpu_counts.reached(xml / f"{m.stem}.reached.json") for m in modules}
        read = gpu_counts.total(list(per_file.values())) or {"counts": None, "failures": []}
        return {**machine(), **read, "per_file": per_file, "reached": reached}
    if kind == "none":
        return {**machine(), "counts": None, "failures": [], "summary": "exit status only"}
    read = {"junit": gpu_counts.junit, "fuzz": gpu_counts.fuzz}[kind](Path(path))
    return {**machine(), **(read or {"counts": None, "failures": []})}


def archive_logs(work: Path, out: Path) -> None:
    """``OUT/logs.tar.gz``: every log, JUnit XML and report of WORK (small files only; the
    steps still running may change a file while it is read, which is then left out)."""
    partial = out / "logs.tar.gz.partial"
    with tarfile.open(partial, "w:gz") as archive:
        for path in sorted(work.rglob("*")):
            keep = path.suffix in (".log", ".xml", ".json", ".md", ".py", ".txt")
            try:
                if path.is_file() and keep and path.stat().st_size <= LOG_FILE_LIMIT:
                    archive.add(path, arcname=str(path.relative_to(work)))
            except OSError:
                continue  # a running step removed or rewrote it: the next archive has it
    os.replace(partial, out / "logs.tar.gz")


def notes(folder: Path) -> dict[str, str]:
    path = folder / "notes.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def run(steps: list[gpu_steps.Step], out: Path, work: Path, grace_s: float = GRACE_S) -> dict:
    """The steps not done in OUT; the report and the logs refreshed after each result."""

    def refresh(result: dict) -> None:
        print(f"{result['step']}: exit {result['status']}, "
              f"{gpu_counts.line(result.get('counts'))}", flush=True)
        (out / "gpu-report.md").write_text(gpu_report.report(gpu_steps.done(out), notes(out)))
        archive_logs(work, out)

    return gpu_steps.run_steps(steps, out, work, describe, grace_s, refresh)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="folder of the step results and the report")
    parser.add_argument("--resume", type=Path, help="skip the steps with a result here")
    parser.add_argument("--upstream", action="store_true", help="run the seed files")
    parser.add_argument("--seeds", type=Path, default=DEFAULT_SEEDS)
    parser.add_argument("--bundle", type=Path, help="install its wheels offline first")
    parser.add_argument("--work", type=Path, help="logs, XML, fuzz output (default: a temp dir)")
    parser.add_argument("--examples", type=int, default=5, help="per fuzz property")
    parser.add_argument("--jobs", type=int, default=4, help="pytest -m cuda's workers")
    parser.add_argument("--write-docs", type=Path, metavar="DIR",
                        help="write docs/gpu.md from DIR's results, and stop")
    parser.add_argument("--plan", action="store_true", help="print the steps, and stop")
    return parser.parse_args(argv)


def validate(args: argparse.Namespace) -> None:
    """Every option a run reads, checked before anything runs."""
    for option in ("examples", "jobs"):
        if getattr(args, option) < 1:
            raise UsageError(f"--{option} {getattr(args, option)}: expected a number >= 1")
    if args.resume is not None and not args.resume.is_dir():
        raise UsageError(f"--resume {args.resume}: not a folder")
    if args.out is None and args.resume is None:
        raise UsageError("--out: give the folder for the results (or --resume DIR)")
    if args.bundle is not None and not (args.bundle / "requirements.txt").is_file():
        raise UsageError(f"--bundle {args.bundle}: holds no requirements.txt "
                         f"(make it with scripts/gpu_bundle.py)")
    if args.upstream and not args.seeds.is_dir():
        raise UsageError(f"--seeds {args.seeds}: not a folder (the seed files NNN_*.txt)")


def plan(args: argparse.Namespace, work: Path) -> list[gpu_steps.Step]:
    try:
        seeds = seed_steps(args.seeds, work) if args.upstream else []
    except ValueError as error:
        raise UsageError(f"--seeds: {error}") from None
    return [*seeds, *check_steps(work, args.examples, args.jobs)]


def write_docs(folder: Path, page: Path = DOCS_PAGE) -> int:
    results = gpu_steps.done(folder)
    if not results:
        raise UsageError(f"--write-docs {folder}: holds no step results (<step>.json)")
    page.write_text(gpu_report.docs_page(results, notes(folder)))
    print(f"wrote {page} from {len(results)} step results in {folder}")
    return 0


def print_plan(args: argparse.Namespace) -> int:
    """The steps a run would take, with their budgets (no GPU needed, nothing run)."""
    validate(argparse.Namespace(**{**vars(args), "out": Path(".")}))
    with tempfile.TemporaryDirectory(prefix="refimpl-gpu-plan-") as work:
        steps = plan(args, Path(work))
    if args.bundle is not None:
        steps.insert(0, install_step(args.bundle))
    for step in steps:
        print(f"phase {step.phase}  {step.name:<14} {step.budget_s:>4.0f} s  "
              f"{' '.join(step.command)}")
    return 0


def start(args: argparse.Namespace) -> tuple[Path, Path]:
    """OUT (holding the results to resume from) and WORK, made."""
    out = (args.out or args.resume).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.resume is not None and args.resume.resolve() != out:
        for name, result in gpu_steps.done(args.resume).items():
            if name != "install":
                gpu_steps.write_result(out, result)
    (out / "install.json").unlink(missing_ok=True)  # a machine installs in every session
    work = args.work or Path(tempfile.mkdtemp(prefix="refimpl-gpu-"))
    return out, work.resolve()


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        if args.write_docs is not None:
            return write_docs(args.write_docs)
        if args.plan:
            return print_plan(args)
        if not torch.cuda.is_available():
            raise UsageError("no CUDA device: every GPU check would skip")
        validate(args)
        return run_all(args)
    except UsageError as error:
        print(f"gpu_check.py: {error}", file=sys.stderr)
        return 2


def run_all(args: argparse.Namespace) -> int:
    out, work = start(args)
    steps = plan(args, work)
    try:
        if args.bundle is not None:
            installed = run([install_step(args.bundle.resolve())], out, work)["install"]
            if installed["status"] != 0:
                print("gpu_check.py: the install failed (its log is in logs.tar.gz)")
                return 1
        results = run(steps, out, work)
    except gpu_steps.Interrupted as stop:
        print(f"gpu_check.py: stopped by {stop}: the steps that ended are in {out}; "
              f"--resume {out} runs the others", file=sys.stderr)
        return 130
    print(gpu_report.report(results, notes(out)))
    return 0 if all(r["status"] == 0 for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
