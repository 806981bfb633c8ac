"""Which forward nodes may be recomputed or saved, and the knapsack's candidate items.

All on plain :class:`~refimpl.partition.graph.JointGraph` data:

``hard_bans``      never recomputed at any budget: random ops (recomputing draws fresh
                   values, which would change results), ops that mutate an argument,
                   what a checkpoint policy marks ``must_save`` (:func:`policy_must_save`),
                   and readers of a mutated input (:func:`reads_mutated_input`: by the
                   backward the input holds its new value).
``unsavable``      never saved: tuples (their elements are saved instead) and what a
                   checkpoint region or policy marks recompute (torch's ``must_recompute``),
                   unless a hard ban overrides it (random ops are always saved).
``runtime_bans``   what the budget-1.0 (runtime-optimised) plan also refuses to recompute,
                   among the nodes the forward outputs need (others run once in any plan):
                   anything but cheap ops (pointwise, views, getitem, factories), and any
                   value the backward consumes through a non-pointwise op (it must be
                   materialised there anyway, so recomputing it saves no traffic). Views and
                   nodes marked recompute are never banned.
``items``          the knapsack's choices for budgets strictly between 0 and 1: nodes the
                   forward outputs need (backward-only work runs once in any plan), that
                   the backward needs too, with a positive runtime, and not views.
"""

from __future__ import annotations

from dataclasses import dataclass

from refimpl.partition.cut import needed_by_backward
from refimpl.partition.graph import JointGraph, JointNode

#: ops the runtime-optimised plan may recompute although they are not pointwise or views
#: (torch's recomputable-op allowlist; ``iota`` is what ``arange`` decomposes to).
CHEAP_OPS = ("getitem", "full", "zeros", "ones", "empty", "arange", "iota", "scalar_tensor",
             "index", "gather",
             "_to_copy", "clone", "lift_fresh_copy", "expand", "cat")


@dataclass(frozen=True)
class Item:
    """A knapsack item: save node ``name`` (``bytes``) or recompute it (``runtime``)."""

    name: str
    bytes: int
    runtime: float


def policy_must_save(graph: JointGraph) -> set[str]:
    """Nodes a checkpoint policy marks ``must_save``, plus torch's region-boundary rule
    (``cleanup_recompute_tags``): a node marked recompute whose user is marked recompute in
    a LATER checkpoint region (a higher ``ac_graph_id``) is the boundary between two
    consecutive regions, and is saved, as eager checkpointing saves a region's input."""
    marked = {n.name for n in graph.nodes if n.policy == "must_save"}
    for node in graph.nodes:
        if not node.must_recompute or node.ac_graph_id is None:
            continue
        for user in map(graph.by_name.__getitem__, node.users):
            if user.must_recompute and user.ac_graph_id is not None \
                    and user.ac_graph_id > node.ac_graph_id:
                marked.add(node.name)
    return marked


def reads_mutated_input(graph: JointGraph) -> set[str]:
    """Forward nodes that read a primal the forward mutates, directly or through views of
    it (views included): recomputed in the backward they would read the input's NEW value
    (AOTAutograd copies it in after the forward; :mod:`refimpl.partition.mutation`)."""
    stale = {n.name for n in graph.nodes if n.role == "primal" and n.mutated}
    readers: set[str] = set()
    for node in graph.nodes:  # topological: a view's base is classified before it
        if node.role == "forward" and stale.intersection(node.inputs):
            readers.add(node.name)
            if node.view:
                stale.add(node.name)
    return readers


def hard_bans(graph: JointGraph) -> set[str]:
    """Forward nodes that are never recomputed: random, mutating, marked must-save, and
    readers of a mutated input."""
    must_save = policy_must_save(graph) | reads_mutated_input(graph)
    return {n.name for n in graph.forward_side()
            if n.role == "forward" and (n.random or n.mutable or n.name in must_save)}


def unsavable(graph: JointGraph, banned: set[str]) -> set[str]:
    """Forward nodes that are never saved: tuples, and nodes marked recompute that no hard
    ban (``banned``) keeps."""
    return {n.name for n in graph.forward_side() if n.role == "forward" and (
        not n.savable or (n.must_recompute and n.name not in banned))}


def _is_cheap(node: JointNode) -> bool:
    base = node.op.split(".")[0]
    return node.pointwise or node.view or base in CHEAP_OPS


def _materialised_in_backward(graph: JointGraph, node: JointNode) -> bool:
    """True if a backward node consumes ``node`` (through views) with a non-pointwise op."""
    stack, seen = list(node.users), set()
    while stack:
        user = graph.by_name[stack.pop()]
        if user.name in seen:
            continue
        seen.add(user.name)
        if user.view:
            stack.extend(user.users)
        elif user.role == "backward" and not user.pointwise:
            return True
    return False


def runtime_bans(graph: JointGraph) -> set[str]:
    """The budget-1.0 plan's bans beyond :func:`hard_bans` (see the module docstring).

    Rule: only a node the forward outputs need (``fw_required``) is banned. A forward-side
    node that only the backward reads (a factory such as the ``full`` that a slice's
    backward scatters into, or the ``sum`` of amax's tie mask) runs exactly once in any
    plan, in the forward or in the backward, so computing it in the backward is no
    recomputation: banning it could only force its bytes to be saved. torch's partitioner
    applies its bans only to nodes the forward requires, for the same reason, and with
    nothing banned a node that reads no tensor is never reached from the cut's source, so
    torch computes such a factory in the backward instead of saving it."""
    return {n.name for n in graph.forward_side()
            if n.role == "forward" and n.fw_required and not n.view
            and not n.must_recompute
            and (not _is_cheap(n) or _materialised_in_backward(graph, n))}


def items(graph: JointGraph, banned: set[str]) -> list[Item]:
    """Knapsack candidates: needed, not banned, positive runtime, not free to save.

    A tuple-producing op (SDPA's output and logsumexp) is one item whose bytes are those
    of its elements."""
    needed = needed_by_backward(graph)
    never_saved = unsavable(graph, banned)
    found = []
    for node in graph.forward_side():
        if node.role != "forward" or not node.fw_required or node.view or node.is_sym \
                or node.name in banned or node.name not in needed or node.runtime <= 0 \
                or (node.savable and node.name in never_saved):
            continue
        size = node.bytes if node.savable else sum(
            graph.by_name[u].bytes for u in node.users if graph.by_name[u].op == "getitem")
        if size > 0:
            found.append(Item(node.name, size, node.runtime))
    return found
