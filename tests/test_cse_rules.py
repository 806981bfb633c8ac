"""refimpl's CSE rules one by one: when two nodes are the same value, and what is never merged."""

from __future__ import annotations

import math
import operator

import pytest
import torch
from torch import fx
from torch.fx.experimental.proxy_tensor import make_fx

from refimpl import fx_graph_cse
from refimpl.cse.effects import effect_of
from refimpl.expect.cse_soundness import bitwise_equal

aten = torch.ops.aten


def removed(graph: fx.Graph) -> int:
    new_graph = fx_graph_cse(graph)
    new_graph.lint()
    assert len(fx_graph_cse(new_graph).nodes) == len(new_graph.nodes)
    return len(graph.nodes) - len(new_graph.nodes)


def two_calls(target, first: tuple, second: tuple, kw1=None, kw2=None) -> fx.Graph:
    """x -> (target(x, *first, **kw1), target(x, *second, **kw2)) summed (not the outputs)."""
    g = fx.Graph()
    x = g.placeholder("x")
    a = g.call_function(target, (x, *first), kw1 or {})
    b = g.call_function(target, (x, *second), kw2 or {})
    g.output(g.call_function(aten.add.Tensor, (a, b)))
    return g


@pytest.mark.parametrize(("c1", "c2", "merged"), [
    (1, 1, 1), (1, 1.0, 0), (1, True, 0), (1.0, True, 0), (0.0, -0.0, 0), (0, 0.0, 0),
    (float("nan"), float("nan"), 1), (math.nan, 2.0, 0), (2.5, 2.5, 1)])
def test_constants_compared_by_type_and_bits(c1, c2, merged):
    assert removed(two_calls(aten.add.Tensor, (c1,), (c2,))) == merged


def test_kwargs_compared_as_a_mapping():
    g = two_calls(aten.clamp.default, (), (), {"min": 0.0, "max": 1.0}, {"max": 1.0, "min": 0.0})
    assert removed(g) == 1
    g = two_calls(aten.clamp.default, (), (), {"min": 0.0}, {"max": 0.0})
    assert removed(g) == 0


def test_nested_lists_dtypes_and_memory_formats_compared_structurally():
    assert removed(two_calls(aten.sum.dim_IntList, ([0, 1],), ([0, 1],))) == 1
    assert removed(two_calls(aten.sum.dim_IntList, ([0, 1],), ([1, 0],))) == 0
    to = aten._to_copy.default
    assert removed(two_calls(to, (), (), {"dtype": torch.float64},
                             {"dtype": torch.float64})) == 1
    assert removed(two_calls(to, (), (), {"dtype": torch.float64},
                             {"dtype": torch.float16})) == 0
    assert removed(two_calls(to, (), (), {"memory_format": torch.preserve_format},
                             {"memory_format": torch.contiguous_format})) == 0


def test_exact_overload_is_part_of_the_key():
    g = fx.Graph()
    x = g.placeholder("x")
    a = g.call_function(aten.add.Tensor, (x, 1))
    b = g.call_function(aten.add.Scalar, (x, 1))
    g.output((g.call_function(aten.mul.Tensor, (a, b)),))
    assert removed(g) == 0


@pytest.mark.parametrize("target", [aten.rand_like.default, aten.randn_like.default,
                                    aten.bernoulli.default, aten.uniform.default,
                                    aten.empty_like.default])
def test_random_and_uninitialized_ops_are_never_merged(target):
    assert effect_of(next(iter(two_calls(target, (), ()).find_nodes(
        op="call_function", target=target))), {}).kind in ("random", "uninitialized")
    assert removed(two_calls(target, (), ())) == 0


def test_values_read_across_a_mutation_are_different():
    def f(x):
        a = x.cos()
        x.add_(1)
        return a + x.cos()

    gm = make_fx(f)(torch.zeros(2))
    assert removed(gm.graph) == 0
    new = fx.GraphModule(gm, fx_graph_cse(gm.graph))
    assert bitwise_equal(gm(torch.zeros(2)), new(torch.zeros(2)))


def test_a_mutation_of_another_value_does_not_stop_merging():
    """Finer than torch's mutation regions: writing y does not change x.cos()."""
    def f(x, y):
        a = x.cos()
        y.add_(1)
        return a + x.cos()

    gm = make_fx(f)(torch.zeros(2), torch.zeros(2))
    assert removed(gm.graph) == 1


def test_fresh_values_written_in_place_are_not_shared():
    def f(x):
        a, b = x.clone(), x.clone()
        a.add_(1)
        return a + b

    gm = make_fx(f)(torch.zeros(2))
    assert removed(gm.graph) == 0
    assert bitwise_equal(fx.GraphModule(gm, fx_graph_cse(gm.graph))(torch.zeros(2)),
                         torch.tensor([1.0, 1.0]))


def test_values_that_are_outputs_keep_their_own_storage():
    gm = make_fx(lambda x: (x.clone(), x.clone(), x.view(-1), x.view(-1)))(torch.zeros(2))
    assert removed(gm.graph) == 0


class Stochastic(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x):
        dropped = self.drop(x) + self.drop(x)
        functional = torch.nn.functional.dropout(x) + torch.nn.functional.dropout(x)
        return dropped + functional + torch.rand_like(x) + torch.rand_like(x)


def test_symbolic_trace_modules_and_random_functions_stay():
    assert removed(fx.symbolic_trace(Stochastic()).graph) == 0


def test_symbolic_trace_pure_functions_and_methods_merge():
    def f(x):
        return torch.cos(x) + torch.cos(x) + x.sin() + x.sin()

    assert removed(fx.symbolic_trace(f).graph) == 2


def test_symbolic_trace_in_place_methods_are_mutations():
    def f(x):
        a = x.sin()
        x.add_(1)
        return a + x.sin()

    gm = fx.symbolic_trace(f)
    assert removed(gm.graph) == 0
    assert bitwise_equal(gm(torch.zeros(2)),
                         fx.GraphModule(gm, fx_graph_cse(gm.graph))(torch.zeros(2)))


def test_input_graph_is_unchanged_and_code_is_kept():
    gm = make_fx(lambda x: x.sum() + x.sum())(torch.zeros(2))
    before = [(n.name, n.target, n.args, dict(n.meta)) for n in gm.graph.nodes]
    new = fx.GraphModule(gm, fx_graph_cse(gm.graph))
    assert [(n.name, n.target, n.args, dict(n.meta)) for n in gm.graph.nodes] == before
    assert [n.name for n in new.graph.nodes] == ["x_1", "sum_1", "add", "output"]


def test_bad_input_is_named():
    gm = make_fx(lambda x: x + 1)(torch.zeros(2))
    with pytest.raises(TypeError, match=r"graph must be a torch\.fx\.Graph"):
        fx_graph_cse(gm)
    g = fx.Graph()
    g.placeholder("x")
    with pytest.raises(ValueError, match="output node"):
        fx_graph_cse(g)


def test_symints_are_keyed_by_identity():
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    from refimpl.cse.keys import freeze

    env = ShapeEnv()
    s, t = env.create_unbacked_symint(), env.create_unbacked_symint()
    assert freeze(s, None) == freeze(s, None)
    assert freeze(s, None) != freeze(t, None)


def test_dynamo_graph_with_symbolic_shapes():
    """Equal tensor ops on a SymInt merge; ``size - 1`` and ``size - 1.0`` stay two."""
    graphs = []

    def capture(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    def f(x):
        n = x.shape[-1]
        return x * (n - 1) + x * (n - 1) + x * (n - 1.0)

    torch._dynamo.reset()
    torch.compile(f, backend=capture, dynamic=True)(torch.ones(2, 5))
    torch._dynamo.reset()
    (gm,) = graphs

    def count(graph, target):
        return sum(n.target is target for n in graph.nodes)

    assert (count(gm.graph, operator.sub), count(gm.graph, operator.mul)) == (2, 3), gm.graph
    new_graph = fx_graph_cse(gm.graph)
    new_graph.lint()
    assert (count(new_graph, operator.sub), count(new_graph, operator.mul)) == (2, 2)
    new_gm = fx.GraphModule(gm, new_graph)
    x = torch.randn(2, 5)
    assert bitwise_equal(gm(2, 5, x)[0], new_gm(2, 5, x)[0])


def test_reshape_that_may_copy_is_not_treated_as_a_view():
    """``reshape`` of a transposed tensor is a copy: writing one must not change the other."""
    def f(x):
        a = x.t().reshape(-1)
        b = x.t().reshape(-1)
        a.add_(1)
        return b * 1

    gm = fx.symbolic_trace(f)
    new = fx.GraphModule(gm, fx_graph_cse(gm.graph))
    x = torch.arange(4.0).reshape(2, 2)
    assert bitwise_equal(new(x.clone()), f(x.clone()))
    assert removed(gm.graph) == 1  # the two x.t() views merge; the reshapes stay two
