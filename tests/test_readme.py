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
