"""Where refimpl's CSE deliberately differs from torch's (docs/differences.md "## CSE").

Each case: nodes removed by refimpl and by torch, both asserted, so the table in the docs is
what this file shows (``python -m pytest tests/test_cse_differences.py -v``).
"""

from __future__ import annotations

import pytest
import torch
from torch import fx
from torch.fx.experimental.proxy_tensor import make_fx

from refimpl.oracle import load_backend

aten = torch.ops.aten


def unrelated_mutation():
    def f(x, y):
        a = x.cos()
        y.add_(1)
        return a + x.cos()

    return make_fx(f)(torch.zeros(2), torch.zeros(2))


def intermediate_into_output():
    return make_fx(lambda x: (x.cos(), x.cos().sin()))(torch.zeros(2))


def two_nan_constants():
    g = fx.Graph()
    x = g.placeholder("x")
    a = g.call_function(aten.add.Tensor, (x, float("nan")))
    b = g.call_function(aten.add.Tensor, (x, float("nan")))
    g.output((g.call_function(aten.mul.Tensor, (a, b)),))
    return fx.GraphModule(torch.nn.Module(), g)


def empty_like():
    return make_fx(lambda x: torch.cat([torch.empty_like(x), torch.empty_like(x)]))(
        torch.zeros(2))


def attention_tagged_random():
    sdpa = torch.nn.functional.scaled_dot_product_attention
    return make_fx(lambda q: sdpa(q, q, q) + sdpa(q, q, q))(torch.zeros(1, 1, 2, 2))


@torch.fx.wrap
def python_helper(x):
    return x.cos()


def wrapped_python_function():
    return fx.symbolic_trace(lambda x: python_helper(x) + python_helper(x))


CASES = {  # name: (graph, removed by refimpl, removed by torch)
    "unrelated_mutation": (unrelated_mutation, 1, 0),
    "intermediate_into_output": (intermediate_into_output, 1, 0),
    "two_nan_constants": (two_nan_constants, 1, 0),
    "empty_like": (empty_like, 0, 1),
    "attention_tagged_random": (attention_tagged_random, 0, 3),
    "wrapped_python_function": (wrapped_python_function, 0, 1),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_nodes_removed(case):
    build, ours, theirs = CASES[case]
    gm = build()
    removed = {name: len(gm.graph.nodes) - len(load_backend(name).fx_graph_cse(gm.graph).nodes)
               for name in ("refimpl", "torch")}
    assert removed == {"refimpl": ours, "torch": theirs}


def test_input_graph_untouched_and_codegen_kept():
    gm = make_fx(lambda xs: xs[0] + xs[1])([torch.zeros(1), torch.zeros(1)])
    ours = load_backend("refimpl").fx_graph_cse(gm.graph)
    assert not any("mutation_region_id" in n.meta for n in gm.graph.nodes)
    assert type(ours._codegen) is type(gm.graph._codegen)
    theirs = load_backend("torch").fx_graph_cse(gm.graph)
    assert any("mutation_region_id" in n.meta for n in gm.graph.nodes)
    assert type(theirs._codegen) is fx.graph.CodeGen
