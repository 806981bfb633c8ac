"""Pins of refimpl CSE bugs found and fixed (issue 10 and the 1000-example campaigns).

Each expectation is derived by hand in the test (node counts) or by running the original
graph eagerly; none is computed by refimpl's CSE itself.
"""

from __future__ import annotations

import math
import operator

import pytest
import torch
import torch.nn.functional as F
from torch import fx

from refimpl import fx_graph_cse
from refimpl.expect.cse_soundness import bitwise_equal
from refimpl.strategies.graphs import GraphSpec, NodeSpec


def _run(graph_module: fx.GraphModule, graph: fx.Graph, *inputs):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return fx.Interpreter(fx.GraphModule(graph_module, graph)).run(*inputs)


@pytest.mark.parametrize(("method", "args"), [
    ("uniform_", ()), ("normal_", ()), ("bernoulli_", (0.5,)), ("exponential_", ()),
    ("random_", (4,)), ("geometric_", (0.5,)), ("cauchy_", ()), ("log_normal_", ())])
def test_in_place_random_methods_are_two_draws(method, args):
    """Issue 10.1: ``(x.clone().uniform_(), x.clone().uniform_())`` keeps all 6 nodes (the
    in-place draw writes its clone, so the clones may not be shared), and the two outputs
    stay two tensors with different draws."""
    gm = fx.symbolic_trace(lambda x: (getattr(x.clone(), method)(*args),
                                      getattr(x.clone(), method)(*args)))
    new_graph = fx_graph_cse(gm.graph)
    assert len(new_graph.nodes) == len(gm.graph.nodes) == 6
    a, b = _run(gm, new_graph, torch.zeros(64))
    assert a is not b and not torch.equal(a, b)


def test_dropout_in_place_by_position_writes_its_input():
    """``F.dropout(a, 0.5, True, True)`` writes ``a`` (``inplace`` given by position)."""
    gm = fx.symbolic_trace(lambda x: (F.dropout(x.clone(), 0.5, True, True),
                                      F.dropout(x.clone(), 0.5, True, True)))
    assert len(fx_graph_cse(gm.graph).nodes) == len(gm.graph.nodes) == 6


def test_relu_in_place_by_position_is_a_write():
    """``F.relu(a, True)`` writes ``a``: ``a.cos()`` before and after it are two values."""
    def f(x):
        a = x.clone()
        before = a.cos()
        F.relu(a, True)
        return before + a.cos()

    gm = fx.symbolic_trace(f)
    new_graph = fx_graph_cse(gm.graph)
    assert len(new_graph.nodes) == len(gm.graph.nodes) == 7
    x = torch.tensor([-1.0, 2.0])
    assert bitwise_equal(_run(gm, new_graph, x.clone()), f(x.clone()))


@pytest.mark.parametrize(("c1", "c2"), [
    (math.nan, -math.nan), (0.0, -0.0), (math.inf, -math.inf), (math.inf, math.nan)])
def test_constants_that_differ_in_bits_are_not_merged(c1, c2):
    """Issue 10.2: ``full_like(x, nan)`` and ``full_like(x, -nan)`` stay two nodes (5 kept);
    run through fx.Interpreter, the second result keeps its sign bit."""
    gm = fx.symbolic_trace(lambda x: torch.stack([torch.full_like(x, c1),
                                                  torch.full_like(x, c2)]))
    new_graph = fx_graph_cse(gm.graph)
    assert len(new_graph.nodes) == len(gm.graph.nodes) == 5
    assert bitwise_equal(_run(gm, new_graph, torch.zeros(2)),
                         _run(gm, gm.graph, torch.zeros(2)))  # gm's code prints -nan as nan


def test_nan_signs_survive_separately():
    gm = fx.symbolic_trace(lambda x: (torch.full_like(x, math.nan) * 1,
                                      torch.full_like(x, -math.nan) * 1))
    _, second = _run(gm, fx_graph_cse(gm.graph), torch.zeros(1))
    assert bool(torch.signbit(second)) is True


def test_the_same_nan_bits_still_merge():
    gm = fx.symbolic_trace(lambda x: torch.full_like(x, float("nan")) +
                           torch.full_like(x, float("nan")))
    assert len(gm.graph.nodes) - len(fx_graph_cse(gm.graph).nodes) == 1


def test_a_second_pass_sees_views_made_before_the_first():
    """Found by the idempotence property at 1000 examples: after a merge, a reshape's
    recorded ``meta["val"]`` is a view of the dropped duplicate's value, not of its new
    input's. Judged by storage identity the reshape looked like a copy on the second pass,
    so a write through it was missed and ``c.cos()`` before and after it were merged."""
    clamp = NodeSpec("clamp", (0,), (("min", -1), ("max", 1)))
    spec = GraphSpec(1, 3, (clamp, clamp, NodeSpec("cos", (2,)),
                            NodeSpec("reshape", (2,), ((9,),)), NodeSpec("uniform_", (4,)),
                            NodeSpec("cos", (2,))), (6,), "aten")
    gm = spec.traced()
    once = fx_graph_cse(gm.graph)
    twice = fx_graph_cse(once)
    assert (len(gm.graph.nodes), len(once.nodes), len(twice.nodes)) == (8, 7, 7)
    (expected,) = _run(gm, gm.graph, *spec.example_inputs())
    (got,) = _run(gm, twice, *spec.example_inputs())
    assert bitwise_equal(expected, got)


def test_a_merge_refused_for_a_later_read_is_made_once_that_read_is_merged():
    """Found by the idempotence property at 1000 examples: ``b = x.clone()`` may not share
    ``a = x.clone()``'s storage while ``a`` is written (``relu_``) before ``b``'s last read;
    that read is a duplicate of an earlier one and goes, so the merge becomes sound. One pass
    refused it and a second pass made it; now the first call reaches the fixpoint."""
    clone = NodeSpec("clone", (0,))
    spec = GraphSpec(1, 3, (clone, clone, NodeSpec("clone", (2,)), NodeSpec("relu_", (1,)),
                            NodeSpec("clone", (2,))), (1,), "aten")
    gm = spec.traced()
    once = fx_graph_cse(gm.graph)
    # x0, clone(x0), clone(clone), relu_, output: the second clone and its reader's repeat go
    assert [n.op for n in once.nodes].count("call_function") == 3
    assert len(fx_graph_cse(once).nodes) == len(once.nodes)
    (expected,) = _run(gm, gm.graph, *spec.example_inputs())
    (got,) = _run(gm, once, *spec.example_inputs())
    assert bitwise_equal(expected, got)


def _sin_cos() -> tuple[fx.Graph, fx.Node, fx.Node]:
    g = fx.Graph()
    x = g.placeholder("x")
    sin = g.call_function(torch.ops.aten.sin.default, (x,))
    cos = g.call_function(torch.ops.aten.cos.default, (sin,))
    g.output(cos)
    return g, x, sin


def test_a_cyclic_graph_is_a_clear_error():
    """Issue 14: a cycle was ``KeyError: cos``; now it names the cycle. Still a KeyError,
    which is what torch's pass raises, so code catching torch's error catches it."""
    from refimpl.cse.graph_check import GraphOrderError

    g, _, sin = _sin_cos()
    sin.args = (next(n for n in g.nodes if n.name == "cos_default"),)
    with pytest.raises(GraphOrderError, match=r"graph has a cycle: sin_default -> "
                                              r"cos_default -> sin_default") as info:
        fx_graph_cse(g)
    assert isinstance(info.value, KeyError) and isinstance(info.value, ValueError)


def test_out_of_order_and_foreign_nodes_are_clear_errors():
    from refimpl.cse.graph_check import GraphOrderError

    g, x, sin = _sin_cos()
    with g.inserting_before(g.output_node()):
        later = g.call_function(torch.ops.aten.neg.default, (x,))
    sin.args = (later,)
    with pytest.raises(GraphOrderError, match="not in topological order: node 'sin_default' "
                                              "reads 'neg_default', which comes later"):
        fx_graph_cse(g)
    other, *_ = _sin_cos()
    sin.args = (next(iter(other.nodes)),)
    with pytest.raises(GraphOrderError, match="a node of another graph"):
        fx_graph_cse(g)


def _sdpa_twice() -> fx.GraphModule:
    """``sdpa(q) + sdpa(q)`` (one output: two equal outputs are never merged into one tensor)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(q):
        return F.scaled_dot_product_attention(q, q, q) + F.scaled_dot_product_attention(q, q, q)
    return make_fx(f)(torch.randn(1, 2, 4, 8))


def _attention_calls(graph: fx.Graph) -> int:
    return sum(1 for n in graph.nodes if n.op == "call_function" and "attention" in str(n.target))


def test_attention_without_dropout_is_pure_and_merged():
    """Found by the partition differential (refimpl recomputed two identical SDPAs that
    torch's joint-graph CSE had merged): attention kernels carry ``nondeterministic_seeded``
    for their optional dropout, but with ``dropout_p=0`` they draw nothing. Two equal calls
    are one value; by hand: 2 attention nodes before, 1 after."""
    gm = _sdpa_twice()
    assert _attention_calls(gm.graph) == 2
    new_graph = fx_graph_cse(gm.graph)
    assert _attention_calls(new_graph) == 1
    q = torch.randn(1, 2, 4, 8)
    assert bitwise_equal(gm(q), fx.GraphModule(gm, new_graph)(q))


def _kernel_twice(dropout_p: float) -> fx.Graph:
    """Two calls of the CPU flash-attention kernel on the same q, summed (one output)."""
    graph = fx.Graph()
    q = graph.placeholder("q")
    kernel = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
    first, second = (graph.call_function(operator.getitem, (graph.call_function(
        kernel, (q, q, q, dropout_p)), 0)) for _ in range(2))
    graph.output(graph.call_function(operator.add, (first, second)))
    return graph


def test_attention_with_dropout_is_two_draws():
    """The same kernel called with ``dropout_p=0.5`` draws: never merged (2 nodes stay 2)."""
    assert _attention_calls(fx_graph_cse(_kernel_twice(0.5))) == 2


def test_the_dropout_check_reads_the_call():
    """The control for the test above: the same graph with ``dropout_p=0`` merges (2 -> 1)."""
    assert _attention_calls(fx_graph_cse(_kernel_twice(0.0))) == 1


@pytest.mark.parametrize("style", ["aten", "torch"])
def test_a_view_returned_through_an_in_place_op_stays_its_own_object(style):
    """Issue 29 (found when the judge began comparing output objects): ``a = x.view(-1)``,
    ``b = x.view(-1)``, returning ``(b.mul_(2), a)``: ``mul_`` returns the object ``b``, so
    ``b`` is returned and may not be merged into ``a`` (eager returns two objects)."""
    spec = GraphSpec(num_inputs=1, side=3, outputs=(3, 1), style=style, nodes=(
        NodeSpec(op="flatten_view", inputs=(0,), params=((-1,),)),
        NodeSpec(op="flatten_view", inputs=(0,), params=((-1,),)),
        NodeSpec(op="mul_", inputs=(2,), params=(2,)),
    ))
    gm = spec.traced()
    new_graph = fx_graph_cse(gm.graph)
    eager_first, eager_second = _run(gm, gm.graph, *spec.example_inputs())
    first, second = _run(gm, new_graph, *spec.example_inputs())
    assert eager_first is not eager_second
    assert first is not second
    assert bitwise_equal((first, second), (eager_first, eager_second))
