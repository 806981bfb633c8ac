"""The CSE half of test/functorch/test_memory_efficient_fusion.py, in our own code.

Each case traces a small function, runs ``refimpl.fx_graph_cse`` and checks: the number of
nodes removed (the seed's delta; -1 means "no more nodes than before"), that a second pass
removes nothing, that the graph still lints, and (for deterministic graphs) that the outputs
are bit-identical.
"""

from __future__ import annotations

import random

import pytest
import torch
from torch import fx
from torch.fx.experimental.proxy_tensor import make_fx

from refimpl import fx_graph_cse
from refimpl.expect.cse_soundness import bitwise_equal


def check(gm: fx.GraphModule, args: tuple, delta: int, check_val: bool = True) -> fx.Graph:
    """The seed's ``check``: delta nodes removed, idempotent, same outputs."""
    old = len(gm.graph.nodes)
    new_graph = fx_graph_cse(gm.graph)
    new = len(new_graph.nodes)
    if delta == -1:
        assert new <= old, f"CSE added nodes: {old} -> {new}"
    else:
        assert old - new == delta, f"removed {old - new}, expected {delta}\n{new_graph}"
    new_graph.lint()
    assert len(fx_graph_cse(new_graph).nodes) == new, "a second pass removed more nodes"
    if check_val:
        new_gm = fx.GraphModule(gm, new_graph)
        expected, got = gm(*args), new_gm(*args)
        assert (expected is None) == (got is None)
        assert expected is None or bitwise_equal(expected, got), (expected, got)
    return new_graph


def traced(f, *args) -> fx.GraphModule:
    return make_fx(f)(*args)


T = torch.randn(2, 2, generator=torch.Generator().manual_seed(0))


def test_nochange():
    def f(x):
        a = x + 1
        b = x + a
        a = x
        d = x + a
        return b + d

    check(traced(f, T), (T,), 0)


def test_empty():
    def f(x):
        pass

    check(traced(f, T), (T,), 0)


def test_rand_like():
    def f(x):
        return torch.rand_like(x) + torch.rand_like(x)

    check(traced(f, T), (T,), 0, check_val=False)


def test_rand_n():
    def f(x):
        return torch.randn(4) + torch.randn(4)

    check(traced(f, T), (T,), 0, check_val=False)


def test_hash_with_numbers():
    """hash((s, 1)) == hash((s, 1.0)): ``size - 1`` and ``size - 1.0`` must stay two nodes
    in the dynamo graph (symbolic shapes, operator.sub on SymInts)."""
    def f(inpt, osize):
        size = inpt.shape[-1]
        s1 = size - 1
        s2 = size - 1.0
        scale = s2 / (osize - 1.0)
        inpt = torch.clamp(inpt, 0, s1)
        return scale * inpt

    graphs = []

    def capture(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    compiled = torch.compile(f, backend=capture, dynamic=True)
    compiled(torch.rand(3, 100), 50)
    torch._dynamo.reset()
    assert len(graphs) == 1, graphs
    subs = [n for n in graphs[0].graph.nodes if n.target is __import__("operator").sub]
    assert len(subs) == 3, graphs[0].graph  # size - 1, size - 1.0, osize - 1.0
    check(graphs[0], (), 0, check_val=False)


def test_two_args():
    def f(x):
        a = x.sum(dim=1)
        b = x.sum(dim=1, keepdim=True)
        c = x.sum(dim=1, keepdim=True)
        d = x.sum(dim=1)
        return a + b + c + d

    check(traced(f, T), (T,), 2)


def test_simple_multiple_same_ops():
    def f(x):
        return x.sum() + x.sum() + x.sum() + x.sum()

    check(traced(f, T), (T,), 3)


def test_nested_immutable_list_type():
    def f(x):
        return torch.cat((x, x)) + torch.cat((x, x))

    check(traced(f, T), (T,), 1)


def test_kwarg():
    def f(x):
        return torch.ones_like(x) + torch.ones_like(x)

    check(traced(f, T), (T,), 1)


def random_chain(rng: random.Random):
    """The seed's random program: 100 ops over clone/cos/tanh/gelu, each applied to a
    random earlier value; returns the last value."""
    ops = [torch.clone, torch.cos, torch.tanh, torch.nn.functional.gelu]
    plan = [(rng.randrange(4), rng.randrange(i + 1)) for i in range(100)]

    def f(x):
        vals = [x]
        for op, src in plan:
            vals.append(ops[op](vals[src]))
        return vals[-1]

    return f


@pytest.mark.parametrize("seed", range(30))
def test_random(seed):
    """symbolic_trace graphs calling torch functions; delta -1 (never more nodes)."""
    gm = fx.symbolic_trace(random_chain(random.Random(seed)))
    gm.graph.eliminate_dead_code()
    gm.recompile()
    check(gm, (T,), -1)
