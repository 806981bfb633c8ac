"""Common-subexpression elimination on an FX graph: the pass itself.

Two nodes are the same value when

1. both are *mergeable* (:func:`mergeable`): a pure op (not random, not uninitialized memory,
   not mutating, no side effect, not opaque, not defining an unbacked symbol) on a storage
   whose metadata nothing changes in place; and sharing one storage between them is
   invisible (:meth:`SharedStorage.can_share`): they are views of one storage already and
   not both returned, or two fresh storages that do not both escape through the output,
   neither of which is written while the other is still read;
2. they have the same ``op`` and the same target (the exact overload: ``aten.sum.default`` is
   not ``aten.sum.dim_IntList``);
3. their arguments are structurally equal (:mod:`refimpl.cse.keys`: 1, 1.0 and True differ,
   floats compare by their bits: 0.0 and -0.0 differ, nan and -nan differ, a NaN equals a NaN
   of the same bits; kwargs compared as a mapping), where a graph value is
   compared as (its representative, the number of writes to its storage so far), so a value
   read before and after a mutation is two different values.

Algorithm: one pass in graph order with a table from key to the first node that had it
(its representative). A node whose key is in the table is dropped and its users read the
representative (if the storages cannot be shared, it replaces the table entry instead);
otherwise it is copied. Invariant: every node's representative comes earlier
in the graph and computes the same value, so the new graph is in the original order, acyclic,
and computes the same outputs with the same aliasing between them.

A refused merge (one storage written while the other is still read) can become possible once
later duplicates, readers among them, are dropped: so while a pass both merged and refused,
the pass runs again on its result, to a fixpoint (each repeat removes a node; usually one pass,
two where a refusal was lifted). So a second ``fx_graph_cse`` removes nothing.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass, field

import torch
from torch import fx

from refimpl.cse.aliasing import AliasFacts, alias_facts
from refimpl.cse.effects import Effect, effects_of
from refimpl.cse.graph_check import check_graph
from refimpl.cse.keys import freeze


def fx_graph_cse(graph: fx.Graph) -> fx.Graph:
    """A new graph with common subexpressions of ``graph`` merged; ``graph`` is unchanged.

    Same contract as ``torch._functorch.compile_utils.fx_graph_cse``: placeholders and the
    output node are kept, the order of the remaining nodes is stable.
    """
    check_graph(graph)
    found = _merge_pass(graph)
    new_graph = _rebuild(graph, found.duplicates)
    while found.duplicates and found.refused:  # dropped readers may lift a refusal
        found = _merge_pass(new_graph)
        if found.duplicates:
            new_graph = _rebuild(new_graph, found.duplicates)
    return new_graph


def mergeable(node: fx.Node, effect: Effect, facts: AliasFacts) -> bool:
    """May this node be merged with (or stand for) an equal node? See the module docstring."""
    return effect.kind == "pure" and facts.storage[node] not in facts.reshaped


@dataclass
class SharedStorage:
    """Storage classes as they become after merges (a union-find over AliasFacts' classes).

    Each merged class keeps whether it escapes through the output, the positions that
    write it, the last that reads it, and the number of writes seen so far in the pass (the
    version that graph values are keyed by); ``returned`` holds the nodes that are (or now
    stand for) graph outputs. Local to one call of :func:`_merge_pass`.
    """

    facts: AliasFacts
    returned: set[fx.Node] = field(default_factory=set)
    parent: dict[fx.Node, fx.Node] = field(default_factory=dict)
    escapes: dict[fx.Node, bool] = field(default_factory=dict)
    write_positions: dict[fx.Node, list[int]] = field(default_factory=dict)
    last_read: dict[fx.Node, int] = field(default_factory=dict)
    writes: Counter[fx.Node] = field(default_factory=Counter)

    def root(self, node: fx.Node) -> fx.Node:
        cls = start = self.facts.storage[node]
        if cls not in self.parent:
            self.parent[cls] = cls
            self.escapes[cls] = cls in self.facts.escaping
            self.write_positions[cls] = self.facts.write_positions.get(cls, [])
            self.last_read[cls] = self.facts.last_read.get(cls, -1)
        while self.parent[cls] is not cls:
            cls = self.parent[cls]
        self.parent[start] = cls  # path compression
        return cls

    def can_share(self, duplicate: fx.Node, rep: fx.Node, effect: Effect) -> bool:
        """Is one storage for both invisible? Equal views share their storage already: only
        two returned tensors must stay two objects. Two fresh storages (or what may be a
        copy, like ``reshape``) must not both escape (two outputs would share memory), and
        neither may be written while the other is still read."""
        if effect.aliases and duplicate in self.returned and rep in self.returned:
            return False
        if effect.aliases and not effect.maybe_copy:
            return True
        mine, theirs = self.root(duplicate), self.root(rep)
        if self.escapes[mine] and self.escapes[theirs]:
            return False
        since = self.facts.position[rep]  # writes before both exist change neither
        return (self._unseen(self._first_write(mine, since), self.last_read[theirs])
                and self._unseen(self._first_write(theirs, since), self.last_read[mine]))

    def _first_write(self, cls: fx.Node, since: int) -> float:
        positions = self.write_positions[cls]
        i = bisect.bisect_right(positions, since)
        return positions[i] if i < len(positions) else math.inf

    def _unseen(self, write: float, last_read: int) -> bool:
        """A write at position ``write`` comes after the last read, or is that read: an
        elementwise in-place op reading and writing whole fresh tensors (``a.add_(b)`` with
        ``a`` and ``b`` equal becomes ``a.add_(a)``, which is well defined)."""
        if write != last_read:
            return write > last_read
        node = self.facts.nodes[last_read]
        return (isinstance(node.target, torch._ops.OpOverload)
                and torch.Tag.pointwise in node.target.tags
                and not any(self.facts.effects[i].aliases for i in node.all_input_nodes))

    def share(self, duplicate: fx.Node, rep: fx.Node) -> None:
        if duplicate in self.returned:
            self.returned.add(rep)
        mine, theirs = self.root(duplicate), self.root(rep)
        if mine is not theirs:
            self.parent[mine] = theirs
            self.escapes[theirs] = self.escapes[theirs] or self.escapes[mine]
            self.write_positions[theirs] = sorted(self.write_positions[theirs]
                                                  + self.write_positions[mine])
            self.last_read[theirs] = max(self.last_read[theirs], self.last_read[mine])
            self.writes[theirs] += self.writes[mine]


def _target_key(node: fx.Node) -> Hashable:
    try:
        hash(node.target)
    except TypeError:
        return ("identity", id(node.target))
    return node.target


@dataclass(frozen=True)
class MergePass:
    """One pass's result: each dropped node's representative, and how many equal nodes were
    kept because their storages could not be shared."""

    duplicates: dict[fx.Node, fx.Node]
    refused: int


def _merge_pass(graph: fx.Graph) -> MergePass:
    """One pass in graph order (module docstring): each node that repeats an earlier one,
    mapped to its representative (:func:`fx_graph_cse` repeats passes to a fixpoint)."""
    nodes = list(graph.nodes)
    effects = effects_of(nodes)
    facts = alias_facts(nodes, effects)
    storage = SharedStorage(facts, set(facts.returned))
    representative: dict[fx.Node, fx.Node] = {}
    first_with_key: dict[Hashable, fx.Node] = {}
    refused = 0

    def value_key(value: fx.Node) -> tuple:
        rep = representative[value]
        return rep, storage.writes[storage.root(rep)]

    for node in nodes:
        representative[node] = node
        if mergeable(node, effects[node], facts):
            key = (node.op, _target_key(node), freeze(node.args, value_key),
                   freeze(node.kwargs, value_key))
            first = first_with_key.setdefault(key, node)
            if first is not node and storage.can_share(node, first, effects[node]):
                representative[node] = first
                storage.share(node, first)
            else:  # later duplicates share with this one
                refused += first is not node
                first_with_key[key] = node
        for written in effects[node].writes:
            storage.writes[storage.root(written)] += 1
    return MergePass({n: rep for n, rep in representative.items() if rep is not n}, refused)


def _rebuild(graph: fx.Graph, duplicates: dict[fx.Node, fx.Node]) -> fx.Graph:
    """Copy ``graph`` in order, sending each duplicate's users to its representative."""
    new_graph = fx.Graph(tracer_cls=graph._tracer_cls, tracer_extras=graph._tracer_extras)
    new_graph._codegen = graph._codegen  # calling convention (e.g. pytree specs), read-only
    env: dict[fx.Node, fx.Node] = {}
    for node in graph.nodes:
        if node in duplicates:
            env[node] = env[duplicates[node]]
        else:
            env[node] = new_graph.node_copy(node, env.__getitem__)
    return new_graph
