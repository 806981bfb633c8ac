"""`refimpl fuzz` end to end on a tiny property suite of our own making, and the pytest plugin
as a backend author's suite sees it (both in subprocesses, as users run them)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from refimpl.fuzz.campaign import INCOMPLETE
from refimpl.fuzz.options import FuzzOptions

SUITE = '''
from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, strategies as st


@dataclass(frozen=True)
class Box:  # a property module's own dataclass: the reproducer must rebuild it
    x: int


# x is drawn from 100 up, so every example fails: a property that fails only on x >= 100 drawn
# from all integers is missed by 3 random examples one time in three (dev profile).
@given(box=st.builds(Box, x=st.integers(min_value=100)), ys=st.lists(st.integers()))
def test_small(refimpl_backend, box, ys):
    assert box.x < 100, f"expected x < 100, observed {box.x}"

@given(x=st.integers())
def test_always(refimpl_backend, x):
    assert isinstance(x, int)
'''


def _run(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "refimpl", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def write_suite(folder: Path, name: str, text: str) -> Path:
    """A property file ``name`` in ``folder`` (created), from dedented ``text``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return folder


def report_of(out: Path) -> dict[str, dict]:
    """report.json's properties by test name."""
    rows = json.loads((out / "report.json").read_text())["properties"]
    return {p["nodeid"].split("::")[-1]: p for p in rows}


def skipped_for_want_of_cuda(row: dict) -> bool:
    """A report row of a ``cuda``-marked property skipped on a machine without a GPU (it
    never reached the target). On a GPU machine no row may say so."""
    skipped = row["outcome"] == "skipped" and "needs a CUDA device" in (row["reason"] or "")
    assert not (skipped and torch.cuda.is_available()), f"skipped on a GPU machine: {row}"
    return skipped


#: optional packages a property skips without (its skip reason names the package)
OPTIONAL_PACKAGES = ("transformers", "torchvision")


def skipped_for_want_of_a_package(row: dict) -> bool:
    """A report row of a property skipped because an optional package it needs (one of
    :data:`OPTIONAL_PACKAGES`, named in the reason) is not installed here: it never reached
    the target. Where the package is installed no row may say so."""
    reason = row["reason"] or ""
    named = [p for p in OPTIONAL_PACKAGES if f"need {p}" in reason or f"needs {p}" in reason]
    skipped = row["outcome"] == "skipped" and bool(named)
    missing = all(importlib.util.find_spec(p) is None for p in named)
    assert not (skipped and not missing), f"skipped with {named} installed: {row}"
    return skipped


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    folder = tmp_path / "props"
    folder.mkdir()
    (folder / "test_cse_tiny.py").write_text(SUITE)
    return folder


def test_fuzz_finds_shrinks_and_writes_a_reproducer(suite: Path, tmp_path: Path):
    out = tmp_path / "out"
    done = _run("fuzz", "--component", "cse", "--properties", str(suite), "--out", str(out),
                "--max-examples", "30", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads((out / "report.json").read_text())
    by_name = {p["nodeid"].split("::")[1]: p for p in report["properties"]}
    assert by_name["test_small"]["outcome"] == "failed"
    assert "observed 100" in by_name["test_small"]["message"]  # shrunk to the boundary
    assert by_name["test_always"]["outcome"] == "passed"
    assert by_name["test_always"]["examples"] >= 30
    repro = Path(by_name["test_small"]["reproducer"])
    assert "x=100" in repro.read_text()
    replayed = subprocess.run([sys.executable, str(repro)], capture_output=True, text=True,
                              timeout=120)
    assert replayed.returncode == 1
    assert "REPRODUCED" in replayed.stdout


def test_fuzz_passes_with_exit_0_and_reports_missing_components(tmp_path: Path):
    folder = tmp_path / "props"
    folder.mkdir()
    (folder / "test_flops_ok.py").write_text(SUITE.split("@given(x=st.integers())")[0]
                                             .replace("box.x < 100", "box.x == box.x"))
    done = _run("fuzz", "--component", "flops,layout", "--properties", str(folder), "--out",
                str(tmp_path / "o"), "--max-examples", "5", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no property files test_layout*.py" in done.stdout  # skipped, and says why


def test_fuzz_reports_a_skipped_property_as_skipped_with_no_examples(tmp_path: Path):
    folder = tmp_path / "props"
    folder.mkdir()
    (folder / "test_layout_needs.py").write_text(textwrap.dedent('''
        from hypothesis import given, strategies as st
        from refimpl.oracle import component

        @given(x=st.integers())
        def test_needs_layout(refimpl_backend, x):
            component(refimpl_backend, "optimize_layout")
            raise AssertionError("unreachable against torch")
    '''))
    out = tmp_path / "o"
    done = _run("fuzz", "--target", "torch", "--component", "layout", "--properties",
                str(folder), "--out", str(out), "--max-examples", "5", cwd=tmp_path)
    assert done.returncode == INCOMPLETE, done.stdout + done.stderr  # nothing ran: not a pass
    assert "nothing ran" in done.stdout
    (prop,) = json.loads((out / "report.json").read_text())["properties"]
    assert (prop["outcome"], prop["examples"]) == ("skipped", 0)
    assert "has no optimize_layout" in prop["reason"]


@pytest.mark.parametrize("args", [["--component", "nonsense"], ["--max-examples", "0"],
                                  ["--target", "no_colon_here"],
                                  ["--max-examples", "3", "--minutes", "1"]])
def test_fuzz_bad_arguments_exit_2(args: list[str], tmp_path: Path):
    done = _run("fuzz", *args, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip()


def test_options_reject_bad_values():
    with pytest.raises(ValueError, match="components"):
        FuzzOptions(components=("cse", "bogus"))
    with pytest.raises(ValueError, match="jobs"):
        FuzzOptions(jobs=0)


def test_plugin_gives_a_users_suite_the_fixture_and_the_target(tmp_path: Path):
    (tmp_path / "test_mine.py").write_text(textwrap.dedent('''
        from hypothesis import given
        from refimpl.oracle import component

        def test_backend_is_torch(refimpl_backend):
            assert refimpl_backend.name == "torch"
            assert callable(component(refimpl_backend, "fx_graph_cse"))

        def test_layout_is_skipped(refimpl_backend):
            component(refimpl_backend, "optimize_layout")
            raise AssertionError("torch has no layout pass: this line must not run")
    '''))
    done = subprocess.run([sys.executable, "-m", "pytest", "-rs", "-p", "no:cacheprovider",
                           "--refimpl-target", "torch", str(tmp_path / "test_mine.py")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout
    assert "refimpl target: torch" in done.stdout
    assert "1 passed, 1 skipped" in done.stdout
    assert "has no optimize_layout" in done.stdout


def test_fuzz_jobs_run_components_side_by_side(suite: Path, tmp_path: Path):
    (suite / "test_flops_tiny.py").write_text(SUITE)
    done = _run("fuzz", "--component", "cse,flops", "--jobs", "2", "--properties", str(suite),
                "--out", str(tmp_path / "o"), "--max-examples", "20", "--no-shrink", cwd=tmp_path)
    assert done.returncode == 1
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    failed = sorted(p["component"] for p in report["properties"] if p["outcome"] == "failed")
    assert failed == ["cse", "flops"]  # each worker found its component's failure
