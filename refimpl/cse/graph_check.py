"""What CSE requires of its input graph, checked up front with an error that says what is wrong.

A graph for ``fx_graph_cse`` is an ``fx.Graph`` that ends with its output node and lists every
node after the nodes it reads (topological order: what ``Graph.lint`` checks, and what every
tracer produces). A node that reads a later node means the graph has a cycle, or nodes out
of order; a node that reads a node of another graph is a graph built wrongly. Either is a
:class:`GraphOrderError`, naming the node, the input, and the cycle where there is one.

Algorithm: one pass in graph order with the set of nodes seen so far (O(nodes + edges)); on
the first offending input, a depth-first search from it back to the reader finds the cycle.
"""

from __future__ import annotations

from torch import fx


class GraphOrderError(ValueError, KeyError):
    """A node reads a node that is not before it in the graph (a cycle, nodes out of order,
    or a node of another graph). A ``KeyError`` too, which is what torch's ``fx_graph_cse``
    raises for such a graph, so code written against torch keeps catching it."""

    __str__ = BaseException.__str__  # a plain message, not KeyError's repr of it


def check_graph(graph: fx.Graph) -> None:
    """Raise TypeError, ValueError or :class:`GraphOrderError` unless ``graph`` is usable."""
    if not isinstance(graph, fx.Graph):
        raise TypeError(f"graph must be a torch.fx.Graph, got {type(graph).__name__}"
                        " (pass gm.graph for a GraphModule)")
    last = next(iter(reversed(graph.nodes)), None)
    if last is None or last.op != "output":
        raise ValueError("graph must end with its output node (op='output'); "
                         f"its last node is {last!r}")
    seen: set[fx.Node] = set()
    for node in graph.nodes:
        for source in node.all_input_nodes:
            if source not in seen:
                raise GraphOrderError(_order_message(graph, node, source))
        seen.add(node)


def _order_message(graph: fx.Graph, node: fx.Node, source: fx.Node) -> str:
    if source.graph is not graph:
        return (f"graph is malformed: node {node.name!r} reads {source.name!r}, a node of "
                "another graph; every input of a node must be a node of the same graph")
    cycle = _path(source, node)
    if cycle:
        loop = " -> ".join(n.name for n in [node, *cycle])
        return (f"graph has a cycle: {loop}; CSE needs an acyclic graph in topological "
                "order (each node after the nodes it reads)")
    return (f"graph is not in topological order: node {node.name!r} reads {source.name!r}, "
            "which comes later in graph.nodes; reorder the nodes (each after its inputs)")


def _path(start: fx.Node, goal: fx.Node) -> list[fx.Node]:
    """A path of inputs from ``start`` to ``goal`` (``[start, ..., goal]``), or [].

    Depth-first search whose stack holds whole paths, each node entered once: it ends after
    at most one path per node, whatever the graph."""
    entered = {start}
    stack = [[start]]
    while stack:
        path = stack.pop()
        if path[-1] is goal:
            return path
        for source in path[-1].all_input_nodes:
            if source not in entered:
                entered.add(source)
                stack.append([*path, source])
    return []
