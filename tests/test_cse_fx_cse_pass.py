"""The ``fx-cse-pass`` target's adapter (``CSEPass`` behind ``fx_graph_cse``), on a few graphs.

Node counts are derived by hand from CSEPass's rule (same target, same flattened arguments;
banned packets kept). Its findings are pinned in tests/test_cse_findings.py.
"""

from __future__ import annotations

import pytest
import torch
from torch import fx
from torch.fx.experimental.proxy_tensor import make_fx

from refimpl.oracle import component, load_backend


@pytest.fixture(scope="module")
def backend():
    return load_backend("fx-cse-pass")


def test_it_is_a_builtin_target_with_only_cse(backend):
    assert backend.name == "fx-cse-pass"
    assert callable(component(backend, "fx_graph_cse"))
    with pytest.raises(pytest.skip.Exception, match="fx-cse-pass is a CSE pass only"):
        component(backend, "flop_counter")


def test_pure_duplicates_are_merged_and_the_input_is_kept(backend):
    gm = make_fx(lambda x: x.cos() + x.cos())(torch.zeros(2))
    before = [n.name for n in gm.graph.nodes]
    new_graph = backend.fx_graph_cse(gm.graph)
    assert len(gm.graph.nodes) - len(new_graph.nodes) == 1  # the second cos
    assert [n.name for n in gm.graph.nodes] == before
    x = torch.tensor([0.5, 2.0])
    assert torch.equal(fx.GraphModule(gm, new_graph)(x), gm(x))


def test_an_unchanged_graph_comes_back_as_a_copy(backend):
    gm = make_fx(lambda x: x.cos() + x.sin())(torch.zeros(2))
    new_graph = backend.fx_graph_cse(gm.graph)
    assert new_graph is not gm.graph
    assert [n.name for n in new_graph.nodes] == [n.name for n in gm.graph.nodes]
    new_graph.lint()


def test_banned_random_ops_are_kept_and_get_attr_resolves(backend):
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(2))

        def forward(self, x):
            return torch.rand_like(x) + torch.rand_like(x) + self.w * (x * 2) + x * 2

    gm = make_fx(M())(torch.zeros(2))
    new_graph = backend.fx_graph_cse(gm.graph)
    assert len(gm.graph.nodes) - len(new_graph.nodes) == 1  # x * 2 once; rand_like twice
    assert sum(n.target is torch.ops.aten.rand_like.default for n in new_graph.nodes) == 2


def test_a_graph_without_a_module_is_wrapped(backend):
    g = fx.Graph()
    x = g.placeholder("x")
    a = g.call_function(torch.ops.aten.neg.default, (x,))
    b = g.call_function(torch.ops.aten.neg.default, (x,))
    g.output(g.call_function(torch.ops.aten.mul.Tensor, (a, b)))
    assert len(g.nodes) - len(backend.fx_graph_cse(g).nodes) == 1
