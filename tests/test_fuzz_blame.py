"""Blame where it belongs (issue 22, item 2): a backend that raises, returns the wrong type or
exits fails as "the target failed: <its error>", never as a harness defect, and its
reproducer says it reproduces."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import fx

from refimpl.oracle import TargetError, component
from tests.test_fuzz import _run, report_of

BACKENDS = '''
import sys


class Raises:
    name = "raises"

    def fx_graph_cse(self, graph):
        raise RuntimeError("boom")


class ReturnsNone:
    name = "returns-none"

    def fx_graph_cse(self, graph):
        return None


class ReturnsGarbage:
    name = "returns-garbage"

    def fx_graph_cse(self, graph):
        return "a graph, honestly"


class Exits:
    name = "exits"

    def fx_graph_cse(self, graph):
        sys.exit(0)
'''

CASES = {"Raises": "raised RuntimeError: boom",
         "ReturnsNone": "returned NoneType, expected a torch.fx.Graph",
         "ReturnsGarbage": "returned str, expected a torch.fx.Graph",
         "Exits": "raised SystemExit: 0"}


@pytest.mark.slow
@pytest.mark.parametrize("backend", list(CASES))
def test_a_broken_backend_is_the_targets_failure(tmp_path: Path, backend: str):
    (tmp_path / "blame_backends.py").write_text(BACKENDS)
    done = _run("fuzz", "--target", f"blame_backends:{backend}", "--component", "cse",
                "--max-examples", "2", "--no-shrink", "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    rows = report_of(tmp_path / "o")
    assert rows and all(r["outcome"] == "failed" and not r["harness_defect"]
                        for r in rows.values()), rows
    for row in rows.values():
        assert "the target failed" in row["message"] and CASES[backend] in row["message"], row
    assert "harness defect" not in done.stdout
    assert "the target failed" in done.stdout  # the table's note says whose failure it is
    reproducer = next(r["reproducer"] for r in rows.values() if r["reproducer"])
    text = Path(reproducer).read_text()  # the installed suite by name, not by checkout path
    assert "properties='refimpl.properties'" in text
    assert str(Path(__file__).resolve().parents[1]) not in text
    replayed = subprocess.run([sys.executable, reproducer], cwd=tmp_path, capture_output=True,
                              text=True, timeout=300)
    assert replayed.returncode == 1, replayed.stdout + replayed.stderr  # not "fixed"


class Honest:
    name = "honest"

    def fx_graph_cse(self, graph):
        return graph


def test_the_wrapper_returns_what_the_backend_returns():
    graph = fx.symbolic_trace(lambda x: torch.sin(x)).graph
    assert component(Honest(), "fx_graph_cse")(graph) is graph


def test_the_harness_own_interrupts_pass_through():
    class Stop(BaseException):
        pass

    class Interrupts:
        name = "interrupts"

        def fx_graph_cse(self, graph):
            raise Stop

    with pytest.raises(Stop):
        component(Interrupts(), "fx_graph_cse")(fx.Graph())
    with pytest.raises(TargetError, match=r"the target failed: interrupts\.fx_graph_cse"):
        component(type("R", (), {"name": "interrupts", "fx_graph_cse":
                                 lambda self, g: 1 / 0})(), "fx_graph_cse")(fx.Graph())
