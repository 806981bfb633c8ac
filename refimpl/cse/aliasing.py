"""Which graph values may share storage, and which storages are written or escape.

Algorithm: union-find over the nodes. Every node starts in its own storage class; a node whose
output may alias some of its inputs (a view, an ``out=`` or in-place op, an opaque call) is
joined to their classes. Placeholders are distinct storages (the contract of make_fx and
AOTAutograd graphs: inputs do not alias each other unless the graph says so).

Invariant: two nodes in different classes never share storage. From the classes:

* ``reshaped``: classes whose metadata some in-place view op changes (``t_``, ``squeeze_``);
* ``escaping``: classes of the values the graph returns (their storage is observable), and
  ``returned``: those values themselves (their identity as tensor objects is observable),
  with the argument an in-place or ``out=`` op returns as itself (``x.mul_(2)`` returns the
  object ``x``, so returning it returns ``x``);
* ``write_positions`` / ``last_read``: the graph positions (ascending) at which some node
  writes a class (in place, ``out=``, an opaque call), and the last at which one reads it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from torch import fx

from refimpl.cse.effects import Effect, node_inputs


@dataclass(frozen=True)
class AliasFacts:
    """Storage classes and what happens to them (see the module docstring)."""

    storage: dict[fx.Node, fx.Node]  # node -> the representative node of its class
    reshaped: frozenset[fx.Node]
    escaping: frozenset[fx.Node]
    returned: frozenset[fx.Node]
    write_positions: dict[fx.Node, list[int]]  # class -> positions of its writers, ascending
    last_read: dict[fx.Node, int]  # class -> last position of a node reading a member
    position: dict[fx.Node, int]
    nodes: tuple[fx.Node, ...]  # position -> node
    effects: dict[fx.Node, Effect]


def _find(parent: dict[fx.Node, fx.Node], node: fx.Node) -> fx.Node:
    root = node
    while parent[root] is not root:
        root = parent[root]
    while parent[node] is not root:  # path compression
        parent[node], node = root, parent[node]
    return root


def _returned_objects(nodes: list[fx.Node], effects: dict[fx.Node, Effect]) -> set[fx.Node]:
    """The graph values whose tensor objects the graph returns: its outputs and, for each
    that an op writing in place made, the value it wrote (the op returns that object)."""
    returned = {v for n in nodes if n.op == "output" for v in node_inputs((n.args, n.kwargs))}
    frontier = list(returned)
    while frontier:
        effect = effects[frontier.pop()]
        same_object = set(effect.writes) & set(effect.aliases)
        frontier += [v for v in same_object if v not in returned]
        returned |= same_object
    return returned


def alias_facts(nodes: Iterable[fx.Node], effects: dict[fx.Node, Effect]) -> AliasFacts:
    """Union-find the storage classes of ``nodes`` from their effects."""
    nodes = list(nodes)
    parent = {n: n for n in nodes}
    for node in nodes:
        for source in effects[node].aliases:
            a, b = _find(parent, node), _find(parent, source)
            if a is not b:
                parent[a] = b
    storage = {n: _find(parent, n) for n in nodes}
    write_positions: dict[fx.Node, list[int]] = {}
    last_read: dict[fx.Node, int] = {}
    for i, n in enumerate(nodes):
        for cls in dict.fromkeys(storage[w] for w in effects[n].writes):
            write_positions.setdefault(cls, []).append(i)
        for source in n.all_input_nodes:
            last_read[storage[source]] = i
    reshaped = {storage[w] for n in nodes if effects[n].inplace_view
                for w in effects[n].writes}
    returned = _returned_objects(nodes, effects)
    escaping = {storage[v] for v in returned}
    return AliasFacts(storage, frozenset(reshaped), frozenset(escaping), frozenset(returned),
                      write_positions,
                      last_read, {n: i for i, n in enumerate(nodes)}, tuple(nodes), effects)
