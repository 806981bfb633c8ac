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
    "empty_like": (empty_like, 0, 1),
    "wrapped_python_function": (wrapped_python_function, 0, 1),
}
#: torch 2.14 keys floats by their bits and keeps ops fx calls impure: no longer differences.
RELEASE_CASES = [
    pytest.param(two_nan_constants, 1, 0, id="two_nan_constants",
                 marks=pytest.mark.torch_releases("2.13")),
    pytest.param(attention_tagged_random, 3, 3, id="attention_tagged_random",
                 marks=pytest.mark.torch_releases("2.13")),
    pytest.param(two_nan_constants, 1, 1, id="two_nan_constants-2.14",
                 marks=pytest.mark.torch_releases("2.14")),
    pytest.param(attention_tagged_random, 3, 0, id="attention_tagged_random-2.14",
                 marks=pytest.mark.torch_releases("2.14")),
]


@pytest.mark.parametrize("case", sorted(CASES))
def test_nodes_removed(case):
    assert_removed(*CASES[case])


@pytest.mark.parametrize(("build", "ours", "theirs"), RELEASE_CASES)
def test_nodes_removed_on_this_release(build, ours, theirs):
    assert_removed(build, ours, theirs)


def assert_removed(build, ours: int, theirs: int) -> None:
    """Nodes removed by refimpl and by torch, each counted by hand for the case."""
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
