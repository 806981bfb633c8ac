"""Apply a :class:`~refimpl.layout.plan.LayoutPlan` to an FX graph (the other FX edge).

Two helpers are inserted as graph calls:

``to_channels_last(t)``     ``t.contiguous(memory_format=torch.channels_last)``;
``restore_strides(t, s)``  ``t`` when it already has strides ``s``, else a copy of ``t``
                           into a fresh tensor with eager's strides ``s``.
"""

from __future__ import annotations

import torch
from torch import fx

from refimpl.layout.facts import NodeFact
from refimpl.layout.plan import LayoutPlan


def to_channels_last(t: torch.Tensor) -> torch.Tensor:
    """``t`` in channels-last memory order (itself if it already is)."""
    return t.contiguous(memory_format=torch.channels_last)


def restore_strides(t: torch.Tensor, stride: tuple[int, ...]) -> torch.Tensor:
    """``t`` with exactly the strides ``stride`` (eager's): itself, or a fresh copy."""
    if tuple(t.stride()) == tuple(stride):
        return t
    out = torch.empty_strided(t.shape, stride, dtype=t.dtype, device=t.device)
    return out.copy_(t)


def apply_plan(gm: fx.GraphModule, facts: list[NodeFact], plan: LayoutPlan) -> fx.GraphModule:
    """Insert the plan's conversions into ``gm`` (in place) and recompile it."""
    nodes = {n.name: n for n in gm.graph.nodes}
    strides = {f.name: f.stride for f in facts}
    graph = gm.graph
    for conv in plan.convert_inputs:
        node = nodes[conv]
        source = node.args[0]
        with graph.inserting_before(node):
            converted = graph.call_function(to_channels_last, (source,))
        node.replace_input_with(source, converted)
    for name in plan.restore_at_definition:
        node = nodes[name]
        with graph.inserting_after(node):
            restored = graph.call_function(restore_strides, (node, strides[name]))
        node.replace_all_uses_with(restored, delete_user_cb=lambda user, r=restored: user is not r)
    for value, consumer in plan.restore_before:
        with graph.inserting_before(nodes[consumer]):
            restored = graph.call_function(restore_strides, (nodes[value], strides[value]))
        nodes[consumer].replace_input_with(nodes[value], restored)
    _restore_outputs(graph, nodes, strides, plan)
    graph.lint()
    gm.recompile()
    return gm


def _restore_outputs(graph: fx.Graph, nodes: dict, strides: dict, plan: LayoutPlan) -> None:
    output = next(n for n in graph.nodes if n.op == "output")
    copies: dict[str, fx.Node] = {}
    for value, root in plan.restore_outputs.items():
        if root not in copies:
            with graph.inserting_before(output):
                copies[root] = graph.call_function(restore_strides, (nodes[root], strides[root]))
        output.replace_input_with(nodes[value], copies[root])
