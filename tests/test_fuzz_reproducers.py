"""Reproducers print the expected and the observed value, exit 2 when their target cannot be
loaded, are code only where the example prints as code (no pickle, no database), and rebuild
examples holding tensors from a pickle that moves with the campaign's folder."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from refimpl.fuzz.examples import examples_file
from refimpl.fuzz.report import REBUILT_FROM_CODE
from tests.test_fuzz import _run, report_of, write_suite

pytestmark = pytest.mark.slow

TENSOR_SUITE = '''
import torch
from hypothesis import given, strategies as st
from refimpl.oracle import component


@given(n=st.integers(1, 40), scale=st.floats(0.5, 4.0))
def test_sum_matches(refimpl_backend, n, scale):
    x = torch.linspace(0, scale, n * 37)
    component(refimpl_backend, "fx_graph_cse")
    expected, observed = float(x.sum()), refimpl_backend.total(x)
    assert observed == pytest_approx(expected), f"expected {expected}, observed {observed}"


@st.composite
def long_tensors(draw):
    n = draw(st.integers(1, 30))
    return torch.full((n * 137,), draw(st.sampled_from([0.5, 1.0, 2.0])), dtype=torch.float64)


@given(x=long_tensors())
def test_tensor_argument(refimpl_backend, x):
    component(refimpl_backend, "fx_graph_cse")
    assert refimpl_backend.total(x) == float(x.sum())


def pytest_approx(value):
    return value
'''

BACKEND = '''
class Backend:
    """Drops the last element of a tensor of more than 1000 (whose repr is cut with ...)."""
    name = "lossy"

    def fx_graph_cse(self, graph):
        return graph

    def total(self, x):
        return float(x[:-1].sum()) if x.numel() > 1000 else float(x.sum())
'''


@pytest.fixture(scope="module")
def campaign(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("repro")
    (home / "lossy_backend.py").write_text(textwrap.dedent(BACKEND))
    write_suite(home / "props", "test_cse_tensors.py", TENSOR_SUITE)
    done = _run("fuzz", "--target", "lossy_backend:Backend", "--component", "cse",
                "--properties", str(home / "props"), "--out", str(home / "o"),
                "--max-examples", "40", cwd=home)
    assert done.returncode == 1, done.stdout + done.stderr
    return home


def _replay(path: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, path], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def test_a_reproducer_prints_expected_and_observed(campaign: Path):
    row = report_of(campaign / "o")["test_sum_matches"]
    done = _replay(row["reproducer"], campaign)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "REPRODUCED" in done.stdout
    assert "expected vs observed (this run): AssertionError: expected" in done.stdout


def test_a_tensor_example_is_rebuilt_without_the_database(campaign: Path, tmp_path: Path):
    row = report_of(campaign / "o")["test_tensor_argument"]
    assert "tensor(" in row["example"] and "..." in row["example"]  # not evaluable
    shutil.rmtree(campaign / "o" / "hypothesis-db", ignore_errors=True)
    done = _replay(row["reproducer"], tmp_path)  # elsewhere: the campaign's folder is kept
    assert done.returncode == 1, done.stdout + done.stderr
    assert "replaying through pytest" not in done.stdout
    # rebuilt exactly: the assertion shows the shrunk tensor's sum
    assert "REPRODUCED" in done.stdout and "assert" in done.stdout


def test_a_replay_through_pytest_saves_nothing_where_it_runs(campaign: Path, tmp_path: Path):
    """Without its arguments file, a tensor example replays through pytest (and the
    example database); that replay fails again but writes no saved-examples/ folder into
    the directory it runs in (it used to, for want of REFIMPL_FUZZ_SAVED)."""
    row = report_of(campaign / "o")["test_tensor_argument"]
    text = Path(row["reproducer"]).read_text()
    text = re.sub(r"arguments=str\(HERE / '[^']+'\)", f"arguments={str(tmp_path / 'gone.pt')!r}",
                  text)
    database = str(campaign / "o" / "hypothesis-db")
    text = re.sub(r"database=str\(HERE / '[^']+'\)", f"database={database!r}", text)
    assert "gone.pt" in text and database in text
    copy = tmp_path / "repro.py"
    copy.write_text(text)
    done = _replay(str(copy), tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "replaying through pytest" in done.stdout
    assert not (tmp_path / "saved-examples").exists()


def test_a_reproducer_whose_target_cannot_load_exits_2(campaign: Path, tmp_path: Path):
    row = report_of(campaign / "o")["test_sum_matches"]
    copy = tmp_path / "repro.py"
    copy.write_text(Path(row["reproducer"]).read_text()
                    .replace("target='lossy_backend:Backend'", "target='gone_backend:Backend'"))
    done = _replay(str(copy), tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "could not load target 'gone_backend:Backend'" in done.stdout


def test_an_example_that_prints_as_code_is_a_file_of_code_only(campaign: Path, tmp_path: Path):
    """test_sum_matches's example (an int and a float) rebuilds exactly from its printed
    call: no pickle is kept, and the reproducer copied alone elsewhere still reproduces."""
    row = report_of(campaign / "o")["test_sum_matches"]
    assert not examples_file(campaign / "o" / "examples", row["nodeid"]).exists()
    text = Path(row["reproducer"]).read_text()
    assert "arguments=None" in text and REBUILT_FROM_CODE in text
    alone = tmp_path / "bug_report.py"
    alone.write_text(text)
    done = _replay(str(alone), tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "REPRODUCED" in done.stdout and "replaying through pytest" not in done.stdout


def test_a_pickled_example_moves_with_its_out_folder(campaign: Path, tmp_path: Path):
    """The tensor example's pickle is named relative to the reproducer: the --out folder
    copied elsewhere, without its example database, still rebuilds it."""
    row = report_of(campaign / "o")["test_tensor_argument"]
    assert examples_file(campaign / "o" / "examples", row["nodeid"]).exists()
    moved = tmp_path / "moved"
    shutil.copytree(campaign / "o", moved)
    shutil.rmtree(moved / "hypothesis-db", ignore_errors=True)
    reproducer = moved / Path(row["reproducer"]).relative_to(campaign / "o")
    assert str(campaign / "o") not in reproducer.read_text()
    done = _replay(str(reproducer), tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "REPRODUCED" in done.stdout and "replaying through pytest" not in done.stdout
