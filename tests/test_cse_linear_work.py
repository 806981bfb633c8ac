"""CSE does linear work: executed bytecodes per node stay flat as the graph grows ten times.

Issue 14 asked why per-node CSE *time* grows from 10k to 100k nodes. The count of executed
bytecodes (``benchmarks/bytecode_work.py``) separates the algorithm from the machine: it is the
same per node at both sizes, while a bare dict build over the same nodes slows per node as
much as CSE does (benchmarks/bench_cse.py, ``test_cse_scales_linearly``). A quadratic step
(a list scan per node, a sort per merge, re-walking users) would show here, on any machine,
without a clock.
"""

from __future__ import annotations

from benchmarks.bytecode_work import bytecodes
from benchmarks.large_graphs import aten_graph
from refimpl import fx_graph_cse

SMALL, LARGE = 1_000, 10_000
#: Allowed growth of bytecodes per node over a tenfold graph: 5% (the count is exact; the
#: slack covers constant per-call overhead spread over fewer nodes at the small size).
LINEAR = 1.05


def test_cse_bytecodes_per_node_do_not_grow_with_the_graph():
    small_graph, large_graph = aten_graph(SMALL), aten_graph(LARGE)
    fx_graph_cse(small_graph)  # first call: lazy imports and caches, not the algorithm
    per_node = [bytecodes(fx_graph_cse, g) / len(g.nodes) for g in (small_graph, large_graph)]
    growth = per_node[1] / per_node[0]
    assert growth <= LINEAR, (
        f"bytecodes per node grew {growth:.3f}x from {SMALL} to {LARGE} nodes "
        f"({per_node[0]:.0f} -> {per_node[1]:.0f}); expected at most {LINEAR}x (linear)")


def test_the_work_count_sees_a_quadratic_pass():
    """The measure itself: a pass that scans all earlier nodes per node fails the bound."""
    def quadratic(graph):
        seen = []
        for node in graph.nodes:
            if node not in seen:
                seen.append(node)
        for node in graph.nodes:
            any(other is node for other in seen)

    small, large = aten_graph(200), aten_graph(2_000)
    growth = (bytecodes(quadratic, large) / len(large.nodes)) / (
        bytecodes(quadratic, small) / len(small.nodes))
    assert growth > 5, f"a quadratic pass grew only {growth:.2f}x per node"
