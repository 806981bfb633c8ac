"""Which forward nodes may be recomputed, and the knapsack's candidate items.

Three sets, all on plain :class:`~refimpl.partition.trace.JointGraph` data:

``hard_bans``     never recomputed at any budget: random ops (recomputing draws fresh
                  values, which would change results) and ops that mutate an argument.
``runtime_bans``  what the budget-1.0 (runtime-optimised) plan also refuses to recompute:
                  anything but cheap ops (pointwise, views, getitem, factories), and any
                  value the backward consumes through a non-pointwise op (it must be
                  materialised there anyway, so recomputing it saves no traffic).
                  Views are never banned: recomputing a view is free.
``items``         the knapsack's choices for budgets strictly between 0 and 1: nodes the
                  forward outputs need (backward-only work runs once in any plan), that
                  the backward needs too, with a positive runtime, and not views. Saving an item
                  costs its bytes and spares its runtime; everything else the backward
                  needs is recomputed from inputs, saved items and must-save values.
"""

from __future__ import annotations

from dataclasses import dataclass

from refimpl.partition.trace import JointGraph, JointNode

#: ops the runtime-optimised plan may recompute although they are not pointwise or views.
CHEAP_OPS = ("getitem", "full", "zeros", "ones", "empty", "arange", "scalar_tensor",
             "_to_copy", "clone", "lift_fresh_copy", "expand", "cat")


@dataclass(frozen=True)
class Item:
    """A knapsack item: save node ``name`` (``bytes``) or recompute it (``runtime``)."""

    name: str
    bytes: int
    runtime: float


def hard_bans(graph: JointGraph) -> set[str]:
    """Forward nodes that are never recomputed: random and mutating ops."""
    return {n.name for n in graph.forward_side()
            if n.role == "forward" and (n.random or n.mutable)}


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
    """The budget-1.0 plan's bans beyond :func:`hard_bans` (see the module docstring)."""
    return {n.name for n in graph.forward_side() if n.role == "forward" and not n.view and (
        not _is_cheap(n) or _materialised_in_backward(graph, n))}


def backward_reads(graph: JointGraph, saved: set[str]) -> tuple[list[str], list[str]]:
    """Given the values saved, (the saved values and inputs the backward reads, the forward
    nodes it recomputes), both in graph order: walk up from what the backward uses directly,
    stopping at saved values and primals."""
    stack, seen = graph.read_by_backward(), set()
    reads, recomputed = [], []
    while stack:
        name = stack.pop()
        node = graph.by_name[name]
        if name in seen or node.role not in ("primal", "forward"):
            continue
        seen.add(name)
        if name in saved or node.role == "primal":
            reads.append(name)
        else:
            recomputed.append(name)
            stack.extend(node.inputs)
    key = graph.order.__getitem__
    return sorted(reads, key=key), sorted(recomputed, key=key)


def needed_by_backward(graph: JointGraph) -> set[str]:
    """Forward-side nodes a backward node depends on through forward-side paths: everything
    the backward would read or recompute if nothing were saved."""
    reads, recomputed = backward_reads(graph, set())
    return set(reads) | set(recomputed)


def items(graph: JointGraph, banned: set[str]) -> list[Item]:
    """Knapsack candidates: needed, not banned, positive runtime, not free to save.

    A tuple-producing op (SDPA's output and logsumexp) is one item whose bytes are those
    of its elements."""
    needed = needed_by_backward(graph)
    found = []
    for node in graph.forward_side():
        if node.role != "forward" or not node.fw_required or node.view or node.is_sym \
                or node.name in banned or node.name not in needed or node.runtime <= 0:
            continue
        size = node.bytes if node.savable else sum(
            graph.by_name[u].bytes for u in node.users if graph.by_name[u].op == "getitem")
        if size > 0:
            found.append(Item(node.name, size, node.runtime))
    return found
