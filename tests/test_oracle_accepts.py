"""A backend declares what it takes (issue 30, item 1): ``accepts = {"fx_graph_cse":
("aten",)}``; inputs of another kind are never drawn for it, a property that draws only those
is skipped, and a declaration that says nothing valid is a load error."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings

from refimpl.oracle import BackendError, component, load_backend, skip_unless_takes
from refimpl.oracle.accepts import accepts_lines, graph_kind
from refimpl.oracle.backend import describe
from refimpl.strategies import op_graphs
from refimpl.strategies.graphs import GraphSpec, NodeSpec
from tests.test_fuzz import _run

SPEC = GraphSpec(num_inputs=1, side=2, nodes=(NodeSpec(op="cos", inputs=(0,), params=()),),
                 outputs=(1,), style="aten")


class Counting:
    """An aten-only CSE that records the kind of every graph it is handed."""

    name = "counting"

    def __init__(self) -> None:
        self.accepts = {"fx_graph_cse": ("aten",)}
        self.seen: list[str] = []

    def fx_graph_cse(self, graph):
        self.seen.append(graph_kind(graph))
        return graph


def test_the_kind_of_a_graph_is_whether_its_nodes_carry_values():
    assert graph_kind(SPEC.traced().graph) == "aten"
    torch_style = GraphSpec(SPEC.num_inputs, SPEC.side, SPEC.nodes, SPEC.outputs, "torch")
    assert graph_kind(torch_style.traced().graph) == "torch"


def test_a_backend_never_gets_a_graph_of_a_kind_it_does_not_take():
    backend = Counting()

    @settings(max_examples=30, database=None, derandomize=True)
    @given(op_graphs())
    def prop(spec):
        component(backend, "fx_graph_cse")(spec.traced().graph)

    prop()
    assert backend.seen and set(backend.seen) == {"aten"}, backend.seen
    assert len(backend.seen) >= 30  # rejected draws are replaced: it still gets its examples


def test_a_backend_that_declares_nothing_gets_both_kinds():
    backend = Counting()
    backend.accepts = None

    @settings(max_examples=30, database=None, derandomize=True)
    @given(op_graphs())
    def prop(spec):
        component(backend, "fx_graph_cse")(spec.traced().graph)

    prop()
    assert set(backend.seen) == {"aten", "torch"}


def test_a_property_that_draws_only_other_kinds_is_skipped_with_the_reason():
    with pytest.raises(pytest.skip.Exception, match="takes only aten input for fx_graph_cse"):
        skip_unless_takes(Counting(), "fx_graph_cse", ("torch",))
    skip_unless_takes(Counting(), "fx_graph_cse", ("aten", "torch"))  # draws some it takes


def test_torch_declares_its_cse_aten_only_and_the_header_says_so():
    torch_backend = load_backend("torch")
    assert torch_backend.accepts == {"fx_graph_cse": ("aten",)}
    assert "fx_graph_cse takes aten input only" in describe(torch_backend)
    (line,) = accepts_lines(torch_backend)
    assert "torch graphs not drawn" in line and len(line) <= 100, line
    assert accepts_lines(load_backend("refimpl")) == []


BAD = '''
class UnknownMethod:
    name = "bad"
    accepts = {"compile": ("aten",)}


class UnknownKind:
    name = "bad"
    accepts = {"fx_graph_cse": ("onnx",)}
'''


@pytest.mark.parametrize("attribute, words", [("UnknownMethod", "'compile'"),
                                              ("UnknownKind", "'onnx'")])
def test_an_accepts_that_names_nothing_known_is_a_load_error(tmp_path: Path, monkeypatch,
                                                              attribute, words):
    (tmp_path / "bad_accepts.py").write_text(BAD)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(BackendError, match=words):
        load_backend(f"bad_accepts:{attribute}")
    done = _run("fuzz", "--target", f"bad_accepts:{attribute}", "--component", "cse",
                "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and "--target" in done.stderr and words in done.stderr
