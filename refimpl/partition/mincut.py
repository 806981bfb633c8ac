"""Min-cut rematerialisation: choose what to save by a minimum s-t cut.

The flow network (built by :func:`save_set` from a plain ``JointGraph``):

* every forward-side node ``v`` is split into ``v.in -> v.out`` with capacity = the bytes
  saving ``v`` costs (infinite if ``v`` cannot be saved, e.g. a tuple). A view of an
  activation that may be saved is never saved itself: its base is saved and the view
  recomputed (same storage, same bytes, a free recompute), so that no two savable values
  share a storage and the cut's capacity is exactly the plan's bytes;
* ``u.out -> v.in`` (infinite) for each forward-side edge ``u -> v``;
* ``source -> v.in`` (infinite) if ``v`` cannot be recomputed: a primal or a banned node;
* ``v.out -> sink`` (infinite) if the backward uses ``v`` directly.

A finite cut separates what must exist before the backward (source side) from the backward,
and crossing edges can only be ``v.in -> v.out`` edges: exactly the saved values. A minimum
cut is therefore the cheapest set of values to save such that everything else the backward
needs can be recomputed from them without recomputing a banned node.

:func:`max_flow_source_side` is Dinic's algorithm written for reading: BFS levels, then
blocking flows by DFS along level-increasing edges, until the sink is unreachable. The
source side of the final residual graph is a minimum cut (max-flow min-cut theorem).
"""

from __future__ import annotations

from collections import deque

from refimpl.partition.errors import NoFiniteCut
from refimpl.partition.graph import JointGraph, JointNode

__all__ = ["Network", "NoFiniteCut", "max_flow_source_side", "min_cut_saves", "save_set",
           "saves_itself"]


class Network:
    """A residual graph on vertices ``0..n-1``: edge ``e`` goes ``to[e]`` with ``cap[e]``
    left; edge ``e ^ 1`` is its reverse."""

    def __init__(self, n: int) -> None:
        self.out: list[list[int]] = [[] for _ in range(n)]
        self.to: list[int] = []
        self.cap: list[int] = []

    def add_edge(self, u: int, v: int, capacity: int) -> None:
        for a, b, c in ((u, v, capacity), (v, u, 0)):
            self.out[a].append(len(self.to))
            self.to.append(b)
            self.cap.append(c)

    def levels(self, s: int) -> list[int]:
        """BFS distance from ``s`` over edges with capacity left (-1: unreachable)."""
        level = [-1] * len(self.out)
        level[s] = 0
        queue = deque([s])
        while queue:
            u = queue.popleft()
            for e in self.out[u]:
                if self.cap[e] > 0 and level[self.to[e]] < 0:
                    level[self.to[e]] = level[u] + 1
                    queue.append(self.to[e])
        return level

    def augment(self, s: int, t: int, level: list[int], nxt: list[int]) -> int:
        """One augmenting path along increasing levels (iterative DFS); its flow, or 0.
        ``nxt[u]`` is the first edge of ``u`` not yet known to be useless in this phase."""
        path, u = [], s
        while u != t:
            edges = self.out[u]
            while nxt[u] < len(edges):
                e = edges[nxt[u]]
                if self.cap[e] > 0 and level[self.to[e]] == level[u] + 1:
                    break
                nxt[u] += 1
            else:  # dead end: never try u again in this phase, step back
                level[u] = -1
                if not path:
                    return 0
                u = self.to[path.pop() ^ 1]
                continue
            path.append(edges[nxt[u]])
            u = self.to[edges[nxt[u]]]
        flow = min(self.cap[e] for e in path)
        for e in path:
            self.cap[e] -= flow
            self.cap[e ^ 1] += flow
        return flow


def max_flow_source_side(net: Network, s: int, t: int) -> tuple[int, set[int]]:
    """Dinic's max flow; returns (flow value, the source side of a minimum cut)."""
    total = 0
    while True:
        level = net.levels(s)
        if level[t] < 0:
            return total, {v for v, d in enumerate(level) if d >= 0}
        nxt = [0] * len(net.out)
        while (flow := net.augment(s, t, level, nxt)) > 0:
            total += flow


def saves_itself(graph: JointGraph, node: JointNode, banned: set[str], unsavable: set[str]
                 ) -> bool:
    """Whether a plan may save ``node`` as such: not unsavable, and not a view of an
    activation that may be saved (its base is saved instead; module docstring)."""
    if node.name in unsavable or not node.savable:
        return False
    owner = graph.by_name[node.storage]
    return not (node.view and node.bytes and node.name not in banned and owner is not node
                and owner.role == "forward" and owner.savable
                and owner.name not in unsavable)


def _capacity(graph: JointGraph, node: JointNode, banned: set[str], unsavable: set[str],
              infinite: int) -> int:
    """Bytes of saving ``node`` (infinite where it is never saved; module docstring)."""
    return node.bytes if saves_itself(graph, node, banned, unsavable) else infinite


def save_set(graph: JointGraph, banned: set[str], unsavable: set[str] = frozenset()
             ) -> list[str]:
    """Names of the forward-side values a minimum cut saves, given the nodes that may not be
    recomputed (``banned``) and those that may not be saved (``unsavable``)."""
    side = graph.forward_side()
    infinite = sum(n.bytes for n in side if n.savable) + 1
    save = [_capacity(graph, n, banned, unsavable, infinite) for n in side]
    source = [infinite if n.role == "primal" or n.name in banned else 0 for n in side]
    return min_cut_saves(graph, side, save, source, infinite,
                         "a random or must-save op inside a region marked recompute, or a "
                         "banned tuple-valued op used directly")


def min_cut_saves(graph: JointGraph, side: list[JointNode], save: list[int],
                  source: list[int], infinite: int, why_infinite: str) -> list[str]:
    """The saved names of a minimum cut of the network of the module docstring over
    ``side`` (``graph.forward_side()``): ``save[i]`` is the capacity of ``v.in -> v.out``
    (what saving ``v`` costs), ``source[i]`` that of ``source -> v.in`` (0: no edge;
    ``infinite``: ``v`` may not be recomputed; else what recomputing it costs). Raises
    :class:`NoFiniteCut`, naming ``why_infinite``, when every cut is infinite."""
    index = {n.name: i for i, n in enumerate(side)}
    source_vertex, sink = 2 * len(side), 2 * len(side) + 1
    net = Network(2 * len(side) + 2)
    for name in graph.read_by_backward():
        net.add_edge(2 * index[name] + 1, sink, infinite)
    for i, node in enumerate(side):
        net.add_edge(2 * i, 2 * i + 1, save[i])
        if source[i]:
            net.add_edge(source_vertex, 2 * i, source[i])
        for user in node.users:
            if user in index:
                net.add_edge(2 * i + 1, 2 * index[user], infinite)
    flow, reach = max_flow_source_side(net, source_vertex, sink)
    if flow >= infinite:
        raise NoFiniteCut("the backward needs a value that can be neither saved nor "
                          f"recomputed ({why_infinite})")
    return [n.name for i, n in enumerate(side) if 2 * i in reach and 2 * i + 1 not in reach]
