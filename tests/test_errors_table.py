"""docs/errors.md, row by row: every error a user can cause is one line naming the argument,
exit 2 on the command line (or the exception the row names, in the Python API).

The rows are read from the page itself, as a reader sees them, so the page and these tests
cannot drift: a row whose command stops failing, fails with another status or message, or
prints more than one line fails here. The page's ``# mymodels.py`` and ``# badimport.py``
blocks are the files the command rows run beside; its ``# setup`` block runs before each
Python row. ``…`` in a message stands for any text.
"""

from __future__ import annotations

import builtins
import contextlib
import io
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import refimpl.fuzz.cli as fuzz_cli
from refimpl.cli import main

PAGE = Path(__file__).resolve().parents[1] / "docs" / "errors.md"
TEXT = PAGE.read_text()
#: "# NAME" first line of a ```python block -> the block's text.
BLOCKS = {m.group(1): m.group(2) for m in
          re.finditer(r"```python\n# (\S+)\n(.*?)```", TEXT, flags=re.DOTALL)}
#: files written where the command rows run.
USER_FILES = ("mymodels.py", "badimport.py")


def _code(cell: str) -> str:
    """A table cell's text without the backticks around it."""
    cell = cell.strip()
    assert cell.startswith("`") and cell.endswith("`"), cell
    return cell[1:-1]


def table_rows() -> list[tuple[str, str, str, str]]:
    """(section, input, message, exit status or exception name) for each row of the page."""
    rows, section = [], ""
    for line in TEXT.splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
        if not line.startswith("| `"):
            continue
        cells = line.strip().strip("|").split(" | ")
        assert len(cells) == 3, line
        given, message, outcome = cells
        rows.append((section, _code(given), _code(message), outcome.strip().strip("`")))
    return rows


ROWS = table_rows()
COMMAND_ROWS = [r for r in ROWS if r[3].isdigit()]
API_ROWS = [r for r in ROWS if not r[3].isdigit()]


def matches(message: str, text: str) -> bool:
    """Whether ``text`` is ``message`` with each ``…`` standing for any text."""
    pattern = ".*".join(re.escape(piece) for piece in message.split("…"))
    return re.fullmatch(pattern, text, flags=re.DOTALL) is not None


def test_the_page_has_rows_for_each_command_and_the_api():
    sections = {section for section, *_ in ROWS}
    assert {"`refimpl flops`", "`refimpl pareto`", "`refimpl fuzz`", "The Python API"} <= sections
    for section in sections:
        assert sum(1 for r in ROWS if r[0] == section) >= 3, section
    assert set(USER_FILES) | {"setup"} <= set(BLOCKS)


def test_the_page_is_in_the_sites_nav():
    nav = (PAGE.parents[1] / "mkdocs.yml").read_text()
    assert re.search(r"^  - [^:]+: errors\.md$", nav, flags=re.MULTILINE)


#: rows that reach an optional package's check: skipped (visibly) where it is not installed.
NEEDS = {"--engine dask --jobs": "distributed"}
#: what `refimpl fuzz` runs once its arguments are checked.
CAMPAIGNS = ("run_and_report", "run_dask", "run_hypofuzz", "run_with_baseline")


def campaign_started(*args, **kwargs):
    raise AssertionError("the arguments were accepted: a campaign started")


def run_command(command: str) -> tuple[int, str]:
    """``refimpl ARGS`` run in-process (its exit status and stderr)."""
    argv = shlex.split(command)
    assert argv[0] == "refimpl", command
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            status = main(argv[1:])
        except SystemExit as exc:  # argparse's own errors
            status = exc.code
    return status, err.getvalue()


@pytest.mark.parametrize("section,given,message,status", COMMAND_ROWS,
                         ids=[r[1] for r in COMMAND_ROWS])
def test_command_row(section, given, message, status, tmp_path, monkeypatch):
    for words, package in NEEDS.items():
        if words in given:
            pytest.importorskip(package, reason=f"the row needs {package}")
    for name in USER_FILES:
        (tmp_path / name).write_text(BLOCKS[name])
        monkeypatch.delitem(sys.modules, name.removesuffix(".py"), raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # a command may put the folder on it
    for name in CAMPAIGNS:  # every row fails before a campaign: one that starts is a failure
        monkeypatch.setattr(fuzz_cli, name, campaign_started)
    *setup, command = given.split(" && ")
    if setup:
        subprocess.run(["bash", "-c", " && ".join(setup)], cwd=tmp_path, check=True)
    got_status, err = run_command(command)
    lines = err.strip().splitlines()
    assert got_status == int(status), err
    assert len(lines) == 1, err
    assert matches(message, lines[0]), f"\n page: {message}\n  got: {lines[0]}"


def raised_by(statement: str) -> BaseException:
    namespace: dict = {}
    exec(BLOCKS["setup"], namespace)
    with pytest.raises(Exception) as info:
        exec(statement, namespace)
    return info.value


@pytest.mark.parametrize("section,given,message,exception", API_ROWS,
                         ids=[r[1] for r in API_ROWS])
def test_api_row(section, given, message, exception):
    error = raised_by(given)
    assert isinstance(error, getattr(builtins, exception)), repr(error)
    text = str(error)
    assert "\n" not in text.strip(), text
    assert matches(message, text), f"\n page: {message}\n  got: {text}"
