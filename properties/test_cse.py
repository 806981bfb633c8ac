"""Properties of the backend's ``fx_graph_cse`` on random op graphs (``--refimpl-target``).

Graphs come from ``refimpl.strategies.op_graphs`` in both dialects (make_fx's aten ops, with
static or symbolic sizes, and symbolic_trace's torch functions and Tensor methods) and every
effect class: pure ops, views,
in-place writes (also through views of inputs and of intermediates, and to tensors made by
``full``), random draws, in-place random draws, effectful calls, constants that differ only
in their type or bits (``1``/``1.0``/``True``, ``0.0``/``-0.0``, ``nan``/``-nan``), calls
that differ only in a keyword argument, and values returned with their repeats (the strategy
options and the features they draw: ``refimpl.strategies.graphs``, docs/features.md). Each
expectation is independent of any CSE: the original graph run eagerly from the same RNG seed
(values, outputs, inputs after the run, aliasing), and the never-merged nodes as the
generator recorded them.

Each property fails only for what its name says: it asks the judge
(``refimpl.expect.cse_soundness.unsound_reasons``) for the checks it names (values,
aliasing, kept nodes); only ``test_cse_is_sound`` asks for all.

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
from refimpl.strategies import never_merged_names, op_graphs
from refimpl.strategies.graphs import (
    CONSTANT_LOOKALIKES,
    DETERMINISTIC,
    EFFECTFUL,
    EFFECTS,
    FAMILY_META,
    KEYWORDS,
    RETURNED,
    SOUNDNESS,
    SYMBOLIC_SIZES,
    shows_constant_types,
    shows_kwargs_only_difference,
    shows_returned_duplicates,
    shows_signed_zero_or_nan,
)


def run_cse(backend, spec) -> tuple[fx.GraphModule, fx.Graph]:
    """The spec's traced graph and the backend's CSE of it; records the example's reach."""
    gm = spec.traced()
    new_graph = component(backend, "fx_graph_cse")(gm.graph)
    reach(len(new_graph.nodes) < len(gm.graph.nodes) or naive_duplicates(gm.graph) > 0)
    return gm, new_graph


def lost_message(lost: list[str]) -> str:
    """Never-merged nodes gone, in the words of the judge's ``kept`` check
    (``unsound_reasons``), which test_cse_is_sound reports."""
    return f"never-merged nodes removed: {lost}"


def explain(spec, backend, reasons) -> str:
    """The failure message of every property here: the judge's reasons, then the spec. The
    properties that check one thing word it as the judge does (``never-merged nodes
    removed: [...]``), so that one defect found by two properties reads as one cause."""
    return (f"{backend.name} fx_graph_cse is unsound: {reasons}\nreproduce with:\n"
            f"  from refimpl.strategies.graphs import GraphSpec, NodeSpec\n  spec = {spec}\n"
            f"  gm = spec.traced(); new = fx_graph_cse(gm.graph)")


@given(op_graphs(SOUNDNESS))
def test_cse_is_sound(refimpl_backend, spec):
    """lint passes, no growth, random draws and writes kept, every surviving node's value,
    the outputs, the inputs after the run and the outputs' aliasing bit-identical."""
    gm, new_graph = run_cse(refimpl_backend, spec)
    reasons = unsound_reasons(gm, new_graph, spec.example_inputs,
                              must_keep=never_merged_names(gm.graph))
    assert not reasons, explain(spec, refimpl_backend, reasons)


@given(op_graphs(SYMBOLIC_SIZES))
def test_cse_is_sound_with_symbolic_sizes(refimpl_backend, spec):
    """test_cse_is_sound's checks on make_fx graphs traced with symbolic sizes: every value
    recorded as a fake tensor of sizes ``(s0, s0)``, and a size read twice as two
    ``aten.sym_size.int`` nodes (SymInts) and two ops reading them."""
    gm, new_graph = run_cse(refimpl_backend, spec)
    reasons = unsound_reasons(gm, new_graph, spec.example_inputs,
                              must_keep=never_merged_names(gm.graph))
    assert not reasons, explain(spec, refimpl_backend, reasons)


@given(op_graphs(CONSTANT_LOOKALIKES))
def test_cse_tells_constants_apart_by_type_and_bits(refimpl_backend, spec):
    """``1``/``1.0``/``True``, ``0.0``/``-0.0`` and ``nan``/``-nan`` are different constants
    (``full((1, 1), True)`` is a bool tensor): on graphs of pure ops, constants and their
    lookalikes (no keyword arguments), every value, output and input is bit-identical
    (dtype too). Reach: the graph has two calls that differ only in such a constant."""
    gm, new_graph = run_cse(refimpl_backend, spec)
    reach(shows_constant_types(spec) or shows_signed_zero_or_nan(spec))
    reasons = unsound_reasons(gm, new_graph, spec.example_inputs, checks=("values",))
    assert not reasons, explain(spec, refimpl_backend, reasons)


@given(op_graphs(KEYWORDS))
def test_cse_tells_calls_apart_by_their_keywords(refimpl_backend, spec):
    """``gelu(x)`` and ``gelu(x, approximate="tanh")``, ``sum(x, [0], dtype=torch.float64)``
    and ``dtype=torch.float32`` are different calls: on graphs of reductions and pure unary
    ops, every value, output and input is bit-identical (dtype and shape too). Reach: the
    graph has two calls that differ only in a keyword argument."""
    gm, new_graph = run_cse(refimpl_backend, spec)
    reach(shows_kwargs_only_difference(spec))
    reasons = unsound_reasons(gm, new_graph, spec.example_inputs, checks=("values",))
    assert not reasons, explain(spec, refimpl_backend, reasons)


@given(op_graphs(RETURNED))
def test_cse_keeps_returned_tensors_distinct(refimpl_backend, spec):
    """Two returned values that are the same call (``(x.clone(), x.clone())``,
    ``(x.t(), x.t())``) stay two tensors: which outputs share storage with which outputs and
    inputs, and which are one object, is as eager has it. Reach: the graph returns a value
    and its repeat."""
    gm, new_graph = run_cse(refimpl_backend, spec)
    reach(shows_returned_duplicates(spec))
    reasons = unsound_reasons(gm, new_graph, spec.example_inputs, checks=("aliasing",))
    assert not reasons, explain(spec, refimpl_backend, reasons)


@given(op_graphs(SOUNDNESS))
def test_cse_is_idempotent(refimpl_backend, spec):
    """A second pass over the backend's own result removes nothing, and computes what the
    first pass's graph computes (its input carries the recorded values of the first pass's
    merged-away nodes). Whether the first pass was sound is test_cse_is_sound's question."""
    gm, once = run_cse(refimpl_backend, spec)
    twice = component(refimpl_backend, "fx_graph_cse")(once)
    assert len(twice.nodes) == len(once.nodes), (
        f"second pass removed nodes: {len(once.nodes)} -> {len(twice.nodes)}\n{spec}")
    reasons = unsound_reasons(fx.GraphModule(gm, once), twice, spec.example_inputs,
                              must_keep=never_merged_names(once))
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
    assert not lost, explain(spec, refimpl_backend, [lost_message(lost)])


@given(op_graphs(EFFECTFUL))
def test_effectful_calls_are_never_merged(refimpl_backend, spec):
    """Every effectful call (``aten._print``, ``torch._assert``: they return nothing) survives
    (by name): two prints are two lines of output. Reach: an effectful call made twice."""
    gm, new_graph = run_cse(refimpl_backend, spec)
    reach(spec.count("effect") >= 2)
    effectful = {n.name for n in gm.graph.nodes if n.meta.get(FAMILY_META) == "effect"}
    lost = sorted(effectful - {n.name for n in new_graph.nodes})
    assert not lost, explain(spec, refimpl_backend, [lost_message(lost)])
