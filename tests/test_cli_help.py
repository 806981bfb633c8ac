"""`refimpl --help` imports no component (torch takes ~2 s to import): the import list, not a
timer, is checked here; benchmarks/ holds no timed variant because the list is the cause."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from refimpl.cli import COMMANDS, SUMMARIES


def imported_modules(*argv: str) -> set[str]:
    """The modules `python -X importtime -m refimpl ARGV` imports (importtime's stderr)."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "refimpl", *argv],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line.split("|") for line in done.stderr.splitlines()
            if line.startswith("import time:") and line.count("|") == 2]
    modules = {row[2].strip() for row in rows}
    assert "refimpl.cli" in modules  # the parse found the rows it reads
    return modules


@pytest.mark.parametrize("argv", [["--help"], ["--version"]])
def test_top_level_help_and_version_import_no_torch(argv):
    heavy = {m for m in imported_modules(*argv)
             if m.split(".")[0] in ("torch", "pytest", "hypothesis", "numpy")}
    assert not heavy, sorted(heavy)[:10]


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_summary_is_the_subcommands_own_help(name):
    """`refimpl --help` shows SUMMARIES without importing the modules: they must not drift."""
    assert SUMMARIES[name] == importlib.import_module(COMMANDS[name]).HELP
