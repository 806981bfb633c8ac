"""Every command checks where it will write before it works (issue 22, item 3): one line
naming the option, exit status 2, nothing written; a folder given to `refimpl pareto --out`
receives the files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def refimpl(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "refimpl", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "a-file").write_text("")
    (tmp_path / "a-folder").mkdir()
    return tmp_path


@pytest.mark.parametrize(("args", "says"), [
    (["flops", "resnet18", "--depth", "0"], "--depth=0: expected an int >= 1"),
    (["flops", "mlp", "--output", "a-file/out.json"], "lies under"),
    (["flops", "mlp", "--output", "a-folder"], "is a folder"),
    (["flops", "mlp", "--output", "missing/out.json"], "folder missing does not exist"),
    (["pareto", "mlp", "--out", "missing/x"], "folder missing does not exist"),
    (["pareto", "mlp", "--out", "a-file/x"], "lies under"),
    (["pareto", "mlp", "--points", "1"], "--points=1"),
], ids=["flops-depth", "flops-under-file", "flops-folder", "flops-missing",
        "pareto-missing", "pareto-under-file", "pareto-points"])
def test_a_bad_output_is_one_line_and_exit_2(home: Path, args: list[str], says: str):
    before = sorted(p.name for p in home.iterdir())
    done = refimpl(*args, cwd=home)
    assert done.returncode == 2, done.stdout + done.stderr
    assert says in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in home.iterdir()) == before


@pytest.mark.slow
def test_pareto_writes_into_a_folder_named_with_a_slash(home: Path):
    done = refimpl("pareto", "mlp", "--points", "2", "--compare", "none", "--out", "plots/",
                   cwd=home)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in (home / "plots").iterdir()) == [
        "pareto-mlp.csv", "pareto-mlp.json", "pareto-mlp.png"]
    assert not (home / "plots.csv").exists()


def test_version_names_refimpl_and_torch(tmp_path: Path):
    import importlib.metadata

    import refimpl as package

    done = refimpl("--version", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    torch_release = importlib.metadata.version("torch")
    assert done.stdout.strip() == f"refimpl {package.__version__} (torch {torch_release})"
