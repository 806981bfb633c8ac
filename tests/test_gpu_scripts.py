"""scripts/gpu_check.py and scripts/upstream_tests.py, on any machine: the swaps reach
refimpl, each upstream module runs in a process of its own, the GPU check refuses a machine
without a GPU, and its report reads counts as written. The seed steps themselves (extraction,
both columns, their counts) are in tests/test_gpu_seeds.py."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


UPSTREAM_CSE = '''
import refimpl
from torch._functorch.compile_utils import fx_graph_cse
from torch.distributed._composable import checkpoint


def test_cse_is_refimpls():
    assert fx_graph_cse.__wrapped__ is refimpl.fx_graph_cse


def test_checkpoint_is_refimpls_with_its_state():
    assert checkpoint.__wrapped__ is refimpl.checkpoint
    assert checkpoint.state is refimpl.checkpoint.state
'''

#: as test_ac.py's setUp does: global state a later module must not see
LEAVES_STATE = '''
import torch


def test_sets_default_dtype():
    torch.set_default_dtype(torch.float64)
'''

SEES_NO_STATE = '''
import torch


def test_default_dtype_is_float32():
    assert torch.get_default_dtype() == torch.float32
'''


def _upstream(tmp_path: Path, **modules: str) -> Path:
    folder = tmp_path / "upstream"
    folder.mkdir()
    for name, text in modules.items():
        (folder / f"{name}.py").write_text(textwrap.dedent(text))
    return folder


@pytest.mark.slow
def test_upstream_modules_run_with_refimpl_swapped_in_each_alone(tmp_path: Path):
    folder = _upstream(tmp_path, test_a_leaves=LEAVES_STATE, test_b_sees=SEES_NO_STATE,
                       test_cse=UPSTREAM_CSE)
    done = subprocess.run([sys.executable, str(SCRIPTS / "upstream_tests.py"), str(folder),
                           "--xml-dir", str(tmp_path / "xml"), "-q"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "test_b_sees.py: pytest exit 0" in done.stdout  # not after test_a_leaves' state
    assert "fx_graph_cse                 reached 0 times" in done.stdout  # import only
    read = [_script("gpu_counts").junit(xml) for xml in sorted((tmp_path / "xml").glob("*.xml"))]
    assert _script("gpu_counts").total(read)["counts"] == {
        "passed": 4, "failed": 0, "errors": 0, "skipped": 0}
    reached = _script("gpu_counts").reached(tmp_path / "xml" / "test_cse.reached.json")
    assert (reached["checkpoint"], reached["fx_graph_cse"]) == (0, 0)  # imported, not called


def test_upstream_tests_needs_a_folder_of_modules(tmp_path: Path):
    done = subprocess.run([sys.executable, str(SCRIPTS / "upstream_tests.py"), str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "must hold upstream test modules" in done.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
def test_gpu_check_refuses_a_machine_without_a_gpu(tmp_path: Path):
    done = subprocess.run([sys.executable, str(SCRIPTS / "gpu_check.py"), "--out",
                           str(tmp_path / "o")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "no CUDA device" in done.stderr
    assert not (tmp_path / "o").exists()


def test_gpu_check_reads_a_fuzz_report(tmp_path: Path):
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"properties": [
        {"nodeid": "p/test_layout.py::test_a", "outcome": "passed", "reach": 0.75,
         "examples": 10},
        {"nodeid": "p/test_layout.py::test_b", "outcome": "skipped", "reach": None,
         "examples": 0},
        {"nodeid": "p/test_layout.py::test_c", "outcome": "failed", "reach": 0.5,
         "examples": 3, "message": "AssertionError: strides differ\nmore"},
        {"nodeid": "p/test_layout.py::test_d", "outcome": "interrupted", "reach": None,
         "examples": 1}]}))
    read = _script("gpu_counts").fuzz(report)
    assert read["counts"] == {"passed": 1, "failed": 1, "errors": 0, "skipped": 1,
                              "unfinished": 1}
    assert read["reach"] == {"test_a": 0.75, "test_c": 0.5} and read["examples"] == 14
    assert read["failures"] == [{"test": "test_c", "outcome": "failed",
                                 "message": "AssertionError: strides differ\nmore"}]
    assert _script("gpu_counts").line(read["counts"]) == (
        "1 passed, 1 failed, 0 errors, 1 skipped, 1 unfinished")
    assert _script("gpu_counts").fuzz(tmp_path / "absent.json") is None


JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest"
errors="1" failures="1" skipped="1" tests="5">
<testcase classname="test_ac.MemoryBudgetTest" name="test_profile"><failure
 message="AssertionError: 3 != 4&#10;second line">trace</failure></testcase>
<testcase classname="test_ac.MemoryBudgetTest" name="test_a"/>
<testcase classname="test_ac.MemoryBudgetTest" name="test_b"/>
<testcase classname="test_ac.MemoryBudgetTest" name="test_c"><skipped message="no cuda"/>
</testcase>
<testcase classname="" name="test_ac"><error message="collection failed"/></testcase>
</testsuite></testsuites>"""


def test_gpu_check_reads_junit_counts_and_the_first_line_of_each_failure(tmp_path: Path):
    (tmp_path / "a.xml").write_text(JUNIT)
    read = _script("gpu_counts").junit(tmp_path / "a.xml")
    assert read["counts"] == {"passed": 2, "failed": 1, "errors": 1, "skipped": 1}
    assert read["failures"] == [
        {"test": "MemoryBudgetTest::test_profile", "outcome": "failed",
         "message": "AssertionError: 3 != 4"},
        {"test": "test_ac", "outcome": "errors", "message": "collection failed"}]
    assert _script("gpu_counts").junit(tmp_path / "absent.xml") is None
    assert _script("gpu_counts").total([None, read, None])["counts"]["passed"] == 2
    assert _script("gpu_counts").total([None]) is None


@pytest.mark.parametrize("options, message", [
    (["--implementation", "jax"], "--implementation jax: expected one of refimpl, torch"),
    (["--jobs", "0"], "--jobs 0: expected a whole number >= 1"),
    (["--xml-dir"], "--xml-dir needs a value"),
])
def test_upstream_tests_refuses_a_bad_option_in_one_line(tmp_path: Path, capsys, options,
                                                         message):
    folder = _upstream(tmp_path, test_a=SEES_NO_STATE)
    assert _script("upstream_tests").main([str(folder), *options]) == 2
    assert capsys.readouterr().err == f"upstream_tests.py: {message}\n"
