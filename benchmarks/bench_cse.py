"""refimpl.fx_graph_cse against torch's fx_graph_cse on large generated graphs, same run.

Graphs: the seed's random program scaled up (unary/binary/scalar aten ops, each reading
recent values, a quarter of the nodes deliberate duplicates). Reported in extra_info:
``refimpl_s`` and ``torch_s`` (best of the rounds), ``ratio`` = refimpl / torch (target: at
most 1), ``us_per_node``; ``test_cse_scales_linearly`` reports per-node time at 100k / 10k.

    python -m pytest benchmarks/bench_cse.py --benchmark-enable -q -s
"""

from __future__ import annotations

import gc
import random
import time

import pytest
import torch
from torch import fx
from torch._functorch.compile_utils import fx_graph_cse as torch_cse

from refimpl import fx_graph_cse

aten = torch.ops.aten
UNARY = (aten.cos.default, aten.tanh.default, aten.clone.default, aten.gelu.default)
BINARY = (aten.add.Tensor, aten.mul.Tensor)
ROUNDS = 3


def make_graph(num_nodes: int, seed: int = 0) -> fx.Graph:
    """A graph of about ``num_nodes`` nodes; node i reads values among the last 64."""
    rng = random.Random(seed)
    g = fx.Graph()
    values = [g.placeholder("x"), g.placeholder("y")]
    made: list[tuple] = []
    for _ in range(num_nodes - 3):
        if made and rng.random() < 0.25:
            target, args = made[rng.randrange(max(0, len(made) - 64), len(made))]
        else:
            window = values[-64:]
            kind = rng.randrange(3)
            if kind == 0:
                target, args = rng.choice(UNARY), (rng.choice(window),)
            elif kind == 1:
                target, args = rng.choice(BINARY), (rng.choice(window), rng.choice(window))
            else:
                target, args = aten.add.Tensor, (rng.choice(window), rng.choice((1, 1.0, 2)))
        made.append((target, args))
        values.append(g.call_function(target, args))
    g.output((values[-1],))
    return g


def best_time(fn, graph: fx.Graph) -> float:
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        fn(graph)
        times.append(time.perf_counter() - start)
    return min(times)


@pytest.mark.parametrize("num_nodes", [1_000, 10_000, 100_000])
def test_cse_time_vs_torch(benchmark, num_nodes):
    graph = make_graph(num_nodes)
    ours = fx_graph_cse(graph)
    assert len(ours.nodes) <= len(torch_cse(graph).nodes)
    torch_s = best_time(torch_cse, graph)
    benchmark.pedantic(fx_graph_cse, args=(graph,), rounds=ROUNDS, iterations=1)
    refimpl_s = benchmark.stats.stats.min if benchmark.stats else best_time(fx_graph_cse,
                                                                              graph)
    benchmark.extra_info.update(
        nodes=len(graph.nodes), removed_refimpl=len(graph.nodes) - len(ours.nodes),
        removed_torch=len(graph.nodes) - len(torch_cse(graph).nodes), torch_s=torch_s,
        refimpl_s=refimpl_s, ratio=refimpl_s / torch_s,
        us_per_node=1e6 * refimpl_s / len(graph.nodes))
    print(f"\n{num_nodes} nodes: refimpl {refimpl_s:.3f}s torch {torch_s:.3f}s "
          f"ratio {refimpl_s / torch_s:.2f}")


def best_time_without_gc(fn, graph: fx.Graph) -> float:
    """best_time with Python's cyclic GC paused (and restored): its full collections walk
    the whole heap (torch's objects included), which is not the algorithm's cost."""
    gc.disable()
    try:
        return best_time(fn, graph)
    finally:
        gc.enable()


def test_cse_scales_linearly(benchmark):
    """Per-node time at 100k nodes over per-node time at 10k (1.0 = linear), for refimpl and,
    for comparison, torch; each size is timed with only its own graph alive, with the GC on
    (what a user sees) and paused (the algorithm alone)."""
    per_node = {}
    for size in (10_000, 100_000):
        graph = make_graph(size)
        gc.collect()
        if size == 100_000:
            benchmark.pedantic(fx_graph_cse, args=(graph,), rounds=1, iterations=1)
        per_node[size] = [t / len(graph.nodes) for t in (
            best_time(fx_graph_cse, graph), best_time(torch_cse, graph),
            best_time_without_gc(fx_graph_cse, graph))]
        del graph
    small, large = per_node[10_000], per_node[100_000]
    ours, theirs, no_gc = (b / a for a, b in zip(small, large))
    benchmark.extra_info.update(
        us_per_node_10k=1e6 * small[0], us_per_node_100k=1e6 * large[0], scaling=ours,
        torch_scaling=theirs, scaling_gc_paused=no_gc)
    print(f"\nper node: 10k {1e6 * small[0]:.1f}us, 100k {1e6 * large[0]:.1f}us, scaling "
          f"{ours:.2f} (torch {theirs:.2f}; refimpl with GC paused {no_gc:.2f})")
