"""The README's worked example, run as a backend author would run it: in their own suite,
through the installed pytest plugin, against refimpl (passes) and torch (fails: a finding)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def _worked_example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    return next(b for b in blocks if "def test_conv_backward_is_twice_forward" in b)


@pytest.mark.parametrize(("target", "expected"), [("refimpl", 0), ("torch", 1)])
def test_worked_example(tmp_path: Path, target: str, expected: int):
    (tmp_path / "test_my_backend.py").write_text(_worked_example())
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                           "test_my_backend.py", "--refimpl-target", target],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == expected, done.stdout + done.stderr
    assert f"refimpl target: {target}" in done.stdout
    if expected:
        assert "convolution_backward" in done.stdout or "groups=" in done.stdout


def test_quickstart_has_exactly_two_commands():
    text = README.read_text()
    block = text.split("## Quickstart", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [line for line in block.splitlines() if line.strip()]
    assert len(commands) == 2
    assert "pip install" in commands[0] and "refimpl fuzz" in commands[0]
    assert "pytest" in commands[1]


ROOT = README.parent


def _pins(path: Path) -> dict[str, str]:
    lines = [ln.split("#", 1)[0].strip() for ln in path.read_text().splitlines()]
    return dict(ln.split("==", 1) for ln in lines if "==" in ln)


def test_ci_tests_both_torch_releases():
    """CI's default releases (docs/design.md, torch releases): the README's install pins
    2.13.0 through constraints.txt; the 2.14 stage and tox env pin 2.14.1 with torchvision
    0.29.1."""
    assert _pins(ROOT / "constraints.txt") == {"torch": "2.13.0"}
    assert _pins(ROOT / "constraints-2.14.txt") == {"torch": "2.14.1", "torchvision": "0.29.1"}
    run = (ROOT / ".ci" / "run").read_text()
    assert "constraints-2.14.txt" in run and "refimpl fuzz" in run
    tox = (ROOT / "tox.ini").read_text()
    envlist = next(ln for ln in tox.splitlines() if ln.startswith("envlist"))
    assert "py-torch214" in envlist and "torch214: -c constraints-2.14.txt" in tox


def test_ci_runs_the_quickstart_verbatim():
    """.ci/run extracts the Quickstart's commands with awk; it must find the same two lines
    this file reads (so the README's commands are what CI runs)."""
    run = (ROOT / ".ci" / "run").read_text()
    awk = next(ln for ln in run.splitlines() if ln.startswith("mapfile -t QUICKSTART"))
    program = awk.split("awk '", 1)[1].rsplit("' README.md", 1)[0]
    done = subprocess.run(["awk", program, str(README)], capture_output=True, text=True,
                          check=True)
    block = README.read_text().split("## Quickstart", 1)[1].split("```bash\n", 1)[1]
    expected = [ln for ln in block.split("```", 1)[0].splitlines() if ln.strip()]
    assert done.stdout.splitlines() == expected


def test_the_torch_floor_is_one_release_everywhere():
    """setup.cfg's floor is the release CI runs in its floor stage (constraints-floor.txt),
    the first release scripts/torch_releases.py runs, a row of docs/torch-releases.md, and
    what the README states."""
    floor = _pins(ROOT / "constraints-floor.txt")["torch"]
    minor = ".".join(floor.split(".")[:2])
    assert re.search(rf"^\s*torch>={re.escape(minor)}\s*$", (ROOT / "setup.cfg").read_text(),
                     flags=re.MULTILINE), f"setup.cfg does not say torch>={minor}"
    assert "constraints-floor.txt" in (ROOT / ".ci" / "run").read_text()
    assert "floor: -c constraints-floor.txt" in (ROOT / "tox.ini").read_text()
    releases = (ROOT / "scripts" / "torch_releases.py").read_text()
    first = re.search(r'RELEASES = \("([0-9.]+)"', releases).group(1)
    assert first == floor
    assert f"| {floor} |" in (ROOT / "docs" / "torch-releases.md").read_text()
    assert f"torch {minor} or newer" in README.read_text()
