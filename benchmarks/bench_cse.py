"""refimpl.fx_graph_cse against torch's fx_graph_cse on large generated graphs, same run.

Graphs: the seed's random program scaled up (unary/binary/scalar aten ops, each reading
recent values, a quarter of the nodes deliberate duplicates). Reported in extra_info:
``refimpl_s`` and ``torch_s`` (best of the rounds), ``ratio`` = refimpl / torch (target: at
most 1), ``us_per_node``; ``test_cse_scales_linearly`` reports per-node time and executed
bytecodes at 100k / 10k, beside the same ratio for a bare dict build (the machine's cache
effect alone).

    python -m pytest benchmarks/bench_cse.py --benchmark-enable -q -s
"""

from __future__ import annotations

import gc
import time

import pytest
from torch import fx
from torch._functorch.compile_utils import fx_graph_cse as torch_cse

from benchmarks.bytecode_work import bytecodes
from benchmarks.large_graphs import aten_graph
from refimpl import fx_graph_cse

ROUNDS = 3


def best_time(fn, graph: fx.Graph, rounds: int = ROUNDS) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn(graph)
        times.append(time.perf_counter() - start)
    return min(times)


@pytest.mark.parametrize("num_nodes", [1_000, 10_000, 100_000])
def test_cse_time_vs_torch(benchmark, num_nodes):
    graph = aten_graph(num_nodes)
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


def dict_build(graph: fx.Graph) -> None:
    """The machine's baseline: one dict keyed by the graph's nodes, the commonest step of any
    pass over a graph (CSE builds several)."""
    {node: i for i, node in enumerate(graph.nodes)}


def test_cse_scales_linearly(benchmark):
    """Per-node cost at 100k nodes over per-node cost at 10k (1.0 = linear), each size timed
    with only its own graph alive: refimpl's time with the GC on (what a user sees) and
    paused; torch's; a bare dict build over the same nodes (how this machine's caches alone
    slow per-node work at the larger size); and refimpl's executed bytecodes, which no
    cache or load changes (``benchmarks/bytecode_work.py``)."""
    per_node = {}
    for size in (10_000, 100_000):
        graph = aten_graph(size)
        gc.collect()
        if size == 100_000:
            benchmark.pedantic(fx_graph_cse, args=(graph,), rounds=1, iterations=1)
        per_node[size] = [x / len(graph.nodes) for x in (
            best_time(fx_graph_cse, graph), best_time(torch_cse, graph),
            best_time_without_gc(fx_graph_cse, graph), best_time(dict_build, graph, rounds=20),
            bytecodes(fx_graph_cse, graph))]
        del graph
    small, large = per_node[10_000], per_node[100_000]
    ours, theirs, no_gc, baseline, work = (b / a for a, b in zip(small, large))
    benchmark.extra_info.update(
        us_per_node_10k=1e6 * small[0], us_per_node_100k=1e6 * large[0], scaling=ours,
        torch_scaling=theirs, scaling_gc_paused=no_gc, dict_build_scaling=baseline,
        bytecodes_per_node_10k=small[4], bytecodes_per_node_100k=large[4],
        bytecode_scaling=work)
    print(f"\nper node: 10k {1e6 * small[0]:.1f}us, 100k {1e6 * large[0]:.1f}us, scaling "
          f"{ours:.2f} (torch {theirs:.2f}; refimpl with GC paused {no_gc:.2f}; a bare dict "
          f"build {baseline:.2f}); bytecodes per node {small[4]:.0f} -> {large[4]:.0f}, "
          f"scaling {work:.3f}")
