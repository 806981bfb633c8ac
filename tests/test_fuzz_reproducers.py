"""Reproducers print the expected and the observed value, exit 2 when their target cannot be
loaded or their example cannot be rebuilt, are code only where the example prints as code (no
pickle, no database), rebuild examples holding tensors from a pickle that moves with the
campaign's folder, and replay everything else (st.data() draws) from Hypothesis's record of
the example's choices: never from the example database, never writing where they run.

The last test is the campaign-level one of issue 32: a backend wrong on one graph in ten
(tests/rare_backends.py), whose every reproducer must replay its own example."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from refimpl.fuzz.examples import examples_file
from refimpl.fuzz.outdir import check_out
from refimpl.fuzz.report import REBUILT_FROM_CODE
from tests.test_fuzz import _run, report_of, write_suite

#: under pytest-xdist every test here runs on one worker, so the module's campaign runs once.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("reproducer-campaign")]

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


def _with(text: str, pattern: str, new: str) -> str:
    """``text`` with the one match of ``pattern`` (a regular expression) replaced."""
    changed, count = re.subn(pattern, lambda m: new, text, flags=re.DOTALL)
    assert count == 1, pattern
    return changed


PICKLE = r"arguments=str\(HERE / '[^']+'\)"


def test_a_gone_pickle_is_replayed_from_the_choices(campaign: Path, tmp_path: Path):
    """The tensor example's pickle is gone: the reproducer replays Hypothesis's record of
    its draws instead (no database, no pytest), and still reproduces."""
    row = report_of(campaign / "o")["test_tensor_argument"]
    text = _with(Path(row["reproducer"]).read_text(), PICKLE, "arguments='gone.pt'")
    assert "CHOICES = ('" in text
    (tmp_path / "repro.py").write_text(text)
    done = _replay(str(tmp_path / "repro.py"), tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "REPRODUCED" in done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repro.py"]


def test_an_example_nothing_rebuilds_says_so_and_never_claims_fixed(campaign: Path,
                                                                   tmp_path: Path):
    """Neither its pickle nor its choices: exit 2, "CANNOT TELL", never "not reproduced"."""
    row = report_of(campaign / "o")["test_tensor_argument"]
    text = _with(Path(row["reproducer"]).read_text(), PICKLE, "arguments='gone.pt'")
    text = _with(text, r"CHOICES = \('[^\n]*\)\n", "CHOICES = None\n")
    (tmp_path / "repro.py").write_text(text)
    done = _replay(str(tmp_path / "repro.py"), tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "CANNOT TELL" in done.stdout and "not reproduced" not in done.stdout


def test_a_replay_of_a_whole_property_writes_nothing_where_it_runs(campaign: Path,
                                                                   tmp_path: Path):
    """A property whose setup timed out (CALL empty) is replayed whole through pytest, with
    the campaign's rootdir; it fails again, and leaves no .hypothesis/, .benchmarks/,
    .pytest_cache/ or saved examples in the folder it runs in."""
    row = report_of(campaign / "o")["test_sum_matches"]
    text = _with(Path(row["reproducer"]).read_text(), r"CALL = '''.*?'''\n", "CALL = ''\n")
    (tmp_path / "repro.py").write_text(text)
    done = _replay(str(tmp_path / "repro.py"), tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "replaying it through pytest" in done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repro.py"]


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


def _tree(folder: Path) -> set[str]:
    """Every path under ``folder``, relative to it."""
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def test_every_reproducer_of_a_rarely_wrong_backend_replays_its_example(tmp_path: Path):
    """Issue 32: a CSE wrong on about one graph in ten (by a checksum of the graph) fails
    only on the examples the campaign drew. Every reproducer, run from a copy of --out in
    another folder without the example database, exits 1 with REPRODUCED; the st.data()
    properties' reproducers say they replay Hypothesis's choices, not that they are code
    only; and none writes anything, neither where it runs nor into the copy, so a copy that
    ran them inside still takes --resume and --force. The campaign runs two of CSE's property
    files (the write-between properties draw with st.data(), the effects ones do not): all
    eight took nearly the 300-s limit alone, and past it beside a loaded suite."""
    repo = Path(__file__).resolve().parents[1]
    suite = tmp_path / "suite"
    suite.mkdir()
    for name in ("test_cse_strength.py", "test_cse_effects.py"):
        shutil.copy(repo / "properties" / name, suite / name)
    out = tmp_path / "campaign"
    done = _run("fuzz", "--target", "tests.rare_backends:RarelyLazyCSE", "--component", "cse",
                "--max-examples", "10", "--seed", "1", "--out", str(out),
                "--properties", str(suite), cwd=repo)
    assert done.returncode == 1, done.stdout + done.stderr
    failed = {n: row for n, row in report_of(out).items() if row["outcome"] == "failed"}
    drawn_with_data = [n for n in failed if n.startswith("test_a_write_between_equal_values")]
    assert drawn_with_data, f"no st.data() property failed: {sorted(failed)}"

    copy = tmp_path / "uploaded"
    shutil.copytree(out, copy, ignore=shutil.ignore_patterns("hypothesis-db"))
    before = _tree(copy)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for name, row in failed.items():
        reproducer = copy / Path(row["reproducer"]).relative_to(out)
        done = _replay(str(reproducer), elsewhere)
        assert done.returncode == 1 and "REPRODUCED" in done.stdout, (
            f"{name}: exit {done.returncode}\n{done.stdout[-3000:]}{done.stderr[-2000:]}")
        text = reproducer.read_text()
        if name in drawn_with_data:
            assert "CHOICES = ('" in text and "route='choices'" in text
            assert REBUILT_FROM_CODE not in text and "code only" not in text
    inside = copy / Path(failed[drawn_with_data[0]]["reproducer"]).relative_to(out)
    assert _replay(str(inside), copy).returncode == 1  # run inside the uploaded folder
    assert list(elsewhere.iterdir()) == []
    assert _tree(copy) == before
    check_out(copy, resume=True, force=False)
    check_out(copy, resume=False, force=True)
