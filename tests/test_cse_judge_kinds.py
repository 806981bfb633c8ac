"""The CSE judge's own reading of what never merges (``refimpl.expect.cse_soundness.node_kind``),
written from torch's documented semantics apart from refimpl's CSE: each kind on graphs of
both dialects, by hand."""

from __future__ import annotations

import operator

import torch
import torch.nn.functional as F
from torch import fx
from torch.fx.experimental.proxy_tensor import make_fx

from refimpl.expect.cse_soundness import kept_counts, node_kind, unsound_reasons

aten = torch.ops.aten


def kinds_of(graph: fx.Graph) -> dict[str, str]:
    return {n.name: node_kind(n) for n in graph.nodes if n.op not in ("placeholder", "output")}


def _opaque_helper(x):
    return x * 2


torch.fx.wrap("_opaque_helper")  # traced as one call, not through


def test_aten_calls_by_tag_and_schema():
    graph = fx.Graph()
    x = graph.placeholder("x")
    nodes = {
        "random": graph.call_function(aten.randn_like.default, (x,)),
        "random_inplace": graph.call_function(aten.uniform_.default, (x,)),
        "mutating": graph.call_function(aten.add_.Tensor, (x, x)),
        "uninitialized": graph.call_function(aten.empty_like.default, (x,)),
        "side_effect": graph.call_function(aten._print.default, ("hello",)),
        "pure": graph.call_function(aten.gelu.default, (x,), {"approximate": "tanh"}),
        "view": graph.call_function(aten.t.default, (x,)),
    }
    graph.output((nodes["pure"],))
    got = {label: node_kind(node) for label, node in nodes.items()}
    assert got == {"random": "random", "random_inplace": "random", "mutating": "mutating",
                   "uninitialized": "uninitialized", "side_effect": "side_effect",
                   "pure": "pure", "view": "pure"}


def test_traced_python_calls_by_name_and_convention():
    def f(x):
        a = torch.rand_like(x)
        b = F.dropout(x)
        c = x.clone().normal_()
        d = F.relu(x, True)
        e = F.relu(x)
        g = x.add(1)
        x.mul_(2)
        return a, b, c, d, e, g, x[0], _opaque_helper(x)

    gm = fx.symbolic_trace(f)
    got = kinds_of(gm.graph)
    assert got["rand_like"] == got["dropout"] == got["normal_"] == "random"
    assert got["relu"] == "mutating" and got["relu_1"] == "pure", got
    assert got["add"] == got["getitem"] == got["clone"] == "pure", got
    assert got["mul_"] == "mutating" and got["_opaque_helper"] == "opaque", got


def test_operator_writes_modules_and_asserts():
    graph = fx.Graph()
    x = graph.placeholder("x")
    write = graph.call_function(operator.setitem, (x, 0, 1.0))
    add = graph.call_function(operator.iadd, (x, x))
    module = graph.call_module("drop", (x,))
    check = graph.call_function(torch._assert, (True, "m"))  # fx lists it as side-effectful
    graph.output((add,))
    assert [node_kind(n) for n in (write, add, module, check)] == [
        "mutating", "mutating", "opaque", "side_effect"]


def test_the_default_judge_sees_a_merged_random_draw():
    """Without a generator's record (``must_keep``), the judge counts never-merged nodes by
    its own kinds: a CSE that merged two draws is found even where the values agree."""
    gm = make_fx(lambda x: (torch.rand_like(x), torch.rand_like(x)))(torch.zeros(2))
    assert kept_counts(gm.graph)["random"] == 2
    merged = fx.Graph()
    env: dict = {}
    first = None
    for node in gm.graph.nodes:
        if node.op == "call_function" and first is not None:
            env[node] = first
            continue
        env[node] = merged.node_copy(node, env.__getitem__)
        if node.op == "call_function":
            first = env[node]
    reasons = unsound_reasons(gm, merged, lambda: [torch.zeros(2)], checks=("kept",))
    assert reasons and "never-merged nodes changed" in reasons[0], reasons
