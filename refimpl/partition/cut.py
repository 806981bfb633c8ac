"""A cut of the joint graph: what the backward reads and what it recomputes.

Given the set ``S`` of forward values the forward hands over, the backward's needs close
upward: every value it uses directly is read if it is in ``S`` or an input, and otherwise
recomputed, which makes the recomputed node's own inputs needed in turn.
:func:`cut_of` walks that closure; the result is a :class:`Cut`. Invariant: ``reads`` and
``recomputed`` are disjoint, every input of a recomputed node is read or recomputed, and
``bytes`` counts each storage once (a view shares its base's storage; inputs and their views
cost nothing).
"""

from __future__ import annotations

from dataclasses import dataclass

from refimpl.partition.graph import JointGraph


@dataclass(frozen=True)
class Cut:
    """The backward's side of a plan: read values, recomputed nodes, their bytes and cost."""

    reads: tuple[str, ...]  # saved values and inputs the backward reads, in graph order
    recomputed: tuple[str, ...]  # forward nodes the backward computes again, in graph order
    bytes: int  # activation bytes of ``reads``, each storage once
    cost: float  # runtime of the recomputed nodes the forward outputs need


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


def saved_bytes(graph: JointGraph, names: list[str] | tuple[str, ...]) -> int:
    """Activation bytes of saving ``names``: each storage counted once (views share it)."""
    by_storage = {graph.by_name[n].storage: graph.by_name[n].bytes for n in names}
    return sum(by_storage.values())


def recompute_cost(graph: JointGraph, recomputed: list[str] | tuple[str, ...]) -> float:
    """Runtime of the recomputed nodes that the forward outputs need (backward-only work
    runs once in every plan, so moving it to the backward costs nothing)."""
    return sum(graph.by_name[n].runtime for n in recomputed if graph.by_name[n].fw_required)


def cut_of(graph: JointGraph, saved: set[str]) -> Cut:
    """The :class:`Cut` that saving ``saved`` gives (module docstring)."""
    reads, recomputed = backward_reads(graph, saved)
    return Cut(tuple(reads), tuple(recomputed), saved_bytes(graph, reads),
               recompute_cost(graph, recomputed))


def needed_by_backward(graph: JointGraph) -> set[str]:
    """Forward-side nodes a backward node depends on through forward-side paths: everything
    the backward would read or recompute if nothing were saved."""
    reads, recomputed = backward_reads(graph, set())
    return set(reads) | set(recomputed)
