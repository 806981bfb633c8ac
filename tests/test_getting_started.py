"""docs/getting-started.md's walkthrough, run as written: the page's `mybackend.py` and the
commands of its "Check a backend of your own" section are read from the page itself, run in an
empty folder with the installed `refimpl`, `python` and `pytest` first on PATH, and the page's
claims checked against what they print.

The claims: the fuzz run exits 1 and groups its failures by cause (the page's `failures by
cause` line is the real one); `--baseline torch` exits 1 and shows none as new (the page's
line again); the reproducer the page runs is the one the triage names for a group, and exits 1
with REPRODUCED; the pytest route honours `--refimpl-max-examples` (profile `dev-3`) and
passes. The page shows torch 2.13.0's output: the numbers are compared on the release the
harness tests run on (conftest.py, HARNESS_FILES).

The baseline step reuses the fuzz step's campaign (`--baseline torch --resume` on the same
`--out`): mine runs once, torch once.

Cost: the four commands run once per session (the fixture's record is shared by workers); a few
minutes of wall time on 2 shared, busy cores (torch 2.13.0), most of it `test_cse_is_sound`
shrinking its failure on mine (the baseline, torch, runs unshrunk).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest
from filelock import FileLock

#: under pytest-xdist every test here runs on one worker: the other worker goes on with other
#: tests instead of waiting on the walkthrough's lock for its minutes
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("first-hour")]

PAGE = Path(__file__).resolve().parent.parent / "docs" / "getting-started.md"
SECTION = "## Check a backend of your own"
ADAPTER_HEADER = "# mybackend.py"
PROGRAMS = ("refimpl", "python", "pytest")
GROUP_LINE = re.compile(r"^ +\d+\. \d+ failed: \w+", flags=re.MULTILINE)
TRIAGE_REPRODUCER = re.compile(r"^ +python (reproducers/\S+\.py)$", flags=re.MULTILINE)
# Variables that would change what a newcomer's run prints (a CI profile, another target).
FOREIGN_ENV = ("CI", "HYPOTHESIS_PROFILE", "REFIMPL_TARGET", "REFIMPL_MAX_EXAMPLES")


@dataclass(frozen=True)
class Ran:
    command: str
    returncode: int
    output: str


def _section() -> str:
    after = PAGE.read_text().split(SECTION, 1)[1]
    return after.split("\n## ", 1)[0]


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", _section(), flags=re.DOTALL)


def _adapter() -> str:
    return next(b for b in _blocks("python") if b.startswith(ADAPTER_HEADER))


def _commands() -> list[str]:
    """The bash blocks' commands, a line ending in a backslash joined to the next."""
    text = "\n".join(_blocks("bash")).replace("\\\n", " ")
    return [" ".join(ln.split()) for ln in text.splitlines() if ln.strip()]


def _shown(needle: str) -> str:
    """The line of the page's shown output (its ```text blocks) that starts with `needle`."""
    lines = [ln for b in _blocks("text") for ln in b.splitlines() if ln.startswith(needle)]
    assert len(lines) == 1, f"the page shows {len(lines)} lines starting {needle!r}"
    return lines[0]


def _shown_ending(needle: str) -> str:
    """The line of the page's shown output that ends with `needle`."""
    lines = [ln for b in _blocks("text") for ln in b.splitlines() if ln.endswith(needle)]
    assert len(lines) == 1, f"the page shows {len(lines)} lines ending {needle!r}"
    return lines[0]


def _run(command: str, folder: Path) -> Ran:
    env = {k: v for k, v in os.environ.items() if k not in FOREIGN_ENV}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(shlex.split(command), cwd=folder, env=env, capture_output=True,
                          text=True, timeout=1200)
    return Ran(command, done.returncode, done.stdout + done.stderr)


@dataclass(frozen=True)
class Walkthrough:
    folder: Path
    steps: dict[str, Ran]  # by step: fuzz, baseline, reproducer, pytest


def _session_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of this test session that every pytest-xdist worker sees (the workers'
    temporary folders share their parent), or the session's own without xdist."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="module")
def walkthrough(tmp_path_factory: pytest.TempPathFactory) -> Walkthrough:
    """Every command of the page, in its order, in one new folder holding only mybackend.py.

    Run once per test session: the first worker to get here runs the page under a file lock
    and writes what each step printed; any other worker (xdist may set the module up on
    both) reads that record instead of running the page again."""
    root = _session_root(tmp_path_factory)
    folder, record = root / "first-hour", root / "first-hour.json"
    with FileLock(str(root / "first-hour.lock")):
        if not record.exists():
            folder.mkdir()
            (folder / "mybackend.py").write_text(_adapter())
            steps = {_step(command): _run(command, folder) for command in _commands()}
            record.write_text(json.dumps({k: asdict(v) for k, v in steps.items()}))
    ran = json.loads(record.read_text())
    return Walkthrough(folder, {step: Ran(**fields) for step, fields in ran.items()})


def _step(command: str) -> str:
    program = command.split()[0]
    assert program in PROGRAMS, f"the page runs {program!r}, which this test does not know"
    if program == "pytest":
        return "pytest"
    if program == "python":
        return "reproducer"
    return "baseline" if "--baseline" in command else "fuzz"


def test_the_page_has_the_adapter_and_the_four_steps():
    adapter = _adapter()
    assert "class MyBackend" in adapter and 'accepts = {"fx_graph_cse": ("aten",)}' in adapter
    assert [_step(c) for c in _commands()] == ["fuzz", "baseline", "reproducer", "pytest"]
    fuzz, baseline = _commands()[:2]
    assert "--target mybackend:MyBackend" in fuzz and "--seed 1" in fuzz
    assert baseline == f"{fuzz} --baseline torch --resume"  # the same campaign, reused


def test_fuzz_groups_the_failures_by_cause(walkthrough: Walkthrough):
    ran = walkthrough.steps["fuzz"]
    assert ran.returncode == 1, ran.output[-4000:]
    assert "torch graphs not drawn" in ran.output
    assert GROUP_LINE.search(ran.output), ran.output[-4000:]
    shown = _shown("failures by cause:")
    assert shown in ran.output.splitlines(), f"the page shows {shown!r}; the run did not"
    assert (walkthrough.folder / "out" / "report.json").is_file()


def test_baseline_torch_shows_none_as_new(walkthrough: Walkthrough):
    ran = walkthrough.steps["baseline"]
    assert ran.returncode == 1, ran.output[-4000:]
    assert "seed: 1 (both targets)" in ran.output
    reused = "the finished campaign of mine in out ran on this seed and these examples: reused"
    assert reused in " ".join(ran.output.split())  # mine ran once, in the fuzz step
    shown = _shown("baseline torch:")
    assert shown.startswith("baseline torch: 0 failing properties fail only on mine"), shown
    assert shown in ran.output.splitlines(), ran.output[-4000:]
    not_new = _shown_ending("fail on torch too (not new)")
    assert not_new in ran.output.splitlines(), f"the page shows {not_new!r}; the run did not"


def test_the_reproducer_is_a_groups_and_reproduces(walkthrough: Walkthrough):
    ran = walkthrough.steps["reproducer"]
    script = ran.command.split()[1]
    named = TRIAGE_REPRODUCER.findall(walkthrough.steps["fuzz"].output)
    assert script.removeprefix("out/") in named, (script, named)
    assert ran.returncode == 1, ran.output[-4000:]
    assert "REPRODUCED: " in ran.output
    shown = _shown("REPRODUCED: ")
    assert shown in ran.output.splitlines(), f"the page shows {shown!r}; the run did not"


def test_the_pytest_route_takes_an_example_count(walkthrough: Walkthrough):
    ran = walkthrough.steps["pytest"]
    assert ran.returncode == 0, ran.output[-4000:]
    assert "refimpl target: mine (mine 0.1)" in ran.output
    assert "hypothesis profile: dev-3;" in ran.output
    assert re.search(r"\b1 passed, \d+ deselected\b", ran.output), ran.output[-4000:]
