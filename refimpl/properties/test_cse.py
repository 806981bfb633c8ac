"""Properties of the backend's ``fx_graph_cse`` on random op graphs (``--refimpl-target``).

Graphs come from ``refimpl.strategies.op_graphs`` in both dialects (make_fx's aten ops and
symbolic_trace's torch functions and Tensor methods) and every effect class: pure ops, views,
in-place writes, random draws, in-place random draws, and constants that differ only in their
bits (``0.0``/``-0.0``, ``nan``/``-nan``, ``inf``). Each expectation is independent of any CSE:
the original graph run eagerly from the same RNG seed (values, outputs, inputs after the run,
aliasing), and the never-merged nodes as the generator recorded them.

Reach (``refimpl.properties.reach``): an example reaches when the backend merged something, or
when a naive CSE would have merged something (so the backend made or refused a merge).
A failure prints the GraphSpec, which rebuilds the graph: ``spec.traced()``,
``spec.example_inputs()``.
"""

from __future__ import annotations

from hypothesis import given
from torch import fx

from refimpl.expect.cse_soundness import bitwise_equal, naive_duplicates, unsound_reasons
from refimpl.oracle import component
from refimpl.properties.reach import reach
from refimpl.strategies import FAMILIES, GraphOptions, never_merged_names, op_graphs

DETERMINISTIC = GraphOptions(
    families=tuple(f for f in FAMILIES if f not in ("random", "inplace_random")))
EFFECTS = GraphOptions(families=("unary", "view", "random", "inplace", "inplace_random",
                                 "binary"))
#: scalar constants and what reads them: where ``x + 0.0`` meets ``x + -0.0``, nan meets -nan.
CONSTANTS = GraphOptions(families=("constant", "unary", "binary", "list"))


def run_cse(backend, spec) -> tuple[fx.GraphModule, fx.Graph]:
    """The spec's traced graph and the backend's CSE of it; records the example's reach."""
    gm = spec.traced()
    new_graph = component(backend, "fx_graph_cse")(gm.graph)
    reach(len(new_graph.nodes) < len(gm.graph.nodes) or naive_duplicates(gm.graph) > 0)
    return gm, new_graph


def explain(spec, backend, reasons) -> str:
    return (f"{backend.name} fx_graph_cse is unsound: {reasons}\nreproduce with:\n"
            f"  from refimpl.strategies.graphs import GraphSpec, NodeSpec\n  spec = {spec}\n"
            f"  gm = spec.traced(); new = fx_graph_cse(gm.graph)")


@given(op_graphs())
def test_cse_is_sound(refimpl_backend, spec):
    """lint passes, no growth, random draws and writes kept, every surviving node's value,
    the outputs, the inputs after the run and the outputs' aliasing bit-identical."""
    gm, new_graph = run_cse(refimpl_backend, spec)
    reasons = unsound_reasons(gm, new_graph, spec.example_inputs,
                              must_keep=never_merged_names(gm.graph))
    assert not reasons, explain(spec, refimpl_backend, reasons)


@given(op_graphs(CONSTANTS))
def test_cse_tells_constants_apart_by_type_and_bits(refimpl_backend, spec):
    """``1``/``1.0``/``True``, ``0.0``/``-0.0`` and ``nan``/``-nan`` are different constants:
    the judge of :func:`test_cse_is_sound`, on graphs of constants and their lookalikes."""
    gm, new_graph = run_cse(refimpl_backend, spec)
    reasons = unsound_reasons(gm, new_graph, spec.example_inputs,
                              must_keep=never_merged_names(gm.graph))
    assert not reasons, explain(spec, refimpl_backend, reasons)


@given(op_graphs())
def test_cse_is_idempotent(refimpl_backend, spec):
    """A second pass over the backend's own result removes nothing, and is sound too (its
    input carries the recorded values of the first pass's merged-away nodes)."""
    gm, once = run_cse(refimpl_backend, spec)
    twice = component(refimpl_backend, "fx_graph_cse")(once)
    assert len(twice.nodes) == len(once.nodes), (
        f"second pass removed nodes: {len(once.nodes)} -> {len(twice.nodes)}\n{spec}")
    reasons = unsound_reasons(gm, twice, spec.example_inputs,
                              must_keep=never_merged_names(gm.graph))
    assert not reasons, explain(spec, refimpl_backend, reasons)


@given(op_graphs(DETERMINISTIC))
def test_deterministic_graphs_give_identical_outputs(refimpl_backend, spec):
    """No random op: the outputs are bit-identical to the original graph's, run eagerly
    (by fx.Interpreter: a GraphModule's generated code prints the constant -nan as nan)."""
    gm, new_graph = run_cse(refimpl_backend, spec)
    expected = fx.Interpreter(gm).run(*spec.example_inputs())
    got = fx.Interpreter(fx.GraphModule(gm, new_graph)).run(*spec.example_inputs())
    assert bitwise_equal(expected, got), f"outputs differ: {expected} != {got}\n{spec}"


@given(op_graphs(EFFECTS))
def test_random_and_mutating_nodes_are_never_merged(refimpl_backend, spec):
    """Every random draw, in-place write and in-place random draw survives (by name)."""
    gm, new_graph = run_cse(refimpl_backend, spec)
    lost = sorted(never_merged_names(gm.graph) - {n.name for n in new_graph.nodes})
    assert not lost, f"{refimpl_backend.name} removed never-merged nodes {lost}\n{spec}"
